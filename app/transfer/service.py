"""Export a namespace to a file and import it elsewhere ("memory moving").

An import file is untrusted input from a client whose key may be limited to the target
namespace. It is read like a store request: every record meets the API's rules
(transfer/schemas.py), and nothing from the file names a row to write. Every id and key is
derived again in the target namespace (memories the way the builder and compression derive
them, events and archive rows from those), so an import can only ever write rows of its own
namespace, and importing a namespace's export into itself is a no-op for ids.

Import is idempotent (every record is upserted by its key, events are inserted once) and all
or nothing for invalid files: the whole file is decoded, parsed, validated and cross-checked
before anything is written; the first bad line answers 400 with its number. Importing with
another embedding model (or a file without vectors) re-embeds every memory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from app.compression.service import summary_id
from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.errors import BadRequest, PayloadTooLarge
from app.locks import NamespaceLocks
from app.storage.records import (
    ArchiveRecord,
    EventRecord,
    MemoryRecord,
    MessageRecord,
    SessionRecord,
)
from app.storage.repository import Repository
from app.store.builder import MemoryBuilder
from app.store.chunker import memory_id
from app.store.service import content_hash
from app.transfer.schemas import (
    ExportHeader,
    ImportedArchive,
    ImportedEvent,
    ImportedMemory,
    ImportedMessage,
    ImportedSession,
    ImportPhase,
    ImportProgress,
    ImportResult,
)

_RECORD_TYPES: dict[str, type[BaseModel]] = {
    "message": ImportedMessage, "memory": ImportedMemory, "event": ImportedEvent,
    "session": ImportedSession, "archive": ImportedArchive,
}
# An event id's tail after `<memory id>:` (e.g. `created`, `compressed:<hex>`) is kept when
# it is this plain; any other id gets a tail derived from it.
# Memories embedded per call while importing: small enough that the progress moves every
# second or so on a CPU, large enough to keep the model's batches full.
_EMBED_SLICE = 64
_EVENT_TAIL = re.compile(r"^[a-z_]{1,32}(:[A-Za-z0-9_-]{1,64}){0,2}$")


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
                 locks: NamespaceLocks, settings: Settings) -> None:
        self._settings = settings
        self._repo = repo
        self._pool = pool
        self._builder = builder
        self._locks = locks
        # namespace -> the running or latest import's progress, for `engram import` to poll
        # while this request embeds (in this process; one import per namespace at a time).
        self._progress: dict[str, ImportProgress] = {}

    def progress(self, namespace: str) -> ImportProgress:
        """The running or latest import into `namespace` (`idle` if none since start)."""
        found = self._progress.get(namespace)
        if found is not None:
            return found.model_copy()
        return ImportProgress(namespace=namespace, running=False, phase=ImportPhase.idle,
                              done=0, total=0, started_at=None, updated_at=None)

    def _advance(self, namespace: str, phase: ImportPhase, done: int = 0, total: int = 0
                 ) -> None:
        now = datetime.now(UTC)
        current = self._progress.get(namespace)
        started = current.started_at if current is not None and current.running else now
        self._progress[namespace] = ImportProgress(
            namespace=namespace, running=phase not in (ImportPhase.done, ImportPhase.failed),
            phase=phase, done=done, total=total, started_at=started, updated_at=now)

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
            BadRequest: the file is not an Engram export, or a line is invalid (nothing is
                written then; the message names the line).
            PayloadTooLarge: a message is longer than `max_message_chars`.
        """
        self._progress.pop(namespace, None)
        self._advance(namespace, ImportPhase.waiting)
        try:
            result = await self._import(namespace, body)
        except BaseException:
            progress = self._progress[namespace]
            self._advance(namespace, ImportPhase.failed, progress.done, progress.total)
            raise
        self._advance(namespace, ImportPhase.done, result.reembedded, result.reembedded)
        return result

    async def _import(self, namespace: str, body: bytes) -> ImportResult:
        async with self._locks.hold(namespace):
            self._advance(namespace, ImportPhase.checking)
            # Ids are derived against the target's own chunks (under its lock, so no build
            # slips in between): a chunk it already holds keeps its id, a new one takes a
            # free one.
            held = await self._repo.namespace_memories(namespace, with_vector=False)
            existing = {(m.session_id, tuple(m.msg_ids), m.part): m.id
                        for m in held if not m.summary_of}
            summaries = {tuple(sorted(m.summary_of)): m.id for m in held if m.summary_of}
            # Parsing and checking a large file is CPU work: off the event loop.
            plan = await asyncio.to_thread(
                _ImportPlan.read, body, namespace, existing=existing, summaries=summaries,
                max_message_chars=self._settings.max_message_chars)
            memories = plan.memories
            stale = [m for m in memories if m.vector is None or len(m.vector) != self._pool.dim
                     or plan.header.embedding_model != self._pool.name]
            # Slice by slice, so the progress moves while a large file is embedded again.
            self._advance(namespace, ImportPhase.embedding, 0, len(stale))
            for start in range(0, len(stale), _EMBED_SLICE):
                part = stale[start: start + _EMBED_SLICE]
                vectors = await self._pool.embed_many([m.text for m in part])
                for memory, vector in zip(part, vectors, strict=True):
                    memory.vector, memory.embedding_model = vector.tolist(), self._pool.name
                self._advance(namespace, ImportPhase.embedding, start + len(part), len(stale))
            self._advance(namespace, ImportPhase.writing)
            # The raw-log lock too: a wait=false store holds only that one, and appends the
            # rows it read as absent (Repository.store_messages). What the target's raw log
            # holds of the file's sessions is read under it, so no store slips in between.
            async with self._locks.hold_log(namespace):
                stored = await self._stored_messages(namespace, plan.messages)
                plan = plan.merged_into(stored, held)
                await self._repo.upsert_messages(plan.messages)
            memories = plan.memories
            await self._repo.upsert_memories(memories)
            await self._repo.append_events(plan.events)
            await self._repo.upsert_sessions(plan.sessions)
            await self._repo.archive_memories(plan.archive)
            pending = sorted({m.session_id for m in plan.messages if m.state == "pending"})
            for built, session_id in enumerate(pending):
                self._advance(namespace, ImportPhase.building, built, len(pending))
                await self._builder.build_session(namespace, session_id)
        return ImportResult(namespace=namespace, source_namespace=plan.header.namespace,
                            messages=len(plan.messages), memories=len(memories),
                            events=len(plan.events), sessions=len(plan.sessions),
                            archived=len(plan.archive), reembedded=len(stale))

    async def _stored_messages(self, namespace: str, messages: list[MessageRecord]
                               ) -> dict[str, dict[str, MessageRecord]]:
        """session id -> msg_id -> stored row (ids, hashes, seqs) of the file's sessions
        that the target's raw log already holds. Caller holds the raw-log lock."""
        if not messages or not await self._repo.count_messages(namespace):
            return {}  # a new namespace: nothing to merge with (the common move)
        sessions = sorted({m.session_id for m in messages})
        rows = await asyncio.gather(*(self._repo.session_messages(namespace, sid,
                                                                  with_content=False)
                                      for sid in sessions))
        return {sid: {m.msg_id: m for m in found}
                for sid, found in zip(sessions, rows, strict=True) if found}


def _invalid(number: int, problem: str) -> BadRequest:
    return BadRequest(f"line {number} is not a valid export record: {problem}")


def _pydantic_problem(exc: ValidationError) -> str:
    """The first error, naming its field (`data.created_at: ...`)."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


@dataclasses.dataclass
class _ImportPlan:
    """A whole file, validated and renamed into the target namespace: the rows to write."""

    header: ExportHeader
    messages: list[MessageRecord]
    memories: list[MemoryRecord]
    events: list[EventRecord]
    sessions: list[SessionRecord]
    archive: list[ArchiveRecord]

    @classmethod
    def read(cls, body: bytes, target: str, *,
             existing: Mapping[tuple[str, tuple[str, ...], int], str],
             summaries: Mapping[tuple[str, ...], str],
             max_message_chars: int) -> _ImportPlan:
        header, records = _parse(body)
        by_kind: dict[str, list[tuple[int, Any]]] = {kind: [] for kind in _RECORD_TYPES}
        for number, kind, record in records:
            by_kind[kind].append((number, record))

        messages: dict[tuple[str, str], MessageRecord] = {}
        for number, m in by_kind["message"]:
            if len(m.content) > max_message_chars:
                raise PayloadTooLarge(f"line {number}: data.content has {len(m.content)} "
                                      f"characters; the limit is {max_message_chars}")
            if (m.session_id, m.msg_id) in messages:
                raise _invalid(number, f"message {m.msg_id!r} of session {m.session_id!r} "
                               "appears twice")
            messages[(m.session_id, m.msg_id)] = MessageRecord(
                namespace=target, session_id=m.session_id, msg_id=m.msg_id, seq=m.seq,
                role=str(m.role), content=m.content,
                content_hash=content_hash(str(m.role), m.content), timestamp=m.timestamp,
                received_at=m.received_at, source=m.source, branch=m.branch, tags=m.tags,
                state=m.state)

        ids = _derive_memory_ids(by_kind["memory"], target, existing, summaries)
        memories = [_memory_record(m, target, ids) for _, m in by_kind["memory"]]
        kinds = {m.id: bool(m.summary_of) for _, m in by_kind["memory"]}

        events: dict[str, EventRecord] = {}
        for number, e in by_kind["event"]:
            if e.memory_id not in ids:
                raise _invalid(number, f"event of memory {e.memory_id!r}, which the file does "
                               "not hold")
            event = EventRecord(id=_event_id(e, ids[e.memory_id], target),
                                memory_id=ids[e.memory_id], namespace=target, event=e.event,
                                note=e.note, timestamp=e.timestamp, metadata=e.metadata)
            if event.id in events:
                raise _invalid(number, f"event {e.id!r} appears twice")
            events[event.id] = event

        sessions: dict[str, SessionRecord] = {}
        for number, s in by_kind["session"]:
            if s.session_id in sessions:
                raise _invalid(number, f"session {s.session_id!r} appears twice")
            sessions[s.session_id] = SessionRecord(
                namespace=target, session_id=s.session_id, source=s.source, branch=s.branch,
                stored_at=s.stored_at, updated_at=s.updated_at, message_count=s.message_count,
                chunk_count=s.chunk_count,
                # The ledger lists the file's own memories only, renamed.
                chunk_ids=[ids[i] for i in s.chunk_ids if i in ids], first_msg=s.first_msg,
                last_msg=s.last_msg, time_start=s.time_start, time_end=s.time_end)

        archive: dict[str, ArchiveRecord] = {}
        owners = {m.id: m for _, m in by_kind["memory"]}
        for number, a in by_kind["archive"]:
            if a.memory_id not in ids or kinds[a.memory_id]:
                raise _invalid(number, f"archived text of {a.memory_id!r}, which is not a "
                               "memory of the file")
            if a.summary_id and not kinds.get(a.summary_id, False):
                raise _invalid(number, f"summary {a.summary_id!r} is not a summary of the file")
            new_id = ids[a.memory_id]
            if new_id in archive:
                raise _invalid(number, f"archived text of {a.memory_id!r} appears twice")
            archive[new_id] = ArchiveRecord(
                memory_id=new_id, namespace=target, session_id=owners[a.memory_id].session_id,
                text=a.text, content_hash=a.content_hash, compressed_text=a.compressed_text,
                summary_id=ids[a.summary_id] if a.summary_id else "", archived_at=a.archived_at,
                metadata=a.metadata)
        return cls(header, list(messages.values()), memories, list(events.values()),
                   list(sessions.values()), list(archive.values()))

    def merged_into(self, stored: Mapping[str, Mapping[str, MessageRecord]],
                    held: Sequence[MemoryRecord]) -> _ImportPlan:
        """The plan against what the target holds of the file's sessions (`stored`, its raw
        log; `held`, its memories), read under the locks the import holds.

        A session the target does not hold, or holds only as part of the file (each stored
        message in the file with the same content, each of its memories a chunk of the
        file: a re-import, or `wait=false` stores of the same messages not built yet) is
        written as the file has it. Any other (its own messages, other content, memories
        chunked otherwise) is merged like a store of the file's messages: an unchanged
        message is left as it is, a changed one is rewritten in its place, a new one is
        appended after the session's last, both pending; the file's memories of the
        session (their events, archive rows and ledger row) are left out and the import's
        build brings the session's memories in line with its raw log. Writing them too
        would put a message in two memories, or leave a memory that no longer is its
        messages; the file's seqs would collide with the session's own.
        """
        if not stored:
            return self
        file_chunks, own_chunks = _chunks_by_session(self.memories), _chunks_by_session(held)
        incoming: dict[str, dict[str, MessageRecord]] = {}
        for message in self.messages:
            incoming.setdefault(message.session_id, {})[message.msg_id] = message
        merged = {
            sid for sid, rows in stored.items()
            if any(r.msg_id not in incoming[sid]
                   or incoming[sid][r.msg_id].content_hash != r.content_hash
                   for r in rows.values())
            or not own_chunks.get(sid, set()) <= file_chunks.get(sid, set())}
        if not merged:
            return self
        messages = [m for m in self.messages if m.session_id not in merged]
        for sid in sorted(merged):
            rows = stored[sid]
            next_seq = max((r.seq for r in rows.values()), default=-1) + 1
            for message in sorted(incoming[sid].values(), key=lambda m: m.seq):
                old = rows.get(message.msg_id)
                if old is None:
                    message.seq, next_seq = next_seq, next_seq + 1
                elif old.content_hash == message.content_hash:
                    continue
                else:
                    message.seq, message.pinned = old.seq, old.pinned
                    message.received_at = old.received_at or message.received_at
                message.state = "pending"
                messages.append(message)
        dropped = {m.id for m in self.memories if m.session_id in merged and not m.summary_of}
        memories = []
        for memory in self.memories:
            if memory.id in dropped:
                continue
            if memory.summary_of:
                # A summary keeps the sources still written; one left without any goes.
                memory.summary_of = [i for i in memory.summary_of if i not in dropped]
                if not memory.summary_of:
                    dropped.add(memory.id)
                    continue
            memories.append(memory)
        return dataclasses.replace(
            self, messages=messages, memories=memories,
            events=[e for e in self.events if e.memory_id not in dropped],
            sessions=[s for s in self.sessions if s.session_id not in merged],
            archive=[a for a in self.archive if a.memory_id not in dropped])


def _chunks_by_session(memories: Iterable[MemoryRecord]
                       ) -> dict[str, set[tuple[tuple[str, ...], int]]]:
    """session id -> the (msg_ids, part) of its chunks (summaries left out)."""
    chunks: dict[str, set[tuple[tuple[str, ...], int]]] = {}
    for m in memories:
        if not m.summary_of:
            chunks.setdefault(m.session_id, set()).add((tuple(m.msg_ids), m.part))
    return chunks


def _parse(body: bytes) -> tuple[ExportHeader, list[tuple[int, str, Any]]]:
    """The header and every record with its line number (1-based, blank lines counted)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = body.count(b"\n", 0, exc.start) + 1
        raise BadRequest(f"line {number} is not UTF-8 text (byte {exc.start})") from None
    lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
    if not lines:
        raise BadRequest("the import file is empty")
    number, first = lines[0]
    try:
        header = ExportHeader.model_validate(_json(first))
    except (ValueError, ValidationError) as exc:
        problem = _pydantic_problem(exc) if isinstance(exc, ValidationError) else str(exc)
        raise BadRequest(f"line {number} is not an Engram export header (format "
                         f"'engram-export', version 1): {problem}") from None
    records = []
    for number, line in lines[1:]:
        try:
            item = _json(line)
        except ValueError as exc:
            raise _invalid(number, str(exc)) from None
        if not isinstance(item, dict) or item.get("type") not in _RECORD_TYPES:
            raise _invalid(number, "expected {\"type\": one of " + ", ".join(
                sorted(_RECORD_TYPES)) + ", \"data\": {...}}")
        kind = item["type"]
        try:
            record = _RECORD_TYPES[kind].model_validate(item.get("data"))
        except ValidationError as exc:
            raise _invalid(number, f"{kind} data.{_pydantic_problem(exc)}") from None
        records.append((number, kind, record))
    return header, records


def _json(line: str) -> Any:
    """One JSON value. Raises: ValueError, also for nesting too deep to parse."""
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


# --- ids derived again in the target namespace -------------------------------------------


def _derive_memory_ids(memories: list[tuple[int, ImportedMemory]], target: str,
                       existing: Mapping[tuple[str, tuple[str, ...], int], str],
                       summaries: Mapping[tuple[str, ...], str]) -> dict[str, str]:
    """File id → id in `target`: chunks as the builder derives them, summaries as
    compression does (from the namespace and the ids of the memories they cover).

    A chunk the target already holds (same session, messages and part: importing a
    namespace's export into itself) keeps the target's id, whatever the file says. Any other
    chunk takes the builder's id for its session, first message and part, or its next free
    candidate when that one is taken: by another chunk of the file (a rebuilt memory keeps
    its id when its first message is deleted, so two chunks may start at one message), or by
    a different chunk of the target, which an import never overwrites (that could leave the
    target's messages in no memory). A summary the target holds over the same chunks keeps
    its id too (its sources may have shrunk since it was written, so the id derived from them
    now would differ).
    """
    ids: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, m in memories:
        if m.id in lines:
            raise _invalid(number, f"memory {m.id!r} appears twice")
        lines[m.id] = number
    assigned: set[str] = set()
    held_ids = set(existing.values())
    for number, m in memories:
        if m.summary_of:
            continue
        if not m.start_msg:
            raise _invalid(number, "memory data.start_msg: a chunk needs its first message")
        held = existing.get((m.session_id, tuple(m.msg_ids), m.part))
        if held is not None and held not in assigned:
            new_id = held
        else:
            attempt = 0
            while (new_id := memory_id(target, m.session_id, m.start_msg, m.part,
                                       attempt=attempt)) in assigned or new_id in held_ids:
                attempt += 1
        assigned.add(new_id)
        ids[m.id] = new_id
    for number, m in memories:
        if m.summary_of:
            for source in m.summary_of:
                if source not in ids:
                    raise _invalid(number, f"memory data.summary_of: {source!r} is not a "
                                   "chunk memory of the file")
            sources = [ids[s] for s in m.summary_of]
            ids[m.id] = summaries.get(tuple(sorted(sources))) or summary_id(target, sources)
    seen: dict[str, str] = {}
    for file_id, new_id in ids.items():
        if new_id in seen:
            raise _invalid(lines[file_id], f"memory {file_id!r} is the same memory as "
                           f"{seen[new_id]!r} (same session, first message and part)")
        seen[new_id] = file_id
    return ids


def _memory_record(m: ImportedMemory, target: str, ids: dict[str, str]) -> MemoryRecord:
    values = m.model_dump(exclude={"id", "summary_of", "category", "tier", "state",
                                   "decision"})
    return MemoryRecord(**values, id=ids[m.id], namespace=target,
                        summary_of=[ids[s] for s in m.summary_of], category=str(m.category),
                        tier=str(m.tier), state=str(m.state), decision=str(m.decision))


def _event_id(event: ImportedEvent, new_memory_id: str, target: str) -> str:
    """`<memory id>:<tail>`: the file's tail when it is plain (replays and re-imports then
    insert nothing twice), else one derived from the file's id."""
    tail = event.id.removeprefix(event.memory_id + ":") if event.id.startswith(
        event.memory_id + ":") else ""
    if not _EVENT_TAIL.fullmatch(tail):
        digest = hashlib.sha256(f"{target}\x1f{event.id}".encode()).hexdigest()[:16]
        tail = f"{event.event}:{digest}"
    return f"{new_memory_id}:{tail}"
