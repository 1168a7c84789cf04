"""A recall's deadline: when its answer is due, and the stages it skipped to be on time.

The deadline runs from the start of the recall (`RecallService._run`). Two stages can be
late and are then skipped, never turned into an error:

- `vector`: the question's vector is computed in the embedding pool while the full-text
  search runs; the vector search (and the date or session searches, which need the vector
  too) is used only if it is done by the deadline. Otherwise the answer comes from the
  full-text search alone, scored on its keyword part (`score(keyword_only=True)`).
- `second_hop`: the hop's searches start only while time is left.

The full-text search is always waited for: it is the answer a late recall falls back on.
A late task is cancelled and left to finish harmlessly (`wait`): an embedding job whose
caller went away is dropped from the pool's queue, a LanceDB call in a thread ends there.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TypeVar

from app.recall.schemas import Stage

T = TypeVar("T")


@dataclass
class Deadline:
    """`at`: the `time.perf_counter()` by which the answer is due (None: no deadline)."""

    at: float | None = None
    skipped: list[Stage] = field(default_factory=list)

    @classmethod
    def after(cls, ms: int, *, started: float) -> Deadline:
        """A deadline `ms` after `started`; 0: none."""
        return cls(at=started + ms / 1000 if ms > 0 else None)

    def left(self) -> float | None:
        """Seconds left (0 once passed); None without a deadline."""
        return None if self.at is None else max(0.0, self.at - time.perf_counter())

    @property
    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() >= self.at

    def skip(self, stage: Stage) -> None:
        if stage not in self.skipped:
            self.skipped.append(stage)

    async def wait(self, task: asyncio.Task[T]) -> asyncio.Task[T] | None:
        """`task` if it is done by the deadline (or at all, without one); otherwise None,
        and the task is cancelled (not waited for: a thread it runs in ends on its own).

        Only the deadline bounds the wait: a caller's cancellation still cancels `task`
        through the caller's own clean-up.
        """
        left = self.left()
        if left is None:
            await asyncio.wait({task})
        elif not task.done():
            await asyncio.wait({task}, timeout=left)
        if task.done():
            return task
        task.cancel()
        task.add_done_callback(_retrieve)
        return None


def _retrieve(task: asyncio.Task[object]) -> None:
    """Read a late task's outcome, so a failure after the deadline is not reported as an
    exception nobody retrieved: the recall answered without it."""
    if not task.cancelled():
        task.exception()
