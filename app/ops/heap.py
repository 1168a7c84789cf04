"""Python's cycle collector, kept off what start-up built.

CPython's cycle collector stops the process while it runs (it holds the GIL): every
thread, the event loop included, waits until it has walked every container object of the
generations it collects, and a full collection walks all of them. What start-up builds
lives as long as the process and holds no garbage: the app's modules and classes, jieba's
and CC-CEDICT's dictionaries, the tokenizer's tables, ~355k containers. A full collection
over them alone took 157 ms on this machine, and 235-252 ms under a 16-tenant ingest,
where one came every ~25 s and stopped the recalls in flight for that long: most of the
slowest recalls ran past their 300 ms deadline by the length of one (docs/benchmarks.md,
"Many users at once").

`freeze_startup_heap`, at the end of start-up, moves every object alive then into the
permanent generation, which no collection walks (`gc.freeze`); what the server makes
afterwards is collected as before. It does not collect first: a full collection there found
nothing to free, and cost 0.16-0.3 s at every app start (the tests start one per test:
tests/context and tests/memories took 119 s with it, 82 s without). `thaw_startup_heap` at shutdown
gives them back (`gc.unfreeze`), so a process that runs several apps one after another
(the tests) does not keep the cycles of the ones that ended.

`watch_collections` times every collection into a histogram by generation
(`engram_gc_pause_seconds`), so a pause that comes back shows in /metrics.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import Histogram


def freeze_startup_heap() -> int:
    """Freeze every object alive now (module docstring); returns how many."""
    gc.freeze()
    return gc.get_freeze_count()


def thaw_startup_heap() -> None:
    """Hand the frozen objects back to the collector (at shutdown)."""
    gc.unfreeze()


def watch_collections(pauses: Histogram) -> Callable[[], None]:
    """Observe each collection's duration in `pauses` (labelled by generation) from now
    on; returns the function that stops it. The callback runs in whichever thread set the
    collection off, around it."""
    started: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            pauses.labels(str(info["generation"])).observe(
                time.perf_counter() - started.pop())

    gc.callbacks.append(timed)

    def stop() -> None:
        if timed in gc.callbacks:
            gc.callbacks.remove(timed)

    return stop
