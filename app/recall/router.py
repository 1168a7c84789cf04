"""Recall the memories that matter for a query, packed into a token budget."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends

from app.deps import CurrentPrincipal, MetricsDep, RecallServiceDep
from app.errors import error_responses
from app.recall.schemas import RecallRequest, RecallResponse
from app.recall.why_not import WhyNotRequest, WhyNotResponse, WhyNotService

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


def get_why_not(service: RecallServiceDep) -> WhyNotService:
    return WhyNotService(service)


@router.post("/recall/why_not", response_model=WhyNotResponse,
             responses=error_responses(400, 401, 403, 422, 503))
async def recall_why_not(body: WhyNotRequest, principal: CurrentPrincipal,
                         service: Annotated[WhyNotService, Depends(get_why_not)]
                         ) -> WhyNotResponse:
    """Run a recall and say, for each of `memory_ids`, what kept it out (the filter, its
    state, its relevance against the threshold, the budget) or that it was recalled."""
    principal.require_namespace(body.namespace)
    return await service.explain(body)
