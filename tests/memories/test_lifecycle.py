"""Access, promotion, forgetting, restoring, editing and the evolution history."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.helpers import all_memories, store

DECISION = [{"msg_id": "d1", "role": "user",
             "content": "We decided to move the team wiki to Notion next month."}]
CHITCHAT = [{"msg_id": "c1", "role": "user",
             "content": "The weather was grey today, nothing much."}]


async def one_memory(client: Any, msgs: list[dict[str, Any]] = DECISION, **kw: Any) -> str:
    result = await store(client, msgs, **kw)
    memory_id: str = result["memories_created"][0]
    return memory_id


async def evolution(client: Any, memory_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/memories/{memory_id}/evolution")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


class TestAccessAndPromotion:
    async def test_access_is_counted_and_logged(self, client: Any) -> None:
        memory_id = await one_memory(client)
        response = await client.post(f"/v1/memories/{memory_id}/access",
                                     json={"note": "用户问起 wiki 迁移"})
        assert response.status_code == 200
        body = response.json()
        assert body["access_count"] == 1 and body["last_accessed"]
        history = await evolution(client, memory_id)
        assert [e["event"] for e in history["events"]] == ["created", "accessed"]
        assert history["events"][1]["note"] == "用户问起 wiki 迁移"
        assert history["summary"].splitlines()[0].startswith("🆕 created: category decision")
        assert history["summary"].splitlines()[1].startswith("✏️ accessed")

    async def test_promotion_at_the_thresholds(self, open_client: Any) -> None:
        async with open_client(promote_daily_accesses=2, promote_longterm_accesses=4) as client:
            memory_id = await one_memory(client)
            start = (await client.get(f"/v1/memories/{memory_id}")).json()["importance"]
            tiers = []
            for _ in range(4):
                body = (await client.post(f"/v1/memories/{memory_id}/access", json={})).json()
                tiers.append(body["tier"])
            assert tiers == ["session", "daily", "daily", "longterm"]
            assert body["importance"] == min(10, start + 2), "each promotion adds importance"
            history = await evolution(client, memory_id)
            promoted = [e for e in history["events"] if e["event"] == "promoted"]
            assert [(e["metadata"]["from"], e["metadata"]["to"]) for e in promoted] == [
                ("session", "daily"), ("daily", "longterm")]
            assert history["summary"].count("⬆️") == 2
            assert [m["id"] for m in await all_memories(client, tier="longterm")] == [memory_id]

    async def test_concurrent_accesses_lose_no_count(self, client: Any) -> None:
        memory_id = await one_memory(client)
        responses = await asyncio.gather(*(
            client.post(f"/v1/memories/{memory_id}/access", json={"note": str(i)})
            for i in range(20)))
        assert all(r.status_code == 200 for r in responses)
        final = (await client.get(f"/v1/memories/{memory_id}")).json()
        assert final["access_count"] == 20
        history = await evolution(client, memory_id)
        assert sum(e["event"] == "accessed" for e in history["events"]) == 20


class TestForgetting:
    async def test_forget_and_restore(self, client: Any) -> None:
        memory_id = await one_memory(client)
        forgotten = await client.post(f"/v1/memories/{memory_id}/forget")
        assert forgotten.json()["state"] == "forgotten"
        assert await all_memories(client) == []
        assert [m["id"] for m in await all_memories(client, state="forgotten")] == [memory_id]
        restored = await client.post(f"/v1/memories/{memory_id}/restore")
        assert restored.json()["state"] == "active"
        assert [m["id"] for m in await all_memories(client)] == [memory_id]
        summary = (await evolution(client, memory_id))["summary"]
        assert "🗑️ forgotten" in summary and "♻️ restored" in summary

    async def test_stale_low_value_memories_are_forgotten_first(self, open_client: Any) -> None:
        async with open_client(forget_after_days=1e-9, forget_max_importance=4) as client:
            low = await one_memory(client, CHITCHAT, session_id="a")
            high = await one_memory(client, DECISION, session_id="b")
            importance = {m["id"]: m["importance"] for m in await all_memories(client)}
            assert importance[low] <= 4 < importance[high], importance
            protected = await one_memory(client, [{"msg_id": "p", "role": "user",
                                                   "content": "Grey sky again, meh."}],
                                         session_id="c")
            patch = await client.patch(f"/v1/memories/{protected}", json={"protected": True})
            assert patch.status_code == 200
            result = (await client.post("/v1/namespaces/alice/forget")).json()
            assert result["forgotten"] == [low]
            states = {m["id"]: m["state"] for m in await all_memories(client, state="any")}
            assert states == {low: "forgotten", high: "active", protected: "active"}

    async def test_protected_memory_cannot_be_forgotten(self, client: Any) -> None:
        memory_id = await one_memory(client)
        await client.patch(f"/v1/memories/{memory_id}", json={"protected": True})
        response = await client.post(f"/v1/memories/{memory_id}/forget")
        assert response.status_code == 409


class TestEdit:
    async def test_text_edit_is_reembedded_and_logged(self, client: Any) -> None:
        memory_id = await one_memory(client)
        before = (await client.get(f"/v1/memories/{memory_id}")).json()
        response = await client.patch(f"/v1/memories/{memory_id}", json={
            "text": "我们决定下个月把团队 wiki 迁移到 Notion", "tags": ["wiki"]})
        assert response.status_code == 200, response.text
        after = response.json()
        assert after["text"].startswith("我们决定") and after["tags"] == ["wiki"]
        assert after["language"] == "zh" and after["entities"] != before["entities"]
        (event,) = [e for e in (await evolution(client, memory_id))["events"]
                    if e["event"] == "evolved"]
        assert event["metadata"]["old"]["text"] == before["text"]
        assert event["metadata"]["new"]["text"] == after["text"]

    async def test_null_fields_are_left_as_they_are(self, client: Any) -> None:
        memory_id = await one_memory(client)
        before = (await client.get(f"/v1/memories/{memory_id}")).json()
        response = await client.patch(f"/v1/memories/{memory_id}", json={
            "text": None, "category": None, "importance": None, "tags": ["wiki"]})
        assert response.status_code == 200, response.text
        after = response.json()
        assert after["tags"] == ["wiki"]
        assert (after["text"], after["category"], after["importance"]) == (
            before["text"], before["category"], before["importance"])

    async def test_importance_override_sticks_across_rebuilds(self, client: Any) -> None:
        memory_id = await one_memory(client)
        await client.patch(f"/v1/memories/{memory_id}", json={"importance": 9,
                                                              "category": "task"})
        edited = [{**DECISION[0], "content": DECISION[0]["content"] + " Really."}]
        await store(client, edited)
        memory = (await client.get(f"/v1/memories/{memory_id}")).json()
        assert memory["importance"] == 9

    async def test_invalid_edits_are_rejected(self, client: Any) -> None:
        memory_id = await one_memory(client)
        for body in ({}, {"importance": None, "category": None}, {"importance": 11},
                     {"category": "gossip"}, {"text": "  "}, {"colour": "red"}):
            response = await client.patch(f"/v1/memories/{memory_id}", json=body)
            assert response.status_code == 422, body
        assert (await client.patch("/v1/memories/mem_nope", json={"importance": 3})
                ).status_code == 404


async def recall_ids(client: Any, query: str, **extra: Any) -> list[str]:
    response = await client.post("/v1/recall", json={"namespace": "alice", "query": query,
                                                     **extra})
    assert response.status_code == 200, response.text
    return [m["id"] for m in response.json()["memories"]]


class TestWithRecall:
    async def test_recall_hits_promote_a_memory(self, open_client: Any) -> None:
        async with open_client(promote_daily_hits=3, hits_per_memory_per_day=3,
                               hit_flush_seconds=3600) as client:
            memory_id = await one_memory(client)
            # Three different questions: the same one asked again is one use (hits.py).
            for query in ("team wiki Notion decision", "which wiki did the team pick?",
                          "Notion for the team wiki"):
                assert memory_id in await recall_ids(client, query)
            await client.app.state.engram.hits.flush()
            memory = (await client.get(f"/v1/memories/{memory_id}")).json()
            assert (memory["hit_count"], memory["tier"]) == (3, "daily")
            promoted = [e for e in (await evolution(client, memory_id))["events"]
                        if e["event"] == "promoted"]
            assert "3 recall hits" in promoted[0]["note"]

    async def test_one_flush_promotes_many_memories_in_two_commits(
            self, open_client: Any) -> None:
        """A hit flush holds the namespace's write lock: two commits per promoted memory
        held it 10 s on a local disk and 88 s on a bucket for ~100 promotions, and every
        store of the namespace waited (bench/object_store_latency.py)."""
        notes = ["下周二上午九点去医院做体检，记得前一天晚上空腹。",
                 "The dentist appointment moved to Friday at 3 pm, bring the insurance card.",
                 "周末和小王去香山徒步，早上七点在地铁站集合。",
                 "Renew the car insurance before the end of the month, the quote was 420 euros.",
                 "孩子的数学作业每天晚上八点之前要检查完。",
                 "The quarterly budget review with Lukas is on the 14th in the Lisbon office."]
        async with open_client(promote_daily_hits=3, hits_per_memory_per_day=3,
                               hit_flush_seconds=3600) as client:
            ids = [await one_memory(client, [{"msg_id": "n", "role": "user", "content": n}],
                                    session_id=f"s{i}") for i, n in enumerate(notes)]
            for query in ("体检 dentist 徒步 insurance 作业 budget",
                          "budget 作业 insurance 徒步 dentist 体检",
                          "dentist 体检 insurance 徒步 budget 作业"):  # three questions
                found = await recall_ids(client, query, min_score=0, top_k=10)
                assert set(ids) <= set(found)
            writers = client.app.state.engram.repo.writers
            before = {t: writers[t].commits for t in ("memories", "events")}
            await client.app.state.engram.hits.flush()
            # The hit counts, the promotions; their events.
            assert writers["memories"].commits - before["memories"] == 2
            assert writers["events"].commits - before["events"] == 1
            for memory_id in ids:
                memory = (await client.get(f"/v1/memories/{memory_id}")).json()
                assert (memory["hit_count"], memory["tier"]) == (3, "daily")
                events = (await evolution(client, memory_id))["events"]
                assert [e["event"] for e in events].count("promoted") == 1

    async def test_forgotten_memory_leaves_recall_and_comes_back_restored(
        self, client: Any
    ) -> None:
        memory_id = await one_memory(client, [{"msg_id": "t", "role": "user",
                                               "content": "下周二上午我要去医院体检。"}])
        assert memory_id in await recall_ids(client, "我的体检安排是哪天")
        await client.post(f"/v1/memories/{memory_id}/forget")
        assert memory_id not in await recall_ids(client, "我的体检安排是哪天")
        await client.post(f"/v1/memories/{memory_id}/restore")
        assert memory_id in await recall_ids(client, "我的体检安排是哪天")

    async def test_recall_keeps_to_one_branch_or_spans_all(self, client: Any) -> None:
        main = await one_memory(client, DECISION, session_id="a", branch="main")
        experiment = await one_memory(client, [{**DECISION[0], "msg_id": "x"}],
                                      session_id="b", branch="experiment")
        query = "team wiki Notion"
        assert set(await recall_ids(client, query)) == {main, experiment}
        assert await recall_ids(client, query, branch="experiment") == [experiment]
        spanning = await recall_ids(client, query, branch="experiment", other_branches=True)
        assert spanning[0] == experiment and main in spanning
