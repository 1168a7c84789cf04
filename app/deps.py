"""FastAPI dependencies: the long-lived objects the lifespan put on `app.state`, and the caller.

Routers declare these as typed parameters; nothing else reads `app.state`. Each is an
`async def` although none awaits: FastAPI runs a plain `def` dependency in its thread pool,
a thread hop per dependency and request (five for a store call) for a few attribute reads.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from app.auth import Principal, authenticate
from app.config import Settings
from app.errors import Unavailable
from app.memories.service import MemoryService
from app.ops.metrics import Metrics
from app.recall.service import RecallService
from app.state import AppState
from app.store.service import StoreService
from app.transfer.service import TransferService


async def get_state(request: Request) -> AppState:
    state: AppState | None = getattr(request.app.state, "engram", None)
    if state is None:
        raise Unavailable("the service is starting up")
    return state


_DECLARED_QUERY: dict[int, frozenset[str]] = {}


def _declared_query(route: APIRoute) -> frozenset[str]:
    """The query parameter names a route takes, its dependencies' included (cached)."""
    names = _DECLARED_QUERY.get(id(route))
    if names is None:
        found: set[str] = set()
        todo: list[Any] = [route.dependant]
        while todo:
            dependant = todo.pop()
            found.update(field.alias for field in dependant.query_params)
            todo.extend(dependant.dependencies)
        names = _DECLARED_QUERY[id(route)] = frozenset(found)
    return names


async def reject_unknown_query_params(request: Request) -> None:
    """Every route's guard (installed on the app): a query parameter the route does not
    take is a 422 naming it, never silently ignored (`?q=` on a route without search
    returned everything as if it had searched).

    Raises:
        RequestValidationError: rendered as the usual 422 listing each unknown parameter.
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    declared = _declared_query(route)
    unknown = sorted({name for name in request.query_params if name not in declared})
    if unknown:
        takes = ", ".join(sorted(declared)) or "none"
        raise RequestValidationError([
            {"type": "unknown_query_parameter", "loc": ("query", name),
             "msg": f"unknown query parameter (this route takes: {takes})", "input": None}
            for name in unknown])


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_principal(request: Request, settings: Annotated[Settings, Depends(get_settings)]
                  ) -> Principal:
    return authenticate(request, settings)


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


async def get_store_service(state: Annotated[AppState, Depends(get_state)]) -> StoreService:
    return state.store


async def get_transfer_service(state: Annotated[AppState, Depends(get_state)]) -> TransferService:
    return state.transfer


async def get_recall_service(state: Annotated[AppState, Depends(get_state)]) -> RecallService:
    return state.recall


async def get_memory_service(state: Annotated[AppState, Depends(get_state)]) -> MemoryService:
    return state.memories


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]
StoreServiceDep = Annotated[StoreService, Depends(get_store_service)]
MemoryServiceDep = Annotated[MemoryService, Depends(get_memory_service)]
TransferServiceDep = Annotated[TransferService, Depends(get_transfer_service)]
StateDep = Annotated[AppState, Depends(get_state)]
RecallServiceDep = Annotated[RecallService, Depends(get_recall_service)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
