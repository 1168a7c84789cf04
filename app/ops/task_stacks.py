"""What the server is waiting on: every pending asyncio task's stack, logged on SIGUSR1.

A request or a build that never finishes leaves no trace in a thread dump (py-spy, gdb):
the event loop sits in `select`, and the coroutine that waits is a frame no thread is
running. A store worker that stopped reporting (`/readyz`: "the store worker has not
reported for N s") was seen once under a 16-tenant ingest and could not be told apart from
a slow one. `kill -USR1 <pid>` logs `task_stacks`: each pending task's name and its chain
of awaits down to what it waits on, which names the await that does not return. Nothing else
changes; the server goes on.
"""

from __future__ import annotations

import asyncio
import io
import signal

import structlog

log = structlog.get_logger(__name__)

# Awaits followed per task: a request's chain runs through ASGI middleware first.
CHAIN_LIMIT = 60


def log_task_stacks() -> int:
    """Log where every pending task of the running loop waits; returns how many tasks."""
    tasks = sorted((t for t in asyncio.all_tasks() if not t.done()), key=lambda t: t.get_name())
    out = io.StringIO()
    for task in tasks:
        out.write(f"--- {task.get_name()}\n")
        for line in awaiting(task.get_coro()):
            out.write(f"  {line}\n")
    log.warning("task_stacks", tasks=len(tasks), stacks=out.getvalue())
    return len(tasks)


def awaiting(coro: object) -> list[str]:
    """The chain of awaits a suspended coroutine waits in, outermost first, down to what
    it waits for (a future, a task). `Task.print_stack` shows only the outermost frame of
    a suspended coroutine: the line of its first await, not the one that does not return."""
    lines: list[str] = []
    while coro is not None and len(lines) < CHAIN_LIMIT:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:  # a future, a task or another awaitable: what the chain waits on
            lines.append(f"waits on {coro!r:.300}")
            break
        code = frame.f_code
        lines.append(f"{code.co_filename}:{frame.f_lineno} in {code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return lines


def log_task_stacks_on_signal(loop: asyncio.AbstractEventLoop) -> bool:
    """Log the task stacks whenever the process gets SIGUSR1. Returns whether the handler
    was installed: not without SIGUSR1 (Windows), nor for a loop outside the main thread
    (an app started by a test's own thread), where signals cannot be handled."""
    if not hasattr(signal, "SIGUSR1"):
        return False
    try:
        loop.add_signal_handler(signal.SIGUSR1, log_task_stacks)
    except (RuntimeError, ValueError):
        return False
    return True


def stop_logging_task_stacks(loop: asyncio.AbstractEventLoop) -> None:
    loop.remove_signal_handler(signal.SIGUSR1)
