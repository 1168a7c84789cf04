"""The live sweep: every server builds the pending sessions nobody else is building.

A `wait=false` store is acknowledged once its messages are in the raw log as `pending`;
the server that took it queues their build in its own memory. If that server dies first,
the messages are safe but nobody builds them: start-up (`StoreService.resume_pending`)
queues every pending session of the store, but only when a server starts, and a
`wait=true` store builds only its own session. So each running server, every
`pending_sweep_seconds`, looks for sessions with pending messages received more than
`pending_sweep_min_age_seconds` ago (and jobs left queued as long) and queues their build
(`StoreService.enqueue`, the same path as start-up): the build takes the namespace's
normal lock or lease, so it never runs beside another server's build.

It leaves alone what someone is on: a session already queued here, a namespace this
process or another live one holds (`NamespaceLocks.held_elsewhere`: a lease renewed within
its TTL, a lock file held). Younger messages are their own server's: it queued them. A
namespace held by a dead server's lease is swept once the lease has stood still for a TTL
(on this server's clock) or at once if its pid is gone on this host. What it cannot tell
apart: a live server whose own queue is longer than the minimum age; then both build the
session, one after the other under the lock, and the second finds nothing left to do.

It also finishes the deletes a dead server left half done (app/store/deletes.py): their
intents recorded more than the minimum age ago, in namespaces nobody holds.

Cost with nothing to do: two filtered scans (pending messages, queued jobs), selecting two
columns, and one of the small meta table; a GET of a lease per namespace it finds.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import structlog

from app.locks import NamespaceLocks
from app.periodic import Periodic
from app.storage.repository import Repository
from app.store.service import StoreService

log = structlog.get_logger(__name__)


class PendingSweep:
    """Args:
        interval: seconds between sweeps; 0 disables it (`start` does nothing).
        min_age: pending messages (queued jobs) younger than this are not swept.
    """

    def __init__(self, repo: Repository, store: StoreService, locks: NamespaceLocks, *,
                 interval: float, min_age: float) -> None:
        self._repo = repo
        self._store = store
        self._locks = locks
        self._interval = interval
        self._min_age = min_age
        # A failed sweep (the store did not answer) is logged; the next one tries again.
        self._loop = Periodic("pending-sweep", self.sweep_once, interval=interval)
        self.swept = 0  # sessions queued by the sweep since start-up

    def start(self) -> None:
        if self._interval > 0:
            self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sweep_once(self) -> int:
        """Finish the deletes a dead server left half done (app/store/deletes.py); queue the
        build of every abandoned pending session; how many builds were queued."""
        cutoff = datetime.now(UTC) - timedelta(seconds=self._min_age)
        await self._store.deletes.resume(recorded_before=cutoff, leave_held=True)
        messages, jobs = await asyncio.gather(
            self._repo.pending_sessions(received_before=cutoff),
            self._repo.queued_job_sessions(updated_before=cutoff))
        candidates = [key for key in sorted(set(messages) | set(jobs))
                      if not self._store.has_queued(*key) and not self._locks.is_held(key[0])]
        busy: dict[str, bool] = {}
        queued = []
        for namespace, session_id in candidates:
            if namespace not in busy:
                busy[namespace] = await self._locks.held_elsewhere(namespace)
            if not busy[namespace]:
                self._store.enqueue(namespace, session_id)
                queued.append((namespace, session_id))
        self.swept += len(queued)
        if queued or candidates:
            log.info("pending_sweep", queued=len(queued), left_to_holder=len(candidates)
                     - len(queued), namespaces=sorted({n for n, _ in queued}))
        return len(queued)
