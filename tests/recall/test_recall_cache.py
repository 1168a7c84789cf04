"""Recall over the namespace cache (storage/namespace_cache.py) through the HTTP API: what is
stored, deleted or forgotten between two recalls shows in the second one, in English and in
Chinese, and a recall gives the same answer whether or not the namespace's copy was held."""

from __future__ import annotations

from typing import Any

import pytest

from tests.recall.test_recall_api import CHINESE, ENGLISH, recall, store_notes


def ids_of(body: dict[str, Any]) -> set[str]:
    return {m["id"] for m in body["memories"]}


@pytest.mark.parametrize(("notes", "first_query", "first_word", "note", "query", "word"), [
    (ENGLISH, "dentist appointment", "dentist",
     "The boiler service is booked for the 14th of May.", "when is the boiler service",
     "boiler"),
    (CHINESE, "体检要注意什么", "体检", "锅炉检修约在五月十四号。", "锅炉什么时候检修", "锅炉"),
])
async def test_writes_between_recalls_are_seen(client: Any, notes: list[str], first_query: str,
                                               first_word: str, note: str, query: str,
                                               word: str) -> None:
    await store_notes(client, notes)
    first = await recall(client, first_query, min_score=0, top_k=20)
    cache = client.app.state.engram.repo.namespace_cache
    assert cache.size("alice") == len(notes)

    await store_notes(client, [note], prefix="n")
    body = await recall(client, query, top_k=3)
    assert word in body["memories"][0]["text"]
    new = body["memories"][0]["id"]

    old = first["memories"][0]["id"]
    assert first_word in first["memories"][0]["text"]
    response = await client.delete(f"/v1/memories/{old}")
    assert response.status_code == 200, response.text
    body = await recall(client, first_query, min_score=0, top_k=20)
    assert old not in ids_of(body)

    response = await client.post(f"/v1/memories/{new}/forget")
    assert response.status_code == 200, response.text
    body = await recall(client, query, min_score=0, top_k=20)
    assert new not in ids_of(body)
    assert ids_of(body) == ids_of(first) - {old}


QUERIES = ["dentist", "which database did we pick", "half marathon training", "猫吃什么",
           "as I said before, the sales report", "体检前要注意什么", "“咖啡”加糖吗？", "？？"]


async def test_recall_is_the_same_whether_the_copy_was_held(open_client: Any) -> None:
    """The keyword search awaits the namespace's copy as the vector search does: a recall
    right after the copy was dropped (a compaction, another process's write, eviction) gives
    the same memories with the same scores as one on a copy held all along."""
    # No hit flush in between: promotions earned by hits would change the scores.
    async with open_client(hit_flush_seconds=3600) as client:
        await store_notes(client, ENGLISH + CHINESE)
        cache = client.app.state.engram.repo.namespace_cache
        held = [await recall(client, q, min_score=0, top_k=20) for q in QUERIES]
        assert cache.size("alice") == len(ENGLISH + CHINESE)
        dropped = []
        for q in QUERIES:
            cache.clear()
            dropped.append(await recall(client, q, min_score=0, top_k=20))
    for a, b in zip(held, dropped, strict=True):
        assert [(m["id"], m["score"], m["text"]) for m in a["memories"]] == \
            [(m["id"], m["score"], m["text"]) for m in b["memories"]]
