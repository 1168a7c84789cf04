"""The only code that touches LanceDB tables.

Methods speak in domain words (a session's messages, a namespace's memories); arguments after
the first are keyword-only. `Repository` is put together from one part per table
(app/storage/tables/, each reading and writing its own table through the shared write path
of tables/base.py); this module adds opening the store and what spans several tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import lancedb
import structlog

from app.config import Settings
from app.storage.filters import (
    MemoryFilter,
    SearchFilter,
    full_text_query,
    sql_in,
    sql_str,
    sql_time,
)
from app.storage.leases import LeaseStore
from app.storage.migrations import migrate
from app.storage.namespace_cache import Change
from app.storage.object_store import location_for
from app.storage.records import session_key
from app.storage.tables.archive import ArchiveTable
from app.storage.tables.events import EventsTable
from app.storage.tables.jobs import JobsTable
from app.storage.tables.memories import MemoriesTable
from app.storage.tables.messages import MessagesTable
from app.storage.tables.meta import MetaTable
from app.storage.tables.search import SearchHit, SearchTable
from app.storage.tables.sessions import SessionsTable

# Kept importable from here: callers outside app/storage import these from this module.
__all__ = ["TABLES", "MemoryFilter", "NamespaceStats", "Repository", "SearchFilter",
           "SearchHit", "full_text_query", "sql_in", "sql_str", "sql_time"]

log = structlog.get_logger(__name__)

TABLES = ("messages", "memories", "sessions", "events", "jobs", "meta", "archive")


@dataclass
class NamespaceStats:
    """What a namespace holds (`Repository.namespace_overview`)."""

    namespace: str
    memories: int = 0
    sessions: int = 0
    pinned: int = 0
    last_stored_at: datetime | None = None


class Repository(MemoriesTable, SearchTable, MessagesTable, SessionsTable, EventsTable,
                 JobsTable, MetaTable, ArchiveTable):
    """Every table's methods on one object (`repo.get_job`, `repo.vector_search`).

    Parts of one class rather than one object per table: the parts share the writers, the
    caches told of every write and the compaction counts (tables/base.py), and callers keep
    the one handle they are given.
    """

    @classmethod
    async def open(cls, settings: Settings, *, embedding_dim: int) -> Repository:
        """Connect, apply pending migrations and open every table.

        On an object store (s3://) the bucket is checked first (reachable, credentials
        accepted, conditional writes honoured); each failure raises `Unavailable` naming it.
        """
        if not settings.lancedb_uri:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        location = location_for(settings.resolved_lancedb_uri, settings.storage_options)
        leases = None
        if location is not None:
            await location.check()
            log.info("object_store_checked", uri=location.uri, endpoint=location.endpoint)
            if settings.uses_leases:
                leases = LeaseStore(location.store, ttl=settings.lease_ttl_seconds)
        interval = timedelta(seconds=settings.read_consistency_seconds)
        session = lancedb.Session(
            index_cache_size_bytes=settings.lancedb_index_cache_mb << 20,
            metadata_cache_size_bytes=settings.lancedb_metadata_cache_mb << 20)
        db = await lancedb.connect_async(
            settings.resolved_lancedb_uri,
            read_consistency_interval=interval,
            storage_options=settings.storage_options or None,
            session=session,
        )
        await migrate(
            db,
            embedding_dim=embedding_dim,
            lock_path=settings.resolved_lock_dir / "migrations.lock",
            lease=None if leases is None else leases.held(
                "migrations", max_wait=max(120.0, 4 * settings.lease_ttl_seconds)),
        )
        tables = {name: await db.open_table(name) for name in TABLES}
        repo = cls(db, tables, embedding_dim=embedding_dim,
                   cache_rows=settings.namespace_cache_max_rows,
                   cache_namespace_rows=settings.namespace_cache_max_namespace_rows,
                   write_batch_max_rows=settings.write_batch_max_rows,
                   reads_see_every_write=settings.read_consistency_seconds == 0,
                   compact_unindexed_every=settings.compact_unindexed_every_versions,
                   log_cache_rows=settings.raw_log_cache_max_rows,
                   pending_cache_rows=settings.pending_cache_max_rows,
                   pending_vectors_rows=settings.pending_vectors_max_rows)
        repo.leases = leases
        repo.lancedb_session = session
        await repo._read_tables()
        return repo

    async def delete_session(self, namespace: str, session_id: str) -> None:
        """The session's ledger row, raw log, memories and their events."""
        memories = await self.session_memories(namespace, session_id)
        await self.delete_events([m.id for m in memories])
        where = f"namespace = {sql_str(namespace)} AND session_id = {sql_str(session_id)}"
        for table in ("memories", "messages", "jobs", "archive"):
            await self._delete(table, where, change=Change(namespaces=frozenset([namespace])))
        await self._delete("sessions", f"key = {sql_str(session_key(namespace, session_id))}")
        self.pending_vectors.forget_session(namespace, session_id)
        await self._unlink_from_summaries(namespace, [m.id for m in memories])

    async def delete_namespace(self, namespace: str) -> None:
        where = f"namespace = {sql_str(namespace)}"
        for table in ("memories", "events", "messages", "jobs", "sessions", "archive"):
            await self._delete(table, where, change=Change(namespaces=frozenset([namespace])))
        self.pending_vectors.forget_namespace(namespace)

    async def delete_memories(self, memory_ids: Sequence[str], *,
                              namespace: str | None = None) -> None:
        """Delete memories and their archive rows; with `namespace`, also their links from
        the namespace's summaries (`_unlink_from_summaries`)."""
        if memory_ids:
            await self._delete("memories", sql_in("id", memory_ids),
                               change=Change(deleted=frozenset(memory_ids)))
            await self.delete_archived(memory_ids)
            if namespace is not None:
                await self._unlink_from_summaries(namespace, memory_ids)

    async def _unlink_from_summaries(self, namespace: str, deleted: Sequence[str]) -> None:
        """No summary keeps a link to a deleted memory: the link is dropped, and a summary
        that summarised deleted memories only is deleted too (it holds nothing but their
        text). A dangling link made an export that import refuses."""
        gone = set(deleted)
        rows = (await self._tables["memories"].query()
                .where(f"namespace = {sql_str(namespace)}")
                .select(["id", "summary_of"]).to_arrow()).to_pylist()
        changed = [{"id": r["id"], "summary_of": [s for s in r["summary_of"] if s not in gone]}
                   for r in rows if r["summary_of"] and gone.intersection(r["summary_of"])]
        emptied = [c["id"] for c in changed if not c["summary_of"]]
        await self.set_memory_columns([c for c in changed if c["summary_of"]])
        if emptied:
            await self.delete_events(emptied)
            await self.delete_memories(emptied)

    async def namespace_overview(self) -> list[NamespaceStats]:
        """Every namespace holding memories or sessions, with its counts, sorted by name.

        Reads two narrow columns of memories and sessions (a scan: the listing is an
        operator's and a UI's view, not a per-turn call).
        """
        memories = await (self._tables["memories"].query()
                          .select(["namespace", "pinned"]).to_arrow())
        sessions = await (self._tables["sessions"].query()
                          .select(["namespace", "stored_at", "updated_at"]).to_arrow())
        stats: dict[str, NamespaceStats] = {}
        for namespace, pinned in zip(memories.column("namespace").to_pylist(),
                                     memories.column("pinned").to_pylist(), strict=True):
            entry = stats.setdefault(namespace, NamespaceStats(namespace))
            entry.memories += 1
            entry.pinned += bool(pinned)
        for row in sessions.to_pylist():
            entry = stats.setdefault(row["namespace"], NamespaceStats(row["namespace"]))
            entry.sessions += 1
            stored = row["updated_at"] or row["stored_at"]
            if stored is not None and (entry.last_stored_at is None
                                       or stored > entry.last_stored_at):
                entry.last_stored_at = stored
        return [stats[name] for name in sorted(stats)]
