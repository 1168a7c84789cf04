"""`engram mcp`: Engram's MCP tools over stdio, for desktop clients, bridged to a server.

The process loads no model and opens no data directory: it relays each JSON-RPC message
from stdin to a running server's `/mcp` endpoint (streamable HTTP, with the API key) and
each answer back to stdout. So the tools, their rules, the key's namespace scoping and the
single writer per data directory are the server's, exactly as for an HTTP MCP client; a
desktop client only needs the command line, the server's URL and a key.
"""

from __future__ import annotations

import sys

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

# A tool call may wait for a store built before its answer: as long as the REST client waits.
TIMEOUT_SECONDS = 120.0


def _report(problem: Exception) -> None:
    # stdout is the protocol's: problems go to stderr, which desktop clients log.
    print(f"engram mcp: {problem}", file=sys.stderr, flush=True)


async def bridge_stdio(url: str, api_key: str | None) -> None:
    """Relay MCP messages between stdin/stdout and the server at `url` until stdin closes.

    Args:
        url: the server's MCP endpoint, e.g. `http://127.0.0.1:8420/mcp`.
        api_key: sent as `Authorization: Bearer <key>` on every request.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx2.Timeout(TIMEOUT_SECONDS)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (remote_read, remote_write),
        stdio_server() as (local_read, local_write),
        anyio.create_task_group() as relays,
    ):
        async def to_server() -> None:
            async for message in local_read:
                if isinstance(message, Exception):  # a line that is not JSON-RPC
                    _report(message)
                    continue
                await remote_write.send(message)
            relays.cancel_scope.cancel()  # stdin closed: the desktop client is gone

        async def to_client() -> None:
            async for message in remote_read:
                if isinstance(message, Exception):
                    _report(message)
                    continue
                await local_write.send(SessionMessage(message.message))

        relays.start_soon(to_server)
        relays.start_soon(to_client)
