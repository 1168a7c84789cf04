"""Reading and deleting memories, messages, sessions and namespaces.

Deletes take the namespace write lock; deleting a message rebuilds the memories that held it
(through the same builder the store uses), so nothing derived from deleted text survives.
"""

from __future__ import annotations

from app.auth import Principal
from app.errors import NotFound
from app.locks import NamespaceLocks
from app.memories.schemas import Deleted, MemoryList, MemoryPublic, SessionList, SessionPublic
from app.storage.records import MemoryRecord
from app.storage.repository import MemoryFilter, Repository
from app.store.builder import MemoryBuilder


class MemoryService:
    def __init__(self, repo: Repository, builder: MemoryBuilder, locks: NamespaceLocks) -> None:
        self._repo = repo
        self._builder = builder
        self._locks = locks

    async def _memory(self, memory_id: str, principal: Principal) -> MemoryRecord:
        memory = await self._repo.get_memory(memory_id)
        if memory is None:
            raise NotFound(f"memory {memory_id!r} not found")
        principal.require_namespace(memory.namespace)
        return memory

    async def get(self, memory_id: str, principal: Principal) -> MemoryPublic:
        return MemoryPublic.from_record(await self._memory(memory_id, principal))

    async def list(self, where: MemoryFilter, *, offset: int, limit: int) -> MemoryList:
        items, count = await self._repo.list_memories(where, offset=offset, limit=limit)
        return MemoryList(items=[MemoryPublic.from_record(m) for m in items], count=count,
                          offset=offset, limit=limit)

    async def delete(self, memory_id: str, principal: Principal) -> Deleted:
        memory = await self._memory(memory_id, principal)
        async with self._locks.hold(memory.namespace):
            await self._repo.delete_memories([memory.id])
            await self._repo.delete_events([memory.id])
        return Deleted(memories_deleted=1)

    async def sessions(self, namespace: str) -> SessionList:
        items = await self._repo.list_sessions(namespace)
        return SessionList(items=[SessionPublic.from_record(s) for s in items], count=len(items))

    async def session(self, namespace: str, session_id: str) -> SessionPublic:
        found = await self._repo.get_session(namespace, session_id)
        if found is None:
            raise NotFound(f"session {session_id!r} not found in namespace {namespace!r}")
        return SessionPublic.from_record(found)

    async def delete_session(self, namespace: str, session_id: str) -> Deleted:
        async with self._locks.hold(namespace):
            memories = await self._repo.session_memories(namespace, session_id)
            stored = await self._repo.count_messages(namespace, session_id)
            if not memories and not stored:
                raise NotFound(f"session {session_id!r} not found in namespace {namespace!r}")
            await self._repo.delete_session(namespace, session_id)
        return Deleted(memories_deleted=len(memories))

    async def delete_message(self, namespace: str, session_id: str, msg_id: str) -> Deleted:
        async with self._locks.hold(namespace):
            messages = await self._repo.session_messages(namespace, session_id)
            if not any(m.msg_id == msg_id for m in messages):
                raise NotFound(f"message {msg_id!r} not found in session {session_id!r}")
            await self._repo.delete_messages(namespace, session_id, [msg_id])
            outcome = await self._builder.build_session(namespace, session_id)
        return Deleted(memories_deleted=len(outcome.deleted), memories_rebuilt=outcome.updated)

    async def delete_namespace(self, namespace: str) -> Deleted:
        async with self._locks.hold(namespace):
            count = await self._repo.count_memories(namespace)
            await self._repo.delete_namespace(namespace)
        return Deleted(memories_deleted=count)
