"""API keys as Bearer tokens: admin keys, and keys limited to a list of namespaces.

With no keys configured the service trusts its caller, but it only listens on loopback
(`Settings` refuses another host) and every request from a non-loopback peer is refused.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Request

from app.config import LOOPBACK_HOSTS, Settings
from app.errors import Forbidden, Unauthorized


@dataclass(frozen=True)
class Principal:
    """Who is calling: an admin, or a key limited to `namespaces`."""

    admin: bool
    namespaces: frozenset[str] = frozenset()

    @property
    def readable(self) -> frozenset[str] | None:
        """The namespaces a lookup by id may search: None for an admin (every one)."""
        return None if self.admin else self.namespaces

    def can_access(self, namespace: str) -> bool:
        return self.admin or namespace in self.namespaces

    def require_namespace(self, namespace: str) -> None:
        """Raises: Forbidden: the key is not allowed to touch `namespace`."""
        if not self.can_access(namespace):
            raise Forbidden(f"this API key has no access to namespace {namespace!r}")

    def require_admin(self) -> None:
        """Raises: Forbidden: the route needs an admin key."""
        if not self.admin:
            raise Forbidden("this route needs an admin API key")


_LOCAL_PEERS = LOOPBACK_HOSTS | {"testclient"}  # starlette's TestClient peer name


def authenticate(request: Request, settings: Settings) -> Principal:
    """The caller's principal from its `Authorization: Bearer <key>` header.

    Raises:
        Unauthorized: a key is required and is missing or unknown.
        Forbidden: no keys are configured and the peer is not on this machine.
    """
    if not settings.auth_enabled:
        peer = request.client.host if request.client else "127.0.0.1"
        if peer not in _LOCAL_PEERS:
            raise Forbidden("no API keys are configured: only local callers are served")
        return Principal(admin=True)
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    token = token.strip()
    # Constant-time comparisons: a key must not be guessable from response timing.
    for key in settings.admin_keys:
        if hmac.compare_digest(key.encode(), token.encode()):
            return Principal(admin=True)
    for key, namespaces in settings.namespace_keys.items():
        if hmac.compare_digest(key.encode(), token.encode()):
            return Principal(admin=False, namespaces=frozenset(namespaces))
    raise Unauthorized("unknown API key")
