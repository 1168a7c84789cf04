"""glibc's allocator, bounded for a long-running server with many threads.

glibc gives threads that allocate at the same time arenas of their own (up to 8 per core),
and memory freed in one arena serves only the threads allocating from it. This server's
threads (LanceDB's runtime, the embedding worker, asyncio's executor running text analysis)
each keep the freed pages of their own arena, so its resident size grows with the number of
threads that ever allocated, not with what it holds. Two arenas: 1.05 -> 1.01 GB RSS after
`bench/load.py --sessions 5` (docs/benchmarks.md, "Server memory").

A setting of the process, applied here (`limit_arenas`, at the start of the app's lifespan,
before its threads exist) rather than as `MALLOC_ARENA_MAX` in a launch script: every way of
starting a server gets it (`engram serve`, the image, `scripts/serve`, the tests' and the
benchmarks' server processes, each uvicorn worker). An operator's own `MALLOC_ARENA_MAX`
wins. Elsewhere than glibc (musl, macOS) nothing is done.

`release_free_memory` hands the allocator's free pages back to the system once start-up is
done: loading the model and the tables leaves freed temporaries (the parsed model file, fp32
weights before bf16) that glibc keeps for reuse; the running server never asks for that much
again at once. 17 MB at an idle start (docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes
import os

import structlog

log = structlog.get_logger(__name__)

# mallopt's parameter number for the arena limit (glibc's malloc.h).
_M_ARENA_MAX = -8


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def limit_arenas(count: int) -> bool:
    """At most `count` malloc arenas in this process from now on; 0 keeps glibc's default.

    Returns whether the limit was set (False: not glibc, or `MALLOC_ARENA_MAX` is set).
    """
    if count <= 0 or "MALLOC_ARENA_MAX" in os.environ:
        return False
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    done = bool(libc.mallopt(_M_ARENA_MAX, count))
    log.info("malloc_arenas_limited", arenas=count, done=done)
    return done


def release_free_memory() -> bool:
    """Return the free pages of every malloc arena to the system (glibc's `malloc_trim`).

    Takes a few milliseconds and the arenas' locks meanwhile: call it when the process is
    quiet (after start-up), not per request. Returns whether memory was released.
    """
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    before = resident_mb()
    released = bool(libc.malloc_trim(0))
    log.info("malloc_trimmed", released=released, resident_mb_before=before,
             resident_mb_after=resident_mb())
    return released


def resident_mb() -> int | None:
    """This process's resident set in MB (Linux: /proc/self/statm); None elsewhere."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") // 1_000_000
