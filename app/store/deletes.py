"""Deletes that a crash cannot leave half done.

Every delete is several commits on several tables: a message delete rebuilds the memories
that held the message (memories, events, ledger) and then deletes its raw-log row; a session
or namespace delete clears six tables one after another; a memory delete its row, its
archive row, its summaries' links and its events. A crash between two of them left, for a
message, a raw-log row marked done that no memory holds and no build would ever take again
(neither a restart nor a re-sent delete repaired it), for a session a ledger or raw log
without memories.

So a delete first records what it is about to do: an intent, one meta row (`delete:<id>`)
naming the namespace, the session and, for a message, its content hash as read under the
locks. Then it makes its commits, then clears the intent. A crash anywhere in between leaves
the intent, and `resume` finishes it: at start-up, before the server answers (the store's
`resume_pending`), and in the live sweep for a dead server's (app/store/sweep.py). Each
finishing step is idempotent (a rebuild without the message, deletes by filter), so an
intent finished twice, or cut again by a second crash, is finished again.

A message delete finishes only if the message is still the one the delete read (same
content hash): a store that rewrote it since (another server, while this one was down) is
newer than the delete, and its content is kept (the delete is undone, never half done).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Literal

import structlog

from app.config import Settings
from app.errors import NotFound
from app.locks import NamespaceLocks
from app.ops.faults import crash_point
from app.storage.records import MessageRecord
from app.storage.repository import Repository
from app.store.builder import BuildOutcome, MemoryBuilder

log = structlog.get_logger(__name__)

INTENT_PREFIX = "delete:"

Kind = Literal["message", "session", "namespace", "memory"]


@dataclass(frozen=True)
class Intent:
    kind: Kind
    namespace: str
    session_id: str = ""
    msg_ids: dict[str, str] = field(default_factory=dict)  # msg_id -> content hash read
    memory_id: str = ""
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    key: str = field(default_factory=lambda: f"{INTENT_PREFIX}{uuid.uuid4().hex}")

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if k != "key"},
                          ensure_ascii=False)

    @classmethod
    def from_json(cls, key: str, value: str) -> Intent:
        return cls(key=key, **json.loads(value))

    @property
    def recorded_at(self) -> datetime:
        return datetime.fromisoformat(self.at)


class Deletes:
    """Message, session, namespace and memory deletes, each recorded as an intent first."""

    def __init__(self, repo: Repository, builder: MemoryBuilder, locks: NamespaceLocks,
                 settings: Settings) -> None:
        self._repo = repo
        self._builder = builder
        self._locks = locks
        self._settings = settings

    # --- the deletes -------------------------------------------------------------------

    async def message(self, namespace: str, session_id: str, msg_id: str) -> BuildOutcome:
        """Delete one message: its memories rebuilt without it, then its raw-log row.

        Raises:
            NotFound: the session holds no such message.
        """
        # The raw-log lock for the whole delete (deletes are rare): no store of the session
        # slips in between the rebuild without the message and its removal.
        async with self._locks.hold(namespace), self._locks.hold_log(namespace):
            messages = await self._repo.session_messages(namespace, session_id)
            found = next((m for m in messages if m.msg_id == msg_id), None)
            if found is None:
                raise NotFound(f"message {msg_id!r} not found in session {session_id!r}")
            intent = Intent("message", namespace, session_id,
                            msg_ids={msg_id: found.content_hash})
            await self._record(intent)
            crash_point(self._settings, "delete_message.after_intent")
            outcome = await self._finish_message(intent, messages)
            await self._clear(intent)
        return outcome

    async def session(self, namespace: str, session_id: str) -> int:
        """Delete a session (memories, raw log, jobs, archive rows, ledger); how many
        memories it held.

        Raises:
            NotFound: the namespace holds nothing of that session.
        """
        # The raw-log lock too: a wait=false store holds only that one (app/locks.py).
        async with self._locks.hold(namespace), self._locks.hold_log(namespace):
            memories = await self._repo.session_memories(namespace, session_id)
            stored = await self._repo.count_messages(namespace, session_id)
            if not memories and not stored:
                raise NotFound(f"session {session_id!r} not found in namespace {namespace!r}")
            intent = Intent("session", namespace, session_id)
            await self._record(intent)
            await self._finish(intent)
            await self._clear(intent)
        return len(memories)

    async def namespace(self, namespace: str) -> int:
        """Delete everything of a namespace; how many memories it held."""
        async with self._locks.hold(namespace), self._locks.hold_log(namespace):
            count = await self._repo.count_memories(namespace)
            intent = Intent("namespace", namespace)
            await self._record(intent)
            await self._finish(intent)
            await self._clear(intent)
        return count

    async def memory(self, namespace: str, memory_id: str) -> None:
        """Delete one memory: its row, archive row, summaries' links and events."""
        async with self._locks.hold(namespace):
            intent = Intent("memory", namespace, memory_id=memory_id)
            await self._record(intent)
            await self._finish(intent)
            await self._clear(intent)

    # --- finishing (also after a crash) --------------------------------------------------

    async def _finish(self, intent: Intent) -> None:
        """Do what `intent` records; every step may have been done already. The caller holds
        the namespace's write lock (and its raw-log lock for raw-log deletes)."""
        repo, ns = self._repo, intent.namespace
        if intent.kind == "message":
            await self._finish_message(intent)
        elif intent.kind == "session":
            # What recall could find goes first; the rest after (repo.delete_session also
            # deletes any memory of the session a crash left, and is whole on a replay).
            memories = [m.id for m in await repo.session_memories(ns, intent.session_id)]
            await repo.delete_events(memories)
            await repo.delete_memories(memories, namespace=ns)
            crash_point(self._settings, "delete_session.after_memories")
            await repo.delete_session(ns, intent.session_id)
        elif intent.kind == "namespace":
            await repo.delete_namespace(ns)
        else:
            await repo.delete_memories([intent.memory_id], namespace=ns)
            await repo.delete_events([intent.memory_id])

    async def _finish_message(self, intent: Intent,
                              messages: Sequence[MessageRecord] | None = None) -> BuildOutcome:
        ns, sid = intent.namespace, intent.session_id
        if messages is None:
            messages = await self._repo.session_messages(ns, sid)
        # Only the message the delete read: one rewritten since is newer than the delete.
        doomed = frozenset(m.msg_id for m in messages
                           if intent.msg_ids.get(m.msg_id) == m.content_hash)
        # Memories first, the raw rows after: a build that fails leaves the raw log as it was
        # (the intent finishes the delete), never a log without the message beside memories
        # that still hold its text.
        outcome = await self._builder.build_session(ns, sid, without=doomed,
                                                    raw_log=list(messages))
        crash_point(self._settings, "delete_message.after_rebuild")
        if doomed:
            await self._repo.delete_messages(ns, sid, sorted(doomed))
        crash_point(self._settings, "delete_message.after_raw_log")
        return outcome

    async def _record(self, intent: Intent) -> None:
        await self._repo.add_meta(intent.key, intent.to_json())

    async def _clear(self, intent: Intent) -> None:
        await self._repo.delete_meta([intent.key])

    async def resume(self, *, recorded_before: datetime | None = None,
                     leave_held: bool = False) -> int:
        """Finish every delete a crash left half done; how many were finished.

        Args:
            recorded_before: only intents recorded before this (the sweep: younger ones
                belong to a live delete, on this server or another).
            leave_held: skip a namespace whose lock this process or a live other holds (the
                sweep); start-up waits for the locks instead.
        """
        intents = []
        for key, value in (await self._repo.meta_with_prefix(INTENT_PREFIX)).items():
            try:
                intents.append(Intent.from_json(key, value))
            except (TypeError, ValueError):
                log.warning("delete_intent_unreadable", key=key, value=value[:200])
        finished = 0
        for intent in sorted(intents, key=lambda i: i.recorded_at):  # in the order asked
            key = intent.key
            if recorded_before is not None and intent.recorded_at >= recorded_before:
                continue
            ns = intent.namespace
            if leave_held and (self._locks.is_held(ns) or await self._locks.held_elsewhere(ns)):
                continue
            try:
                async with self._locks.hold(ns), self._locks.hold_log(ns):
                    # Finished meanwhile (its own delete, or another server's sweep)?
                    if await self._repo.get_meta(key) is None:
                        continue
                    await self._finish(intent)
                    await self._clear(intent)
            except Exception:
                # It stays recorded: the next sweep or start-up tries again.
                log.exception("delete_resume_failed", kind=intent.kind, namespace=ns,
                              session_id=intent.session_id)
                continue
            finished += 1
            log.info("delete_resumed", kind=intent.kind, namespace=ns,
                     session_id=intent.session_id, msg_ids=sorted(intent.msg_ids),
                     memory_id=intent.memory_id)
        return finished
