"""Turn a session's raw log into memories: chunk, understand, embed, write.

`build_session` is the one place memories are derived from messages. It runs under the
namespace write lock and is idempotent: a rebuilt chunk keeps the id of the memory it
rebuilds, a new chunk's id is derived from its own identity and never collides with another
memory of the session (`assign_ids`), an unchanged chunk is not rewritten, events have
deterministic ids. So a build interrupted by a crash is simply run again at start-up, and a
replay never duplicates a memory or an event.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

import structlog

from app.classify.analyzer import Analysis, analyze
from app.classify.smalltalk import is_small_talk
from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.memories.lifecycle import pin_event
from app.ops.metrics import Metrics, lap_timer
from app.recall.newer import mark_superseded
from app.scripts import has_han
from app.storage.records import (
    EventRecord,
    MemoryRecord,
    MessageRecord,
    SessionRecord,
    new_event,
)
from app.storage.repository import Repository
from app.store.chunker import (
    Chunk,
    assign_ids,
    is_long,
    plan_chunks,
    render_line,
    split_long,
)
from app.store.firewall import (
    QUOTING_ROLES,
    long_enough_to_quote,
    memory_lines,
    normalised,
    own_words,
    quoted_lines,
    quotes_only_memories,
    words_of,
)

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

# The most memory texts the firewall's one search per build reads (each message that could be
# a quote adds its own share, 5 + 2 per line, at most 50): bounds a large import's search.
_ECHO_CANDIDATES_MAX = 500


@dataclass
class BuildOutcome:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    messages_done: int = 0
    job_ids: set[str] = field(default_factory=set)
    firewalled: list[str] = field(default_factory=list)  # Engram's own text (firewall.py)


@dataclass(frozen=True)
class DerivedState:
    """What a session's memories are now: its memories and its ledger row, read at once
    (`MemoryBuilder.read_derived`) by a holder of the namespace write lock, which keeps
    every other writer of them out until it releases the lock."""

    memories: list[MemoryRecord]
    ledger: SessionRecord | None


def language_of(text: str) -> str:
    return "zh" if has_han(text) else "en"


def text_hash(text: str, msg_ids: Sequence[str]) -> str:
    return hashlib.sha256("\x1f".join([text, *msg_ids]).encode()).hexdigest()


def stage_timer(metrics: Metrics | None) -> Callable[[str], None]:
    """`lap(stage)`: observe the time since the last lap (or since this call) as `stage` in
    engram_store_stage_seconds; nothing without metrics."""
    return lap_timer(metrics.store_stage if metrics is not None else None)


class MemoryBuilder:
    def __init__(self, repo: Repository, pool: EmbeddingPool, settings: Settings, *,
                 metrics: Metrics | None = None) -> None:
        self._repo = repo
        self._pool = pool
        self._settings = settings
        self._metrics = metrics

    async def read_derived(self, namespace: str, session_id: str) -> DerivedState:
        """The session's memories and ledger, two queries at once (each a LanceDB query and
        a version check). A store reads them while it writes the raw log: one round less."""
        memories, ledger = await asyncio.gather(
            self._repo.session_memories(namespace, session_id),
            self._repo.get_session(namespace, session_id))
        return DerivedState(memories, ledger)

    async def build_session(self, namespace: str, session_id: str, *,
                            without: frozenset[str] = frozenset(),
                            raw_log: Sequence[MessageRecord] | None = None,
                            derived: DerivedState | None = None) -> BuildOutcome:
        """Bring the session's memories in line with its raw log. Caller holds the lock.

        Args:
            without: msg_ids to build as if already deleted from the raw log (a message
                delete builds first and deletes the raw row after, so a failed build leaves
                the raw log as it was).
            raw_log: the session's raw log as the caller just wrote it under the raw-log
                lock (a store saves reading it back); None: read here. Messages stored
                after it are pending and built by the build their store queued.
            derived: the session's memories and ledger as read under the lock the caller
                still holds (`read_derived`); None: read here.
        """
        # Recalls in flight go first, but one build gives them a bounded total
        # (app/ops/recall_first.py): a stream of recalls never starves a store.
        with self._pool.recall_first.build():
            return await self._build_session(namespace, session_id, without=without,
                                             raw_log=raw_log, derived=derived)

    async def _build_session(self, namespace: str, session_id: str, *, without: frozenset[str],
                             raw_log: Sequence[MessageRecord] | None,
                             derived: DerivedState | None) -> BuildOutcome:
        lap = stage_timer(self._metrics)
        # Independent reads at once: each is a LanceDB query (and a version check).
        stored_messages, state = await asyncio.gather(
            self._repo.session_messages(namespace, session_id) if raw_log is None
            else _ready(list(raw_log)),
            self.read_derived(namespace, session_id) if derived is None else _ready(derived))
        memories, previous = list(state.memories), state.ledger
        if raw_log is None or derived is None:
            lap("read")
        if not stored_messages and not memories and previous is None:
            # Deleted before this build ran (a wait=false store's queued build, the session
            # deleted at once): nothing to build, and no ledger row for a session not there.
            return BuildOutcome()
        messages = [m for m in stored_messages if m.msg_id not in without]
        # Memories are made of what the messages say themselves: an injection block a
        # message carries is cut out here, at every build (firewall.py, rule 1), so a
        # rebuilt or grown chunk never takes it back in. The raw log keeps them as sent.
        blocked = {m.msg_id: words for m in messages if self._settings.store_firewall
                   and (words := own_words(m.content, m.role)) is not None}
        by_id = {m.msg_id: dataclasses.replace(m, content=blocked[m.msg_id])
                 if m.msg_id in blocked else m for m in messages}
        pending = [m for m in messages if m.state == "pending"]
        pending_ids = {m.msg_id for m in pending}
        in_memory = {msg_id for memory in memories for msg_id in memory.msg_ids}

        # Memories holding a changed message, or one that was deleted from the raw log.
        affected = [
            memory for memory in memories
            if any(i in pending_ids or i not in by_id for i in memory.msg_ids)
        ]
        affected_ids = {m.id for m in affected}
        chunks = _without_contained(
            self._rebuild_chunks(affected, by_id),
            settled=[set(m.msg_ids) for m in memories if m.id not in affected_ids])
        unassigned = [by_id[m.msg_id] for m in pending if m.msg_id not in in_memory]
        if self._settings.skip_small_talk:
            unassigned = [m for m in unassigned if not is_small_talk(m.content)]
        echoes = await self._echoes(namespace, unassigned, blocked=set(blocked)) \
            if self._settings.store_firewall else set()
        unassigned = [m for m in unassigned if m.msg_id not in echoes]
        lap("firewall")
        chunks += self._new_chunks(unassigned, memories, affected, by_id)

        existing = {m.id: m for m in memories}
        outcome = BuildOutcome(job_ids={m.job_id for m in pending if m.job_id},
                               firewalled=[m.msg_id for m in pending if m.msg_id in echoes])
        ids = assign_ids(namespace, session_id, chunks, taken=existing)
        keep_ids = set(ids)
        # Memories of affected chunks that no chunk produces any more (message deleted, or a
        # long message that now splits into fewer pieces).
        outcome.deleted = [m.id for m in affected if m.id not in keep_ids]

        records = await self._records(namespace, session_id, list(zip(ids, chunks, strict=True)),
                                      existing)
        lap("embed")
        now = datetime.now(UTC)
        events: list[EventRecord] = []
        for record in records:
            old = existing.get(record.id)
            if old is None:
                outcome.created.append(record.id)
                events.append(new_event(
                    record, "created", f"category {record.category}", now,
                    {"category": record.category, "importance": record.importance},
                    event_id=_replay_safe_id(record, "created")))
            else:
                outcome.updated.append(record.id)
                events.append(new_event(
                    record, "evolved", "rebuilt from changed messages", now,
                    {"old_text": old.text, "new_text": record.text, "msg_ids": record.msg_ids},
                    event_id=_replay_safe_id(record, "evolved")))

        pins = self._pins(pending, records, memories, now, gone=set(outcome.deleted))
        events += [pin_event(m, True, "stored with pinned: true", now) for m in pins]

        # Order matters for crash safety: memories, then events, then the raw log marked done
        # together with the ledger (both derived; a ledger written ahead of the raw log is
        # rewritten by the replay). Replaying any suffix of these steps is harmless.
        # Recalls in flight go first (app/ops/recall_first.py; the app's gate is its pool's):
        # a build waits for them (bounded) before each text it analyses and before its
        # writes; the pool does the same before each slice it embeds.
        await self._pool.recall_first.step_aside()
        lap("recall_first")
        # Only new chunks (a session's first build, an import): their ids were read as absent
        # under the lock just now (`existing`), so they are appended, not merged.
        await self._repo.upsert_memories(
            records, absent=not any(r.id in existing for r in records))
        rewritten = {r.id for r in records}
        await self._repo.set_memory_columns([{"id": m.id, "pinned": True, "updated_at": now}
                                             for m in pins if m.id not in rewritten])
        lap("memories")
        # The superseded search reads the memories just written (on the namespace's copy,
        # while the table has no vector index: ~2 ms); its events and the build's go to the
        # events table in one commit, before the raw log is marked done (they were two
        # commits in a row when the search found a restated fact: most appends of a chat).
        with self._repo.collecting_events(list(events)) as together:
            await mark_superseded(self._repo, records, now=now,
                                  threshold=self._settings.model_profile.supersede_cosine)
        await self._repo.append_events(together)
        if outcome.deleted:
            await self._repo.delete_memories(outcome.deleted, namespace=namespace)
            await self._repo.delete_events(outcome.deleted)
        lap("events")
        # The session's memories now, without reading them back (the namespace lock keeps
        # every other writer of this session's memories out).
        gone = set(outcome.deleted) | rewritten
        after = sorted([*(m for m in memories if m.id not in gone), *records],
                       key=lambda m: (m.start_seq, m.part))
        await asyncio.gather(
            self._repo.mark_messages_done(pending),
            self._update_ledger(namespace, session_id, messages, after, previous, now))
        lap("done")
        outcome.messages_done = len(pending)
        log.info("session_built", namespace=namespace, session_id=session_id,
                 created=len(outcome.created), updated=len(outcome.updated),
                 deleted=len(outcome.deleted), messages=len(pending))
        return outcome

    async def _echoes(self, namespace: str, messages: Sequence[MessageRecord], *,
                      blocked: set[str]) -> set[str]:
        """The msg_ids of `messages` that are Engram's own text sent back (firewall.py):
        kept in the raw log, never made into memories. `messages` carry their own words
        (a block cut out); `blocked`: the msg_ids that carried one.

        One full-text search per build, whatever the number of messages: the words of every
        message that could be a quote, together, with room in the limit for each one's own
        candidates (a query per message cost a search per assistant turn of an import).
        """
        found: set[str] = set()
        quoting: list[tuple[MessageRecord, list[str]]] = []
        for message in messages:
            if message.msg_id in blocked and not normalised(message.content):
                found.add(message.msg_id)  # the block and nothing else
                continue
            if message.role not in QUOTING_ROLES:
                continue
            lines = quoted_lines(message.content)
            if long_enough_to_quote(lines):  # shorter: no quote, no search needed
                quoting.append((message, lines))
        if quoting:
            limit = min(_ECHO_CANDIDATES_MAX,
                        sum(min(50, 5 + 2 * len(lines)) for _, lines in quoting))
            texts = await self._repo.memory_texts_like(
                namespace, "\n".join(words_of(m.content) for m, _ in quoting), limit=limit)
            known = memory_lines(texts)
            found.update(m.msg_id for m, lines in quoting if quotes_only_memories(lines, known))
        if found:
            log.info("firewall_kept_out", namespace=namespace, messages=len(found))
        return found

    @staticmethod
    def _pins(pending: Sequence[MessageRecord], records: Sequence[MemoryRecord],
              memories: Sequence[MemoryRecord], now: datetime, *, gone: set[str]
              ) -> list[MemoryRecord]:
        """The memories a pinned message of this build newly pins (set pinned in place):
        those being written and the unchanged ones that hold such a message."""
        pinned_ids = {m.msg_id for m in pending if m.pinned}
        if not pinned_ids:
            return []
        written = {r.id for r in records}
        candidates = [*records, *(m for m in memories if m.id not in written
                                  and m.id not in gone)]
        pins = [m for m in candidates if not m.pinned and pinned_ids.intersection(m.msg_ids)]
        for memory in pins:
            memory.pinned, memory.updated_at = True, now
        return pins

    async def hold_turn_vectors(self, messages: Sequence[MessageRecord]) -> int:
        """Embed each of `messages` (just written as pending) on its own, as its build will
        cut it, and hold the vectors until the build lands (app/storage/pending_vectors.py):
        a `wait=true` store's promise that the next recall finds them by vector too.

        What the build makes into no memory gets no vector: a message that is nothing but
        an injection block (firewall rule 1; a block a message carries is cut out first),
        small talk when it is skipped. Stored text, on the questions' thread when they are
        a few (`EmbeddingPool.embed_now`). Returns the number of vectors held.
        """
        holder = self._repo.pending_vectors
        if holder.max_rows <= 0 or not messages:
            return 0
        s = self._settings
        turns: list[tuple[MessageRecord, str]] = []
        for message in messages:
            words = own_words(message.content, message.role) if s.store_firewall else None
            content = message.content if words is None else words
            if not content.strip() or (s.skip_small_talk and is_small_talk(content)):
                continue
            turns.append((message, render_line(dataclasses.replace(message, content=content))))
        if not turns:
            return 0
        vectors = await self._pool.embed_now([text for _, text in turns])
        first = turns[0][0]
        holder.put(first.namespace, first.session_id,
                   [(m.msg_id, m.content_hash, v) for (m, _), v in zip(turns, vectors,
                                                                      strict=True)])
        return len(turns)

    async def with_new_text(self, memory: MemoryRecord, text: str) -> MemoryRecord:
        """A copy of `memory` carrying an edited text: re-analysed and re-embedded."""
        analysis = await asyncio.to_thread(analyze, text)
        vector = (await self._pool.embed_many([text]))[0]
        return dataclasses.replace(
            memory, text=text, vector=vector.tolist(),
            content_hash=text_hash(text, memory.msg_ids),
            entities=json.dumps(analysis.entities.to_dict(), ensure_ascii=False),
            subtopics=list(analysis.subtopics), language=language_of(text),
            updated_at=datetime.now(UTC),
        )

    # --- chunk planning ----------------------------------------------------------------

    def _rebuild_chunks(
        self, affected: Sequence[MemoryRecord], by_id: dict[str, MessageRecord]
    ) -> list[Chunk]:
        """Each affected memory rebuilt from its remaining messages, keeping its id."""
        chunks: list[Chunk] = []
        resplit: set[str] = set()
        built: set[tuple[str, ...]] = set()
        max_chars = self._settings.chunk_max_chars
        solo = self._solo_memories(affected, by_id)
        for memory in affected:
            current = tuple(by_id[i] for i in memory.msg_ids if i in by_id)
            if not current:
                continue
            if len(current) == 1 and (memory.part > 0 or is_long(current[0], max_chars)):
                message = current[0]
                if message.msg_id in resplit:
                    continue
                resplit.add(message.msg_id)
                budget = max_chars - len(message.role) - 2
                pieces = split_long(message.content, budget) if is_long(message, max_chars) \
                    else [message.content]
                parts = solo.get(message.msg_id, {})
                chunks += [Chunk((message,), part=i, piece=p, keeps=parts.get(i))
                           for i, p in enumerate(pieces)]
            else:
                key = tuple(m.msg_id for m in current)
                if key in built:
                    # Two neighbours shrank to the same messages (both lost their other
                    # ones): one memory holds them, the other is deleted.
                    continue
                built.add(key)
                chunks.append(Chunk(current, keeps=memory.id))
        return chunks

    @staticmethod
    def _solo_memories(affected: Sequence[MemoryRecord], by_id: dict[str, MessageRecord]
                       ) -> dict[str, dict[int, str]]:
        """msg_id -> {part: memory id} of the affected memories left holding only it: the
        ids its pieces keep when it is split again."""
        found: dict[str, dict[int, str]] = {}
        for memory in affected:
            current = [i for i in memory.msg_ids if i in by_id]
            if len(current) == 1:
                found.setdefault(current[0], {}).setdefault(memory.part, memory.id)
        return found

    def _new_chunks(
        self,
        unassigned: Sequence[MessageRecord],
        memories: Sequence[MemoryRecord],
        affected: Sequence[MemoryRecord],
        by_id: dict[str, MessageRecord],
    ) -> list[Chunk]:
        if not unassigned:
            return []
        s = self._settings
        context: list[MessageRecord] = []
        extends: str | None = None  # the open chunk's memory, when the new chunk grows it
        affected_ids = {m.id for m in affected}
        if memories:
            # The session's open window is its last memory, also when this build rebuilds it
            # (a request that edits the last message and appends new ones): continuing an
            # earlier memory instead gave a chunk with a gap ("11, 13" beside "11, 12").
            last = max(memories, key=lambda m: (m.end_seq, m.part))
            last_messages = [by_id[i] for i in last.msg_ids if i in by_id]
            appended = unassigned[0].seq > last.end_seq
            has_room = (
                last.id not in affected_ids  # rebuilt from its own messages: not grown here
                and last.part == 0
                and not any(is_long(m, s.chunk_max_chars) for m in last_messages)
                and len(last_messages) < s.chunk_max_turns
                and len(last.text) < s.chunk_max_chars * 0.8
            )
            if appended and has_room:
                context = last_messages  # continue the open window: the chunk grows in place
                extends = last.id
            elif appended and s.chunk_overlap_turns:
                context = last_messages[-s.chunk_overlap_turns:]
        chunks = plan_chunks(
            unassigned,
            context=context,
            max_turns=s.chunk_max_turns,
            max_chars=s.chunk_max_chars,
            overlap=s.chunk_overlap_turns,
        )
        if extends is not None and chunks:
            grown = chunks[0]
            if grown.part == 0 and grown.messages[:len(context)] == tuple(context):
                # The open chunk grew in place: it is the same memory, with more messages.
                chunks[0] = dataclasses.replace(grown, keeps=extends)
        return chunks

    # --- records -----------------------------------------------------------------------

    async def _records(
        self,
        namespace: str,
        session_id: str,
        chunks: Sequence[tuple[str, Chunk]],
        existing: dict[str, MemoryRecord],
    ) -> list[MemoryRecord]:
        todo: list[tuple[str, Chunk, str, str]] = []
        for mid, chunk in chunks:
            text = chunk.text
            digest = text_hash(text, [m.msg_id for m in chunk.messages])
            old = existing.get(mid)
            if old is not None and old.content_hash == digest:
                continue  # replay of a build that already landed
            todo.append((mid, chunk, text, digest))
        if not todo:
            return []
        texts = [t[2] for t in todo]
        # Analysis is CPU-bound Python (regexes, jieba): keep it off the event loop, let it
        # overlap with the embedding forward passes, and step aside for recalls between texts.
        analyses_task = asyncio.create_task(self._pool.recall_first.each_in_thread(analyze, texts))
        vectors = await self._pool.embed_many(texts)
        analyses = await analyses_task
        now = datetime.now(UTC)
        return [
            self._record(namespace, session_id, mid, chunk, text, digest, analysis,
                         vector.tolist(), existing.get(mid), now)
            for (mid, chunk, text, digest), analysis, vector in zip(
                todo, analyses, vectors, strict=True)
        ]

    def _record(
        self, namespace: str, session_id: str, mid: str, chunk: Chunk, text: str, digest: str,
        analysis: Analysis, vector: list[float], old: MemoryRecord | None, now: datetime,
    ) -> MemoryRecord:
        messages = chunk.messages
        times = [m.time for m in messages if m.time is not None]
        first = messages[0]
        tags = sorted({t for m in messages for t in m.tags})
        record = MemoryRecord(
            id=mid,
            namespace=namespace,
            session_id=session_id,
            text=text,
            vector=vector,
            content_hash=digest,
            created_at=now,
            updated_at=now,
            time_start=min(times) if times else None,
            time_end=max(times) if times else None,
            source=first.source,
            branch=first.branch,
            tags=tags,
            subtopics=list(analysis.subtopics),
            entities=json.dumps(analysis.entities.to_dict(), ensure_ascii=False),
            speaker_pattern=">".join(m.role for m in messages),
            start_msg=first.msg_id,
            end_msg=messages[-1].msg_id,
            start_seq=first.seq,
            end_seq=messages[-1].seq,
            part=chunk.part,
            msg_ids=[m.msg_id for m in messages],
            msg_count=len(messages),
            category=str(analysis.category),
            categories=[str(c) for c in analysis.categories],
            category_confidence=analysis.confidence,
            importance=analysis.importance,
            embedding_model=self._pool.name,
            language=language_of(text),
        )
        if old is not None:
            # Keep what the memory has lived through: usage, tier, edits by the client.
            record.created_at = old.created_at
            record.hit_count = old.hit_count
            record.access_count = old.access_count
            record.last_accessed = old.last_accessed
            record.tier = old.tier
            # A compressed memory rebuilt from changed messages holds its full new text again:
            # it is active (the next compression pass drops its stale archive row).
            record.state = "active" if old.state == "compressed" else old.state
            record.protected = old.protected
            record.pinned = old.pinned
            record.tags = sorted(set(old.tags) | set(tags))
            if old.importance_overridden:
                record.importance = old.importance
                record.importance_overridden = True
        return record

    async def _update_ledger(
        self, namespace: str, session_id: str, messages: Sequence[MessageRecord],
        memories: Sequence[MemoryRecord], previous: SessionRecord | None, now: datetime,
    ) -> None:
        times = [m.time for m in messages if m.time is not None]
        first = messages[0] if messages else None
        await self._repo.upsert_session(SessionRecord(
            namespace=namespace,
            session_id=session_id,
            source=first.source if first else "api",
            branch=first.branch if first else "main",
            stored_at=previous.stored_at if previous and previous.stored_at else now,
            updated_at=now,
            message_count=len(messages),
            chunk_count=len(memories),
            chunk_ids=[m.id for m in memories],
            first_msg=first.msg_id if first else None,
            last_msg=messages[-1].msg_id if messages else None,
            time_start=min(times) if times else None,
            time_end=max(times) if times else None,
        ))



def _without_contained(chunks: list[Chunk], *, settled: Sequence[set[str]]) -> list[Chunk]:
    """Rebuilt chunks left holding only messages that another chunk holds too (a chunk that
    lost all but its overlap with a neighbour) are dropped: their memories are deleted, and
    no message is in more memories than the overlap allows."""
    whole = [c for c in chunks if c.piece is None]
    kept = []
    for chunk in chunks:
        mine = {m.msg_id for m in chunk.messages}
        if chunk.piece is None and (
                any(mine <= other for other in settled)
                or any(mine < {m.msg_id for m in o.messages} for o in whole if o is not chunk)):
            continue
        kept.append(chunk)
    return kept


async def _ready(value: _T) -> _T:
    return value


def _replay_safe_id(memory: MemoryRecord, event: str) -> str:
    # The same change replayed after a crash has the same content hash: logged once.
    return f"{memory.id}:{event}:{memory.content_hash[:16]}"
