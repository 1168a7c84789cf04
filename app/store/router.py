"""Store a session's messages; follow a background store job."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from app.deps import CurrentPrincipal, StoreServiceDep
from app.errors import error_responses
from app.store.schemas import JobPublic, StoreRequest, StoreResult, StoreStatus

router = APIRouter(prefix="/v1", tags=["store"])


@router.post(
    "/store",
    response_model=StoreResult,
    responses={202: {"model": StoreResult,
                     "description": "Queued (wait=false)"},
               **error_responses(400, 401, 403, 409, 413, 422, 503)},
)
async def store(body: StoreRequest, response: Response, principal: CurrentPrincipal,
                service: StoreServiceDep) -> StoreResult:
    """Store a session's messages incrementally: only new and changed ones are processed."""
    principal.require_namespace(body.namespace)
    result = await service.store(body)
    if result.status == StoreStatus.queued:
        response.status_code = status.HTTP_202_ACCEPTED
    return result


@router.get("/jobs/{job_id}", response_model=JobPublic,
            responses=error_responses(401, 403, 404))
async def get_job(job_id: str, principal: CurrentPrincipal, service: StoreServiceDep
                  ) -> JobPublic:
    """State of the background build of a store made with wait=true or false."""
    job = await service.get_job(job_id)
    principal.require_namespace(job.namespace)
    return job
