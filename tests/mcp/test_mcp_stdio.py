"""`engram mcp`: a desktop client's view (the SDK's stdio client), relayed to a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.mcp.conftest import ALICE
from tests.mcp.test_mcp_http import TOOLS, error_text, payload
from tests.procs import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow


def desktop(server: ServerProcess, tmp_path: Path, key: str | None = ALICE) -> Client:
    args = ["-m", "app.cli", "mcp", "--url", server.base_url]
    if key is not None:
        args += ["--key", key]
    # The cwd has no .env: the command reads nothing but its flags.
    return Client(StdioServerParameters(command=sys.executable, args=args, cwd=tmp_path,
                                        env={"PYTHONPATH": str(REPO_ROOT)}))


class TestStdioBridge:
    async def test_tools_remember_recall_and_scoping(self, server: ServerProcess,
                                                    tmp_path: Path) -> None:
        async with desktop(server, tmp_path) as client:
            listed = await client.list_tools()
            stored: Any = payload(await client.call_tool("remember", {
                "namespace": "alice-desktop", "session_id": "desk-1", "messages": [
                    {"role": "user", "content": "我的护照号码放在书房抽屉里的蓝色文件夹。"},
                    {"role": "user", "content": "My passport is in the blue folder."}]}))
            recalled: Any = payload(await client.call_tool("recall", {
                "namespace": "alice-desktop", "query": "护照放在哪里？"}))
            denied = await client.call_tool("list_memories", {"namespace": "bob"})
        assert {tool.name for tool in listed.tools} == TOOLS
        assert stored["memories_created"][0] in {m["id"] for m in recalled["memories"]}
        assert "蓝色文件夹" in recalled["block"]
        assert "forbidden: this API key has no access to namespace 'bob'" in error_text(denied)

    def test_a_wrong_key_stops_it_with_one_clear_line(self, server: ServerProcess,
                                                      tmp_path: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "mcp", "--url", server.base_url,
             "--key", "wrong-key-0123456789abcdef"], cwd=tmp_path, capture_output=True,
            text=True, env={"PYTHONPATH": str(REPO_ROOT), "PATH": os.environ["PATH"]},
            stdin=subprocess.DEVNULL, timeout=120, check=False)
        assert done.returncode == 1 and done.stdout == ""
        assert "401 unauthorized: unknown API key" in done.stderr
