"""A delete cut by a crash is finished after the restart (app/store/deletes.py).

A message delete is several commits: its memories rebuilt without it, then its raw-log row
deleted. A real `engram serve` process is killed (SIGKILL, by its own crash point:
`ENGRAM_CRASH_AT`, app/ops/faults.py) between those commits, and between the intent and the
rebuild; a session delete between its memories and its raw log. After a restart on the same
data directory, every delete is whole: the message (session) is gone from the raw log, its
text is in no memory and no recall finds it, every other message is in a memory, the ledger
counts what is left. English and Chinese sessions. And the live sweep finishes a dead
server's delete without a restart.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import lancedb
import pytest

from app.store.deletes import INTENT_PREFIX, Intent
from tests.procs import ServerProcess, chat_messages

pytestmark = pytest.mark.slow

Json = dict[str, Any]
HTTP_TIMEOUT = 120.0
NS = "crashdel"
# Small windows: a deleted message sits in two memories (the overlap), both rebuilt.
ENV = {"ENGRAM_CHUNK_MAX_TURNS": "3", "ENGRAM_SKIP_SMALL_TALK": "false",
       "ENGRAM_COMPRESSION_ENABLED": "false", "ENGRAM_PENDING_SWEEP_SECONDS": "0"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "data", env=ENV, name="delete-crash")
    try:
        yield proc
    finally:
        proc.stop()
        print(f"--- {proc.log_path} ---\n{proc.log_tail(40)}")  # shown when a test fails


def start(server: ServerProcess, crash_at: str | None) -> httpx.Client:
    server.extra_env = {**ENV, **({"ENGRAM_CRASH_AT": crash_at} if crash_at else {})}
    server.start()
    return httpx.Client(base_url=server.base_url, timeout=HTTP_TIMEOUT)


def store(client: httpx.Client, session_id: str, msgs: list[Json]) -> None:
    response = client.post("/v1/store", json={"namespace": NS, "session_id": session_id,
                                               "messages": msgs, "wait": "built"})
    assert response.status_code == 200, response.text


def delete_cut_by_crash(server: ServerProcess, client: httpx.Client, path: str) -> None:
    """DELETE `path`; the server dies at its crash point before answering."""
    with pytest.raises(httpx.TransportError):
        response = client.delete(path)
        pytest.fail(f"the server answered {response.status_code} instead of dying at its "
                    f"crash point: {response.text}")
    client.close()
    server.proc.wait(timeout=30)  # type: ignore[union-attr]
    server.kill()  # reaps it
    assert server.returncode == -signal.SIGKILL


def raw_log_ids(server: ServerProcess, session_id: str) -> set[str]:
    """msg_ids of the session's raw-log rows, read from the tables below the API."""
    table = lancedb.connect(str(server.data_dir / "lancedb")).open_table("messages")
    rows = (table.search().where(f"namespace = '{NS}' AND session_id = '{session_id}'")
            .select(["msg_id"]).limit(None).to_arrow().to_pylist())
    return {r["msg_id"] for r in rows}


def memories_of(client: httpx.Client, session_id: str) -> list[Json]:
    response = client.get("/v1/memories", params={"namespace": NS, "session_id": session_id,
                                                  "state": "any", "limit": 500})
    assert response.status_code == 200, response.text
    items: list[Json] = response.json()["items"]
    return items


def exported_ids(client: httpx.Client, session_id: str) -> set[str]:
    response = client.get(f"/v1/namespaces/{NS}/export")
    assert response.status_code == 200, response.text
    records = [json.loads(line) for line in response.text.splitlines()[1:]]
    return {r["data"]["msg_id"] for r in records
            if r["type"] == "message" and r["data"]["session_id"] == session_id}


def assert_message_deleted(client: httpx.Client, session_id: str, msgs: list[Json],
                           deleted: Json) -> None:
    """The delete is whole: raw log, memories, recall and ledger all without the message,
    and every other message still in a memory whose text is its messages."""
    left = {m["msg_id"]: m for m in msgs if m["msg_id"] != deleted["msg_id"]}
    assert exported_ids(client, session_id) == set(left), "raw log not as after the delete"
    memories = memories_of(client, session_id)
    for memory in memories:
        assert deleted["msg_id"] not in memory["msg_ids"], memory
        assert deleted["content"] not in memory["text"], memory
        assert memory["text"] == "\n".join(f"{left[i]['role']}: {left[i]['content']}"
                                           for i in memory["msg_ids"]), memory
    orphans = set(left) - {i for m in memories for i in m["msg_ids"]}
    assert not orphans, f"messages in no memory after the restart: {sorted(orphans)}"
    recalled = client.post("/v1/recall", json={"namespace": NS, "query": deleted["content"],
                                               "top_k": 20})
    assert recalled.status_code == 200, recalled.text
    for memory in recalled.json()["memories"]:
        assert deleted["msg_id"] not in memory["msg_ids"] or memory["session_id"] != session_id
        assert deleted["content"] not in memory["text"]
    ledger = client.get(f"/v1/namespaces/{NS}/sessions/{session_id}").json()
    assert ledger["message_count"] == len(left), ledger
    assert set(ledger["chunk_ids"]) == {m["id"] for m in memories}, ledger


def test_message_deletes_cut_by_a_crash_are_finished_at_restart(server: ServerProcess
                                                                ) -> None:
    english = chat_messages(random.Random(37), 8, id_prefix="en", zh_share=0.0)
    chinese = chat_messages(random.Random(38), 8, id_prefix="zh", zh_share=1.0)
    # Between the memories rebuilt without the message and its raw-log row deleted.
    client = start(server, "delete_message.after_rebuild")
    store(client, "en", english)
    store(client, "zh", chinese)
    victim = english[4]  # in two windows of 3 with an overlap of 1
    assert sum(victim["msg_id"] in m["msg_ids"] for m in memories_of(client, "en")) == 2
    delete_cut_by_crash(server, client, f"/v1/namespaces/{NS}/sessions/en/messages/en4")
    # The crash landed between the two commits: the raw row is still there.
    assert "en4" in raw_log_ids(server, "en")

    # Between the intent and the rebuild (the restart's own repair passes no crash point).
    client = start(server, "delete_message.after_intent")
    assert_message_deleted(client, "en", english, victim)
    delete_cut_by_crash(server, client, f"/v1/namespaces/{NS}/sessions/zh/messages/zh3")
    assert "zh3" in raw_log_ids(server, "zh")

    client = start(server, None)
    with client:
        assert_message_deleted(client, "zh", chinese, chinese[3])
        assert_message_deleted(client, "en", english, victim)  # still whole
        # Both deletes were finished once: each message, sent again, is new.
        again = client.post("/v1/store", json={"namespace": NS, "session_id": "zh",
                                               "messages": chinese, "wait": "built"}).json()
        assert (again["new"], again["skipped"]) == (1, 7), again


def test_a_session_delete_cut_by_a_crash_is_finished_at_restart(server: ServerProcess
                                                                ) -> None:
    doomed = chat_messages(random.Random(39), 7, id_prefix="d", zh_share=0.5)
    kept = chat_messages(random.Random(40), 5, id_prefix="k", zh_share=0.5)
    client = start(server, "delete_session.after_memories")
    store(client, "doomed", doomed)
    store(client, "kept", kept)
    kept_memories = sorted((m["id"], m["text"]) for m in memories_of(client, "kept"))
    delete_cut_by_crash(server, client, f"/v1/namespaces/{NS}/sessions/doomed")
    # Cut between the memories and the raw log.
    assert raw_log_ids(server, "doomed") == {m["msg_id"] for m in doomed}

    with start(server, None) as client:
        assert client.get(f"/v1/namespaces/{NS}/sessions/doomed").status_code == 404
        assert memories_of(client, "doomed") == []
        assert exported_ids(client, "doomed") == set()
        sessions = client.get(f"/v1/namespaces/{NS}/sessions").json()["items"]
        assert [s["session_id"] for s in sessions] == ["kept"]
        assert sorted((m["id"], m["text"]) for m in memories_of(client, "kept")) == \
            kept_memories
        assert exported_ids(client, "kept") == {m["msg_id"] for m in kept}
    assert raw_log_ids(server, "doomed") == set()


async def test_the_sweep_finishes_a_dead_servers_delete_and_keeps_what_was_rewritten_since(
        open_client: Any) -> None:
    """Intents as a server that died mid-delete leaves them (recorded a minute ago), in a
    running server: its sweep finishes the delete of a message still as the delete read it,
    keeps one a store rewrote since (newer than the delete: undone, not half done), and
    leaves a young intent to the live delete it belongs to."""
    ns = "sweepdel"
    english = chat_messages(random.Random(41), 6, id_prefix="en", zh_share=0.0)
    chinese = chat_messages(random.Random(42), 6, id_prefix="zh", zh_share=1.0)
    async with open_client(pending_sweep_seconds=0.2, pending_sweep_min_age_seconds=30.0,
                           chunk_max_turns=3) as client:
        for session_id, msgs in (("en", english), ("zh", chinese)):
            response = await client.post("/v1/store", json={
                "namespace": ns, "session_id": session_id, "messages": msgs, "wait": "built"})
            assert response.status_code == 200, response.text
        repo = client.app.state.engram.repo
        hashes = {m.msg_id: m.content_hash for s in ("en", "zh")
                  for m in await repo.session_messages(ns, s)}
        a_minute_ago = (datetime.now(UTC) - timedelta(seconds=60)).isoformat()
        young = Intent("message", ns, "zh", msg_ids={"zh1": hashes["zh1"]})
        for intent in (Intent("message", ns, "en", msg_ids={"en2": hashes["en2"]},
                              at=a_minute_ago),
                       Intent("message", ns, "zh", msg_ids={"zh3": "0" * 64}, at=a_minute_ago),
                       young):
            await repo.add_meta(intent.key, intent.to_json())
        deadline = time.monotonic() + 60
        while set(await repo.meta_with_prefix(INTENT_PREFIX)) != {young.key}:
            assert time.monotonic() < deadline, "the sweep never finished the intents"
            await asyncio.sleep(0.2)

        exported = (await client.get(f"/v1/namespaces/{ns}/export")).text.splitlines()[1:]
        records = [json.loads(line) for line in exported]
        kept = {(r["data"]["session_id"], r["data"]["msg_id"]) for r in records
                if r["type"] == "message"}
        assert kept == {("en", m["msg_id"]) for m in english if m["msg_id"] != "en2"} | {
            ("zh", m["msg_id"]) for m in chinese}
        memories = [r["data"] for r in records if r["type"] == "memory"]
        held = {(m["session_id"], i) for m in memories for i in m["msg_ids"]}
        assert held == kept, "a deleted message in a memory, or a kept one in none"
        assert not any(english[2]["content"] in m["text"] for m in memories)
