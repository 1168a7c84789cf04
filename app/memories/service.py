"""Reading and deleting memories, messages, sessions and namespaces.

Deletes take the namespace write lock; deleting a message rebuilds the memories that held it
(through the same builder the store uses), so nothing derived from deleted text survives.
Each delete is recorded before its commits and finished after a crash (app/store/deletes.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from app.auth import Principal
from app.compression.archive import restore_compressed
from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.errors import Conflict, NotFound
from app.locks import NamespaceLocks
from app.memories.lifecycle import evolution_summary, pin_event, promotion_for
from app.memories.schemas import (
    Deleted,
    EventPublic,
    Evolution,
    ForgetResult,
    MemoryList,
    MemoryMessages,
    MemoryPublic,
    MemoryUpdate,
    MessagePublic,
    NamespaceList,
    NamespacePublic,
    SessionList,
    SessionPublic,
)
from app.recall.score import relevance
from app.recall.search import merge
from app.recall.text import query_terms
from app.recall.tuning import CANDIDATES
from app.scripts import has_han
from app.storage.records import EventRecord, MemoryRecord, new_event
from app.storage.repository import MemoryFilter, Repository
from app.store.builder import MemoryBuilder
from app.store.deletes import Deletes


class MemoryService:
    def __init__(self, repo: Repository, builder: MemoryBuilder, locks: NamespaceLocks,
                 settings: Settings, *, pool: EmbeddingPool) -> None:
        self._repo = repo
        self._builder = builder
        self._locks = locks
        self._settings = settings
        self._pool = pool
        self._deletes = Deletes(repo, builder, locks, settings)

    async def _memory(self, memory_id: str, principal: Principal) -> MemoryRecord:
        """The memory, looked up only among the namespaces the caller may read.

        Another namespace's memory answers the same 404 as an unknown id: a 403 would tell
        the caller that the (predictable) id exists.
        """
        memory = await self._repo.get_memory(memory_id, namespaces=principal.readable)
        if memory is None:
            raise NotFound(f"memory {memory_id!r} not found")
        return memory

    async def get(self, memory_id: str, principal: Principal) -> MemoryPublic:
        return MemoryPublic.from_record(await self._memory(memory_id, principal))

    async def messages(self, memory_id: str, principal: Principal) -> MemoryMessages:
        """The raw-log messages a memory was built from, so a reader sees who said what and
        when rather than bare ids. A summary holds no messages of its own (empty list)."""
        memory = await self._memory(memory_id, principal)
        wanted = set(memory.msg_ids)
        held = {m.msg_id: m for m in await self._repo.session_messages(
            memory.namespace, memory.session_id) if m.msg_id in wanted} if wanted else {}
        items = [MessagePublic(msg_id=i, role=held[i].role, content=held[i].content,
                               timestamp=held[i].time) for i in memory.msg_ids if i in held]
        return MemoryMessages(memory_id=memory.id, items=items, count=len(items),
                              missing=[i for i in memory.msg_ids if i not in held])

    async def list_memories(self, where: MemoryFilter, *, offset: int, limit: int,
                            q: str | None = None, min_score: float | None = None
                            ) -> MemoryList:
        """A page of memories: newest first, or with `q` the best matches first (those
        reaching `min_score`, else the configured floor)."""
        if q is not None:
            return await self._search(where, q, offset=offset, limit=limit,
                                      min_score=min_score)
        items, count = await self._repo.list_memories(where, offset=offset, limit=limit)
        return MemoryList(items=[MemoryPublic.from_record(m) for m in items], count=count,
                          offset=offset, limit=limit)

    async def _search(self, where: MemoryFilter, q: str, *, offset: int, limit: int,
                      min_score: float | None) -> MemoryList:
        """Keyword (BM25) and vector (cosine) search under the listing's filters, each
        match scored as a recall scores it (`app.recall.score.relevance`: the same 0–1
        `relevance` a recall of `q` shows in `explain`, over as many candidates), best first.
        What falls below `min_score` (else `Settings.memory_search_floor`) is left out, so
        a query that matches nothing lists nothing.

        `count` is the number of matches passing, among the `CANDIDATES` best of each search.
        """
        floor = self._settings.memory_search_floor if min_score is None else min_score
        query_vector = await self._pool.embed_query(q)
        near, keyword, vectors = await self._repo.search_memories(
            where, vector=query_vector.tolist(), text=q, limit=CANDIDATES)
        found = merge(near, keyword, vectors, query_vector)
        relevance(found, self._settings, terms=query_terms(q), chinese=has_han(q))
        ranked = sorted((c for c in found if c.relevance >= floor),
                        key=lambda c: (-c.relevance, -c.when, c.memory.id))
        return MemoryList(
            items=[MemoryPublic.from_record(c.memory, score=round(c.relevance, 4))
                   for c in ranked[offset: offset + limit]],
            count=len(ranked), offset=offset, limit=limit, min_score=round(floor, 4))

    async def namespaces(self, principal: Principal) -> NamespaceList:
        """The namespaces the caller may read, with their counts."""
        return NamespaceList(namespaces=[
            NamespacePublic(namespace=n.namespace, memories=n.memories, sessions=n.sessions,
                            pinned=n.pinned, last_stored_at=n.last_stored_at)
            for n in await self._repo.namespace_overview() if principal.can_access(n.namespace)])

    async def delete(self, memory_id: str, principal: Principal) -> Deleted:
        memory = await self._memory(memory_id, principal)
        await self._deletes.memory(memory.namespace, memory.id)
        return Deleted(memories_deleted=1)

    async def sessions(self, namespace: str) -> SessionList:
        items = await self._repo.list_sessions(namespace)
        return SessionList(items=[SessionPublic.from_record(s) for s in items], count=len(items))

    async def session(self, namespace: str, session_id: str) -> SessionPublic:
        found = await self._repo.get_session(namespace, session_id)
        if found is None:
            raise NotFound(f"session {session_id!r} not found in namespace {namespace!r}")
        return SessionPublic.from_record(found)

    # Deletes are recorded before their commits and finished after a crash (deletes.py).

    async def delete_session(self, namespace: str, session_id: str) -> Deleted:
        return Deleted(memories_deleted=await self._deletes.session(namespace, session_id))

    async def delete_message(self, namespace: str, session_id: str, msg_id: str) -> Deleted:
        outcome = await self._deletes.message(namespace, session_id, msg_id)
        return Deleted(memories_deleted=len(outcome.deleted), memories_rebuilt=outcome.updated)

    async def delete_namespace(self, namespace: str) -> Deleted:
        return Deleted(memories_deleted=await self._deletes.namespace(namespace))

    # --- usage, tiers, forgetting ---------------------------------------------------------

    async def access(self, memory_id: str, note: str, principal: Principal) -> MemoryPublic:
        """Record an explicit access: access_count + 1, an `accessed` event, maybe a promotion."""
        memory = await self._memory(memory_id, principal)
        async with self._locks.hold(memory.namespace):
            memory = await self._memory(memory_id, principal)  # fresh counts under the lock
            now = datetime.now(UTC)
            memory.access_count += 1
            memory.last_accessed = now
            events = [new_event(memory, "accessed", note, now, {"access_count":
                                                                memory.access_count})]
            events += self._promote(memory, now)
            await self._repo.update_memory(memory.id, {
                "access_count": memory.access_count, "last_accessed": now,
                "tier": memory.tier, "importance": memory.importance},
                namespace=memory.namespace)
            await self._repo.append_events(events)
        return MemoryPublic.from_record(memory)

    async def promote_due(self, namespace: str, memory_ids: Sequence[str]) -> list[str]:
        """Promote those of `memory_ids` whose counts passed a threshold (after recall hits).

        The caller holds the namespace lock.
        """
        promoted: list[MemoryRecord] = []
        events: list[EventRecord] = []
        now = datetime.now(UTC)
        for memory in await self._repo.get_memories(memory_ids):
            if memory.namespace != namespace:
                continue
            earned = self._promote(memory, now)
            if earned:
                events += earned
                promoted.append(memory)
        # One table version for every promotion of the flush, one for their events: two
        # commits per memory made a flush of ~100 promotions hold the namespace lock 10 s on
        # a local disk and 88 s on a bucket (bench/object_store_latency.py's stores waited).
        await self._repo.set_memory_columns([
            {"id": m.id, "tier": m.tier, "importance": m.importance} for m in promoted])
        await self._repo.append_events(events)
        return [m.id for m in promoted]

    def _promote(self, memory: MemoryRecord, now: datetime) -> list[EventRecord]:
        """Apply every promotion the memory has earned (in place); their events."""
        events = []
        while (step := promotion_for(memory, self._settings)) is not None:
            memory.tier, memory.importance = step.to_tier, step.importance
            events.append(new_event(memory, "promoted", f"{step.from_tier} → {step.to_tier}: "
                                    f"{step.reason}", now,
                                    {"from": step.from_tier, "to": step.to_tier,
                                     "importance": step.importance}))
        return events

    async def forget(self, memory_id: str, principal: Principal, *, note: str = "by request"
                     ) -> MemoryPublic:
        return await self._set_state(memory_id, principal, "forgotten", note)

    async def restore(self, memory_id: str, principal: Principal) -> MemoryPublic:
        """Bring a forgotten memory back, or a compressed one whole from the archive."""
        memory = await self._memory(memory_id, principal)
        if memory.state != "compressed":
            return await self._set_state(memory_id, principal, "active", "restored")
        async with self._locks.hold(memory.namespace):
            memory = await self._memory(memory_id, principal)
            if memory.state == "compressed":
                memory = await restore_compressed(self._repo, memory, when=datetime.now(UTC))
        return MemoryPublic.from_record(memory)

    async def _set_state(self, memory_id: str, principal: Principal, state: str, note: str
                         ) -> MemoryPublic:
        memory = await self._memory(memory_id, principal)
        async with self._locks.hold(memory.namespace):
            memory = await self._memory(memory_id, principal)
            if memory.state == state:
                return MemoryPublic.from_record(memory)
            if state == "forgotten" and memory.pinned:
                raise Conflict(f"memory {memory_id!r} is pinned and cannot be forgotten; unpin "
                               "it first (PATCH with {\"pinned\": false})",
                               details={"memory_id": memory_id, "pinned": True})
            if state == "forgotten" and memory.protected:
                raise Conflict(f"memory {memory_id!r} is protected and cannot be forgotten")
            now = datetime.now(UTC)
            event = "forgotten" if state == "forgotten" else "restored"
            old_state, memory.state, memory.updated_at = memory.state, state, now
            await self._repo.update_memory(memory.id, {"state": state, "updated_at": now},
                                           namespace=memory.namespace)
            await self._repo.append_events([new_event(memory, event, note, now, {
                "from": old_state, "to": state})])
        return MemoryPublic.from_record(memory)

    async def forget_stale(self, namespace: str) -> ForgetResult:
        """Soft-forget the namespace's long-untouched, low-importance memories."""
        s = self._settings
        async with self._locks.hold(namespace):
            now = datetime.now(UTC)
            stale = await self._repo.forgettable_memories(
                namespace, untouched_since=now - timedelta(days=s.forget_after_days),
                max_importance=s.forget_max_importance)
            for memory in stale:
                await self._repo.update_memory(memory.id, {"state": "forgotten",
                                                           "updated_at": now},
                                               namespace=namespace)
            await self._repo.append_events([
                new_event(m, "forgotten", f"untouched for {s.forget_after_days:g} days, "
                          f"importance {m.importance}", now, {"from": "active"})
                for m in stale])
        return ForgetResult(namespace=namespace, forgotten=[m.id for m in stale])

    # --- edits and history -----------------------------------------------------------------

    async def update(self, memory_id: str, change: MemoryUpdate, principal: Principal
                     ) -> MemoryPublic:
        """Edit a memory; a new text is re-embedded. Logged as `evolved` with old and new;
        a change of the pin as `pinned` / `unpinned`."""
        memory = await self._memory(memory_id, principal)
        async with self._locks.hold(memory.namespace):
            memory = await self._memory(memory_id, principal)
            fields = change.changes
            pin: bool | None = fields.pop("pinned", None)
            now = datetime.now(UTC)
            events: list[EventRecord] = []
            if pin is not None and pin != memory.pinned:
                memory.pinned = pin
                events.append(pin_event(memory, pin, "by request", now))
            if not fields:  # the pin alone: two columns, no re-embedding
                if events:
                    memory.updated_at = now
                    await self._repo.update_memory(memory.id, {"pinned": pin, "updated_at": now},
                                                   namespace=memory.namespace)
                    await self._repo.append_events(events)
                return MemoryPublic.from_record(memory)
            old = {f: getattr(memory, f) for f in fields}
            text = fields.pop("text", None)
            if text is not None and text != memory.text:
                memory = await self._builder.with_new_text(memory, text)
            else:  # keep the stored vector: the row is written back whole
                memory.vector = (await self._repo.get_memories(
                    [memory.id], with_vector=True))[0].vector
            for name, value in fields.items():
                setattr(memory, name, str(value) if name == "category" else value)
            if "importance" in fields:
                memory.importance_overridden = True
            memory.updated_at = now
            await self._repo.upsert_memories([memory])
            new = {f: getattr(memory, f) for f in old}
            events.insert(0, new_event(
                memory, "evolved", "edited: " + ", ".join(sorted(old)),
                now, {"old": old, "new": new}))
            await self._repo.append_events(events)
        return MemoryPublic.from_record(memory)

    async def evolution(self, memory_id: str, principal: Principal) -> Evolution:
        memory = await self._memory(memory_id, principal)
        events = await self._repo.events_for(memory.namespace, memory.id)
        return Evolution(
            memory_id=memory.id,
            events=[EventPublic(id=e.id, event=e.event, note=e.note, timestamp=e.timestamp,
                                metadata=json.loads(e.metadata or "{}")) for e in events],
            summary=evolution_summary([(e.event, e.note) for e in events]),
        )
