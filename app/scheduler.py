"""Background jobs started and stopped in the lifespan.

`Maintenance` compacts tables: every write is a LanceDB version and a fragment, and searches
slow down as fragments pile up (LANCEDB_NOTES.md #3), while new rows stay outside the
indexes until `optimize()` (#12). Compaction conflicts with concurrent writers (#2), so it
runs only when this process has not written for a while, and a conflict is simply retried
on a later tick.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import structlog

from app.periodic import Periodic
from app.storage.repository import Repository

log = structlog.get_logger(__name__)


class Maintenance:
    def __init__(self, repo: Repository, *, every_versions: int, every_rows: int | None = None,
                 idle_seconds: float = 2.0, tick_seconds: float = 5.0,
                 vector_index_min_rows: int = 0) -> None:
        self._repo = repo
        # 0: never build the vector index (exhaustive search only).
        self._vector_index_min_rows = vector_index_min_rows
        self._vector_index_ready = False
        self._every_versions = every_versions
        self._every_rows = every_rows
        self._idle_seconds = idle_seconds
        self._loop = Periodic("maintenance", self.run_once, interval=tick_seconds)
        self.compactions = 0
        # Held while a pass runs. Background writers that can wait (the recall hit flusher)
        # take it too, so their frequent small writes never preempt a compaction (#2).
        self.busy = asyncio.Lock()

    @property
    def heartbeat(self) -> datetime | None:
        return self._loop.heartbeat

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def run_once(self, *, force: bool = False) -> list[str]:
        """Compact the tables that need it; return their names."""
        if not force and time.monotonic() - self._repo.last_write_monotonic < self._idle_seconds:
            return []
        if force:
            tables = self._repo.tables_needing_compaction(1)
        else:
            tables = self._repo.tables_needing_compaction(self._every_versions, self._every_rows)
        done = []
        async with self.busy:
            for table in tables:
                try:
                    await self._repo.compact(table)
                    done.append(table)
                    self.compactions += 1
                except Exception as exc:  # a commit conflict with a writer: retry next tick
                    log.warning("compaction_deferred", table=table, error=str(exc)[:200])
            await self._ensure_vector_index()
        return done

    async def _ensure_vector_index(self) -> None:
        """Build the memories' vector index once the table passes the threshold (recall).

        Idle time only, like compaction: the build takes tens of seconds of CPU at 100k rows.
        After that, compaction (`optimize()`) folds new rows into it; rows not yet folded in
        are searched exhaustively, so recall never misses them.
        """
        if not self._vector_index_min_rows or self._vector_index_ready:
            return
        try:
            built = await self._repo.ensure_vector_index(min_rows=self._vector_index_min_rows)
            self._vector_index_ready = built or await self._repo.has_vector_index()
        except Exception as exc:  # a conflict with a writer: retry next tick
            log.warning("vector_index_deferred", error=str(exc)[:200])
