"""Export and import a namespace ("memory moving" to a new machine)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import StreamingResponse

from app.deps import CurrentPrincipal, TransferServiceDep
from app.errors import error_responses
from app.transfer.schemas import ImportProgress, ImportResult
from app.validation import NAMESPACE_PATTERN

router = APIRouter(prefix="/v1", tags=["transfer"])

NamespacePath = Annotated[str, Path(pattern=NAMESPACE_PATTERN)]
NDJSON = "application/x-ndjson"


@router.get(
    "/namespaces/{namespace}/export",
    response_class=StreamingResponse,
    responses={200: {"content": {NDJSON: {}}, "description": "The export file (NDJSON)"},
               **error_responses(401, 403)},
)
async def export_namespace(
    namespace: NamespacePath, principal: CurrentPrincipal, service: TransferServiceDep,
    vectors: Annotated[bool, Query(description="Include embedding vectors (larger file; "
                                   "import then skips re-embedding if the model matches).")
                       ] = False,
) -> StreamingResponse:
    """Export a namespace: header, sessions, messages, memories, events."""
    principal.require_namespace(namespace)
    return StreamingResponse(
        service.export(namespace, vectors=vectors), media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="{namespace}.engram.ndjson"'},
    )


@router.post(
    "/namespaces/{namespace}/import",
    response_model=ImportResult,
    responses=error_responses(400, 401, 403, 413, 503),
    openapi_extra={"requestBody": {"required": True, "content": {
        NDJSON: {"schema": {"type": "string", "format": "binary"}}}}},
)
async def import_namespace(namespace: NamespacePath, request: Request,
                           principal: CurrentPrincipal, service: TransferServiceDep
                           ) -> ImportResult:
    """Import an export file into this namespace: checked whole like client input, ids
    derived again here (idempotent; re-embeds if the model differs)."""
    principal.require_namespace(namespace)
    return await service.import_(namespace, await request.body())


@router.get("/namespaces/{namespace}/import/progress", response_model=ImportProgress,
            responses=error_responses(401, 403))
async def import_progress(namespace: NamespacePath, principal: CurrentPrincipal,
                          service: TransferServiceDep) -> ImportProgress:
    """Where the running (or latest) import into this namespace is: its phase and, while it
    embeds, how many memories of how many are done. Poll it beside the import request.
    Answered by the server process that runs the import (one process, as by default)."""
    principal.require_namespace(namespace)
    return service.progress(namespace)
