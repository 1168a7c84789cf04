"""Read, list and delete memories; the sessions ledger; deletes of sessions and namespaces."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from fastapi.exceptions import RequestValidationError

from app.classify.categories import Category
from app.deps import CurrentPrincipal, MemoryServiceDep
from app.errors import error_responses
from app.memories.schemas import (
    AS_OF,
    AccessRequest,
    Deleted,
    Evolution,
    ForgetResult,
    MemoryList,
    MemoryMessages,
    MemoryPublic,
    MemoryState,
    MemoryUpdate,
    NamespaceList,
    SessionList,
    SessionPublic,
    Tier,
)
from app.storage.repository import MemoryFilter
from app.time_range import AcceptedTime
from app.validation import ID_PATTERN, NAMESPACE_PATTERN, IdPath

router = APIRouter(prefix="/v1", tags=["memories"])

NamespacePath = Annotated[str, Path(pattern=NAMESPACE_PATTERN)]


@router.get("/memories", response_model=MemoryList, responses=error_responses(401, 403, 422))
async def list_memories(
    principal: CurrentPrincipal,
    service: MemoryServiceDep,
    namespace: Annotated[str, Query(pattern=NAMESPACE_PATTERN)],
    session_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    category: Annotated[Category | None, Query(
        description="Memories with this category, main or of one of their lines.")] = None,
    tier: Tier | None = None,
    branch: str | None = None,
    state: Annotated[MemoryState | Literal["any"], Query(
        description="active (default), compressed, forgotten, or any")] = MemoryState.active,
    tag: str | None = None,
    min_importance: Annotated[int | None, Query(ge=1, le=10)] = None,
    pinned: Annotated[bool | None, Query(
        description="true: only pinned memories; false: only unpinned ones.")] = None,
    q: Annotated[str | None, Query(
        min_length=1, max_length=4000, pattern=r"\S",
        description="Text search (keyword + vector) within the other filters: the matches "
        "whose relevance (recall's 0–1 scale) reaches `min_score`, best first, each with its "
        "`score`. Without it: newest first.")] = None,
    min_score: Annotated[float | None, Query(
        ge=0, le=1, description="Only with `q`: the relevance a match needs to be listed. "
        "Default: ENGRAM_MEMORY_SEARCH_MIN_SCORE, else the model's recall threshold (0.35); "
        "the floor applied is returned as `min_score`. 0 lists every candidate.")] = None,
    as_of: Annotated[AcceptedTime | None, Query(description="List as of this time. " + AS_OF)
                     ] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> MemoryList:
    """A namespace's memories, newest first (or best match first with `q`), filtered, paged."""
    principal.require_namespace(namespace)
    if min_score is not None and q is None:
        raise RequestValidationError([{
            "loc": ("query", "min_score"), "type": "value_error",
            "msg": "min_score is the floor of the text search: it needs q"}])
    where = MemoryFilter(
        namespace=namespace, session_id=session_id,
        category=category.value if category else None,
        tier=tier.value if tier else None, branch=branch,
        state=None if state == "any" else state, min_importance=min_importance, tag=tag,
        pinned=pinned, as_of=as_of,
    )
    return await service.list_memories(where, offset=offset, limit=limit, q=q,
                                       min_score=min_score)


@router.get("/namespaces", response_model=NamespaceList, responses=error_responses(401, 422))
async def list_namespaces(principal: CurrentPrincipal, service: MemoryServiceDep
                          ) -> NamespaceList:
    """The namespaces this key may read, with their memory, session and pin counts."""
    return await service.namespaces(principal)


@router.get("/memories/{memory_id}", response_model=MemoryPublic,
            responses=error_responses(401, 404))
async def get_memory(memory_id: str, principal: CurrentPrincipal, service: MemoryServiceDep
                     ) -> MemoryPublic:
    """One memory with all its metadata."""
    return await service.get(memory_id, principal)


@router.get("/memories/{memory_id}/messages", response_model=MemoryMessages,
            responses=error_responses(401, 404))
async def memory_messages(memory_id: str, principal: CurrentPrincipal,
                          service: MemoryServiceDep) -> MemoryMessages:
    """The messages the memory covers, in order: role, text and conversation time."""
    return await service.messages(memory_id, principal)


@router.delete("/memories/{memory_id}", response_model=Deleted,
               responses=error_responses(401, 404, 503))
async def delete_memory(memory_id: str, principal: CurrentPrincipal, service: MemoryServiceDep
                        ) -> Deleted:
    """Delete one memory (its messages stay in the raw log)."""
    return await service.delete(memory_id, principal)


@router.patch("/memories/{memory_id}", response_model=MemoryPublic,
              responses=error_responses(400, 401, 404, 422, 503))
async def update_memory(memory_id: str, body: MemoryUpdate, principal: CurrentPrincipal,
                        service: MemoryServiceDep) -> MemoryPublic:
    """Edit text, tags, category, importance, protection or the pin; a new text is
    re-embedded."""
    return await service.update(memory_id, body, principal)


@router.post("/memories/{memory_id}/access", response_model=MemoryPublic,
             responses=error_responses(400, 401, 404, 422, 503))
async def access_memory(memory_id: str, body: AccessRequest, principal: CurrentPrincipal,
                        service: MemoryServiceDep) -> MemoryPublic:
    """Record an explicit access with a note; frequent use promotes the memory."""
    return await service.access(memory_id, body.note, principal)


@router.post("/memories/{memory_id}/forget", response_model=MemoryPublic,
             responses=error_responses(401, 404, 409, 503))
async def forget_memory(memory_id: str, principal: CurrentPrincipal, service: MemoryServiceDep
                        ) -> MemoryPublic:
    """Forget a memory softly: it leaves recall but can be restored (409 if pinned or
    protected)."""
    return await service.forget(memory_id, principal)


@router.post("/memories/{memory_id}/restore", response_model=MemoryPublic,
             responses=error_responses(401, 404, 503))
async def restore_memory(memory_id: str, principal: CurrentPrincipal, service: MemoryServiceDep
                         ) -> MemoryPublic:
    """Bring back a forgotten memory, or a compressed one whole from the archive."""
    return await service.restore(memory_id, principal)


@router.get("/memories/{memory_id}/evolution", response_model=Evolution,
            responses=error_responses(401, 404))
async def memory_evolution(memory_id: str, principal: CurrentPrincipal,
                           service: MemoryServiceDep) -> Evolution:
    """The memory's history, oldest first, with a readable summary."""
    return await service.evolution(memory_id, principal)


@router.post("/namespaces/{namespace}/forget", response_model=ForgetResult,
             responses=error_responses(401, 403, 503))
async def forget_stale(namespace: NamespacePath, principal: CurrentPrincipal,
                       service: MemoryServiceDep) -> ForgetResult:
    """Forget the namespace's long-untouched, low-importance memories (soft, restorable)."""
    principal.require_namespace(namespace)
    return await service.forget_stale(namespace)


@router.get("/namespaces/{namespace}/sessions", response_model=SessionList,
            responses=error_responses(401, 403))
async def list_sessions(namespace: NamespacePath, principal: CurrentPrincipal,
                        service: MemoryServiceDep) -> SessionList:
    """The sessions ledger of a namespace."""
    principal.require_namespace(namespace)
    return await service.sessions(namespace)


@router.get("/namespaces/{namespace}/sessions/{session_id}", response_model=SessionPublic,
            responses=error_responses(401, 403, 404))
async def get_session(namespace: NamespacePath, session_id: IdPath, principal: CurrentPrincipal,
                      service: MemoryServiceDep) -> SessionPublic:
    """One session's ledger entry: when it was stored, its chunks and message range."""
    principal.require_namespace(namespace)
    return await service.session(namespace, session_id)


@router.delete("/namespaces/{namespace}", response_model=Deleted,
               responses=error_responses(401, 403, 503))
async def delete_namespace(namespace: NamespacePath, principal: CurrentPrincipal,
                           service: MemoryServiceDep) -> Deleted:
    """Delete everything stored for a namespace."""
    principal.require_namespace(namespace)
    return await service.delete_namespace(namespace)


@router.delete("/namespaces/{namespace}/sessions/{session_id}", response_model=Deleted,
               responses=error_responses(401, 403, 404, 503))
async def delete_session(namespace: NamespacePath, session_id: IdPath,
                         principal: CurrentPrincipal, service: MemoryServiceDep) -> Deleted:
    """Delete a session: its messages, memories, events and ledger entry."""
    principal.require_namespace(namespace)
    return await service.delete_session(namespace, session_id)


@router.delete("/namespaces/{namespace}/sessions/{session_id}/messages/{msg_id}",
               response_model=Deleted, responses=error_responses(401, 403, 404, 503))
async def delete_message(namespace: NamespacePath, session_id: IdPath, msg_id: IdPath,
                         principal: CurrentPrincipal, service: MemoryServiceDep) -> Deleted:
    """Delete one message; the memories that held it are rebuilt without it."""
    principal.require_namespace(namespace)
    return await service.delete_message(namespace, session_id, msg_id)
