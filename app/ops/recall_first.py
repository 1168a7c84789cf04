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
time, and the bound is what lets builds go on then (one step per `max_wait` at worst), so
they never starve.

The raw-log write that acknowledges a store never steps aside: a 200/202 still means the raw
log is durable, and a `wait=false` acknowledgement stays a raw-log write and nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")


class RecallFirst:
    """Counts the recalls in flight; lets other work wait (bounded) until there are none.

    One per app, used on its event loop only. `max_wait_seconds` 0: nothing ever waits.
    """

    def __init__(self, max_wait_seconds: float) -> None:
        self._max_wait = max_wait_seconds
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

    async def step_aside(self) -> None:
        """Wait while a recall is in flight, at most `max_wait` (a boundary of a build)."""
        if self._max_wait <= 0:
            return
        started = time.perf_counter()
        if self._in_flight:
            with contextlib.suppress(TimeoutError):  # bounded: then it goes on, recall or not
                await asyncio.wait_for(self._clear.wait(), self._max_wait)
        if self.on_wait is not None:  # 0 too: the share of boundaries that waited shows
            self.on_wait(time.perf_counter() - started)

    async def each_in_thread(self, work: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        """`work(item)` for every item, each on a worker thread (off the event loop),
        stepping aside before each: CPU-bound Python (the classifier, a few ms per chunk)
        holds the GIL, and a build's texts in one thread call held it for all of them."""
        done: list[_R] = []
        for item in items:
            await self.step_aside()
            done.append(await asyncio.to_thread(work, item))
        return done
