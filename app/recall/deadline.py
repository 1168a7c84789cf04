"""A recall's deadline: when its answer is due, and the stages it skipped to be on time.

The deadline runs from the start of the recall (`RecallService._run`). A stage not done
by then is skipped and named, never turned into an error:

- `vector`: the question's vector is computed in the embedding pool while the full-text
  search runs; the vector search (and the date or session searches, which need the vector
  too) is used only if it is done by the deadline. Otherwise the answer comes from the
  full-text search alone, scored on its keyword part (`score(keyword_only=True)`).
- `keyword`: the full-text search (LanceDB's, the slowest step under a heavy ingest) the
  same way: without it, the vector search's candidates, their share of the question's
  words standing for the missing BM25 rank (`score(without_bm25=True)`).
- `second_hop`: the hop's searches start only while time is left, and count only if one
  of them is done by the deadline.
- `pending`: the vectors of pending messages' lines (read-your-writes, pending.py),
  computed in the question's pass and kept by message for the next recalls; without them
  those messages are matched and scored by their words alone (`Candidate.words_only`), as
  a recall without its vector scores every memory. What was just stored is still found;
  only its rank can differ. (A second hop waits for none: it uses the vectors held.) Also
  the read of which pending messages a memory holds already: without it only what the
  searches found is left out, so nothing is returned twice.

When neither search of the question is done by the deadline, the first one to finish
answers (`settle`): an answer needs one. A late search is cancelled and left to finish
harmlessly (`late`): an embedding job whose caller went away is dropped from the pool's
queue, a LanceDB call in a thread ends there. (A late encoding of pending lines goes on:
its vectors serve the next recall.)
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from app.recall.schemas import Stage


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

    async def settle(self, *tasks: asyncio.Task[Any], need_one: bool = True) -> None:
        """Wait until every task is done or the deadline has passed; if none is done by
        then and `need_one` (the first search: an answer needs one), until the first one
        is. A second hop's searches are not needed: the first search answered."""
        pending = {task for task in tasks if not task.done()}
        if pending:
            await asyncio.wait(pending, timeout=self.left())
        if need_one and not any(task.done() for task in tasks):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)

    def late(self, task: asyncio.Task[Any], stage: Stage) -> bool:
        """Whether `task` missed the deadline (`settle`): then it is cancelled (not waited
        for: a thread it runs in ends on its own) and `stage` is skipped."""
        if task.done():
            return False
        task.cancel()
        task.add_done_callback(_retrieve)
        self.skip(stage)
        return True


def _retrieve(task: asyncio.Task[object]) -> None:
    """Read a late task's outcome, so a failure after the deadline is not reported as an
    exception nobody retrieved: the recall answered without it."""
    if not task.cancelled():
        task.exception()
