"""Key-value records of the store itself: the embedding model in use, each namespace's
compression policy and feedback state, and the intents of multi-write deletes until they
are whole (the "meta" table)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from app.storage.filters import sql_in, sql_str
from app.storage.tables.base import TableBase
from app.storage.writer import Append


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
