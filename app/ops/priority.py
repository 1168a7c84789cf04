"""Lower OS priority for the threads that build memories, so recall gets the CPU first.

A recall is what a user waits for; a build (analysing stored text, encoding it) can wait,
and on a 2-core machine it otherwise takes the cores a recall's question needs: during a
16-tenant ingest a question waited up to ~0.5 s for its vector behind the builds' threads
(docs/decisions/0010-recall-first.md). `RecallFirst` (app/ops/recall_first.py) makes builds pause at
their boundaries while a recall is in flight; this makes the kernel prefer the recall's
threads inside them too.

Linux schedules threads, and each thread has its own nice value: `setpriority(PRIO_PROCESS,
tid, n)` on a thread's id lowers that thread only (threads it starts later inherit it).
Raising a thread's nice needs no privilege, lowering it back does: so it is set once, on a
thread that only ever does build work (the embedding pool's stored-text thread, the event
loop's default executor that runs builds' analysis and compression), never on the event
loop or the question thread. Under CFS a thread at nice 10 weighs ~1/9 of one at nice 0
when both want a core, and takes idle CPU freely: builds still run at full speed on an idle
machine, and nothing starves.

Elsewhere (macOS: PRIO_PROCESS takes a process id, not a thread's) nothing is changed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import structlog

log = structlog.get_logger(__name__)


def lower_thread_priority(niceness: int) -> None:
    """Add `niceness` to the calling thread's nice value (Linux; 0: nothing)."""
    if niceness <= 0 or not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + niceness))
    except OSError as exc:  # a sandbox that forbids it: builds keep the normal priority
        log.warning("thread_priority_not_lowered", niceness=niceness, error=str(exc))


# The loops given a build executor already (tests run several apps on one loop).
_LOOPS_SET: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def lower_default_executor(niceness: int) -> None:
    """Make the running loop's default executor, which runs `asyncio.to_thread` work (a
    build's text analysis, compression, an import's planning), threads at `niceness` above
    the server's. asyncio shuts it down with the loop, as the executor it replaces."""
    loop = asyncio.get_running_loop()
    if niceness <= 0 or loop in _LOOPS_SET:
        return
    loop.set_default_executor(ThreadPoolExecutor(
        thread_name_prefix="build", initializer=lower_thread_priority, initargs=(niceness,)))
    _LOOPS_SET.add(loop)
