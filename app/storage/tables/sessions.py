"""The sessions ledger: one row per stored session (the "sessions" table)."""

from __future__ import annotations

from collections.abc import Sequence

from app.storage.filters import sql_str
from app.storage.records import SessionRecord, session_key
from app.storage.tables.base import TableBase


class SessionsTable(TableBase):
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

    async def upsert_sessions(self, sessions: Sequence[SessionRecord]) -> None:
        await self._upsert("sessions", "key", sessions)
