"""Background workers that stopped reporting: named for `/readyz`, and their awaits logged.

Each background loop (the store worker, maintenance, the compression scheduler) beats a
heartbeat between its steps. One that has not beaten for `STALE_AFTER_SECONDS` is stuck or
in an unusually long step: `/readyz` answers 503 naming it. A store worker stopped that way
once under a 16-tenant ingest for 13 minutes (every thread idle, the event loop in `select`:
a coroutine awaited something that never completed) and was not seen again in the runs
watched for it. So the server watches itself: the first time a worker goes stale it logs
`worker_stalled` and every pending task's chain of awaits (`task_stacks`, as `kill -USR1`
does), which names the await that does not return, in whatever run it happens. Once per
stall: the worker reporting again ends it, and a later stall logs again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import structlog

from app.ops.task_stacks import log_task_stacks
from app.periodic import Periodic

log = structlog.get_logger(__name__)

# A worker whose heartbeat is older than this is stale. Its loop beats at least every few
# seconds when idle (the store worker every 5 s), so only a step this long is stale.
STALE_AFTER_SECONDS = 60.0

Heartbeats = Mapping[str, Callable[[], datetime | None]]


def stale_workers(heartbeats: Heartbeats, now: datetime) -> dict[str, float]:
    """The workers whose heartbeat is older than `STALE_AFTER_SECONDS`, with its age (s).
    A worker that has not beaten yet (starting up) is not stale."""
    stale = {}
    for name, heartbeat in heartbeats.items():
        beat = heartbeat()
        if beat is not None and (age := (now - beat).total_seconds()) > STALE_AFTER_SECONDS:
            stale[name] = age
    return stale


class StallWatch:
    """Checks the heartbeats every `interval` seconds; logs a new stall with the task stacks.

    Args:
        heartbeats: worker name -> its last heartbeat (None before its first).
    """

    def __init__(self, heartbeats: Heartbeats, *, interval: float = 15.0,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._heartbeats = heartbeats
        self._clock = clock
        self._stalled: set[str] = set()
        self._loop = Periodic("stall-watch", self.check, interval=interval)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def check(self) -> list[str]:
        """Log the workers that went stale since the last check; returns their names."""
        stale = stale_workers(self._heartbeats, self._clock())
        new = sorted(set(stale) - self._stalled)
        self._stalled = set(stale)
        if new:
            for name in new:
                log.warning("worker_stalled", worker=name, seconds=round(stale[name]))
            log_task_stacks()
        return new
