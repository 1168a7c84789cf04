"""Context without a query: pinned memories, durable facts, the latest session's gist."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from app.context.schemas import ContextRequest, ContextResponse
from app.context.service import ContextService
from app.deps import CurrentPrincipal, StateDep
from app.errors import error_responses

router = APIRouter(prefix="/v1", tags=["context"])


def get_context_service(state: StateDep) -> ContextService:
    return ContextService(state.repo, state.pool, state.settings)


ContextServiceDep = Annotated[ContextService, Depends(get_context_service)]


@router.post("/context", response_model=ContextResponse,
             responses=error_responses(401, 403, 422, 503))
async def context(body: ContextRequest, principal: CurrentPrincipal,
                  service: ContextServiceDep) -> ContextResponse:
    """What an assistant should know at the start of a session, without a query, within a
    token budget: pinned memories, then durable facts, then the latest session's gist."""
    principal.require_namespace(body.namespace)
    return await service.context(body)
