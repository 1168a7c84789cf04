"""Recall the memories that matter for a query, packed into a token budget."""

from __future__ import annotations

import time

from fastapi import APIRouter

from app.deps import CurrentPrincipal, MetricsDep, RecallServiceDep
from app.errors import error_responses
from app.recall.schemas import RecallRequest, RecallResponse

router = APIRouter(prefix="/v1", tags=["recall"])


@router.post("/recall", response_model=RecallResponse,
             responses=error_responses(400, 401, 403, 422, 503))
async def recall(body: RecallRequest, principal: CurrentPrincipal, service: RecallServiceDep,
                 metrics: MetricsDep) -> RecallResponse:
    """Hybrid (vector + keyword) recall within a token budget, with an injection block."""
    principal.require_namespace(body.namespace)
    started = time.perf_counter()
    try:
        return await service.recall(body)
    finally:
        metrics.recall_seconds.observe(time.perf_counter() - started)
