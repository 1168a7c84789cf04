"""In-process copies of small namespaces' memories, for recall's exact searches.

An exact (index-free) vector search of a 2,000-memory namespace in a 100k-row table costs
LanceDB 7–10 ms per call, and a recall makes two to eight of them (second hop, date window,
referenced sessions). The same search over a copy of the namespace is a matrix-vector
product, well under a millisecond; the full-text search then fetches only ids and scores
and takes rows and vectors from the copy. Results are the same rows in the same order;
cosines agree with LanceDB's to float32 rounding (~1e-7).

Staleness is ruled out by the table version, checked on every use (~0.2 ms). Each write
through the `Repository` reports the version it made (LanceDB returns it) and what it
changed: upserts, deletes by id and plain column updates (promotions, forgetting) are
applied to the copies in place, hit counts and other namespaces leave them as they are,
and anything else drops the copies concerned. A version this process cannot account for
(another process's write, a compaction, an index build) drops every copy behind it; the
next keyword search starts the reload, so it overlaps the query's embedding.

Memory: a row costs 2.5-5 KB (its vector's 1.5 KB, its text and the other search columns:
4.8 KB a row after bench/many_namespaces.py's mixed chats, by the gauge
`engram_memory_held{what="namespace_cache_bytes"}`); at most `namespace_cache_max_rows`
rows are held, least recently used namespaces first out, and no namespace above
`namespace_cache_max_namespace_rows` (settings; 0 turns the copies off).

One file (past 400 lines) because the copies and the version bookkeeping that keeps them
exact are one piece: each change a write reports is applied by `_Copy.apply` and ordered by
`NamespaceCache`, and neither is correct without the other.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import structlog

from app.storage.filters import MEMORY_CATEGORIES, MEMORY_END, MEMORY_START, SearchFilter, sql_str

log = structlog.get_logger(__name__)

_MAX_ROWS = 50_000
_MAX_NAMESPACE_ROWS = 20_000
# Changes remembered for copies that are behind; beyond this a copy is simply reloaded.
_MAX_CHANGES = 2_000
# Event-loop turns a search gives an in-process write to report the version it just made.
_REPORT_TURNS = 3
# A namespace found too large is not counted again for this long.
_RECOUNT_SECONDS = 60.0
# Rows per matrix-vector product: above ~1,500 rows OpenBLAS splits the product over
# threads, which on a busy 2-core machine took 3-7 ms instead of 0.05 ms.
_BLOCK_ROWS = 512


@dataclass(frozen=True)
class Change:
    """What one write did to the memories table, as far as the copies are concerned.

    `rows` (upserted rows, all cached columns), `deleted` and `updates` (id -> new column
    values) are applied to a copy in place; `namespaces` and `ids` (memories changed some
    other way) drop the copies holding them; `unknown` drops every copy. An empty change
    (hit counts) leaves every copy as it is.
    """

    rows: pa.Table | None = None
    deleted: frozenset[str] = frozenset()
    updates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    namespaces: frozenset[str] = frozenset()
    ids: frozenset[str] = frozenset()
    unknown: bool = False


UNKNOWN = Change(unknown=True)


def combined(changes: Sequence[Change]) -> Change:
    """One change doing what all of `changes` do (the writes of one group commit, whose
    keys are disjoint: writer.py never puts one key twice into a batch)."""
    if len(changes) == 1:
        return changes[0]
    tables = [c.rows for c in changes if c.rows is not None]
    updates: dict[str, Mapping[str, Any]] = {}
    for change in changes:
        updates.update(change.updates)
    return Change(
        rows=pa.concat_tables(tables) if tables else None,
        deleted=frozenset().union(*(c.deleted for c in changes)),
        updates=updates,
        namespaces=frozenset().union(*(c.namespaces for c in changes)),
        ids=frozenset().union(*(c.ids for c in changes)),
        unknown=any(c.unknown for c in changes),
    )


class _Copy:
    """One namespace's rows (without vectors), their vectors as a matrix, and what the
    filters need as arrays. Rows become dicts when first returned, and stay so."""

    def __init__(self, namespace: str, version: int, table: pa.Table,
                 matrix: np.ndarray[Any, np.dtype[np.float32]],
                 dicts: list[dict[str, Any] | None] | None = None) -> None:
        self.namespace = namespace
        self.version = version
        self.table = table.combine_chunks()
        self.matrix = matrix
        n = self.table.num_rows
        self.dicts: list[dict[str, Any] | None] = dicts if dicts is not None else [None] * n
        self.norms = np.linalg.norm(matrix, axis=1).astype(np.float32)
        t = self.table
        self.rows = {i: r for r, i in enumerate(t.column("id").to_pylist())}
        # What a search filter reads (`SearchFilter.mask`): the columns its clauses name.
        self.columns: dict[str, np.ndarray[Any, Any]] = {
            c: np.array(t.column(c).to_pylist(), dtype=object)
            for c in ("namespace", "state", "branch", "category", "tier", "session_id")}
        mains = self.columns["category"]
        lines = (t.column("categories").to_pylist() if "categories" in t.column_names
                 else [None] * n)
        self.columns[MEMORY_CATEGORIES] = np.array(
            [frozenset(([main] if main is not None else []) + (more or []))
             for main, more in zip(mains, lines, strict=True)], dtype=object)
        created = t.column("created_at")
        self.columns[MEMORY_END] = _micros(pc.coalesce(t.column("time_end"), created))
        self.columns[MEMORY_START] = _micros(pc.coalesce(t.column("time_start"), created))

    @classmethod
    def of(cls, namespace: str, version: int, table: pa.Table) -> _Copy:
        """From rows that hold a "vector" column."""
        return cls(namespace, version, table.drop_columns(["vector"]), _matrix(table))

    def mask(self, where: SearchFilter) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows `where` keeps (the clauses its SQL is made of, filters.py)."""
        return where.mask(self.columns)

    def cosine_distances(self, vector: Sequence[float]) -> np.ndarray[Any, np.dtype[np.float32]]:
        if not len(self.matrix):
            return np.zeros(0, dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        dots = np.concatenate([self.matrix[i: i + _BLOCK_ROWS] @ query
                               for i in range(0, len(self.matrix), _BLOCK_ROWS)])
        scale = self.norms * np.float32(np.linalg.norm(query))
        with np.errstate(divide="ignore", invalid="ignore"):
            cosine = np.where(scale > 0, dots / scale, np.float32(0))
        return (np.float32(1) - cosine).astype(np.float32)

    def apply(self, change: Change) -> _Copy | None:
        """This copy with `change` applied, or None when it must be reloaded."""
        if change.unknown or self.namespace in change.namespaces:
            return None
        if change.ids and any(i in self.rows for i in change.ids):
            return None
        replaced: list[tuple[pa.Table, np.ndarray[Any, np.dtype[np.float32]]]] = []
        if change.rows is not None:
            ours = change.rows.filter(pc.equal(change.rows.column("namespace"), self.namespace))
            if ours.num_rows:
                replaced.append((ours.select(self.table.column_names), _matrix(ours)))
        updated = [i for i in change.updates if i in self.rows]
        if updated:
            patched = self._patched(updated, change.updates)
            if patched is None:
                return None
            replaced.append(patched)
        gone = set(change.deleted)
        for table, _ in replaced:
            gone.update(table.column("id").to_pylist())
        if not gone.intersection(self.rows) and not replaced:
            return self
        keep = np.ones(self.table.num_rows, dtype=bool)
        for i in gone:
            row = self.rows.get(i)
            if row is not None:
                keep[row] = False
        table = self.table.filter(pa.array(keep))
        matrix = self.matrix[keep]
        dicts = [d for d, kept in zip(self.dicts, keep, strict=True) if kept]
        for rows, vectors in replaced:
            table = pa.concat_tables([table, rows])
            matrix = np.concatenate([matrix, vectors]) if len(matrix) else vectors
            dicts += [None] * rows.num_rows
        return _Copy(self.namespace, self.version, table, matrix, dicts)

    def _patched(self, ids: list[str], updates: Mapping[str, Mapping[str, Any]]
                 ) -> tuple[pa.Table, np.ndarray[Any, np.dtype[np.float32]]] | None:
        """The rows of `ids` with their new column values (and their vectors), or None when
        a value is not a plain one of its column's type (then the copy is reloaded)."""
        index = [self.rows[i] for i in ids]
        part = self.table.take(pa.array(index, type=pa.int64()))
        schema = part.schema
        rows = part.to_pylist()
        for row in rows:
            for column, value in updates[row["id"]].items():
                if column not in schema.names:
                    continue  # not a searched column
                if not _plain(value, schema.field(column).type):
                    return None  # e.g. a timestamp: leave its conversion to LanceDB
                row[column] = value
        return pa.Table.from_pylist(rows, schema=schema), self.matrix[index]



def _plain(value: Any, column: pa.DataType) -> bool:
    """Whether `value` is a plain Python value of the column's own kind (no conversion)."""
    kind = type(value)
    return ((kind is str and (pa.types.is_string(column) or pa.types.is_large_string(column)))
            or (kind is bool and pa.types.is_boolean(column))
            or (kind is int and pa.types.is_integer(column))
            or (kind is float and pa.types.is_floating(column)))


def _matrix(table: pa.Table) -> np.ndarray[Any, np.dtype[np.float32]]:
    n = table.num_rows
    if not n:
        return np.zeros((0, 0), dtype=np.float32)
    vectors = table.column("vector").combine_chunks().flatten().to_numpy()
    return np.ascontiguousarray(vectors, dtype=np.float32).reshape(n, -1)


def _micros(column: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A timestamp column as float64 UTC microseconds, NaN for null (`Clause.mask`)."""
    values = pc.cast(column, pa.int64()) if len(column) else pa.array([], pa.int64())
    floats = pc.fill_null(pc.cast(values, pa.float64()), float("nan"))
    return np.asarray(floats.to_numpy(zero_copy_only=False), dtype=np.float64)


class NamespaceCache:
    """Copies of small namespaces' memories, checked against the table version on use."""

    def __init__(self, table: Any, columns: Callable[[], list[str]], *,
                 max_rows: int = _MAX_ROWS, max_namespace_rows: int = _MAX_NAMESPACE_ROWS
                 ) -> None:
        self._table = table
        self._columns = columns  # the cached columns (the search columns), "vector" added
        self.max_rows = max_rows
        self.max_namespace_rows = max_namespace_rows
        self._copies: OrderedDict[str, _Copy] = OrderedDict()
        self._changes: dict[int, Change] = {}  # version -> what it changed
        self._loading: dict[str, asyncio.Task[_Copy | None]] = {}
        self._oldest_loading: dict[str, int] = {}
        self._too_large: dict[str, float] = {}  # namespace -> monotonic time of the count
        self._prefetches: set[asyncio.Task[_Copy | None]] = set()
        self.writes_in_flight = 0  # writes to the memories table not reported yet
        self.loads = 0

    # --- writes ------------------------------------------------------------------------

    async def version(self) -> int:
        return int(await self._table.version())

    def wrote(self, version: int | None, change: Change) -> None:
        """Record a write: the version it made (None: unknown) and what it changed.

        A version not recorded here stays unaccounted for and drops every copy behind it.
        Copies that were current are brought up to date now, off the recall path.
        """
        if version is None or change.unknown:
            return
        if change.rows is not None:
            # Only rows a copy (held or being loaded) may need: an import must not pile up.
            wanted = pa.array(sorted({*self._copies, *self._loading}), pa.string())
            rows = change.rows.filter(pc.is_in(change.rows.column("namespace"), wanted))
            change = replace(change, rows=rows if rows.num_rows else None)
        self._changes[version] = change
        for namespace, copy in list(self._copies.items()):
            if copy.version == version - 1:
                updated = copy.apply(change)
                if updated is None:
                    del self._copies[namespace]
                else:
                    updated.version = version
                    self._copies[namespace] = updated
        self._forget_changes()
        if len(self._changes) > _MAX_CHANGES:
            for old in sorted(self._changes)[: len(self._changes) - _MAX_CHANGES]:
                del self._changes[old]

    def clear(self) -> None:
        self._copies.clear()
        self._changes.clear()

    # --- what it holds (/metrics) ------------------------------------------------------

    @property
    def held_namespaces(self) -> int:
        return len(self._copies)

    @property
    def held_rows(self) -> int:
        return sum(c.table.num_rows for c in self._copies.values())

    @property
    def held_bytes(self) -> int:
        """Arrow rows, vector matrices and the remembered changes' rows (the row dicts made
        for returned hits are not counted: at most the rows recalls returned)."""
        copies = sum(c.table.nbytes + c.matrix.nbytes for c in self._copies.values())
        changes = sum(c.rows.nbytes for c in self._changes.values() if c.rows is not None)
        return int(copies + changes)

    # --- reads -------------------------------------------------------------------------

    def size(self, namespace: str) -> int | None:
        held = self._copies.get(namespace)
        return held.table.num_rows if held is not None else None

    @property
    def enabled(self) -> bool:
        """False when the settings turn the copies off (either limit 0)."""
        return self.max_rows > 0 and self.max_namespace_rows > 0

    def prefetch(self, namespace: str) -> None:
        """Start loading the namespace's copy in the background unless it is held or loading
        (the keyword search calls this: the load then overlaps the query's embedding)."""
        if not self.enabled or namespace in self._copies or namespace in self._loading or \
                self._too_big(namespace):
            return
        task = asyncio.create_task(self.get(namespace, load=True))
        self._prefetches.add(task)
        task.add_done_callback(self._prefetched)

    def _prefetched(self, task: asyncio.Task[_Copy | None]) -> None:
        self._prefetches.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("namespace_cache_load_failed", error=str(task.exception())[:200])

    async def get(self, namespace: str, *, load: bool) -> _Copy | None:
        """The namespace's copy as of the current table version; loaded if `load` and the
        namespace is small enough, else None (the caller asks LanceDB)."""
        if not self.enabled:
            return None
        current = await self.version()
        held = self._copies.get(namespace)
        if held is not None and self.writes_in_flight and any(
                v not in self._changes for v in range(held.version + 1, current + 1)):
            # Most likely a write of this process that committed but has not reported yet
            # (its task resumes a turn or two of the event loop later): let it report.
            for _ in range(_REPORT_TURNS):
                await asyncio.sleep(0)
            held = self._copies.get(namespace)
        if held is not None:
            held = self._catch_up(held, current)
            if held is None:
                del self._copies[namespace]
            else:
                self._copies[namespace] = held
                self._copies.move_to_end(namespace)
        self._forget_changes()
        if held is not None or not load:
            return held
        if self._too_big(namespace):
            return None
        loading = self._loading.get(namespace)
        if loading is None:
            # A task of its own, which every caller waits for without owning: a caller
            # cancelled meanwhile (a recall past its deadline) must not cancel the load
            # that others wait for too. It did, once: a build waiting for the copy a late
            # recall had started got the recall's CancelledError, which ended the store
            # worker. A load nobody waits for any more still fills the copy.
            loading = asyncio.create_task(self._load_once(namespace, current),
                                          name=f"namespace-copy-{namespace}")
            loading.add_done_callback(_retrieved)
            self._loading[namespace] = loading
            self._oldest_loading[namespace] = current
        return await asyncio.shield(loading)

    async def _load_once(self, namespace: str, version: int) -> _Copy | None:
        try:
            return await self._load(namespace, version)
        finally:
            del self._loading[namespace]
            del self._oldest_loading[namespace]

    def _too_big(self, namespace: str) -> bool:
        counted = self._too_large.get(namespace)
        return counted is not None and time.monotonic() - counted < _RECOUNT_SECONDS

    async def _load(self, namespace: str, version: int) -> _Copy | None:
        where = f"namespace = {sql_str(namespace)}"
        if await self._table.count_rows(where) > self.max_namespace_rows:
            self._too_large[namespace] = time.monotonic()
            return None
        self._too_large.pop(namespace, None)
        table = await (self._table.query().where(where)
                       .select([*self._columns(), "vector"]).to_arrow())
        if table.num_rows > self.max_namespace_rows:
            return None
        self.loads += 1
        # Stamped with the version read before the query: the rows may be newer, and
        # re-applying a newer change (an upsert or delete by id) is harmless.
        copy = self._catch_up(_Copy.of(namespace, version, table), await self.version())
        if copy is None:
            return None
        self._copies[namespace] = copy
        self._copies.move_to_end(namespace)
        total = sum(c.table.num_rows for c in self._copies.values())
        while total > self.max_rows and len(self._copies) > 1:
            _, dropped = self._copies.popitem(last=False)
            total -= dropped.table.num_rows
        if total > self.max_rows:
            self._copies.clear()
        return copy

    def _catch_up(self, copy: _Copy, current: int) -> _Copy | None:
        if copy.version == current:
            return copy
        if copy.version > current:  # a stale read of the version (interval > 0)
            return None
        for version in range(copy.version + 1, current + 1):
            change = self._changes.get(version, UNKNOWN)
            updated = copy.apply(change)
            if updated is None:
                return None
            copy = updated
        copy.version = current
        return copy

    def _forget_changes(self) -> None:
        """Drop the changes no copy (held or being loaded) is behind on."""
        stamps = [c.version for c in self._copies.values()] + list(self._oldest_loading.values())
        if not self._changes:
            return
        oldest = min(stamps, default=None)
        for version in [v for v in self._changes if oldest is None or v <= oldest]:
            del self._changes[version]

    # --- searches ----------------------------------------------------------------------

    def nearest(self, copy: _Copy, vector: Sequence[float], where: SearchFilter, *, limit: int
                ) -> tuple[list[dict[str, Any]], list[float],
                           np.ndarray[Any, np.dtype[np.float32]]]:
        """The `limit` rows of `where` closest to `vector` (cosine distance), closest first,
        with their distances and vectors."""
        distances = copy.cosine_distances(vector)
        rows = np.flatnonzero(copy.mask(where))
        if len(rows) > limit:
            part = np.argpartition(distances[rows], limit - 1)[:limit]
            rows = rows[part]
        order = rows[np.lexsort((rows, distances[rows]))]
        return self.rows(copy, order), [float(distances[r]) for r in order], copy.matrix[order]

    def take(self, copy: _Copy, ids: Iterable[str]
             ) -> tuple[list[dict[str, Any]], np.ndarray[Any, np.dtype[np.float32]]] | None:
        """Rows (without vectors) and vectors of `ids`, or None if any is not in the copy."""
        rows = [copy.rows.get(i) for i in ids]
        if any(r is None for r in rows):
            return None
        index = np.asarray(rows, dtype=np.int64)
        return self.rows(copy, index), copy.matrix[index]

    @staticmethod
    def rows(copy: _Copy, index: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
        """The rows as dicts, each a fresh dict with fresh lists (callers may keep them)."""
        dicts = copy.dicts
        missing = [int(r) for r in index if dicts[r] is None]
        if missing:
            taken = copy.table.take(pa.array(missing, type=pa.int64())).to_pylist()
            for r, row in zip(missing, taken, strict=True):
                dicts[r] = row
        return [{k: list(v) if isinstance(v, list) else v for k, v in d.items()}
                for d in (dicts[r] for r in index) if d is not None]


def _retrieved(task: asyncio.Task[Any]) -> None:
    """A failed load is the error of each caller waiting for it; when none is left, there
    is nobody to tell (not "Task exception was never retrieved")."""
    if not task.cancelled():
        task.exception()
