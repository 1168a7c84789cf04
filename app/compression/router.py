"""Compression: trigger a pass (or a dry run), read its status, choose a namespace's policy."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from app.compression.scheduler import CompressionScheduler
from app.compression.schemas import (
    CompressionStatus,
    PassResult,
    PolicyConfig,
    PolicyView,
    RunRequest,
)
from app.deps import CurrentPrincipal, StateDep
from app.errors import error_responses
from app.validation import NAMESPACE_PATTERN

router = APIRouter(prefix="/v1/compression", tags=["compression"])

NamespacePath = Annotated[str, Path(pattern=NAMESPACE_PATTERN)]


def get_compression(state: StateDep) -> CompressionScheduler:
    return state.compression


CompressionDep = Annotated[CompressionScheduler, Depends(get_compression)]


@router.post("/run", response_model=PassResult, responses=error_responses(401, 403, 422, 503))
async def run_compression(body: RunRequest, principal: CurrentPrincipal,
                          scheduler: CompressionDep) -> PassResult:
    """Run a compression pass now (one namespace or every one the key may use); `dry_run`
    decides and reports without changing anything."""
    namespaces: list[str] | None
    if body.namespace is not None:
        principal.require_namespace(body.namespace)
        namespaces = [body.namespace]
    else:
        namespaces = None if principal.admin else sorted(principal.namespaces)
    return await scheduler.run(namespaces=namespaces, dry_run=body.dry_run, force=body.force)


@router.get("/status", response_model=CompressionStatus, responses=error_responses(401, 403))
async def compression_status(principal: CurrentPrincipal, scheduler: CompressionDep
                             ) -> CompressionStatus:
    """The scheduler's state and the last result of each namespace the key may see."""
    return scheduler.status(None if principal.admin else set(principal.namespaces))


@router.get("/policies/{namespace}", response_model=PolicyView,
            responses=error_responses(401, 403, 422))
async def get_policy(namespace: NamespacePath, principal: CurrentPrincipal,
                     scheduler: CompressionDep) -> PolicyView:
    """The namespace's compression policy: its choice, the effective live and shadow
    policies, and what feedback has learned."""
    principal.require_namespace(namespace)
    return await scheduler.service.policy(namespace)


@router.put("/policies/{namespace}", response_model=PolicyView,
            responses=error_responses(400, 401, 403, 422, 503))
async def set_policy(namespace: NamespacePath, body: PolicyConfig, principal: CurrentPrincipal,
                     scheduler: CompressionDep) -> PolicyView:
    """Choose a scenario preset (with overrides) and optionally a shadow policy."""
    principal.require_namespace(namespace)
    return await scheduler.service.set_policy(namespace, body)
