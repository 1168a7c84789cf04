"""Recall the memories that matter for a query, packed into a token budget."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import CurrentPrincipal, RecallServiceDep
from app.errors import error_responses
from app.recall.schemas import RecallRequest, RecallResponse

router = APIRouter(prefix="/v1", tags=["recall"])


@router.post("/recall", response_model=RecallResponse,
             responses=error_responses(400, 401, 403, 422, 503))
async def recall(body: RecallRequest, principal: CurrentPrincipal, service: RecallServiceDep
                 ) -> RecallResponse:
    """Hybrid (vector + keyword) recall within a token budget, with an injection block."""
    principal.require_namespace(body.namespace)
    return await service.recall(body)
