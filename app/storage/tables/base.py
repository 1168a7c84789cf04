"""What every table part of `Repository` shares: the table handles and schemas, the reads
and the write path (one group-committing writer per table, the caches told of every write),
and the compaction that the writes make due.

Writes are batched: one call writes many rows in one table version, because every LanceDB
write is a version and a fragment (see LANCEDB_NOTES.md).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import lancedb
import pyarrow as pa
import structlog

from app.storage.leases import LeaseStore, check_fences
from app.storage.log_cache import LogChange, RawLogCache
from app.storage.log_cache import combined as combined_log_changes
from app.storage.namespace_cache import UNKNOWN, Change, NamespaceCache, combined
from app.storage.pending_cache import PendingCache
from app.storage.pending_vectors import PendingVectors
from app.storage.records import _Record
from app.storage.writer import Alone, Delete, TableWriter, Upsert, Write

log = structlog.get_logger(__name__)

R = TypeVar("R", bound=_Record)

# Tables written on every store: compacted in their writer's queue once
# `compact_unindexed_every` versions piled up (`_wrote`), not only when writes are idle.
# The memories table too, less often as it grows (`_memories_due`): its compaction rewrites
# the whole table and folds new rows into its indexes (~0.15 s at 1.5k memories, ~4 s at
# 30k here), while each version it lacks is a fragment every read opens (~1 ms apiece: after
# a 16-tenant ingest that never paused, 332 fragments made a session's memories read
# 265 ms instead of 11 ms and the firewall's full-text search 95 ms instead of 5 ms).
_QUEUE_COMPACTED = ("messages", "jobs", "sessions", "events", "memories")


def _memories_due(every: int, rows: int) -> int:
    """Versions after which the memories table is compacted in its writer's queue.

    A compaction costs about its row count (~0.12 ms a row here: it rewrites the table),
    each version left makes every later read open one more fragment (~1 ms, and a build
    reads the table twice): compacting every sqrt(2 * cost / per-version cost) =
    ~sqrt(rows / 8) versions costs the least in all. Never more often than the other tables
    (`every`): 32 up to ~8k memories, 61 at 30k, 112 at 100k.
    """
    return max(every, math.isqrt(max(rows, 0) // 8))


# The columns a recall reads of each candidate. Only these: every column costs time per
# search (all columns: 5.6 ms for 50 hits on 10k rows; the id alone: 2.6 ms).
_SEARCH_COLUMNS = ("id", "namespace", "session_id", "text", "created_at", "time_start",
                   "time_end", "branch", "part", "msg_ids", "msg_count", "category",
                   "categories", "importance", "tier", "state", "summary_of")


class TableBase:
    """State and helpers of the repository; the table parts (tables/*.py) add the methods."""

    def __init__(self, db: Any, tables: dict[str, Any], *, embedding_dim: int,
                 cache_rows: int = 50_000, cache_namespace_rows: int = 20_000,
                 write_batch_max_rows: int = 20_000, reads_see_every_write: bool = True,
                 compact_unindexed_every: int = 0, log_cache_rows: int = 20_000,
                 pending_cache_rows: int = 5_000, pending_vectors_rows: int = 5_000) -> None:
        self._db = db
        # Every read sees every process's latest commit (read_consistency_seconds = 0): a key
        # read as absent under the lock ordering its writers is absent, so its row may be
        # appended instead of merged (`store_messages`).
        self._reads_see_every_write = reads_see_every_write
        self._tables = tables
        self.embedding_dim = embedding_dim
        self._schemas: dict[str, pa.Schema] = {}
        self._writes_since_compaction: dict[str, int] = dict.fromkeys(tables, 0)
        # Rows written since the last compaction: each sits outside the table's indexes and
        # is scanned by every search until `optimize()` folds it in (a hit flush rewrites
        # the rows it counts, so a store read often drifts out of its full-text index).
        self._rows_since_compaction: dict[str, int] = dict.fromkeys(tables, 0)
        # Versions at which a table of `_QUEUE_COMPACTED` is compacted next (0: never here;
        # the maintenance loop still compacts it when idle), and the compactions under way.
        self._compact_every = compact_unindexed_every
        self._compact_due: dict[str, int] = dict.fromkeys(tables, compact_unindexed_every)
        self._compacting: dict[str, asyncio.Task[None]] = {}
        self.last_write_monotonic = time.monotonic()
        # (monotonic time asked, whether the memories table has a vector index): `_vector_indexed`
        self._vector_index_seen: tuple[float, bool] | None = None
        # Lease objects ordering namespace writes across hosts (leases.py); None: lock files.
        self.leases: LeaseStore | None = None
        # LanceDB's caches of this process (`connect`), read by /metrics.
        self.lancedb_session: lancedb.Session | None = None
        # Small namespaces' memories for exact searches (namespace_cache.py); every write to
        # the memories table below reports what it changed (`_write_memories`).
        self.namespace_cache = NamespaceCache(
            tables["memories"], self._search_columns, max_rows=cache_rows,
            max_namespace_rows=cache_namespace_rows)
        # What a `wait=false` store counts against, held between stores (log_cache.py); every
        # write to the raw log below reports what it did (`_report_messages`). Only where
        # the version check can prove a held session current: reads see every commit.
        self.log_cache = RawLogCache(
            tables["messages"], max_rows=log_cache_rows if reads_see_every_write else 0)
        # What recall searches besides memories, held between recalls (pending_cache.py):
        # the namespaces' pending messages; told of every raw-log write like the above.
        self.pending_cache = PendingCache(
            tables["messages"], max_rows=pending_cache_rows if reads_see_every_write else 0)
        # The own vectors of pending messages stored with wait=true (pending_vectors.py),
        # checked by content hash at every use: no version check needed.
        self.pending_vectors = PendingVectors(max_rows=pending_vectors_rows)
        reporters: dict[str, Any] = {"memories": self._report_memories,
                                     "messages": self._report_messages}
        # One group-committing writer per table (writer.py): concurrent writes of every
        # namespace share commits instead of racing each other's.
        self.writers = {
            name: TableWriter(
                name, table, max_batch_rows=write_batch_max_rows,
                around_commit=reporters.get(name),
                on_commit=lambda rows, name=name: self._wrote(name, rows))  # type: ignore[misc]
            for name, table in tables.items()}

    async def _read_tables(self) -> None:
        """What `Repository.open` reads of the opened tables: their schemas, and where the
        compaction counts start."""
        if self._compact_every:  # a restart on a large table: not every 32 versions
            self._compact_due["memories"] = _memories_due(
                self._compact_every, await self._tables["memories"].count_rows())
        for name, table in self._tables.items():
            self._schemas[name] = await table.schema()
        await self._count_unindexed_rows()

    async def _count_unindexed_rows(self) -> None:
        """Start the row counts from what the indexes lack: a restart must not forget them."""
        for name, table in self._tables.items():
            for index in await table.list_indices():
                stats = await table.index_stats(index.name)
                if stats is not None:
                    self._rows_since_compaction[name] = max(
                        self._rows_since_compaction[name], int(stats.num_unindexed_rows))

    @property
    def stored_vector_dim(self) -> int:
        """The dimension of the vectors the memories table holds (fixed per table)."""
        dim: int = self._schemas["memories"].field("vector").type.list_size
        return dim

    def _arrow(self, table: str, records: Sequence[_Record]) -> pa.Table:
        return pa.Table.from_pylist([r.to_row() for r in records], schema=self._schemas[table])

    def _columns(self, table: str, *, exclude: Iterable[str] = ()) -> list[str]:
        skip = set(exclude)
        return [n for n in self._schemas[table].names if n not in skip]

    async def _upsert(self, table: str, key: str, records: Sequence[_Record], *,
                      first: bool = False) -> None:
        if not records:
            return
        data = self._arrow(table, records)
        change: Any = None
        if table == "memories":
            change = Change(rows=data.select([*self._search_columns(), "vector"]))
        elif table == "messages":
            change = LogChange(rows=tuple(records))  # type: ignore[arg-type]
        # A stored row of another namespace with the same key is never overwritten (keys
        # derived from the namespace cannot match one; this holds whatever a caller passes).
        await self._write(table, Upsert(key, data, change=change, same_namespace=True),
                          first=first)

    async def _insert_new(self, table: str, key: str, records: Sequence[_Record]) -> None:
        """Insert rows whose key is not stored yet; existing keys are left as they are."""
        if not records:
            return
        await self._write(table, Upsert(key, self._arrow(table, records), insert_only=True))

    def memory_held(self) -> dict[str, Callable[[], float]]:
        """Readers of what the storage layer holds in memory (`Metrics.watch_memory`)."""
        cache, writers = self.namespace_cache, self.writers.values()
        return {
            "namespace_cache_namespaces": lambda: cache.held_namespaces,
            "namespace_cache_rows": lambda: cache.held_rows,
            "namespace_cache_bytes": lambda: cache.held_bytes,
            "write_queue_writes": lambda: sum(w.pending_writes for w in writers),
            "write_queue_rows": lambda: sum(w.pending_rows for w in writers),
            "lancedb_cache_bytes": self._lancedb_cache_bytes,
            "raw_log_cache_sessions": lambda: self.log_cache.held_sessions,
            "raw_log_cache_rows": lambda: self.log_cache.held_rows,
            "pending_cache_rows": lambda: self.pending_cache.held_rows,
            "pending_vector_rows": lambda: self.pending_vectors.held_rows,
        }

    def _lancedb_cache_bytes(self) -> float:
        session = self.lancedb_session
        return float(session.size_bytes) if session is not None else 0.0

    async def _write(self, table: str, write: Write, *, first: bool = False) -> Any:
        """Commit `write` with the other pending writes of `table` (writer.py); its result.
        `first`: a store's acknowledgement, committed before queued writes that are not.

        Raises:
            LeaseLost: the write is made under a namespace lease this server no longer holds
                (leases.py, fencing); nothing is committed.
        """
        await check_fences()
        return await self.writers[table].write(write, first=first)

    async def _select(
        self, table: str, cls: type[R], where: str, *, columns: list[str] | None = None,
        limit: int | None = None,
    ) -> list[R]:
        query = self._tables[table].query().where(where)
        query = query.select(columns or self._columns(table, exclude=("vector",)))
        if limit is not None:
            query = query.limit(limit)
        rows = (await query.to_arrow()).to_pylist()
        return [cls.from_row(row) for row in rows]

    async def _delete(self, table: str, where: str, *, change: Change | None = None) -> None:
        if table == "messages":  # the raw-log cache drops the namespaces' sessions
            namespaces = change.namespaces if change is not None else frozenset()
            log_change = LogChange(namespaces=namespaces, unknown=not namespaces)
            await self._write(table, Delete(where, change=log_change))
            return
        await self._write(table, Delete(where, change=(change or UNKNOWN)
                                        if table == "memories" else None))

    async def _write_memories(self, change: Change, write: Callable[[], Awaitable[object]],
                              *, rows: int = 0) -> None:
        """Run a write to the memories table alone, in its writer's queue (writer.py)."""
        await self._write("memories", Alone(write, rows=rows, change=change))

    async def _report_memories(self, changes: list[Any], commit: Callable[[], Awaitable[Any]]
                               ) -> Any:
        """Run one commit on the memories table and tell the namespace cache what it changed.

        Every LanceDB write (merge, update, delete, even one that matches nothing) commits one
        version and returns its number; a number not above the version read before is not
        believed. If the write raises, its version stays unknown (namespace_cache.py).
        """
        cache = self.namespace_cache
        change = combined([c if isinstance(c, Change) else UNKNOWN for c in changes])
        cache.writes_in_flight += 1
        try:
            before = await cache.version()
            result = await commit()
            version = getattr(result, "version", None)
            cache.wrote(version if isinstance(version, int) and version > before else None,
                        change)
            return result
        finally:
            cache.writes_in_flight -= 1

    async def _report_messages(self, changes: list[Any], commit: Callable[[], Awaitable[Any]]
                               ) -> Any:
        """Run one commit on the raw log and tell the raw-log caches what it did (its version
        is LanceDB's answer; a write that raises, or a compaction, reports none)."""
        caches = (self.log_cache, self.pending_cache)
        for cache in caches:
            cache.writes_in_flight += 1
        try:
            result = await commit()
            version = getattr(result, "version", None)
            change = combined_log_changes(changes)
            for cache in caches:
                cache.wrote(version if isinstance(version, int) else None, change)
            return result
        finally:
            for cache in caches:
                cache.writes_in_flight -= 1

    def _wrote(self, table: str, rows: int = 0) -> None:
        """Count one write version of `table`, which added or rewrote `rows` rows; start its
        compaction when it is due (`_QUEUE_COMPACTED`)."""
        self._writes_since_compaction[table] += 1
        self._rows_since_compaction[table] += rows
        self.last_write_monotonic = time.monotonic()
        if (self._compact_every and table in _QUEUE_COMPACTED
                and self._writes_since_compaction[table] >= self._compact_due[table]
                and table not in self._compacting):
            self._compacting[table] = asyncio.get_running_loop().create_task(
                self._compact_busy_table(table), name=f"compact-{table}")

    async def _compact_busy_table(self, table: str) -> None:
        """Compact `table` now, in its writer's queue: the writes queued meanwhile wait for
        it (tens of ms for an unindexed table's small fragments). A failure (a conflict
        with another process's commits, retried by the writer first) is logged and tried
        again after as many versions more."""
        try:
            await self.compact(table)
        except Exception as exc:
            self._compact_due[table] = self._writes_since_compaction[table] + self._compact_every
            log.warning("compaction_deferred", table=table, error=str(exc)[:200])
        finally:
            del self._compacting[table]

    async def close(self) -> None:
        """Wait for the compactions under way (the lifespan's teardown)."""
        await asyncio.gather(*self._compacting.values(), return_exceptions=True)

    def _search_columns(self) -> list[str]:
        return [c for c in _SEARCH_COLUMNS if c in self._schemas["memories"].names]

    async def table_stats(self) -> dict[str, dict[str, int]]:
        stats = {}
        for name, table in self._tables.items():
            stats[name] = {"rows": int(await table.count_rows()),
                           "version": int(await table.version())}
        return stats

    def tables_needing_compaction(self, versions: int, rows: int | None = None) -> list[str]:
        """Tables with `versions` writes, or `rows` rows outside their indexes, since the
        last compaction (a few large writes leave as much to scan as many small ones)."""
        return [t for t, n in self._writes_since_compaction.items()
                if n >= versions or (rows is not None and self._rows_since_compaction[t] >= rows)]

    async def compact(self, table: str) -> None:
        """Merge small fragments, fold new rows into indexes, drop versions older than 10 min.

        Runs in the table's writer queue, alone: this process's writes wait for it instead
        of making it fail with a commit conflict (LANCEDB_NOTES.md #2). Raises whatever
        LanceDB raises on a conflict with another process, after the writer's retries: the
        caller simply retries later.
        """
        async def run() -> None:
            await self._tables[table].optimize(cleanup_older_than=timedelta(minutes=10))
            # Counted from here: the writes queued behind this one are not compacted yet.
            self._writes_since_compaction[table] = -1  # the writer counts this version
            self._rows_since_compaction[table] = 0
            self._compact_due[table] = self._compact_every
            if table == "memories" and self._compact_every:
                self._compact_due[table] = _memories_due(
                    self._compact_every, await self._tables[table].count_rows())

        await self.writers[table].write(Alone(run))
        log.info("table_compacted", table=table)
