"""Health and readiness."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from app.auth import authenticate
from app.config import Settings
from app.errors import Unavailable, error_responses
from app.ops.disk import DiskSpace
from app.ops.metrics import Metrics
from app.ops.stalls import stale_workers
from app.state import AppState

router = APIRouter(tags=["ops"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    model: str
    embedding_dim: int
    tables: dict[str, dict[str, int]]
    store_worker_heartbeat: datetime | None
    maintenance_heartbeat: datetime | None
    compression_heartbeat: datetime | None


def _state_or_none(request: Request) -> AppState | None:
    return getattr(request.app.state, "engram", None)


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the process answers."""
    return Health(status="ok")


def _shows_namespaces(request: Request) -> bool:
    """Whether this scrape may see namespace names: admin callers, or everyone by setting.

    A scraper without a key is served (Prometheus rarely holds one); a key that is sent
    must be valid.
    """
    settings: Settings = request.app.state.settings
    if settings.metrics_namespace_labels:
        return True
    if settings.auth_enabled and "authorization" not in request.headers:
        return False
    return authenticate(request, settings).admin


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}},
                             "description": "Prometheus text format"},
                       **error_responses(401)})
async def metrics(request: Request,
                  state: Annotated[AppState | None, Depends(_state_or_none)],
                  namespace_labels: Annotated[bool, Depends(_shows_namespaces)]) -> Response:
    """Metrics in Prometheus format; namespace names for admin keys only."""
    registry: Metrics = request.app.state.metrics
    if state is not None:
        for table, stats in (await state.repo.table_stats()).items():
            registry.table_rows.labels(table).set(stats["rows"])
            registry.table_version.labels(table).set(stats["version"])
    return Response(registry.render(namespace_labels=namespace_labels),
                    media_type=CONTENT_TYPE_LATEST)


@router.get("/readyz", response_model=Readiness, responses=error_responses(503))
async def readyz(request: Request, state: Annotated[AppState | None, Depends(_state_or_none)]
                 ) -> Readiness:
    """Readiness: model loaded, tables open, background workers alive, disk not full."""
    if state is None:
        raise Unavailable("starting up: model or storage not ready")
    disk: DiskSpace = request.app.state.disk
    if (problem := disk.problem()) is not None:
        raise Unavailable(f"not ready for writes: {problem}")
    if stale := stale_workers(state.heartbeats(), datetime.now(UTC)):
        name, seconds = next(iter(stale.items()))
        raise Unavailable(f"the {name} has not reported for {seconds:.0f} s")
    return Readiness(
        status="ready", model=state.pool.name, embedding_dim=state.pool.dim,
        tables=await state.repo.table_stats(),
        store_worker_heartbeat=state.store.heartbeat,
        maintenance_heartbeat=state.maintenance.heartbeat,
        compression_heartbeat=state.compression.heartbeat,
    )
