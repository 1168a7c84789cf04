"""Key-value records of the store itself: the embedding model in use, each namespace's
compression policy and feedback state (the "meta" table)."""

from __future__ import annotations

import pyarrow as pa

from app.storage.filters import sql_str
from app.storage.tables.base import TableBase


class MetaTable(TableBase):
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
