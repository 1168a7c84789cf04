"""Export a namespace to a file and import it elsewhere ("memory moving").

Import is idempotent (every record is upserted by its key, events are inserted once) and
all-or-nothing for malformed files: the whole file is parsed and validated before anything
is written. Importing into another namespace renames the derived ids consistently; importing
with another embedding model (or a file without vectors) re-embeds every memory.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from app.embedding.pool import EmbeddingPool
from app.errors import BadRequest
from app.locks import NamespaceLocks
from app.storage.records import (
    ArchiveRecord,
    EventRecord,
    MemoryRecord,
    MessageRecord,
    SessionRecord,
    message_key,
    session_key,
)
from app.storage.repository import Repository
from app.store.builder import MemoryBuilder
from app.store.chunker import memory_id
from app.transfer.schemas import ExportHeader, ImportResult

_RECORD_TYPES: dict[str, type[Any]] = {
    "message": MessageRecord, "memory": MemoryRecord, "event": EventRecord,
    "session": SessionRecord, "archive": ArchiveRecord,
}
_ADAPTERS = {name: TypeAdapter(cls) for name, cls in _RECORD_TYPES.items()}


def _line(kind: str, record: Any) -> bytes:
    data = dataclasses.asdict(record)
    return json.dumps({"type": kind, "data": data}, ensure_ascii=False, default=_json_default
                      ).encode() + b"\n"


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot export {type(value).__name__}")


class TransferService:
    def __init__(self, repo: Repository, pool: EmbeddingPool, builder: MemoryBuilder,
                 locks: NamespaceLocks) -> None:
        self._repo = repo
        self._pool = pool
        self._builder = builder
        self._locks = locks

    async def export(self, namespace: str, *, vectors: bool) -> AsyncIterator[bytes]:
        """The namespace as NDJSON lines, header first."""
        messages = await self._repo.namespace_messages(namespace)
        memories = await self._repo.namespace_memories(namespace, with_vector=vectors)
        events = await self._repo.namespace_events(namespace)
        sessions = await self._repo.list_sessions(namespace)
        # The original texts of compressed memories: without them a move would keep only
        # the compressed forms.
        archive = await self._repo.namespace_archive(namespace)
        header = ExportHeader(
            namespace=namespace, exported_at=datetime.now(UTC), embedding_model=self._pool.name,
            embedding_dim=self._pool.dim, vectors=vectors,
            counts={"messages": len(messages), "memories": len(memories),
                    "events": len(events), "sessions": len(sessions),
                    "archive": len(archive)},
        )
        yield header.model_dump_json().encode() + b"\n"
        for kind, records in (("session", sessions), ("message", messages),
                              ("memory", memories), ("event", events), ("archive", archive)):
            for record in records:
                yield _line(kind, record)

    async def import_(self, namespace: str, body: bytes) -> ImportResult:
        """Import an export file into `namespace`.

        Raises:
            BadRequest: the file is not an Engram export, or a line is malformed (nothing is
                written then).
        """
        header, parsed = self._parse(body)
        source = header.namespace
        messages = [self._message(m, namespace) for m in parsed["message"]]
        ids = {m.id: self._memory_id(m, source, namespace) for m in parsed["memory"]}
        memories = [self._memory(m, namespace, ids) for m in parsed["memory"]]
        events = [self._event(e, namespace, ids) for e in parsed["event"]]
        sessions = [self._session(s, namespace, ids) for s in parsed["session"]]
        archive = [dataclasses.replace(a, namespace=namespace,
                                       memory_id=ids.get(a.memory_id, a.memory_id),
                                       summary_id=ids.get(a.summary_id, a.summary_id))
                   for a in parsed["archive"]]
        stale = [m for m in memories if m.vector is None or len(m.vector) != self._pool.dim
                 or header.embedding_model != self._pool.name]
        if stale:
            vectors = await self._pool.embed_many([m.text for m in stale])
            for memory, vector in zip(stale, vectors, strict=True):
                memory.vector, memory.embedding_model = vector.tolist(), self._pool.name
        async with self._locks.hold(namespace):
            await self._repo.upsert_messages(messages)
            await self._repo.upsert_memories(memories)
            await self._repo.append_events(events)
            await self._repo.upsert_sessions(sessions)
            await self._repo.archive_memories(archive)
            for session_id in sorted({m.session_id for m in messages if m.state == "pending"}):
                await self._builder.build_session(namespace, session_id)
        return ImportResult(namespace=namespace, source_namespace=source,
                            messages=len(messages), memories=len(memories), events=len(events),
                            sessions=len(sessions), archived=len(archive),
                            reembedded=len(stale))

    # --- parsing -----------------------------------------------------------------------

    @staticmethod
    def _parse(body: bytes) -> tuple[ExportHeader, dict[str, list[Any]]]:
        lines = [line for line in body.splitlines() if line.strip()]
        if not lines:
            raise BadRequest("the import file is empty")
        try:
            header = ExportHeader.model_validate_json(lines[0])
        except ValidationError as exc:
            raise BadRequest("line 1 is not an Engram export header (format "
                             "'engram-export', version 1)", details=exc.errors()) from None
        parsed: dict[str, list[Any]] = {kind: [] for kind in _RECORD_TYPES}
        for number, line in enumerate(lines[1:], start=2):
            try:
                item = json.loads(line)
                kind = item["type"]
                parsed[kind].append(_ADAPTERS[kind].validate_python(item["data"]))
            except (ValueError, KeyError, TypeError, ValidationError) as exc:
                raise BadRequest(f"line {number} is not a valid export record: "
                                 f"{str(exc)[:300]}") from None
        return header, parsed

    # --- renaming into the target namespace ---------------------------------------------

    @staticmethod
    def _memory_id(memory: MemoryRecord, source: str, target: str) -> str:
        if source == target or memory.summary_of:
            return memory.id
        return memory_id(target, memory.session_id, memory.start_msg, memory.part)

    @staticmethod
    def _message(m: MessageRecord, namespace: str) -> MessageRecord:
        return dataclasses.replace(m, namespace=namespace,
                                   key=message_key(namespace, m.session_id, m.msg_id))

    @staticmethod
    def _memory(m: MemoryRecord, namespace: str, ids: dict[str, str]) -> MemoryRecord:
        return dataclasses.replace(m, namespace=namespace, id=ids[m.id],
                                   summary_of=[ids.get(i, i) for i in m.summary_of])

    @staticmethod
    def _event(e: EventRecord, namespace: str, ids: dict[str, str]) -> EventRecord:
        new_memory = ids.get(e.memory_id, e.memory_id)
        event_id = new_memory + e.id.removeprefix(e.memory_id) if e.id.startswith(
            e.memory_id) else e.id
        return dataclasses.replace(e, namespace=namespace, memory_id=new_memory, id=event_id)

    @staticmethod
    def _session(s: SessionRecord, namespace: str, ids: dict[str, str]) -> SessionRecord:
        return dataclasses.replace(s, namespace=namespace, key=session_key(namespace,
                                                                           s.session_id),
                                   chunk_ids=[ids.get(i, i) for i in s.chunk_ids])

