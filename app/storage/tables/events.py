"""Memory events, append-only: what happened to each memory (the "events" table)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from app.storage.filters import sql_in, sql_str
from app.storage.records import EventRecord
from app.storage.tables.base import TableBase

# Events collected instead of written (`Repository.collecting_events`); None: write them.
_COLLECTED_EVENTS: ContextVar[list[EventRecord] | None] = ContextVar("collected_events",
                                                                      default=None)


class EventsTable(TableBase):
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

    async def namespace_events(self, namespace: str) -> list[EventRecord]:
        rows = await self._select("events", EventRecord, f"namespace = {sql_str(namespace)}")
        return sorted(rows, key=lambda e: (e.memory_id, e.timestamp is None, e.timestamp, e.id))
