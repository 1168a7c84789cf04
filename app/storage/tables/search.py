"""Searches of the "memories" table (recall's vector and full-text searches, the listing's
`q=`, the firewall's candidates), the hit counts recalls add, and the vector index."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import structlog

from app.storage.filters import MemoryFilter, SearchFilter, full_text_query, sql_in, sql_str
from app.storage.namespace_cache import Change
from app.storage.records import MemoryRecord
from app.storage.tables.base import TableBase

log = structlog.get_logger(__name__)


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


# How long a vector search trusts what it last saw of the vector index (`_vector_indexed`).
_INDEX_RECHECK_SECONDS = 10.0

# IVF_PQ query settings: partitions probed, and candidates re-ranked on full vectors.
_VECTOR_NPROBES = 32
_VECTOR_REFINE = 4


class SearchTable(TableBase):
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

    async def search_memories(self, where: MemoryFilter, *, vector: Sequence[float], text: str,
                              limit: int) -> tuple[list[SearchHit], list[SearchHit], Any]:
        """The `limit` memories matching `where` closest to `vector` (cosine), and the
        `limit` best full-text (BM25) matches of `text`, both filtered before the search.

        For listing with `q=`: whole records, searched exhaustively, so every filter of the
        listing applies exactly. Like `text_search`, the full-text hits come with their
        vectors as an (n, dim) float32 matrix (third), for their cosine to the query: the
        caller scores both kinds on one scale.
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
            .where(sql).select([*columns, "vector", "_score"]).limit(limit).to_arrow())
        vectors = _vectors(found, self.embedding_dim)
        keyword_hits = [
            SearchHit(MemoryRecord.from_row(row), bm25=float(score), vector=v)
            for row, score, v in zip(found.drop_columns(["_score", "vector"]).to_pylist(),
                                     found.column("_score").to_pylist(), vectors, strict=True)]
        return vector_hits, keyword_hits, vectors

    async def memory_texts_like(self, namespace: str, text: str, *, limit: int) -> list[str]:
        """The texts of the namespace's memories (any state) that best match `text` by
        full-text search (the recall firewall's candidates)."""
        found = await (
            self._tables["memories"].query().nearest_to_text(full_text_query(text, "text"))
            .where(f"namespace = {sql_str(namespace)}").select(["text", "_score"])
            .limit(limit).to_arrow())
        return [t for t in found.column("text").to_pylist() if t]

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
