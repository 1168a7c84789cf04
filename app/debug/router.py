"""`POST /debug/memory_dump`: the compression state of every memory (admin keys only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from app.debug.schemas import DumpRequest, MemoryDump
from app.debug.service import DebugService
from app.deps import CurrentPrincipal, StateDep
from app.errors import error_responses

router = APIRouter(prefix="/debug", tags=["debug"])


def get_debug_service(state: StateDep) -> DebugService:
    return DebugService(state.repo, state.compression.service)


@router.post("/memory_dump", response_model=MemoryDump,
             responses=error_responses(401, 403, 422))
async def memory_dump(body: DumpRequest, principal: CurrentPrincipal,
                      service: Annotated[DebugService, Depends(get_debug_service)]
                      ) -> MemoryDump:
    """Each memory's original and compressed form, dimension scores, decision and its time,
    with the namespace's pressure, candidate ratio and context hit rate (admin key)."""
    principal.require_admin()
    return await service.memory_dump(body)
