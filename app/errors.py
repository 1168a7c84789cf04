"""One error tree, rendered as one JSON shape.

    EngramError                   500  base: carries its HTTP status and a stable code
    ├── BadRequest                400  the request is well-formed JSON but asks for the impossible
    ├── Unauthorized              401  no or unknown API key
    ├── Forbidden                 403  the key may not touch this namespace / admin route
    ├── NotFound                  404  memory, job, session or namespace does not exist
    ├── Conflict                  409  the request contradicts stored state
    ├── PayloadTooLarge           413  a batch or message over the configured limits
    ├── Unavailable               503  not ready yet, or a lock could not be taken in time
    │   ├── LockTimeout           503
    │   └── LeaseLost             503  this server's namespace lease was taken over (it paused)
    └── InsufficientStorage       507  the disk is full: nothing more can be written

Every error response is `{"error": {"code": ..., "message": ..., "details": ...}}`. Payload
validation errors (FastAPI's 422) are rendered in the same shape with the failing fields
listed, so a client needs one parser. An unexpected exception (a bug) is a 500 in the same
shape carrying the request id, answered by `UnexpectedErrorMiddleware` so that the keep-alive
connection stays open; an exception that says the disk is full becomes a 507.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = structlog.get_logger(__name__)


class EngramError(Exception):
    status_code = 500
    code = "internal_error"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class BadRequest(EngramError):
    status_code = 400
    code = "bad_request"


class Unauthorized(EngramError):
    status_code = 401
    code = "unauthorized"


class Forbidden(EngramError):
    status_code = 403
    code = "forbidden"


class NotFound(EngramError):
    status_code = 404
    code = "not_found"


class Conflict(EngramError):
    status_code = 409
    code = "conflict"


class PayloadTooLarge(EngramError):
    status_code = 413
    code = "payload_too_large"


class Unavailable(EngramError):
    status_code = 503
    code = "unavailable"


class LockTimeout(Unavailable):
    code = "lock_timeout"


class LeaseLost(Unavailable):
    """A write refused because the lease it was made under is another server's now
    (app/storage/leases.py, fencing): nothing of it was committed; retry."""

    code = "lease_lost"


class InsufficientStorage(EngramError):
    status_code = 507
    code = "insufficient_storage"


# LanceDB's Rust core reports the OS error as text inside its own exception types
# ("... No space left on device (os error 28)"); Python's own writes raise OSError(ENOSPC).
_DISK_FULL_TEXT = ("no space left on device", "os error 28", "disk quota exceeded",
                   "os error 122")


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, says the disk is full."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(current).lower() for text in _DISK_FULL_TEXT):
            return True
        current = current.__cause__ or current.__context__
    return False


def disk_full_error() -> InsufficientStorage:
    return InsufficientStorage(
        "insufficient storage: the disk holding the data directory is full; nothing more "
        "can be written until space is freed (reads still work)")


class ErrorBody(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorResponse(BaseModel):
    """The shape of every error response."""

    error: ErrorBody


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries documenting the error shape for the given statuses."""
    return {status: {"model": ErrorResponse} for status in statuses}


def _render(status: int, code: str, message: str, details: Any = None,
            headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": jsonable_encoder(details)}}
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(status_code=status, content=body, headers=headers or None)


async def _engram_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngramError)
    return _render(exc.status_code, exc.code, exc.message, exc.details)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"field": ".".join(str(p) for p in err["loc"]), "problem": err["msg"]}
        for err in exc.errors()
    ]
    summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:5])
    return _render(422, "invalid_request", f"invalid request: {summary}", problems)


# FastAPI answers 400 when a body cannot even be decoded (bad bytes, wrong encoding); to a
# client that is the same mistake as malformed JSON, which is 422 here: one status for both.
_UNPARSEABLE_BODY = "There was an error parsing the body"


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == _UNPARSEABLE_BODY:
        return _render(422, "invalid_request", "invalid request: the body is not valid JSON")
    # Starlette's headers (the `Allow` of a 405) are part of the answer.
    return _render(exc.status_code, f"http_{exc.status_code}", str(exc.detail),
                   headers=exc.headers)


class UnexpectedErrorMiddleware:
    """Answer an exception no handler knows with a JSON 500 (or 507 for a full disk).

    Starlette's outermost error middleware answers through the app's `Exception` handler
    and then re-raises, and uvicorn closes a connection whose app raised: every keep-alive
    client lost its connection after a 500. Here the exception is logged and answered, and
    the server sees a request that ended normally.

    Args:
        app: the ASGI app to wrap (installed innermost, so the request id, metrics and
            access log middlewares see the answer).
        on_disk_full: called when an exception says the disk is full (readiness uses it).
    """

    def __init__(self, app: ASGIApp, on_disk_full: Callable[[], None] | None = None) -> None:
        self.app = app
        self.on_disk_full = on_disk_full

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception as exc:
            if started:  # half an answer is out: only dropping the connection says so
                raise
            response = self.render(exc)
            await response(scope, receive, send)

    def render(self, exc: Exception) -> JSONResponse:
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if is_disk_full(exc):
            log.error("disk_full", error_type=type(exc).__name__, error=str(exc)[:500])
            if self.on_disk_full is not None:
                self.on_disk_full()
            full = disk_full_error()
            return _render(full.status_code, full.code, full.message,
                           {"request_id": request_id})
        # A bug, not a client mistake: log the traceback, answer in the one error shape.
        log.error("unhandled_error", error_type=type(exc).__name__, exc_info=exc)
        return _render(500, "internal_error", "internal error: the request failed on our side "
                       "and was logged", {"request_id": request_id})


def install_error_handlers(app: FastAPI, *, on_disk_full: Callable[[], None] | None = None
                           ) -> None:
    """The handlers of the error tree, and the middleware answering everything else.

    Call before adding other middlewares: this one must be the innermost.
    """
    app.add_middleware(UnexpectedErrorMiddleware, on_disk_full=on_disk_full)
    app.add_exception_handler(EngramError, _engram_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
