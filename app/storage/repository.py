"""The only code that touches LanceDB tables.

Methods speak in domain words (a session's messages, a namespace's memories); arguments after
the first are keyword-only. Writes are batched: one call writes many rows in one table version,
because every LanceDB write is a version and a fragment (see LANCEDB_NOTES.md).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import lancedb
import numpy as np
import pyarrow as pa
import structlog

from app.config import Settings
from app.storage.leases import LeaseStore, check_fences
from app.storage.log_cache import LogChange, RawLogCache
from app.storage.log_cache import combined as combined_log_changes
from app.storage.migrations import migrate
from app.storage.namespace_cache import UNKNOWN, Change, NamespaceCache, combined
from app.storage.object_store import location_for
from app.storage.records import (
    ArchiveRecord,
    EventRecord,
    JobRecord,
    MemoryRecord,
    MessageRecord,
    SessionRecord,
    _Record,
    session_key,
)
from app.storage.writer import Alone, Append, Delete, TableWriter, Update, Upsert, Write

log = structlog.get_logger(__name__)

R = TypeVar("R", bound=_Record)

TABLES = ("messages", "memories", "sessions", "events", "jobs", "meta", "archive")
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


def sql_str(value: str) -> str:
    """A SQL string literal (LanceDB filters are DataFusion SQL)."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    items = ", ".join(sql_str(v) for v in values)
    return f"{column} IN ({items})" if items else "false"


@dataclass(frozen=True)
class MemoryFilter:
    namespace: str
    session_id: str | None = None
    category: str | None = None
    tier: str | None = None
    branch: str | None = None
    state: str | None = "active"
    min_importance: int | None = None
    tag: str | None = None
    pinned: bool | None = None

    def to_sql(self) -> str:
        parts = [f"namespace = {sql_str(self.namespace)}"]
        if self.pinned is not None:
            parts.append("pinned" if self.pinned else "NOT pinned")
        for column in ("session_id", "category", "tier", "branch", "state"):
            value = getattr(self, column)
            if value is not None:
                parts.append(f"{column} = {sql_str(value)}")
        if self.min_importance is not None:
            parts.append(f"importance >= {int(self.min_importance)}")
        if self.tag is not None:
            parts.append(f"array_has(tags, {sql_str(self.tag)})")
        return " AND ".join(parts)


@dataclass
class NamespaceStats:
    """What a namespace holds (`Repository.namespace_overview`)."""

    namespace: str
    memories: int = 0
    sessions: int = 0
    pinned: int = 0
    last_stored_at: datetime | None = None


# Quote marks, straight and typographic, Western and CJK: in a full-text query string they
# open a phrase query, which an index without positions refuses (and they carry no words).
_QUOTES = re.compile("[\"\u201c\u201d\u201e\u201f\u00ab\u00bb\u300c\u300d\u300e\u300f"
                     "\uff02\u301d\u301e]")


def full_text_query(text: str, column: str) -> Any:
    """Any user text as a full-text query of plain words: never query syntax.

    A `MatchQuery` is not parsed (no phrases, no AND/OR/NOT, no field:term, no wildcards):
    its text is only tokenized, like the indexed text. Quote marks are dropped as well.
    """
    from lancedb.query import FullTextOperator, MatchQuery

    # Every field spelled out: the pydantic dataclass hides its defaults from mypy. These are
    # LanceDB's defaults, i.e. what a plain string without syntax was searched with before.
    return MatchQuery(_QUOTES.sub(" ", text), column, boost=1.0, fuzziness=0,
                      max_expansions=50, operator=FullTextOperator.OR, prefix_length=0,
                      document_granularity=None)


def sql_time(value: datetime) -> str:
    """A UTC timestamp literal (naive datetimes are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return f"TIMESTAMP '{value.astimezone(UTC).isoformat()}'"


@dataclass(frozen=True)
class SearchFilter:
    """Which memories a recall may return. The namespace is always part of the filter.

    `time_from`/`time_to` keep memories whose message time range overlaps the interval
    (memories without message times fall back to their creation time).
    """

    namespace: str
    branches: tuple[str, ...] | None = None
    categories: tuple[str, ...] | None = None
    tiers: tuple[str, ...] | None = None
    session_id: str | None = None
    time_from: datetime | None = None
    time_to: datetime | None = None
    states: tuple[str, ...] = ("active",)

    def to_sql(self) -> str:
        parts = [f"namespace = {sql_str(self.namespace)}", sql_in("state", self.states)]
        for column, values in (("branch", self.branches), ("category", self.categories),
                               ("tier", self.tiers)):
            if values is not None:
                parts.append(sql_in(column, values))
        if self.session_id is not None:
            parts.append(f"session_id = {sql_str(self.session_id)}")
        if self.time_from is not None:
            parts.append(f"coalesce(time_end, created_at) >= {sql_time(self.time_from)}")
        if self.time_to is not None:
            parts.append(f"coalesce(time_start, created_at) <= {sql_time(self.time_to)}")
        return " AND ".join(parts)


@dataclass(frozen=True)
class SearchHit:
    """One memory found by a search: cosine similarity to the query vector, and the BM25
    score of the full-text search (None when that search did not return it). `vector` is
    the memory's stored vector when the search had it at hand (recall compares its
    candidates' vectors with each other: `newer.py`); None otherwise."""

    memory: MemoryRecord
    cosine: float | None = None
    bm25: float | None = None
    vector: Any = None  # (dim,) float32 array


# Columns a recall needs; the vector is left out (a search returns the distance already).
# The columns a recall reads of each candidate. Only these: every column costs time per
# search (all columns: 5.6 ms for 50 hits on 10k rows; the id alone: 2.6 ms).
_SEARCH_COLUMNS = ("id", "namespace", "session_id", "text", "created_at", "time_start",
                   "time_end", "branch", "part", "msg_ids", "msg_count", "category",
                   "importance", "tier", "state", "summary_of")


def _search_record(row: dict[str, Any]) -> MemoryRecord:
    # The selected columns are all fields (no per-row field lookup as in `from_row`, which
    # costs ~1 ms per search); a null column takes the field default.
    return MemoryRecord(**{k: v for k, v in row.items() if v is not None})


def _vectors(table: pa.Table, dim: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A search result's "vector" column as an (n, dim) float32 matrix."""
    if table.num_rows == 0:
        return np.zeros((0, dim), dtype=np.float32)
    flat: np.ndarray[Any, np.dtype[np.float32]] = (
        table.column("vector").combine_chunks().flatten().to_numpy().astype(np.float32))
    return flat.reshape(table.num_rows, dim)


# Events collected instead of written (`Repository.collecting_events`); None: write them.
_COLLECTED_EVENTS: ContextVar[list[EventRecord] | None] = ContextVar("collected_events",
                                                                      default=None)

# How long a vector search trusts what it last saw of the vector index (`_vector_indexed`).
_INDEX_RECHECK_SECONDS = 10.0

# IVF_PQ query settings: partitions probed, and candidates re-ranked on full vectors.
_VECTOR_NPROBES = 32
_VECTOR_REFINE = 4


class Repository:
    def __init__(self, db: Any, tables: dict[str, Any], *, embedding_dim: int,
                 cache_rows: int = 50_000, cache_namespace_rows: int = 20_000,
                 write_batch_max_rows: int = 20_000, reads_see_every_write: bool = True,
                 compact_unindexed_every: int = 0, log_cache_rows: int = 20_000) -> None:
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
                   log_cache_rows=settings.raw_log_cache_max_rows)
        repo.leases = leases
        repo.lancedb_session = session
        if repo._compact_every:  # a restart on a large table: not every 32 versions
            repo._compact_due["memories"] = _memories_due(
                repo._compact_every, await tables["memories"].count_rows())
        for name, table in tables.items():
            repo._schemas[name] = await table.schema()
        await repo._count_unindexed_rows()
        return repo

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

    async def reset_vectors(self, dim: int) -> None:
        """Replace the vector column by an empty one of `dim` dimensions (model change).

        Every memory must be re-embedded right after (`upsert_memories`).
        """
        memories = self._tables["memories"]
        self.namespace_cache.clear()
        await memories.drop_columns(["vector"])
        await memories.add_columns(pa.field("vector", pa.list_(pa.float32(), dim)))
        self._schemas["memories"] = await memories.schema()
        self.embedding_dim = dim
        self.namespace_cache.clear()
        self._vector_index_seen = None  # the index went with the column
        self._wrote("memories")

    async def all_memories(self) -> list[MemoryRecord]:
        """Every memory of every namespace, without vectors (model change, maintenance)."""
        return await self._select("memories", MemoryRecord, "true")

    # --- helpers -----------------------------------------------------------------------

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
        """Run one commit on the raw log and tell the raw-log cache what it did (its version
        is LanceDB's answer; a write that raises, or a compaction, reports none)."""
        cache = self.log_cache
        cache.writes_in_flight += 1
        try:
            result = await commit()
            version = getattr(result, "version", None)
            cache.wrote(version if isinstance(version, int) else None,
                        combined_log_changes(changes))
            return result
        finally:
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

    # --- messages (raw log) ------------------------------------------------------------

    async def session_messages(self, namespace: str, session_id: str, *,
                               with_content: bool = True) -> list[MessageRecord]:
        """Every stored message of a session, in order.

        `with_content=False` reads only what tells a message's identity and state (msg_id,
        seq, content hash, state, pinned, received_at, job): role, content, time, tags and
        the rest keep their defaults. About a quarter of the full read's time: what a
        `wait=false` store needs to count new, changed and unchanged messages; answered
        without a read while the raw-log cache holds the session as of the current version
        (log_cache.py), which every read here fills.
        """
        cache = self.log_cache
        if not with_content:
            held = await cache.get(namespace, session_id)
            if held is not None:
                return held
        where = f"namespace = {sql_str(namespace)} AND session_id = {sql_str(session_id)}"
        columns = None if with_content else [
            "key", "namespace", "session_id", "msg_id", "seq", "content_hash", "state",
            "pinned", "received_at", "job_id"]
        with cache.reading(namespace, session_id):
            version = await cache.version() if cache.max_rows else 0
            rows = await self._select("messages", MessageRecord, where, columns=columns)
            cache.put(namespace, session_id, version, rows)
        return sorted(rows, key=lambda m: m.seq)

    async def upsert_messages(self, messages: Sequence[MessageRecord], *,
                              first: bool = False) -> None:
        await self._upsert("messages", "key", messages, first=first)

    async def store_messages(self, new: Sequence[MessageRecord],
                             changed: Sequence[MessageRecord]) -> None:
        """Write a store's raw-log rows in one commit: `new` ones are not stored yet (the
        caller read the session under its raw-log lock, which every writer of raw-log rows
        holds), `changed` ones replace stored rows.

        Only new rows: appended, no merge (the small-append case). Any changed row: all in
        one merge, as is every write when reads may lag behind other processes' commits
        (then absent-when-read does not prove absent-when-written).

        The store's acknowledgement: committed before the queued writes that are not one
        (writer.py), e.g. builds marking messages done.
        """
        if changed or not self._reads_see_every_write:
            await self.upsert_messages([*new, *changed], first=True)
        elif new:
            await self._write("messages", Append(self._arrow("messages", new),
                                                 change=LogChange(rows=tuple(new))), first=True)

    async def mark_messages_done(self, messages: Sequence[MessageRecord]) -> None:
        """Mark these messages built, each only if its stored content is still the one built.

        A `wait=false` store does not wait for a build of its session (service.py): a
        message changed while the build ran stays pending, and the next build takes it.
        """
        if messages:
            pairs = [sql_str(f"{m.key}\x1f{m.content_hash}") for m in messages]
            where = f"concat(key, '\x1f', content_hash) IN ({', '.join(pairs)})"
            done = tuple((m.namespace, m.session_id, m.msg_id, m.content_hash) for m in messages)
            await self._write("messages", Update({"state": "done"}, where, rows=len(messages),
                                                 change=LogChange(done=done)))

    async def pending_sessions(self, *, received_before: datetime | None = None
                               ) -> list[tuple[str, str]]:
        """(namespace, session) pairs whose raw log holds messages not yet built into memories
        (only messages first received before `received_before`, if given)."""
        where = "state = 'pending'"
        if received_before is not None:
            where += f" AND received_at < {sql_time(received_before)}"
        rows = await (
            self._tables["messages"].query().where(where)
            .select(["namespace", "session_id"]).to_arrow()
        )
        return sorted(set(zip(rows.column("namespace").to_pylist(),
                              rows.column("session_id").to_pylist(), strict=True)))

    async def delete_messages(
        self, namespace: str, session_id: str, msg_ids: Sequence[str]
    ) -> None:
        where = (f"namespace = {sql_str(namespace)} AND session_id = {sql_str(session_id)} "
                 f"AND {sql_in('msg_id', msg_ids)}")
        await self._delete("messages", where, change=Change(namespaces=frozenset([namespace])))

    async def count_messages(self, namespace: str, session_id: str | None = None) -> int:
        where = f"namespace = {sql_str(namespace)}"
        if session_id is not None:
            where += f" AND session_id = {sql_str(session_id)}"
        return int(await self._tables["messages"].count_rows(where))

    # --- memories ----------------------------------------------------------------------

    async def upsert_memories(self, memories: Sequence[MemoryRecord], *,
                              absent: bool = False) -> None:
        """Write memories: merged on their id, or with `absent` appended without a merge.

        `absent`: the caller read every one of these ids as not stored, under the namespace
        write lock that every writer of them holds (a build's new chunks: their ids derive
        from their own namespace and session, and the build read that session's memories
        under the lock). A merge joins its rows against the whole table (~60 ms for a
        session's 6 new chunks here), an append only writes a fragment. Merged anyway when
        reads may lag other processes' commits (absent-when-read would prove nothing).
        """
        for memory in memories:
            if memory.vector is None or len(memory.vector) != self.embedding_dim:
                raise ValueError(f"memory {memory.id} has no {self.embedding_dim}-d vector")
        if not (absent and self._reads_see_every_write and memories):
            await self._upsert("memories", "id", memories)
            return
        data = self._arrow("memories", memories)
        await self._write("memories", Append(
            data, change=Change(rows=data.select([*self._search_columns(), "vector"]))))

    async def get_memory(self, memory_id: str, *, namespaces: Collection[str] | None
                         ) -> MemoryRecord | None:
        """The memory with this id if it lies in one of `namespaces` (None: any namespace)."""
        where = f"id = {sql_str(memory_id)}"
        if namespaces is not None:
            where += f" AND {sql_in('namespace', sorted(namespaces))}"
        rows = await self._select("memories", MemoryRecord, where, limit=1)
        return rows[0] if rows else None

    async def get_memories(self, memory_ids: Sequence[str], *, with_vector: bool = False
                           ) -> list[MemoryRecord]:
        columns = self._columns("memories", exclude=() if with_vector else ("vector",))
        return await self._select("memories", MemoryRecord, sql_in("id", memory_ids),
                                  columns=columns)

    async def session_memories(self, namespace: str, session_id: str) -> list[MemoryRecord]:
        where = f"namespace = {sql_str(namespace)} AND session_id = {sql_str(session_id)}"
        rows = await self._select("memories", MemoryRecord, where)
        return sorted(rows, key=lambda m: (m.start_seq, m.part))

    async def list_memories(
        self, where: MemoryFilter, *, offset: int, limit: int
    ) -> tuple[list[MemoryRecord], int]:
        """A page of memories, newest first, and the number of all that match."""
        sql = where.to_sql()
        order = await (
            self._tables["memories"].query().where(sql)
            .select(["id", "created_at", "start_seq", "part"]).to_arrow()
        )
        keys = sorted(
            order.to_pylist(),
            key=lambda r: (r["created_at"], r["start_seq"], r["part"], r["id"]),
            reverse=True,
        )
        page_ids = [r["id"] for r in keys[offset: offset + limit]]
        by_id = {m.id: m for m in await self.get_memories(page_ids)} if page_ids else {}
        return [by_id[i] for i in page_ids if i in by_id], len(keys)

    async def search_memories(self, where: MemoryFilter, *, vector: Sequence[float], text: str,
                              limit: int) -> tuple[list[SearchHit], list[SearchHit]]:
        """The `limit` memories matching `where` closest to `vector` (cosine), and the
        `limit` best full-text (BM25) matches of `text`, both filtered before the search.

        For listing with `q=`: whole records (no vectors), searched exhaustively, so every
        filter of the listing applies exactly (the caller fuses the two rankings).
        """
        sql = where.to_sql()
        columns = self._columns("memories", exclude=("vector",))
        near = await (
            self._tables["memories"].query().nearest_to(list(vector)).distance_type("cosine")
            .where(sql).bypass_vector_index().select([*columns, "_distance"]).limit(limit)
            .to_arrow())
        vector_hits = [
            SearchHit(MemoryRecord.from_row(row), cosine=1.0 - float(d))
            for row, d in zip(near.drop_columns(["_distance"]).to_pylist(),
                              near.column("_distance").to_pylist(), strict=True)]
        found = await (
            self._tables["memories"].query().nearest_to_text(full_text_query(text, "text"))
            .where(sql).select([*columns, "_score"]).limit(limit).to_arrow())
        keyword_hits = [
            SearchHit(MemoryRecord.from_row(row), bm25=float(score))
            for row, score in zip(found.drop_columns(["_score"]).to_pylist(),
                                  found.column("_score").to_pylist(), strict=True)]
        return vector_hits, keyword_hits

    async def context_memories(self, namespace: str, *, durable_categories: Sequence[str],
                               durable_min_importance: int) -> list[MemoryRecord]:
        """What a context starts from: the namespace's pinned memories (unless forgotten)
        and its durable facts (active long-term memories and summaries, and decisions and
        preferences of at least `durable_min_importance`)."""
        durable = (f"tier = 'longterm' OR array_length(summary_of) > 0 OR "
                   f"({sql_in('category', durable_categories)} AND "
                   f"importance >= {int(durable_min_importance)})")
        where = (f"namespace = {sql_str(namespace)} AND ((pinned AND state != 'forgotten') "
                 f"OR (state = 'active' AND ({durable})))")
        return await self._select("memories", MemoryRecord, where)

    async def memory_texts_like(self, namespace: str, text: str, *, limit: int) -> list[str]:
        """The texts of the namespace's memories (any state) that best match `text` by
        full-text search (the recall firewall's candidates)."""
        found = await (
            self._tables["memories"].query().nearest_to_text(full_text_query(text, "text"))
            .where(f"namespace = {sql_str(namespace)}").select(["text", "_score"])
            .limit(limit).to_arrow())
        return [t for t in found.column("text").to_pylist() if t]

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

    async def update_memory(self, memory_id: str, values: dict[str, Any], *,
                            namespace: str | None = None) -> None:
        """Set some columns of one memory (no re-embedding; use upsert_memories for text);
        with `namespace`, only if the memory lies in it."""
        where = f"id = {sql_str(memory_id)}"
        if namespace is not None:
            where += f" AND namespace = {sql_str(namespace)}"
        await self._write_memories(
            Change(updates={memory_id: dict(values)}),
            lambda: self._tables["memories"].update(updates=values, where=where),
            rows=1)

    async def forgettable_memories(
        self, namespace: str, *, untouched_since: datetime, max_importance: int
    ) -> list[MemoryRecord]:
        """Active, unprotected, unpinned, low-importance memories nobody touched since the
        cutoff."""
        since = sql_time(untouched_since)
        where = (
            f"namespace = {sql_str(namespace)} AND state = 'active' AND NOT protected "
            "AND NOT pinned "
            f"AND importance <= {int(max_importance)} "
            f"AND coalesce(last_accessed, updated_at, created_at) < {since}"
        )
        return await self._select("memories", MemoryRecord, where)

    async def count_memories(self, namespace: str) -> int:
        return int(await self._tables["memories"].count_rows(f"namespace = {sql_str(namespace)}"))

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

    # --- recall: search, hits, vector index --------------------------------------------

    def _search_columns(self) -> list[str]:
        return [c for c in _SEARCH_COLUMNS if c in self._schemas["memories"].names]

    async def vector_search(
        self, vector: Sequence[float], where: SearchFilter, *, limit: int, exact: bool = False,
    ) -> list[SearchHit]:
        """The `limit` memories closest to `vector` by cosine, filtered before the search.

        Rows not yet in the vector index (or every row, before the index exists) are
        compared exhaustively, so a new memory is found at once. `exact` skips the index:
        for a small namespace an exhaustive scan is both faster and exact, while an IVF
        index probing a few partitions may hold too few of its rows (LANCEDB_NOTES.md #6).
        An exact search of a small namespace runs on its in-process copy (namespace_cache.py).
        While the table has no vector index every search is exact (LanceDB compares every
        row), so it is run as one: a small namespace's search then costs no LanceDB query
        (a build's superseded search runs one per new memory).
        """
        if not exact and not await self._vector_indexed():
            exact = True
        if exact:
            cache = self.namespace_cache
            copy = await cache.get(where.namespace, load=True)
            if copy is not None:
                rows, distances, vectors = cache.nearest(copy, vector, where, limit=limit)
                return [SearchHit(_search_record(row), cosine=1.0 - d, vector=v)
                        for row, d, v in zip(rows, distances, vectors, strict=True)]
        # The vectors too: recall compares its candidates with each other (newer.py), and
        # reading 50 more vectors here costs less than a second query for them.
        query = (
            self._tables["memories"].query().nearest_to(list(vector)).distance_type("cosine")
            .where(where.to_sql()).select([*self._search_columns(), "vector", "_distance"])
            .limit(limit)
        )
        if exact:
            query = query.bypass_vector_index()
        else:
            # Probe more partitions and re-rank with full vectors: PQ codes alone lose the
            # fine order that recall quality depends on.
            query = query.nprobes(_VECTOR_NPROBES).refine_factor(_VECTOR_REFINE)
        table = await query.to_arrow()
        distances = table.column("_distance").to_pylist()
        matrix = _vectors(table, self.embedding_dim)
        rows = table.drop_columns(["_distance", "vector"]).to_pylist()
        return [SearchHit(_search_record(row), cosine=1.0 - float(d), vector=v)
                for row, d, v in zip(rows, distances, matrix, strict=True)]

    async def text_search(self, text: str, where: SearchFilter, *, limit: int
                          ) -> tuple[list[SearchHit], Any]:
        """Full-text (BM25) search over memory text, filtered before the search.

        Returns the hits and their vectors as an (n, dim) float32 matrix, so the caller can
        score hits the vector search did not return on the same cosine scale. Rows written
        since the last `optimize()` are searched without the index (flat), never skipped.
        """
        def search() -> Any:
            return (self._tables["memories"].query()
                    .nearest_to_text(full_text_query(text, "text"))
                    .where(where.to_sql()).limit(limit))

        cache = self.namespace_cache
        copy = await cache.get(where.namespace, load=False)
        if copy is None:
            cache.prefetch(where.namespace)  # for the vector search that follows
        else:
            # Ids and scores only; rows and vectors come from the namespace's copy.
            found = await search().select(["id", "_score"]).to_arrow()
            taken = cache.take(copy, found.column("id").to_pylist())
            if taken is not None:  # else written since the copy was checked: read it all
                rows, vectors = taken
                vectors = vectors.reshape(len(rows), self.embedding_dim)
                hits = [SearchHit(_search_record(row), bm25=float(s), vector=v)
                        for row, s, v in zip(rows, found.column("_score").to_pylist(), vectors,
                                             strict=True)]
                return hits, vectors
        table = await search().select([*self._search_columns(), "vector", "_score"]).to_arrow()
        scores = table.column("_score").to_pylist()
        vectors = _vectors(table, self.embedding_dim)
        rows = table.drop_columns(["_score", "vector"]).to_pylist()
        hits = [SearchHit(_search_record(row), bm25=float(s), vector=v)
                for row, s, v in zip(rows, scores, vectors, strict=True)]
        return hits, vectors

    async def add_hits(self, counts: dict[str, int], *, namespaces: Sequence[str],
                       when: datetime) -> int:
        """Add `counts[id]` to each memory's hit_count and set its last_accessed to `when`.

        One table version for the whole batch, however many namespaces it spans (a
        partial-column merge on the indexed id). The caller holds the write locks of
        `namespaces`: the read-modify-write must not interleave with a rebuild of the same
        memories. Ids outside `namespaces` and memories deleted meanwhile are skipped.
        Returns the rows updated.
        """
        if not counts or not namespaces:
            return 0
        where = f"{sql_in('namespace', namespaces)} AND {sql_in('id', counts)}"
        current = await (
            self._tables["memories"].query().where(where).select(["id", "hit_count"]).to_arrow()
        )
        rows = [
            {"id": mid, "hit_count": int(hits or 0) + counts[mid], "last_accessed": when}
            for mid, hits in zip(current.column("id").to_pylist(),
                                 current.column("hit_count").to_pylist(), strict=True)
        ]
        if not rows:
            return 0
        schema = self._schemas["memories"]
        partial = pa.schema([schema.field(n) for n in ("id", "hit_count", "last_accessed")])
        # Neither column is one a search reads: cached namespaces stay as they are.
        await self._write_memories(Change(), lambda: (
            self._tables["memories"].merge_insert("id").when_matched_update_all()
            .execute(pa.Table.from_pylist(rows, schema=partial))), rows=len(rows))
        return len(rows)

    async def has_vector_index(self) -> bool:
        indices = await self._tables["memories"].list_indices()
        return any(tuple(index.columns) == ("vector",) for index in indices)

    async def _vector_indexed(self) -> bool:
        """`has_vector_index`, asked again at most every `_INDEX_RECHECK_SECONDS` (another
        process may build the index; until this one sees it, its searches are exhaustive:
        exact, only slower on a large namespace)."""
        now = time.monotonic()
        if self._vector_index_seen is None or now - self._vector_index_seen[0] > \
                _INDEX_RECHECK_SECONDS:
            self._vector_index_seen = (now, await self.has_vector_index())
        return self._vector_index_seen[1]

    async def ensure_vector_index(self, *, min_rows: int) -> bool:
        """Build the IVF_PQ (cosine) index on memory vectors once the table holds `min_rows`.

        Returns True when it built one now. Later rows are folded in by `compact()`
        (`optimize()`); until then they are searched exhaustively. Building takes tens of
        seconds at 100k rows (LANCEDB_NOTES.md): the maintenance loop calls this, never a
        request.
        """
        if await self.has_vector_index():
            return False
        rows = int(await self._tables["memories"].count_rows())
        if rows < min_rows:
            return False
        from lancedb.index import IvfPq

        # ~sqrt(rows) partitions (LanceDB's own rule of thumb), 48 sub-vectors of 8 dims for
        # the 384-d default model; cosine to match the queries (LANCEDB_NOTES.md #5).
        partitions = max(16, int(rows ** 0.5))
        sub_vectors = next(n for n in (48, 32, 24, 16, 8, 4, 2, 1) if self.embedding_dim % n == 0)
        started = time.monotonic()
        await self._tables["memories"].create_index(
            "vector",
            config=IvfPq(distance_type="cosine", num_partitions=partitions,
                         num_sub_vectors=sub_vectors),
            replace=True,
        )
        self._vector_index_seen = None
        log.info("vector_index_built", rows=rows, partitions=partitions,
                 seconds=round(time.monotonic() - started, 1))
        return True

    # --- sessions ledger ---------------------------------------------------------------

    async def get_session(self, namespace: str, session_id: str) -> SessionRecord | None:
        rows = await self._select(
            "sessions", SessionRecord, f"key = {sql_str(session_key(namespace, session_id))}"
        )
        return rows[0] if rows else None

    async def list_sessions(self, namespace: str) -> list[SessionRecord]:
        rows = await self._select("sessions", SessionRecord, f"namespace = {sql_str(namespace)}")
        return sorted(rows, key=lambda s: (s.stored_at is None, s.stored_at, s.session_id))

    async def upsert_session(self, session: SessionRecord) -> None:
        await self._upsert("sessions", "key", [session])

    async def delete_session(self, namespace: str, session_id: str) -> None:
        """The session's ledger row, raw log, memories and their events."""
        memories = await self.session_memories(namespace, session_id)
        await self.delete_events([m.id for m in memories])
        where = f"namespace = {sql_str(namespace)} AND session_id = {sql_str(session_id)}"
        for table in ("memories", "messages", "jobs", "archive"):
            await self._delete(table, where, change=Change(namespaces=frozenset([namespace])))
        await self._delete("sessions", f"key = {sql_str(session_key(namespace, session_id))}")
        await self._unlink_from_summaries(namespace, [m.id for m in memories])

    async def delete_namespace(self, namespace: str) -> None:
        where = f"namespace = {sql_str(namespace)}"
        for table in ("memories", "events", "messages", "jobs", "sessions", "archive"):
            await self._delete(table, where, change=Change(namespaces=frozenset([namespace])))

    # --- events (append-only) ----------------------------------------------------------

    async def append_events(self, events: Sequence[EventRecord]) -> None:
        """Insert-if-absent: replaying a half-finished build after a crash does not log twice.

        Inside `collecting_events` (this task and the ones it starts) the events are only
        collected: its caller writes them, with its own, in one commit.
        """
        collected = _COLLECTED_EVENTS.get()
        if collected is not None:
            collected.extend(events)
            return
        await self._insert_new("events", "id", events)

    @staticmethod
    @contextmanager
    def collecting_events(into: list[EventRecord]) -> Iterator[list[EventRecord]]:
        """`append_events` calls of the block add to `into` instead of writing: the caller
        writes `into` itself (one commit where there were two in a row: a build's events,
        then those of its superseded search). Nothing is durable until the caller writes."""
        token = _COLLECTED_EVENTS.set(into)
        try:
            yield into
        finally:
            _COLLECTED_EVENTS.reset(token)

    async def events_for(self, namespace: str, memory_id: str) -> list[EventRecord]:
        where = f"namespace = {sql_str(namespace)} AND memory_id = {sql_str(memory_id)}"
        rows = await self._select("events", EventRecord, where)
        return sorted(rows, key=lambda e: (e.timestamp is None, e.timestamp, e.id))

    async def delete_events(self, memory_ids: Sequence[str]) -> None:
        if memory_ids:
            await self._delete("events", sql_in("memory_id", memory_ids))

    # --- jobs --------------------------------------------------------------------------

    async def add_job(self, job: JobRecord) -> None:
        """Write a new job (its id is fresh: appended, no merge on the key); part of a
        `wait=false` store's acknowledgement, so committed before queued writes that are not
        (writer.py), e.g. builds marking their jobs done."""
        await self._write("jobs", Append(self._arrow("jobs", [job])), first=True)

    async def upsert_jobs(self, jobs: Sequence[JobRecord]) -> None:
        await self._upsert("jobs", "id", jobs)

    async def get_job(self, job_id: str) -> JobRecord | None:
        rows = await self._select("jobs", JobRecord, f"id = {sql_str(job_id)}", limit=1)
        return rows[0] if rows else None

    async def get_jobs(self, job_ids: Sequence[str]) -> list[JobRecord]:
        return await self._select("jobs", JobRecord, sql_in("id", job_ids)) if job_ids else []

    async def queued_job_sessions(self, *, updated_before: datetime | None = None
                                  ) -> list[tuple[str, str]]:
        """(namespace, session) pairs with a background store job not marked done (only jobs
        last updated before `updated_before`, if given)."""
        where = "state = 'queued'"
        if updated_before is not None:
            where += f" AND updated_at < {sql_time(updated_before)}"
        rows = await (
            self._tables["jobs"].query().where(where)
            .select(["namespace", "session_id"]).to_arrow()
        )
        return sorted(set(zip(rows.column("namespace").to_pylist(),
                              rows.column("session_id").to_pylist(), strict=True)))

    async def unfinished_jobs(self, namespace: str, session_id: str) -> list[JobRecord]:
        where = (f"namespace = {sql_str(namespace)} AND session_id = {sql_str(session_id)} "
                 "AND state = 'queued'")
        return await self._select("jobs", JobRecord, where)

    # --- meta --------------------------------------------------------------------------

    async def get_meta(self, key: str) -> str | None:
        rows = await (
            self._tables["meta"].query().where(f"key = {sql_str(key)}").select(["value"]).to_arrow()
        )
        values = rows.column("value").to_pylist()
        return values[0] if values else None

    async def set_meta(self, key: str, value: str) -> None:
        table = pa.Table.from_pylist([{"key": key, "value": value}], schema=self._schemas["meta"])
        await (
            self._tables["meta"].merge_insert("key").when_matched_update_all()
            .when_not_matched_insert_all().execute(table)
        )
        self._wrote("meta", 1)  # counted, so maintenance compacts meta too

    # --- whole namespaces (export / import) ----------------------------------------------

    async def namespace_messages(self, namespace: str) -> list[MessageRecord]:
        rows = await self._select("messages", MessageRecord, f"namespace = {sql_str(namespace)}")
        return sorted(rows, key=lambda m: (m.session_id, m.seq))

    async def namespace_memories(self, namespace: str, *, with_vector: bool) -> list[MemoryRecord]:
        columns = self._columns("memories", exclude=() if with_vector else ("vector",))
        rows = await self._select("memories", MemoryRecord, f"namespace = {sql_str(namespace)}",
                                  columns=columns)
        return sorted(rows, key=lambda m: (m.session_id, m.start_seq, m.part))

    async def namespace_events(self, namespace: str) -> list[EventRecord]:
        rows = await self._select("events", EventRecord, f"namespace = {sql_str(namespace)}")
        return sorted(rows, key=lambda e: (e.memory_id, e.timestamp is None, e.timestamp, e.id))

    async def upsert_sessions(self, sessions: Sequence[SessionRecord]) -> None:
        await self._upsert("sessions", "key", sessions)

    # --- compression ---------------------------------------------------------------------

    async def namespaces(self) -> list[str]:
        """Every namespace that holds memories, sorted."""
        rows = await self._tables["memories"].query().select(["namespace"]).to_arrow()
        return sorted(set(rows.column("namespace").to_pylist()))

    async def namespace_fingerprint(self, namespace: str) -> str:
        """A cheap summary of a namespace's memories (count, latest change, latest use): equal
        fingerprints mean nothing was stored, edited, compressed or recalled in between."""
        table = await (
            self._tables["memories"].query().where(f"namespace = {sql_str(namespace)}")
            .select(["updated_at", "last_accessed"]).to_arrow()
        )
        if table.num_rows == 0:
            return "0"
        latest = [max((v for v in table.column(c).to_pylist() if v is not None), default=None)
                  for c in ("updated_at", "last_accessed")]
        return f"{table.num_rows}|{latest[0]}|{latest[1]}"

    async def set_memory_columns(self, rows: Sequence[dict[str, Any]]) -> int:
        """Set some columns of many memories in one table version (a partial-column merge).

        Every row holds `id` and the same other columns; memories deleted meanwhile are
        skipped. The caller holds the namespace write lock. Returns the rows given.
        """
        if not rows:
            return 0
        schema = self._schemas["memories"]
        partial = pa.schema([schema.field(name) for name in rows[0]])
        searched = set(partial.names).intersection([*self._search_columns(), "vector"]) - {"id"}
        change = Change(ids=frozenset(r["id"] for r in rows)) if searched else Change()
        await self._write_memories(change, lambda: (
            self._tables["memories"].merge_insert("id").when_matched_update_all()
            .execute(pa.Table.from_pylist(list(rows), schema=partial))), rows=len(rows))
        return len(rows)

    async def archive_memories(self, records: Sequence[ArchiveRecord]) -> None:
        """Write original texts to the archive (replacing an older row of the same memory)."""
        await self._upsert("archive", "memory_id", records)

    async def get_archived(self, namespace: str, memory_ids: Sequence[str]
                           ) -> list[ArchiveRecord]:
        if not memory_ids:
            return []
        where = f"namespace = {sql_str(namespace)} AND {sql_in('memory_id', memory_ids)}"
        return await self._select("archive", ArchiveRecord, where)

    async def namespace_archive(self, namespace: str) -> list[ArchiveRecord]:
        return await self._select("archive", ArchiveRecord, f"namespace = {sql_str(namespace)}")

    async def delete_archived(self, memory_ids: Sequence[str]) -> None:
        where = sql_in("memory_id", memory_ids)
        # Most deletes concern memories never compressed: skip the empty write (a version).
        if memory_ids and await self._tables["archive"].count_rows(where):
            await self._delete("archive", where)

    async def messages_received_since(self, namespace: str, since: datetime
                                      ) -> list[MessageRecord]:
        """The namespace's messages received after `since`, oldest first (feedback)."""
        where = f"namespace = {sql_str(namespace)} AND received_at > {sql_time(since)}"
        rows = await self._select("messages", MessageRecord, where)
        return sorted(rows, key=lambda m: (m.received_at or since, m.session_id, m.seq))

    # --- maintenance -------------------------------------------------------------------

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

    # --- intents: meta rows recording a multi-write operation until it is whole ----------

    async def add_meta(self, key: str, value: str) -> None:
        """A meta row under a new key (an intent's own id): appended, in meta's writer."""
        rows = pa.Table.from_pylist([{"key": key, "value": value}], schema=self._schemas["meta"])
        await self._write("meta", Append(rows))

    async def meta_with_prefix(self, prefix: str) -> dict[str, str]:
        """Every meta row whose key starts with `prefix` (letters, digits, `-` and `:`)."""
        rows = await (self._tables["meta"].query().where(f"key LIKE {sql_str(prefix + '%')}")
                      .select(["key", "value"]).to_arrow())
        return dict(zip(rows.column("key").to_pylist(), rows.column("value").to_pylist(),
                        strict=True))

    async def delete_meta(self, keys: Sequence[str]) -> None:
        if keys:
            await self._delete("meta", sql_in("key", keys))
