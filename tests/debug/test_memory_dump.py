"""`POST /debug/memory_dump`: admin only; originals, compressed forms, scores, decisions."""

from __future__ import annotations

from typing import Any

from tests.compression.fixtures import CHATTER_EN, FACTS, TRICKY, messages
from tests.compression.helpers import SMALL_CHUNKS, everything, only, run, set_policy
from tests.helpers import store

ADMIN = "admin-key-0123456789"
ALICE = "alice-key-0123456789"
KEYS: dict[str, Any] = {"admin_keys": [ADMIN], "namespace_keys": {ALICE: ["alice"]}}


async def compressed_namespace(client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    await store(client, messages(FACTS[:2], prefix="f"), session_id="facts")
    await store(client, messages(CHATTER_EN[:6] + TRICKY, prefix="c"), session_id="chat")
    await set_policy(client, "alice")
    before = await everything(client, "alice")
    return before, only(await run(client, "alice"))


async def dump(client: Any, level: int, **extra: Any) -> dict[str, Any]:
    response = await client.post("/debug/memory_dump",
                                 json={"namespace": "alice", "compress_level": level, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


class TestAccess:
    async def test_needs_an_admin_key(self, open_client: Any) -> None:
        body = {"namespace": "alice", "compress_level": 2}
        async with open_client(token=ALICE, **KEYS) as client:
            response = await client.post("/debug/memory_dump", json=body)
            assert response.status_code == 403
            assert response.json()["error"]["code"] == "forbidden"
        async with open_client(**KEYS) as client:
            assert (await client.post("/debug/memory_dump", json=body)).status_code == 401
        async with open_client(token=ADMIN, **KEYS) as client:
            assert (await client.post("/debug/memory_dump", json=body)).status_code == 200

    async def test_rejects_an_unknown_level(self, client: Any) -> None:
        response = await client.post("/debug/memory_dump",
                                     json={"namespace": "alice", "compress_level": 3})
        assert response.status_code == 422


class TestContent:
    async def test_levels_scores_and_decisions(self, open_client: Any) -> None:
        async with open_client(**SMALL_CHUNKS) as client:
            before, result = await compressed_namespace(client)
            assert result["compressed"]
            both = await dump(client, 2)
            assert both["count"] == len(before) + len(result["summaries"])
            by_id = {i["id"]: i for i in both["items"]}
            for memory_id in result["compressed"]:
                item = by_id[memory_id]
                assert item["original"] == before[memory_id]["text"]  # from the archive
                assert item["compressed"] and item["compressed"] != item["original"]
                assert item["decision"] == "compressed" and item["decided_at"]
                assert item["summarized_by"] in result["summaries"]
                assert item["original_chars"] == len(before[memory_id]["text"])
            for summary_id in result["summaries"]:
                assert by_id[summary_id]["kind"] == "summary"
                assert by_id[summary_id]["decision"] == "summary"
            held = [i for i in both["items"] if i["decision"] == "hold"]
            assert held and all(i["protected"] and i["compressed"] is None for i in held)
            for item in both["items"]:
                assert item["scored"] and set(item["scores"]) == {
                    "novelty", "entropy", "task", "emotion", "feedback", "total"}

            originals = {i["id"]: i for i in (await dump(client, 0))["items"]}
            assert all(i["compressed"] is None and i["original"] for i in originals.values())
            compressed = {i["id"]: i for i in (await dump(client, 1))["items"]}
            assert all(i["original"] is None for i in compressed.values())
            assert all(compressed[m]["compressed"] == by_id[m]["compressed"]
                       for m in result["compressed"])

            metrics = both["metrics"]
            assert metrics["capacity_chars"] == 1000 and metrics["alarm_level"] == 0.7
            assert metrics["pressure_score"] == round(metrics["active_chars"] / 1000, 6)
            assert 0 <= metrics["candidate_ratio"] <= 1

            only_compressed = await dump(client, 2, state="compressed", limit=2)
            assert only_compressed["count"] == len(result["compressed"])
            assert len(only_compressed["items"]) == 2
