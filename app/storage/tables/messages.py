"""The raw log: every stored message of every session (the "messages" table)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from app.storage.filters import sql_in, sql_str, sql_time
from app.storage.log_cache import LogChange
from app.storage.namespace_cache import Change
from app.storage.records import MessageRecord
from app.storage.tables.base import TableBase
from app.storage.writer import Append, Update


class MessagesTable(TableBase):
    async def session_messages(self, namespace: str, session_id: str, *,
                               with_content: bool = True) -> list[MessageRecord]:
        """Every stored message of a session, in order.

        `with_content=False` reads only what tells a message's identity and state (msg_id,
        seq, content hash, state, pinned, received_at, job, branch): role, content, time,
        tags and the rest keep their defaults. About a quarter of the full read's time: what a
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
            "pinned", "received_at", "job_id", "branch"]
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
            # The build landed: the own vectors of what it built (wait=true) go.
            self.pending_vectors.forget_built(done)

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

    async def pending_messages(self, namespace: str) -> list[MessageRecord]:
        """The namespace's messages not built into memories yet, with their content, by
        session and order: what recall searches besides memories (read-your-writes). Held
        between recalls and kept current by every raw-log write (pending_cache.py)."""
        where = f"namespace = {sql_str(namespace)} AND state = 'pending'"

        async def read() -> list[MessageRecord]:
            return await self._select("messages", MessageRecord, where)

        rows = await self.pending_cache.get(namespace, read)
        return sorted(rows, key=lambda m: (m.session_id, m.seq))

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

    async def namespace_messages(self, namespace: str) -> list[MessageRecord]:
        rows = await self._select("messages", MessageRecord, f"namespace = {sql_str(namespace)}")
        return sorted(rows, key=lambda m: (m.session_id, m.seq))

    async def messages_received_since(self, namespace: str, since: datetime
                                      ) -> list[MessageRecord]:
        """The namespace's messages received after `since`, oldest first (feedback)."""
        where = f"namespace = {sql_str(namespace)} AND received_at > {sql_time(since)}"
        rows = await self._select("messages", MessageRecord, where)
        return sorted(rows, key=lambda m: (m.received_at or since, m.session_id, m.seq))
