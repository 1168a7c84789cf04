"""Python client for Engram, the long-term memory service for AI assistants.

    from engram_client import Client, AsyncClient, NotFound

    with Client("http://127.0.0.1:8420", api_key="...") as engram:
        engram.store("alice", "chat-1", [{"role": "user", "content": "We chose LanceDB."}])
        print(engram.recall("alice", "which database did we choose?")["block"])

Every route of the API is a method of both clients (the async one awaited); export and
import stream. Errors are exceptions carrying the API's error code (see `_errors.py`).
"""

from engram_client._client import (
    DEFAULT_URL,
    AsyncClient,
    AsyncExportStream,
    Client,
    ExportStream,
)
from engram_client._errors import (
    ApiError,
    BadRequest,
    Conflict,
    EngramClientError,
    EngramConnectionError,
    Forbidden,
    InsufficientStorage,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    ServerError,
    Unauthorized,
    Unavailable,
)
from engram_client._routes import Call

__all__ = [
    "DEFAULT_URL",
    "ApiError",
    "AsyncClient",
    "AsyncExportStream",
    "BadRequest",
    "Call",
    "Client",
    "Conflict",
    "EngramClientError",
    "EngramConnectionError",
    "ExportStream",
    "Forbidden",
    "InsufficientStorage",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "ServerError",
    "Unauthorized",
    "Unavailable",
]
