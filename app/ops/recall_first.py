"""Recall first: work that can wait steps aside while a recall is in flight (issue 14).

A recall is what a user waits for: the assistant's turn is blocked until its memories come
back. Builds (`wait=false` ones in the background, `wait=true` ones inside their store call)
and background work (compression) can wait a little; their callers already wait seconds. On
this 2-core machine they do not wait on their own: the classifier's Python runs in a thread
holding the GIL, record building and LanceDB's result conversion run on the event loop, and
every one of them takes the CPU a recall needs for its question's forward pass (the
embedding pool puts the question first in its queue and between passes of stored text:
`app/embedding/pool.py`) and for its own ranking and packing.

So a recall holds `RecallFirst` while it runs (`recalling`), and the other work calls
`step_aside()` at its natural boundaries: before each text it analyses
(`each_in_thread`), before each slice of texts it queues for the model, before its writes.
While any recall is in flight it waits until none is, but never longer than `max_wait` at
one boundary: two clients recalling back to back keep a recall in flight nearly all the
time, and the bound is what lets builds go on then (one step per `max_wait` at worst).

That bound alone is per boundary, and a build has one per text it analyses: under a stream
of recalls that never pauses, a 400-message import (~100 chunks) waited ~100 x 50 ms, and a
store's delay grew with its size, not with the recalls it let pass. So a build also ages: it
runs inside `build()`, which gives it a budget (`BUILD_BUDGET_SECONDS`) that every wait at
every boundary of it spends (its analysis thread and its slices queued for the model
included); once spent, the build steps aside no more. A store is delayed by recall-first at
most that much in total, whatever the recalls and its own size.

The raw-log write that acknowledges a store never steps aside: a 200/202 still means the raw
log is durable, and a `wait=false` acknowledgement stays a raw-log write and nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

# What one build gives recalls in total, over all its boundaries. Half a second: about a
# recall's p99 under a 16-tenant ingest (docs/benchmarks.md), so a build still lets the
# recalls around it finish first, and a stream of recalls that never pauses delays a store
# by at most this (before: its boundaries x `max_wait`, 48 s once behind 1,433 recalls).
BUILD_BUDGET_SECONDS = 0.5


@dataclass
class _Budget:
    left: float


# The budget of the build running in this task (and the tasks it starts: they share it).
_BUDGET: ContextVar[_Budget | None] = ContextVar("recall_first_budget", default=None)


class RecallFirst:
    """Counts the recalls in flight; lets other work wait (bounded) until there are none.

    One per app, used on its event loop only. `max_wait_seconds` 0: nothing ever waits.
    """

    def __init__(self, max_wait_seconds: float, *,
                 build_budget_seconds: float = BUILD_BUDGET_SECONDS) -> None:
        self._max_wait = max_wait_seconds
        self._build_budget = build_budget_seconds
        self._in_flight = 0
        self._clear = asyncio.Event()  # set while no recall is in flight
        self._clear.set()
        # Called with each wait's seconds (the app's metrics: what recalls cost builds).
        self.on_wait: Callable[[float], None] | None = None

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @contextmanager
    def recalling(self) -> Iterator[None]:
        """Held by a recall for its whole run."""
        self._in_flight += 1
        self._clear.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._clear.set()

    @contextmanager
    def build(self) -> Iterator[None]:
        """Held by a build for its whole run: its waits together spend at most the build
        budget (the module docstring)."""
        token = _BUDGET.set(_Budget(self._build_budget))
        try:
            yield
        finally:
            _BUDGET.reset(token)

    async def step_aside(self) -> None:
        """Wait while a recall is in flight, at most `max_wait` (a boundary of a build), and
        inside `build()` at most what is left of its budget."""
        if self._max_wait <= 0:
            return
        budget = _BUDGET.get()
        limit = self._max_wait if budget is None else min(self._max_wait, budget.left)
        waited = 0.0
        if self._in_flight and limit > 0:
            started = time.perf_counter()
            with contextlib.suppress(TimeoutError):  # bounded: then it goes on, recall or not
                async with asyncio.timeout(limit):
                    await self._clear.wait()
            # What recall-first chose to wait, not what the loop added after: a task resumes
            # only when the loop gets to it, and while the loop is stalled (a full garbage
            # collection in a big process, a thread holding the GIL) a 50 ms wait can read
            # seconds. That lag is the loop's (engram_event_loop_lag_seconds) and would have
            # come at any other await of the build; charged here, it spent the budget on
            # nothing and reported a wait no recall asked for.
            waited = min(time.perf_counter() - started, limit)
        if budget is not None:
            budget.left = max(0.0, budget.left - waited)
        if self.on_wait is not None:  # 0 too: the share of boundaries that waited shows
            self.on_wait(waited)

    async def each_in_thread(self, work: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        """`work(item)` for every item, each on a worker thread (off the event loop),
        stepping aside before each: CPU-bound Python (the classifier, a few ms per chunk)
        holds the GIL, and a build's texts in one thread call held it for all of them."""
        done: list[_R] = []
        for item in items:
            await self.step_aside()
            done.append(await asyncio.to_thread(work, item))
        return done
