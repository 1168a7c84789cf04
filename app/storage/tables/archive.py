"""Original texts of compressed memories (the "archive" table)."""

from __future__ import annotations

from collections.abc import Sequence

from app.storage.filters import sql_in, sql_str
from app.storage.records import ArchiveRecord
from app.storage.tables.base import TableBase


class ArchiveTable(TableBase):
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
