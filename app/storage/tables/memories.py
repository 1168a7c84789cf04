"""Memories: reads and writes of the "memories" table by id, session and namespace.

Its searches, hit counts and vector index are in search.py.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from app.storage.filters import MemoryFilter, sql_in, sql_str, sql_time
from app.storage.namespace_cache import Change
from app.storage.records import MemoryRecord
from app.storage.tables.base import TableBase
from app.storage.writer import Append


class MemoriesTable(TableBase):
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

    async def built_msg_ids(self, namespace: str, session_ids: Collection[str]
                            ) -> set[tuple[str, str]]:
        """(session, msg_id) of every message a memory of these sessions holds (any state):
        what recall must not return as pending any more."""
        if not session_ids:
            return set()
        # The namespace's copy, if one is held (current as of the table version): no query.
        copy = await self.namespace_cache.get(namespace, load=False)
        if copy is not None:
            rows = np.flatnonzero(np.isin(copy.columns["session_id"], sorted(session_ids)))
            sessions = copy.columns["session_id"][rows].tolist()
            lists = copy.table.column("msg_ids").take(pa.array(rows)).to_pylist()
        else:
            where = (f"namespace = {sql_str(namespace)} AND "
                     f"{sql_in('session_id', sorted(session_ids))}")
            table = await (self._tables["memories"].query().where(where)
                           .select(["session_id", "msg_ids"]).to_arrow())
            sessions = table.column("session_id").to_pylist()
            lists = table.column("msg_ids").to_pylist()
        return {(session_id, msg_id) for session_id, msg_ids in zip(sessions, lists, strict=True)
                for msg_id in msg_ids or ()}

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

    async def namespace_memories(self, namespace: str, *, with_vector: bool) -> list[MemoryRecord]:
        columns = self._columns("memories", exclude=() if with_vector else ("vector",))
        rows = await self._select("memories", MemoryRecord, f"namespace = {sql_str(namespace)}",
                                  columns=columns)
        return sorted(rows, key=lambda m: (m.session_id, m.start_seq, m.part))

    async def all_memories(self) -> list[MemoryRecord]:
        """Every memory of every namespace, without vectors (model change, maintenance)."""
        return await self._select("memories", MemoryRecord, "true")

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
