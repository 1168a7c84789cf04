"""One error tree, rendered as one JSON shape.

    EngramError                   500  base: carries its HTTP status and a stable code
    ├── BadRequest                400  the request is well-formed JSON but asks for the impossible
    ├── Unauthorized              401  no or unknown API key
    ├── Forbidden                 403  the key may not touch this namespace / admin route
    ├── NotFound                  404  memory, job, session or namespace does not exist
    ├── Conflict                  409  the request contradicts stored state
    ├── PayloadTooLarge           413  a batch or message over the configured limits
    └── Unavailable               503  not ready yet, or a lock could not be taken in time
        └── LockTimeout           503

Every error response is `{"error": {"code": ..., "message": ..., "details": ...}}`. Payload
validation errors (FastAPI's 422) are rendered in the same shape with the failing fields
listed, so a client needs one parser.
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

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


def _render(status: int, code: str, message: str, details: Any = None) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": jsonable_encoder(details)}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(status_code=status, content=body, headers=headers)


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
    return _render(exc.status_code, f"http_{exc.status_code}", str(exc.detail))


async def _unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    # A bug, not a client mistake: log the traceback, answer in the one error shape.
    log.error("unhandled_error", error_type=type(exc).__name__, exc_info=exc)
    return _render(500, "internal_error", "internal error: the request failed on our side "
                   "and was logged")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _unexpected_error)
    app.add_exception_handler(EngramError, _engram_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
