"""Name rules shared by every route: namespaces, session ids and message ids.

Namespaces become file names (lock files) and appear in SQL filters, so they are strict;
session and message ids come from clients (chat ids, LoCoMo `D3:7`, `chats/2024/0412`) and
are looser.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote_to_bytes

from fastapi import Path
from pydantic import BeforeValidator, StringConstraints
from starlette.types import ASGIApp, Receive, Scope, Send

NAMESPACE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
ID_PATTERN = r"^[^\x00-\x1f\x7f]{1,256}$"  # any printable text, no control characters

Namespace = Annotated[str, StringConstraints(pattern=NAMESPACE_PATTERN)]
SessionId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
MessageId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]

# A '/' inside an id travels as %2F, and the server decodes it before routing, so the
# id would split into two path segments and match no route. EncodedSlashMiddleware
# decodes %2F to this stand-in instead; ids cannot contain control characters, so the
# stand-in cannot be part of a real id, and IdPath turns it back into '/'.
_SLASH_STAND_IN = "\x1f"


def _restore_slashes(value: object) -> object:
    return value.replace(_SLASH_STAND_IN, "/") if isinstance(value, str) else value


IdPath = Annotated[str, BeforeValidator(_restore_slashes), Path(pattern=ID_PATTERN)]


class EncodedSlashMiddleware:
    """Route `/sessions/chats%2F2024/...` as one segment `chats/2024` (see IdPath)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_path: bytes | None = scope.get("raw_path") if scope["type"] == "http" else None
        if raw_path and (b"%2f" in raw_path.lower() or b"%1f" in raw_path.lower()):
            target = raw_path.split(b"?", 1)[0]
            # A %1F the client sent becomes %7F (DEL), another control character that no
            # id may hold, so it still fails the id pattern instead of passing for a '/'.
            for sent, stand_in in ((b"%1F", b"%7F"), (b"%1f", b"%7F"),
                                   (b"%2F", b"%1F"), (b"%2f", b"%1F")):
                target = target.replace(sent, stand_in)
            path = unquote_to_bytes(target).decode("utf-8", errors="replace")
            scope = {**scope, "path": path}  # raw_path and path are both the whole target
        await self.app(scope, receive, send)
