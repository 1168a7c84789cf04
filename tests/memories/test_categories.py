"""A memory carries every category its lines have, the main one first, and is listed under
each; an unknown category is a 422 that names the valid ones."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import all_memories, store

# The README's example: a checkup reminder and a decision, stored as one memory.
README = [
    {"msg_id": "1", "role": "user", "content": "下周二上午我要去体检"},
    {"msg_id": "2", "role": "user", "content": "We decided to use LanceDB for the memory store."},
]


async def test_readme_memory_is_found_by_each_of_its_categories(client: Any) -> None:
    await store(client, README)
    [memory] = await all_memories(client)
    assert memory["category"] == "task"
    assert memory["categories"][0] == "task" and "decision" in memory["categories"]
    for category in ("task", "decision"):
        assert [m["id"] for m in await all_memories(client, category=category)] == [memory["id"]]
    assert await all_memories(client, category="preference") == []
    # The same filter under a text search.
    found = await all_memories(client, category="decision", q="LanceDB")
    assert [m["id"] for m in found] == [memory["id"]]


@pytest.mark.parametrize("query", ["Which database did we decide on?", "我们决定用哪个数据库？"])
async def test_recall_filtered_by_a_line_category_finds_the_memory(client: Any, query: str
                                                                   ) -> None:
    # The memory's main category is task (the checkup); a recall for decisions only must
    # still find the LanceDB decision it holds, in either language.
    await store(client, README)
    for categories, found in ((["decision"], True), (["task"], True), (["preference"], False)):
        body = (await client.post("/v1/recall", json={
            "namespace": "alice", "query": query, "categories": categories})).json()
        assert any("LanceDB" in m["text"] for m in body["memories"]) is found, categories


@pytest.mark.parametrize(("lines", "expected"), [
    (["我比较喜欢喝绿茶，不太喜欢咖啡。", "提醒我明天下午三点给王芳打电话。"],
     {"preference", "task"}),
    (["Remind me to renew my passport before May.", "I prefer aisle seats on long flights."],
     {"task", "preference"}),
    (["我们决定用 PostgreSQL 做主库。", "你觉得索引应该怎么建？"], {"decision", "question"}),
])
async def test_each_line_adds_its_category(client: Any, lines: list[str], expected: set[str]
                                           ) -> None:
    await store(client, [{"msg_id": str(i), "role": "user", "content": line}
                         for i, line in enumerate(lines)])
    [memory] = await all_memories(client)
    assert memory["categories"][0] == memory["category"]
    assert expected <= set(memory["categories"])
    for category in expected:
        assert len(await all_memories(client, category=category)) == 1


async def test_one_line_memory_has_its_one_category(client: Any) -> None:
    await store(client, [{"msg_id": "1", "role": "user", "content": "我们决定下周搬去杭州。"}])
    [memory] = await all_memories(client)
    assert memory["categories"] == [memory["category"]] == ["decision"]


@pytest.mark.parametrize("category", ["fact", "Decision", "决定"])
async def test_unknown_category_is_422_naming_the_valid_ones(client: Any, category: str
                                                             ) -> None:
    await store(client, README)
    response = await client.get("/v1/memories", params={"namespace": "alice",
                                                        "category": category})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "category" in message
    assert all(name in message for name in ("decision", "preference", "task", "note"))


async def test_recall_rejects_an_unknown_category(client: Any) -> None:
    response = await client.post("/v1/recall", json={
        "namespace": "alice", "query": "体检是哪天？", "categories": ["fact"]})
    assert response.status_code == 422, response.text
    assert "decision" in response.json()["error"]["message"]


async def test_classify_reports_every_category(client: Any) -> None:
    body = (await client.post("/v1/classify", json={
        "text": "\n".join(m["content"] for m in README)})).json()
    assert body["categories"][0] == body["category"]
    assert {"task", "decision"} <= set(body["categories"])
