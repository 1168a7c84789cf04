"""engram_client against a real server: every route, both clients, errors as exceptions."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from engram_client import (
    AsyncClient,
    Call,
    Client,
    EngramConnectionError,
    Forbidden,
    InvalidRequest,
    NotFound,
    Unauthorized,
)

from tests.clients.conftest import ADMIN, ALICE
from tests.procs import ServerProcess, free_port

pytestmark = pytest.mark.slow

TURNS: list[Any] = [
    {"msg_id": "1", "role": "user", "content": "We decided to use LanceDB for the memory store."},
    {"msg_id": "2", "role": "assistant", "content": "Good choice: LanceDB is embedded."},
    {"msg_id": "3", "role": "user", "content": "My sister Mia moved to Lisbon last spring."},
]
ZH_TURNS: list[Any] = [
    {"msg_id": "1", "role": "user", "content": "下周二上午我要去医院体检，记得提醒我空腹。"},
]


def wait_for_job(engram: Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = engram.get_job(job_id)
        if job["state"] != "queued":
            return dict(job)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still queued")


class TestEveryRoute:
    def test_sync_round_trip(self, server: ServerProcess) -> None:
        with Client(server.base_url, api_key=ADMIN) as engram:
            assert engram.health() == {"status": "ok"}
            assert engram.ready()["status"] == "ready"
            stored = engram.store("rt", "s1", TURNS, tags=["demo"])  # wait=true: findable
            assert (stored["status"], stored["new"]) == ("stored", 3) and stored["job_id"]
            assert wait_for_job(engram, stored["job_id"])["state"] == "done"
            assert engram.store("rt", "s1", TURNS)["status"] == "unchanged"
            queued = engram.store("rt", "s2", ZH_TURNS, wait=False)
            assert queued["status"] == "queued" and queued["job_id"]
            assert wait_for_job(engram, queued["job_id"])["state"] == "done"

            en = engram.recall("rt", "which database did we pick?", language="en")
            assert "LanceDB" in en["block"] and en["count"] >= 1
            zh = engram.recall("rt", "我什么时候去体检？")
            assert "体检" in zh["block"] and zh["language"] == "zh"
            assert engram.classify("I prefer green tea over coffee.")["category"]

            page = engram.list_memories("rt", limit=10)
            assert page["count"] == 2 and len(page["items"]) == 2
            found = engram.list_memories("rt", query="LanceDB")
            assert "LanceDB" in found["items"][0]["text"] and found["items"][0]["score"]
            pin = engram.store("rt", "s3", [{"role": "user", "content":
                                             "Always call me Sam."}], pinned=True,
                               wait="built")
            pin_id = pin["memories_created"][0]
            assert engram.list_memories("rt", pinned=True)["items"][0]["id"] == pin_id
            context = engram.context("rt", max_tokens=500, language="en")
            assert context["memories"][0]["id"] == pin_id
            assert context["memories"][0]["reason"] == "pinned" and "Sam" in context["block"]
            assert engram.update_memory(pin_id, pinned=False)["pinned"] is False
            (listed,) = [n for n in engram.list_namespaces()["namespaces"]
                         if n["namespace"] == "rt"]
            assert (listed["memories"], listed["sessions"], listed["pinned"]) == (3, 3, 0)
            assert engram.delete_session("rt", "s3")["deleted"]
            memory_id = engram.list_memories("rt", session_id="s1")["items"][0]["id"]
            assert engram.get_memory(memory_id)["session_id"] == "s1"
            assert engram.update_memory(memory_id, tags=["kept"], importance=9)["tags"] == [
                "kept"]
            assert engram.access_memory(memory_id, note="read by the test")["access_count"] == 1
            assert engram.forget_memory(memory_id)["state"] == "forgotten"
            assert engram.list_memories("rt", state="forgotten")["count"] == 1
            assert engram.restore_memory(memory_id)["state"] == "active"
            evolution = engram.memory_evolution(memory_id)
            assert {"forgotten", "restored"} <= {e["event"] for e in evolution["events"]}

            sessions = engram.list_sessions("rt")
            assert sorted(s["session_id"] for s in sessions["items"]) == ["s1", "s2"]
            assert engram.get_session("rt", "s1")["message_count"] == 3
            assert engram.forget_stale("rt")["forgotten"] == []

            assert "namespace" in json.dumps(engram.run_compression(namespace="rt",
                                                                     dry_run=True))
            assert isinstance(engram.compression_status(), dict)
            assert engram.set_policy("rt", preset="default")["namespace"] == "rt"
            assert engram.get_policy("rt")["namespace"] == "rt"
            assert engram.memory_dump("rt")["namespace"] == "rt"
            assert "# HELP" in engram.metrics()

            rebuilt = engram.delete_message("rt", "s1", "3")
            assert rebuilt["memories_rebuilt"] == [memory_id]
            assert engram.delete_session("rt", "s2")["deleted"]
            assert engram.delete_memory(memory_id)["memories_deleted"] == 1
            assert engram.delete_namespace("rt")["deleted"]
            assert engram.list_memories("rt")["count"] == 0

    def test_a_findable_store_is_recalled_at_once(self, server: ServerProcess) -> None:
        with Client(server.base_url, api_key=ADMIN) as engram:
            queued = engram.store("findable", "s1", TURNS)  # the default, wait=true
            assert queued["status"] == "stored" and queued["job_id"], queued
            assert not queued["memories_created"], queued  # built after the answer
            found = engram.recall("findable", "Where does my sister Mia live now?")
            assert "Lisbon" in found["block"], found
            assert wait_for_job(engram, queued["job_id"])["state"] == "done"
            after = engram.recall("findable", "Where does my sister Mia live now?")
            assert "Lisbon" in after["block"]
            assert not any(m["provisional"] for m in after["memories"]), after

    def test_ids_with_spaces_hashes_and_question_marks_reach_their_route(self, server: ServerProcess
                                                            ) -> None:
        with Client(server.base_url, api_key=ADMIN) as engram:
            engram.store("odd", "chat 7 #a?", [{"msg_id": "D3:7 x#y?", "role": "user",
                                                "content": "The spare key is under the mat."}],
                         wait="built")  # the sessions ledger is the build's
            assert engram.get_session("odd", "chat 7 #a?")["message_count"] == 1
            assert engram.delete_message("odd", "chat 7 #a?", "D3:7 x#y?")["deleted"]

    def test_export_then_import_streams_with_the_same_counts(self, server: ServerProcess
                                                             ) -> None:
        with Client(server.base_url, api_key=ALICE) as engram:
            engram.store("alice", "s1", TURNS, wait="built")
            engram.store("alice", "s2", ZH_TURNS, wait="built")
            with engram.export_namespace("alice") as export:
                assert export.header["namespace"] == "alice"
                lines = list(export.lines())
            assert len(lines) == 1 + export.records
            result = engram.import_namespace("alice-copy", iter(lines))
            counts = export.header["counts"]
            assert (result["messages"], result["memories"], result["sessions"]) == (
                counts["messages"], counts["memories"], counts["sessions"])
            copy = engram.list_memories("alice-copy")
            assert copy["count"] == engram.list_memories("alice")["count"]


class TestAsyncClient:
    async def test_store_recall_export_import(self, server: ServerProcess) -> None:
        async with AsyncClient(server.base_url, api_key=ADMIN) as engram:
            await engram.store("async-ns", "s1", TURNS, wait="built")
            await engram.store("async-ns", "s2", ZH_TURNS, wait="built")
            zh = await engram.recall("async-ns", "体检安排在哪天？")
            assert "体检" in zh["block"]
            en = await engram.recall("async-ns", "what store did we choose?")
            assert "LanceDB" in en["block"]
            # why_not: the recalled memory says so; the other was not an answer.
            returned = en["memories"][0]["id"]
            others = [m["id"] for m in (await engram.list_memories("async-ns"))["items"]
                      if m["id"] != returned]
            why = await engram.why_not("async-ns", "what store did we choose?",
                                       [returned, *others])
            verdicts = {i["memory_id"]: i["verdict"] for i in why["items"]}
            assert verdicts[returned] == "recalled" and why["recalled"][0] == returned
            assert others and all(verdicts[o] != "recalled" for o in others)
            async with engram.export_namespace("async-ns") as export:
                lines = [line async for line in export.lines()]
            assert json.loads(lines[0])["namespace"] == "async-ns"

            async def chunks() -> Any:
                for line in lines:
                    yield line

            result = await engram.import_namespace("async-copy", chunks())
            assert result["memories"] == export.header["counts"]["memories"]
            with pytest.raises(NotFound) as missing:
                await engram.get_memory("no-such-memory")
            assert missing.value.code == "not_found"


class TestErrors:
    def test_api_errors_carry_status_and_code(self, server: ServerProcess) -> None:
        with Client(server.base_url, api_key=ALICE) as engram:
            with pytest.raises(NotFound) as missing:
                engram.get_memory("no-such-memory")
            assert (missing.value.status_code, missing.value.code) == (404, "not_found")
            with pytest.raises(Forbidden) as denied:
                engram.recall("bob", "anything")
            assert denied.value.code == "forbidden" and "'bob'" in denied.value.message
            with pytest.raises(InvalidRequest) as invalid:
                engram.recall("alice", "q", top_k=0)
            assert invalid.value.code == "invalid_request"
            assert any(p["field"] == "body.top_k" for p in invalid.value.details)
            with pytest.raises(InvalidRequest) as unknown_param:
                engram.send(Call("GET", "/v1/memories", lambda r: r.json(),
                                 params={"namespace": "alice", "sort": "new"}))
            assert unknown_param.value.details[0]["field"] == "query.sort"
            assert {n["namespace"] for n in engram.list_namespaces()["namespaces"]} <= {
                "alice", "alice-copy"}
        with Client(server.base_url, api_key="wrong-key-0123456789abcdef") as stranger, \
                pytest.raises(Unauthorized) as unknown:
            stranger.list_memories("alice")
        assert unknown.value.code == "unauthorized"

    def test_no_server_is_a_connection_error(self) -> None:
        with Client(f"http://127.0.0.1:{free_port()}", timeout=5) as engram, \
                pytest.raises(EngramConnectionError):
            engram.health()
