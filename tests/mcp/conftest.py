"""One real `engram serve` for the MCP tests, with an admin key and a key for alice only."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.procs import ServerProcess

ADMIN = "admin-key-0123456789abcdef"
ALICE = "alice-key-0123456789abcdef"


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("mcp")
    env = {"ENGRAM_ADMIN_KEYS": json.dumps([ADMIN]),
           "ENGRAM_NAMESPACE_KEYS": json.dumps({ALICE: ["alice", "alice-desktop"]}),
           # Complete answers asserted on a shared, loaded machine: no default deadline
           # (tests/conftest.py `make_settings` says why).
           "ENGRAM_RECALL_DEADLINE_MS": "0"}
    with ServerProcess(root / "data", env=env, name="mcp") as proc:
        yield proc
