"""The one shape of every background loop of the server: a step, run every few seconds.

Table maintenance (app/scheduler.py), the hit flush (app/recall/hits.py), the compression
scheduler's tick (app/compression/scheduler.py), the pending sweep (app/store/sweep.py) and
the event-loop lag sampler (app/ops/metrics.py) each give `Periodic` their step and their
interval, and get the same start and stop, a heartbeat for /readyz, and the same rule for
failures: a step that raises is logged and the next one runs as usual, so one bad
iteration never stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog

log = structlog.get_logger(__name__)


def stopping() -> bool:
    """Whether the running task is being cancelled, against a CancelledError it was not
    sent: a wait it shared with a caller that was cancelled (a recall past its deadline)
    ends with that caller's CancelledError. A background loop stops on the first, and
    takes the second for a failed step: it once ended the store worker for good."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def end_if_stopping() -> None:
    """Raise CancelledError when the running task's stop was requested and swallowed on the
    way: on Python 3.11, `asyncio.wait_for` whose awaited result was ready as the cancel
    came returns that result instead (the worker then built on and never ended, and its
    `stop()` waited for good). Engram's own waits use `asyncio.timeout`, which does not;
    code it calls may still. A loop calls this at the top of each iteration."""
    if stopping():
        raise asyncio.CancelledError


class Periodic:
    """Run `step` every `interval` seconds, in a task of its own, until stopped.

    Each iteration beats (`heartbeat` is now), waits `interval` seconds, or less when `wake`
    is set meanwhile (then clears it), and runs `step`. A step that raises is logged as
    `<name>_failed` with the error; cancellation (`stop`) is never swallowed.

    Args:
        name: the task's name (`-` becomes `_` in the log event).
        step: one iteration's work.
        interval: seconds between the end of a step and the start of the next.
        wake: set it to run the next step at once (e.g. a buffer filled up).
    """

    def __init__(self, name: str, step: Callable[[], Awaitable[object]], *, interval: float,
                 wake: asyncio.Event | None = None) -> None:
        self.name = name
        self._failed = f"{name.replace('-', '_')}_failed"  # the log event of a failed step
        self.interval = interval
        self._step = step
        self._wake = wake
        self._task: asyncio.Task[None] | None = None
        self.heartbeat: datetime | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the wait or the step under way and wait for the task to end."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def beat(self) -> None:
        """Report the loop alive now (also from inside a long step)."""
        self.heartbeat = datetime.now(UTC)

    async def run(self) -> None:
        """The loop itself, forever (`start` runs it in a task; cancel it to stop)."""
        while True:
            end_if_stopping()
            self.beat()
            await self._wait()
            try:
                await self._step()
            except asyncio.CancelledError:
                if stopping():
                    raise
                log.warning(self._failed, error="cancelled (not by stop)")
            except Exception as error:
                log.warning(self._failed, error=str(error)[:300])

    async def _wait(self) -> None:
        if self._wake is None:
            await asyncio.sleep(self.interval)
            return
        with contextlib.suppress(TimeoutError):  # the timeout is the regular tick
            async with asyncio.timeout(self.interval):
                await self._wake.wait()
        self._wake.clear()
