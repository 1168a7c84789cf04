"""The MCP endpoint on the REST app: `/mcp`, streamable HTTP, behind the same API keys.

The SDK's transport runs stateless (a fresh transport per request, no session table): any
worker process can answer any request, like the REST routes (`engram serve --workers 2`), and
the key is checked on every request, not once per session. Responses are plain JSON (no SSE
stream): the tools answer once, and proxies pass JSON untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.auth import authenticate
from app.config import Settings
from app.mcp.tools import PRINCIPAL_KEY, build_mcp_server
from app.state import AppState

MCP_PATH = "/mcp"


class McpEndpoint:
    """ASGI endpoint: the REST API's key check, then the SDK's streamable HTTP transport.

    A missing or unknown key is answered like on every REST route (401 in the one error
    shape, raised into the app's error handlers); the caller's `Principal` is left in the
    request scope, where each tool reads it to apply the namespace scoping.

    Args:
        server: the MCP server with Engram's tools.
        settings: the API keys; without keys only loopback callers are served, and then
            the SDK's DNS-rebinding protection also refuses a foreign Host or Origin (a web
            page must not reach a keyless local server through the browser).
    """

    def __init__(self, server: MCPServer, settings: Settings) -> None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=not settings.auth_enabled,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])
        server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True,
                                   json_response=True, transport_security=security)
        self._manager = server.session_manager
        self._settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = authenticate(Request(scope), self._settings)
        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        await self._manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The transport's task group, for the app's lifespan (entered once).

        The SDK's `run()` holds an anyio task group, which must be exited by the task that
        entered it; a lifespan may be started and ended by two tasks (pytest-asyncio's
        fixtures are), so one task of its own holds it from start to stop.
        """
        started, stop = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            async with self._manager.run():
                started.set()
                await stop.wait()

        holder = asyncio.create_task(hold(), name="mcp-session-manager")
        ready = asyncio.create_task(started.wait())
        await asyncio.wait({holder, ready}, return_when=asyncio.FIRST_COMPLETED)
        if holder.done():  # it failed to start: say why
            ready.cancel()
            holder.result()
        try:
            yield
        finally:
            stop.set()
            await holder


def mcp_route(state: Callable[[], AppState], settings: Settings) -> tuple[Route, McpEndpoint]:
    """The `/mcp` route for the app, and its endpoint (whose `running()` the lifespan holds)."""
    endpoint = McpEndpoint(build_mcp_server(state), settings)
    # POST only: stateless, the server never sends on its own (no GET stream) and has no
    # session to end (no DELETE); other methods are a 405 naming POST, as the spec allows.
    route = Route(MCP_PATH, endpoint=endpoint, methods=["POST"], include_in_schema=False)
    return route, endpoint
