"""`engram recall / context / memories / export / import` against a real server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engram_client import Client

from tests.clients.conftest import ADMIN, ALICE
from tests.procs import REPO_ROOT, ServerProcess

pytestmark = pytest.mark.slow


def engram(server: ServerProcess, *args: str, key: str = ALICE, cwd: Path,
           expect: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the `engram` command line as a user would, with no ENGRAM_* settings around."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args, "--url", server.base_url, "--key", key],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == expect, done.stderr
    return done


@pytest.fixture(scope="module")
def stored(server: ServerProcess) -> dict[str, Any]:
    with Client(server.base_url, api_key=ALICE) as client:
        client.store("alice", "cli-en", [
            {"msg_id": "1", "role": "user", "content": "We decided to deploy on Fridays."},
            {"msg_id": "2", "role": "assistant", "content": "Fridays it is, noted."}],
            wait="built")
        client.store("alice", "cli-zh", [
            {"msg_id": "1", "role": "user", "content": "我女儿下个月要参加钢琴比赛。"}],
            wait="built")
        first = client.list_memories("alice", session_id="cli-en")["items"][0]
    return dict(first)


class TestRecallAndMemories:
    @pytest.mark.parametrize(("query", "expected"), [
        ("when do we deploy?", "Fridays"), ("我女儿要参加什么比赛？", "钢琴比赛")])
    def test_recall_prints_the_block(self, server: ServerProcess, stored: Any, tmp_path: Path,
                                     query: str, expected: str) -> None:
        done = engram(server, "recall", "alice", query, cwd=tmp_path)
        assert expected in done.stdout

    def test_list_search_and_show_with_evolution(self, server: ServerProcess, stored: Any,
                                                 tmp_path: Path) -> None:
        listed = engram(server, "memories", "list", "alice", "--session", "cli-en",
                        cwd=tmp_path)
        assert stored["id"] in listed.stdout and "of 1" in listed.stderr
        found = engram(server, "memories", "search", "alice", "钢琴", cwd=tmp_path)
        assert "钢琴比赛" in found.stdout.splitlines()[0]
        shown = engram(server, "memories", "show", stored["id"], cwd=tmp_path)
        assert "deploy on Fridays" in shown.stdout and "evolution:" in shown.stdout
        assert "🆕" in shown.stdout.split("evolution:")[1]

    def test_context_puts_the_pinned_memory_first(self, server: ServerProcess, stored: Any,
                                                  tmp_path: Path) -> None:
        with Client(server.base_url, api_key=ALICE) as client:
            client.store("alice", "cli-pin", [{"role": "user", "content":
                                               "请永远用中文回答我。"}], pinned=True,
                         wait="built")
        done = engram(server, "context", "alice", "--json", cwd=tmp_path)
        first = json.loads(done.stdout)["memories"][0]
        assert first["reason"] == "pinned" and first["text"].endswith("请永远用中文回答我。")
        shown = engram(server, "context", "alice", cwd=tmp_path)
        assert "请永远用中文回答我" in shown.stdout and "1 pinned" in shown.stderr

    def test_errors_name_the_api_code(self, server: ServerProcess, tmp_path: Path) -> None:
        done = engram(server, "recall", "bob", "anything", cwd=tmp_path, expect=1)
        assert "403 forbidden" in done.stderr and "'bob'" in done.stderr
        refused = engram(server, "export", "bob", "-o", "bob.ndjson", cwd=tmp_path, expect=1)
        assert "403 forbidden" in refused.stderr
        assert list(tmp_path.iterdir()) == []  # no file, not even a partial one


class TestExportImport:
    def test_export_then_import_into_another_namespace_keeps_the_counts(
            self, server: ServerProcess, stored: Any, tmp_path: Path) -> None:
        exported = engram(server, "export", "alice", "-o", "alice.ndjson", cwd=tmp_path)
        lines = (tmp_path / "alice.ndjson").read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        assert header["namespace"] == "alice" and len(lines) == 1 + sum(
            header["counts"].values())
        assert f"exported alice: {len(lines) - 1} records" in exported.stderr

        imported = engram(server, "import", "cli-copy", "alice.ndjson", "--json",
                          key=ADMIN, cwd=tmp_path)
        result = json.loads(imported.stdout)
        for kind in ("sessions", "messages", "memories", "events"):
            assert result[kind] == header["counts"][kind], kind
        with Client(server.base_url, api_key=ADMIN) as client:
            namespaces = {n["namespace"]: n for n in client.list_namespaces()["namespaces"]}
        source, copy = namespaces["alice"], namespaces["cli-copy"]
        assert (copy["memories"], copy["sessions"]) == (source["memories"], source["sessions"])
        assert (copy["memories"], copy["sessions"]) == (header["counts"]["memories"],
                                                        header["counts"]["sessions"])

    def test_import_shows_progress_while_the_server_embeds_again(
            self, server: ServerProcess, tmp_path: Path) -> None:
        said = [{"msg_id": str(i), "role": "user" if i % 2 == 0 else "assistant", "content":
                 f"第{i}条：周{i % 7 + 1}下午三点讨论项目{i}的预算和排期。" if i % 3 else
                 f"Note {i}: the review of project {i} moved to day {i % 28 + 1} at 3pm."}
                for i in range(900)]
        with Client(server.base_url, api_key=ADMIN) as client:
            client.store("progress", "many", said, wait="built")
        engram(server, "export", "progress", "-o", "progress.ndjson", key=ADMIN, cwd=tmp_path)
        # The export holds no vectors: the server embeds every memory again after the upload.
        imported = engram(server, "import", "progress-copy", "progress.ndjson", "--json",
                          key=ADMIN, cwd=tmp_path)
        result = json.loads(imported.stdout)
        assert result["reembedded"] == result["memories"] > 100
        lines = re.findall(r"importing into progress-copy: re-embedding memories (\d+)/(\d+)",
                           imported.stderr)
        assert lines, imported.stderr
        assert all(int(total) == result["reembedded"] and int(done) <= int(total)
                   for done, total in lines)
