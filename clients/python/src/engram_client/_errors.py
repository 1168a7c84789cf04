"""Exceptions: every error answer of the API, and the failures of reaching it.

    EngramClientError                  base of everything this package raises
    ├── EngramConnectionError          the server could not be reached, or did not answer
    └── ApiError                       the API answered with an error: status, code, details
        ├── BadRequest                 400  the request asks for the impossible
        ├── Unauthorized               401  no or unknown API key
        ├── Forbidden                  403  the key may not touch this namespace / route
        ├── NotFound                   404
        ├── Conflict                   409  contradicts stored state (a pinned memory, ...)
        ├── PayloadTooLarge            413
        ├── InvalidRequest             422  invalid payload or query (the failing fields in
        │                                   `details`)
        ├── ServerError                500  a bug on the server (`details` has the request id)
        ├── Unavailable                503  starting up, or busy: try again
        └── InsufficientStorage        507  the server's disk is full

`ApiError.code` is the API's own error code (`{"error": {"code", "message", "details"}}`),
e.g. `forbidden`, `not_found`, `invalid_request`, `lock_timeout`.
"""

from __future__ import annotations

from typing import Any

import httpx


class EngramClientError(Exception):
    """Base of every exception raised by engram_client."""


class EngramConnectionError(EngramClientError):
    """The server could not be reached, or the connection broke before it answered."""


class ApiError(EngramClientError):
    """The API answered with an error.

    Attributes:
        status_code: the HTTP status.
        code: the API's error code (`not_found`, `forbidden`, `invalid_request`, ...).
        message: the API's explanation, for people.
        details: whatever the API added (the failing fields of a 422, a request id).
    """

    status_code: int = 0

    def __init__(self, status_code: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{status_code} {code}: {message}")
        self.status_code = status_code
        self.code = code
        self.message = message
        self.details = details


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class PayloadTooLarge(ApiError):
    pass


class InvalidRequest(ApiError):
    pass


class ServerError(ApiError):
    pass


class Unavailable(ApiError):
    pass


class InsufficientStorage(ApiError):
    pass


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge, 422: InvalidRequest, 500: ServerError, 503: Unavailable,
    507: InsufficientStorage,
}


def error_from_response(response: httpx.Response) -> ApiError:
    """The exception for an error response (read in full), from its one JSON error shape.

    A body that is not that shape (a proxy's error page) still gives an `ApiError` of the
    status's class, with code `http_<status>` and the start of the body as message.
    """
    status = response.status_code
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    try:
        body = response.json()
        error = body["error"]
        return cls(status, str(error["code"]), str(error["message"]), error.get("details"))
    except (ValueError, KeyError, TypeError):
        return cls(status, f"http_{status}", response.text[:500] or response.reason_phrase)
