"""The compression scheduler: a background task of the app's lifespan.

Every `compression_interval_seconds` it runs one pass over every namespace: one pass at a
time (a manual run waits for a running one), each namespace on its own — its write lock is
taken only to apply what the pass decided, and its errors are logged and reported without
stopping the other namespaces. After a pass that wrote anything it asks the existing table
maintenance (`app.scheduler.Maintenance`) to compact, which happens only when writes are idle.

The loop beats every few seconds, also while a long pass runs, and `/readyz` fails when
the beat stops.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Literal

import structlog

from app.compression.schemas import CompressionStatus, NamespaceResult, PassResult
from app.compression.service import CompressionService
from app.errors import Unavailable
from app.ops.metrics import Metrics
from app.periodic import Periodic
from app.scheduler import Maintenance
from app.storage.repository import Repository

log = structlog.get_logger(__name__)

_MAX_TICK_SECONDS = 5.0
_FULL_PASS_EVERY = timedelta(days=1)


class CompressionScheduler:
    def __init__(self, service: CompressionService, repo: Repository, maintenance: Maintenance,
                 *, interval: float, enabled: bool, wait_seconds: float,
                 metrics: Metrics | None = None) -> None:
        self.service = service
        self._repo = repo
        self._maintenance = maintenance
        self.interval = interval
        self.enabled = enabled
        self._wait_seconds = wait_seconds
        self._metrics = metrics
        self._pass_lock = asyncio.Lock()
        # The loop only starts passes, each in a task of its own (`_tick`), so it keeps
        # beating while a long pass (the first scoring of a large namespace) works.
        self._loop = Periodic("compression", self._tick, interval=interval)
        self._current: asyncio.Task[None] | None = None  # the scheduled pass under way
        self.next_run_at: datetime | None = None
        self.passes = 0
        self.last_pass: PassResult | None = None
        self.results: dict[str, NamespaceResult] = {}
        # Scheduled passes skip a namespace whose memories and policy did not change since
        # its last pass (a full re-read of every vector each interval would not scale); the
        # age rule still needs time to pass, so a day after its last pass it runs anyway.
        self._fingerprints: dict[str, tuple[str, datetime]] = {}

    @property
    def heartbeat(self) -> datetime | None:
        return self._loop.heartbeat

    @property
    def running(self) -> bool:
        return self._pass_lock.locked()

    def start(self) -> None:
        if not self.enabled:
            return
        self.next_run_at = datetime.now(UTC) + timedelta(seconds=self.interval)
        self._loop.interval = min(self.interval, _MAX_TICK_SECONDS)
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        if self._current is not None:
            self._current.cancel()
            await asyncio.gather(self._current, return_exceptions=True)
            self._current = None
        await self.service.close()

    async def _tick(self) -> None:
        """Start the scheduled pass when it is due and the last one is done."""
        due = self.next_run_at is not None and datetime.now(UTC) >= self.next_run_at
        if due and (self._current is None or self._current.done()):
            self._current = asyncio.create_task(self._scheduled(), name="compression-pass")

    async def _scheduled(self) -> None:
        try:
            await self.run(trigger="scheduled")
        except Exception as exc:  # e.g. listing namespaces failed: try next interval
            log.warning("compression_pass_failed", error=str(exc)[:300])
        self.next_run_at = datetime.now(UTC) + timedelta(seconds=self.interval)

    async def run(self, *, namespaces: list[str] | None = None, dry_run: bool = False,
                  force: bool = False,
                  trigger: Literal["scheduled", "manual"] = "manual") -> PassResult:
        """One pass over `namespaces` (default: every namespace holding memories).

        Raises:
            Unavailable: another pass did not finish within the wait limit.
        """
        try:
            async with asyncio.timeout(self._wait_seconds):
                await self._pass_lock.acquire()
        except TimeoutError:
            raise Unavailable("a compression pass is running; retry later") from None
        try:
            started = datetime.now(UTC)
            targets = namespaces if namespaces is not None else await self._repo.namespaces()
            results = []
            for namespace in targets:
                self._loop.beat()
                if trigger == "scheduled" and await self._unchanged(namespace):
                    continue
                results.append(await self._one(namespace, dry_run=dry_run, force=force))
                if not dry_run:
                    await self._remember(namespace, results[-1])
            compacted: list[str] = []
            if not dry_run and any(r.compressed or r.scored for r in results):
                compacted = await self._maintenance.run_once()
            result = PassResult(trigger=trigger, dry_run=dry_run, force=force,
                                started_at=started, finished_at=datetime.now(UTC),
                                namespaces=results, failed=sum(not r.ok for r in results),
                                compacted=compacted)
            self.passes += 1
            self.last_pass = result
            if not dry_run:
                self.results.update({r.namespace: r for r in results})
            self._loop.beat()
            return result
        finally:
            self._pass_lock.release()

    async def _fingerprint(self, namespace: str) -> str:
        policy = await self._repo.get_meta(f"compression:policy:{namespace}") or ""
        return f"{await self._repo.namespace_fingerprint(namespace)}|{policy}"

    async def _unchanged(self, namespace: str) -> bool:
        seen = self._fingerprints.get(namespace)
        if seen is None or datetime.now(UTC) - seen[1] > _FULL_PASS_EVERY:
            return False
        return seen[0] == await self._fingerprint(namespace)

    async def _remember(self, namespace: str, result: NamespaceResult) -> None:
        if result.ok:
            # Taken after the pass: its own writes are part of the state it leaves behind.
            self._fingerprints[namespace] = (await self._fingerprint(namespace),
                                             datetime.now(UTC))
        else:
            self._fingerprints.pop(namespace, None)

    async def _one(self, namespace: str, *, dry_run: bool, force: bool) -> NamespaceResult:
        started = time.monotonic()
        try:
            result = await self.service.run_namespace(namespace, dry_run=dry_run, force=force)
            outcome = "ok"
        except Exception as exc:
            # One namespace's failure (a lock timeout, a bad row, a bug) must not stop the
            # others: report it and move on.
            log.exception("compression_namespace_failed", namespace=namespace)
            result = NamespaceResult(namespace=namespace, ok=False, dry_run=dry_run,
                                     error=f"{type(exc).__name__}: {exc}"[:500],
                                     started_at=datetime.now(UTC),
                                     seconds=round(time.monotonic() - started, 3))
            outcome = "failed"
        if self._metrics is not None:
            self._metrics.background_runs.labels("compression", outcome).inc()
        return result

    def status(self, visible: set[str] | None) -> CompressionStatus:
        """The scheduler's state; `visible` limits namespaces (None: all)."""
        def shown(name: str) -> bool:
            return visible is None or name in visible

        last = self.last_pass
        if last is not None and visible is not None:
            last = last.model_copy(update={"namespaces": [
                r for r in last.namespaces if shown(r.namespace)]})
        return CompressionStatus(
            enabled=self.enabled, interval_seconds=self.interval, running=self.running,
            heartbeat=self.heartbeat, next_run_at=self.next_run_at, passes=self.passes,
            last_pass=last,
            namespaces={k: v for k, v in sorted(self.results.items()) if shown(k)})
