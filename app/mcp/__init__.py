"""Engram as an MCP server: tools over the same services as the REST API.

`/mcp` on the app (streamable HTTP, `app/mcp/http.py`) and `engram mcp` over stdio
(`app/mcp/stdio.py`, a bridge to a running server's `/mcp`).
"""
