"""The incremental store through the HTTP API: session, message and chunk levels."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from tests.helpers import all_memories, messages, store, wait_idle


def covered_ids(memories: list[dict[str, Any]]) -> set[str]:
    return {msg_id for m in memories for msg_id in m["msg_ids"]}


async def ledger(client: Any, session_id: str = "s1", namespace: str = "alice") -> dict[str, Any]:
    response = await client.get(f"/v1/namespaces/{namespace}/sessions/{session_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


class TestSeedScenarios:
    async def test_first_save_of_ten_messages(self, client: Any) -> None:
        result = await store(client, messages(0, 10))
        assert (result["status"], result["total"], result["new"], result["skipped"]) == (
            "stored", 10, 10, 0)
        memories = await all_memories(client)
        assert covered_ids(memories) == {f"m{i}" for i in range(10)}
        assert sorted(result["memories_created"]) == sorted(m["id"] for m in memories)

    async def test_same_ten_again_stores_nothing(self, client: Any) -> None:
        await store(client, messages(0, 10))
        before = await all_memories(client)
        result = await store(client, messages(0, 10))
        assert (result["status"], result["new"], result["updated"], result["skipped"]) == (
            "unchanged", 0, 0, 10)
        assert result["memories_created"] == result["memories_updated"] == []
        assert await all_memories(client) == before

    async def test_five_appended_only_five_stored(self, client: Any) -> None:
        await store(client, messages(0, 10))
        result = await store(client, messages(0, 15))
        assert (result["new"], result["skipped"]) == (5, 10)
        assert covered_ids(await all_memories(client)) == {f"m{i}" for i in range(15)}
        assert (await ledger(client))["message_count"] == 15

    async def test_five_old_and_five_new_mixed(self, client: Any) -> None:
        await store(client, messages(0, 15))
        result = await store(client, messages(10, 20))
        assert (result["total"], result["new"], result["skipped"]) == (10, 5, 5)
        assert (await ledger(client))["message_count"] == 20

    async def test_restart_keeps_the_ledger(self, open_client: Any) -> None:
        async with open_client() as client:
            await store(client, messages(0, 12))
            before = await ledger(client)
        async with open_client() as client:
            after = await ledger(client)
            assert after == before
            again = await store(client, messages(0, 12))
            assert again["status"] == "unchanged"


class TestMessageLevel:
    async def test_middle_message_of_a_chunk_resent_is_not_stored_again(self, client: Any
                                                                          ) -> None:
        await store(client, messages(0, 10))
        before = await all_memories(client)
        middle = [m for m in messages(0, 10) if m["msg_id"] == "m3"]
        result = await store(client, middle)
        assert (result["new"], result["skipped"]) == (0, 1)
        assert await all_memories(client) == before

    async def test_same_length_edit_is_detected_and_rebuilds_its_memory(self, client: Any
                                                                          ) -> None:
        original = messages(0, 10)
        await store(client, original)
        edited = [dict(m) for m in original]
        edited[3]["content"] = original[3]["content"].replace("detail", "DETAIL")
        assert len(edited[3]["content"]) == len(original[3]["content"])
        result = await store(client, edited)
        assert (result["new"], result["updated"], result["skipped"]) == (0, 1, 9)
        assert result["memories_updated"] and not result["memories_created"]
        memories = await all_memories(client)
        holders = [m for m in memories if "m3" in m["msg_ids"]]
        assert holders and all("DETAIL" in m["text"] for m in holders)
        assert not any(original[3]["content"] in m["text"] for m in memories)

    async def test_messages_without_ids_resent_are_not_duplicated(self, client: Any) -> None:
        anonymous = [{"role": m["role"], "content": m["content"]} for m in messages(0, 8)]
        anonymous.append({"role": "user", "content": anonymous[0]["content"]})  # said twice
        first = await store(client, anonymous)
        assert first["new"] == 9
        again = await store(client, anonymous)
        assert (again["status"], again["new"], again["skipped"]) == ("unchanged", 0, 9)
        assert (await ledger(client))["message_count"] == 9

    async def test_every_message_of_a_chunk_counts_as_stored(self, client: Any) -> None:
        await store(client, messages(0, 30))
        for i in range(30):
            result = await store(client, [messages(i, i + 1)[0]])
            assert result["skipped"] == 1, f"m{i} stored again"


class TestSessionLevel:
    async def test_stored_session_with_incremental_false_is_skipped(self, client: Any) -> None:
        await store(client, messages(0, 10))
        result = await store(client, messages(0, 20), incremental=False)
        assert (result["status"], result["new"], result["skipped"]) == ("skipped", 0, 20)
        assert (await ledger(client))["message_count"] == 10

    async def test_new_session_with_incremental_false_is_stored(self, client: Any) -> None:
        result = await store(client, messages(0, 10), incremental=False)
        assert (result["status"], result["new"]) == ("stored", 10)


class TestChunks:
    async def test_windows_are_bounded_and_overlap(self, client: Any) -> None:
        await store(client, messages(0, 40))
        memories = sorted(await all_memories(client), key=lambda m: int(m["start_msg"][1:]))
        assert covered_ids(memories) == {f"m{i}" for i in range(40)}
        for memory in memories:
            assert memory["msg_count"] == len(memory["msg_ids"]) <= 6
            assert len(memory["text"]) <= 900
            assert memory["start_msg"] == memory["msg_ids"][0]
            assert memory["end_msg"] == memory["msg_ids"][-1]
            assert memory["speaker_pattern"].count(">") == memory["msg_count"] - 1
        for before, after in itertools.pairwise(memories):
            assert before["msg_ids"][-1] == after["msg_ids"][0], "neighbours share a message"

    async def test_appended_messages_continue_the_open_window(self, client: Any) -> None:
        await store(client, messages(0, 3))
        result = await store(client, messages(0, 5))
        memories = await all_memories(client)
        assert len(memories) == 1, "a short chunk grows instead of a new one starting"
        assert memories[0]["msg_ids"] == [f"m{i}" for i in range(5)]
        assert result["memories_updated"] == [memories[0]["id"]]

    async def test_editing_the_last_message_while_appending_keeps_every_chunk_a_run(
            self, client: Any) -> None:
        """An assistant regenerates its last reply and the chat goes on, in one request
        (Chinese and English turns): every memory is a run of neighbouring messages, the
        edited one is in the memories with its new text only, and nothing is lost."""
        chat = [{"msg_id": f"m{i}", "role": "user" if i % 2 else "assistant",
                 "content": (f"第{i}条：周末去郊外露营，需要准备帐篷和睡袋。" if i % 2
                             else f"Turn {i}: the camping trip needs a tent and sleeping bags.")}
                for i in range(14)]
        for end in (6, 9, 12):
            await store(client, chat[:end])
        edited = {**chat[11], "content": "Turn 11 (edited): the trip moved to the lake."}
        await store(client, [*chat[:11], edited, chat[12]])
        memories = await all_memories(client)
        assert covered_ids(memories) == {f"m{i}" for i in range(13)}
        for memory in memories:
            seqs = [int(i[1:]) for i in memory["msg_ids"]]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), memory["msg_ids"]
        texts = "\n".join(m["text"] for m in memories)
        assert "moved to the lake" in texts and "Turn 11: the camping" not in texts

    async def test_long_message_is_split_and_fully_kept(self, client: Any) -> None:
        sentence = "The quarterly report covers revenue, hiring and the new office. "
        long_text = sentence * 40  # ~2,600 characters
        await store(client, [{"msg_id": "long", "role": "user", "content": long_text}])
        memories = await all_memories(client)
        assert len(memories) >= 3
        assert all(m["msg_ids"] == ["long"] and len(m["text"]) <= 900 for m in memories)
        kept = "".join(m["text"].removeprefix("user: ") for m in memories)
        assert kept.replace(" ", "") == long_text.replace(" ", "")

    async def test_memory_metadata_is_recorded(self, client: Any) -> None:
        msgs = [
            {"msg_id": "a", "role": "user", "content": "我们决定使用 LanceDB 来构建记忆系统",
             "timestamp": "2026-03-01T09:00:00Z"},
            {"msg_id": "b", "role": "assistant", "content": "Good choice, LanceDB is embedded.",
             "timestamp": "2026-03-01T09:01:00"},
        ]
        await store(client, msgs, source="telegram", branch="exp", tags=["arch"])
        (memory,) = await all_memories(client)
        assert memory["source"] == "telegram" and memory["branch"] == "exp"
        assert memory["tags"] == ["arch"]
        assert memory["speaker_pattern"] == "user>assistant"
        assert memory["time_start"].startswith("2026-03-01T09:00:00")
        assert memory["time_end"].startswith("2026-03-01T09:01:00")
        assert memory["category"] == "decision"
        assert "LanceDB" in memory["entities"]["technologies"]
        assert memory["language"] == "zh"


@pytest.mark.parametrize("wait", [True, False])
class TestOneBranchPerSession:
    """A session re-sent with another `branch` is a 409 naming both branches, and writes
    nothing; the fork is stored as a session of its own, and recall keeps them apart."""

    async def test_another_branch_is_a_conflict_and_writes_nothing(self, client: Any,
                                                                   wait: bool) -> None:
        await store(client, [{"msg_id": "1", "role": "user", "content": "我周二去体检。"}],
                    branch="main")
        response = await client.post("/v1/store", json={
            "namespace": "alice", "session_id": "s1", "branch": "retry", "wait": wait,
            "messages": [{"msg_id": "2", "role": "user",
                          "content": "Actually, the checkup moved to Thursday."}]})
        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["details"] == {"session_branch": "main", "branch": "retry"}
        assert "'main'" in error["message"] and "'retry'" in error["message"]
        await client.app.state.engram.store.idle()
        (memory,) = await all_memories(client)
        assert memory["msg_ids"] == ["1"] and memory["branch"] == "main"

    async def test_the_fork_as_its_own_session_stays_on_its_branch(self, client: Any,
                                                                  wait: bool) -> None:
        await store(client, [{"msg_id": "1", "role": "user",
                              "content": "We will fly to Lisbon in March."}])
        await store(client, [{"msg_id": "1", "role": "user",
                              "content": "We will fly to Porto in March."}],
                    session_id="s1-retry", branch="retry", wait=wait,
                    expect=200 if wait else 202)
        await client.app.state.engram.store.idle()
        on = {m["session_id"]: m["branch"] for m in await all_memories(client)}
        assert on == {"s1": "main", "s1-retry": "retry"}
        found = (await client.post("/v1/recall", json={
            "namespace": "alice", "query": "where will we fly?", "branch": "retry"})).json()
        assert [m["session_id"] for m in found["memories"]] == ["s1-retry"]


class TestBackgroundStore:
    async def test_wait_false_returns_202_and_the_job_finishes(self, client: Any) -> None:
        result = await store(client, messages(0, 10), wait=False, expect=202)
        assert result["status"] == "queued" and result["job_id"]
        await wait_idle(client)
        job = (await client.get(f"/v1/jobs/{result['job_id']}")).json()
        assert job["state"] == "done"
        assert job["result"]["new"] == 10 and job["result"]["memories_created"]
        assert covered_ids(await all_memories(client)) == {f"m{i}" for i in range(10)}

    async def test_unknown_job_is_404(self, client: Any) -> None:
        response = await client.get("/v1/jobs/job_nope")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


class TestConcurrency:
    async def test_twenty_identical_requests_store_each_message_once(self, client: Any) -> None:
        results = await asyncio.gather(*(store(client, messages(0, 10)) for _ in range(20)))
        assert sorted(r["new"] for r in results) == [0] * 19 + [10]
        memories = await all_memories(client)
        ids = [i for m in memories for i in m["msg_ids"]]
        assert set(ids) == {f"m{i}" for i in range(10)}
        assert len({m["id"] for m in memories}) == len(memories)
        assert (await ledger(client))["message_count"] == 10

    async def test_racing_appends_lose_nothing(self, client: Any) -> None:
        batches = [messages(i * 5, i * 5 + 5) for i in range(8)]
        await asyncio.gather(*(store(client, b) for b in batches))
        assert covered_ids(await all_memories(client)) == {f"m{i}" for i in range(40)}
        assert (await ledger(client))["message_count"] == 40
