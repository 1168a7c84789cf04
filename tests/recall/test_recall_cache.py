"""Recall over the namespace cache (storage/namespace_cache.py) through the HTTP API: what is
stored, deleted or forgotten between two recalls shows in the second one."""

from __future__ import annotations

from typing import Any

from tests.recall.test_recall_api import ENGLISH, recall, store_notes


def ids_of(body: dict[str, Any]) -> set[str]:
    return {m["id"] for m in body["memories"]}


async def test_writes_between_recalls_are_seen(client: Any) -> None:
    await store_notes(client, ENGLISH)
    first = await recall(client, "dentist appointment", min_score=0, top_k=20)
    cache = client.app.state.engram.repo.namespace_cache
    assert cache.size("alice") == len(ENGLISH)

    await store_notes(client, ["The boiler service is booked for the 14th of May."],
                      prefix="n")
    body = await recall(client, "when is the boiler service", top_k=3)
    assert "boiler" in body["memories"][0]["text"]
    boiler = body["memories"][0]["id"]

    dentist = first["memories"][0]["id"]
    assert "dentist" in first["memories"][0]["text"]
    response = await client.delete(f"/v1/memories/{dentist}")
    assert response.status_code == 200, response.text
    body = await recall(client, "dentist appointment", min_score=0, top_k=20)
    assert dentist not in ids_of(body)

    response = await client.post(f"/v1/memories/{boiler}/forget")
    assert response.status_code == 200, response.text
    body = await recall(client, "when is the boiler service", min_score=0, top_k=20)
    assert boiler not in ids_of(body)
    assert ids_of(body) == ids_of(first) - {dentist}


async def test_recall_is_the_same_with_and_without_the_cache(open_client: Any) -> None:
    # No hit flush in between: promotions earned by hits would change the scores.
    async with open_client(hit_flush_seconds=3600) as client:
        await store_notes(client, ENGLISH)
        cache = client.app.state.engram.repo.namespace_cache
        queries = ["dentist", "which database did we pick", "half marathon training",
                   "猫吃什么", "as I said before, the sales report"]
        with_cache = [await recall(client, q, min_score=0, top_k=20) for q in queries]
        assert cache.size("alice") == len(ENGLISH)
        cache.clear()
        cache.max_namespace_rows = 0  # LanceDB answers every search from here on
        without = [await recall(client, q, min_score=0, top_k=20) for q in queries]
        assert cache.size("alice") is None
    for a, b in zip(with_cache, without, strict=True):
        assert [(m["id"], m["score"], m["text"]) for m in a["memories"]] == \
            [(m["id"], m["score"], m["text"]) for m in b["memories"]]
