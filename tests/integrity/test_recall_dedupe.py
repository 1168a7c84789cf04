"""Recall de-duplicates lines by (session, msg_id): two sessions that both number their
messages 1, 2, 3 (as the README example does) both come back whole (issue 13, item 4)."""

from __future__ import annotations

import pytest

from tests.helpers import AppClient, all_memories, store

SESSIONS = {
    "en": ("What did we plan for the trip to Lisbon?", {
        "trip-1": ["We plan the trip to Lisbon for the second week of May.",
                   "Good, I will book the flight to Lisbon on Monday.",
                   "Please also find a hotel in Lisbon near the river."],
        "trip-2": ["For the Lisbon trip we still need a restaurant for Friday.",
                   "I found a seafood place in Lisbon with good reviews.",
                   "Then reserve the Lisbon restaurant for eight people."],
    }),
    "zh": ("我们去杭州旅行的计划是什么？", {
        "trip-1": ["我们计划五月第二周去杭州旅行。", "好的，我周一订去杭州的高铁票。",
                   "还要在杭州西湖边找一家酒店。"],
        "trip-2": ["杭州旅行还需要订一家周五的餐厅。", "我找到杭州一家评价很好的杭帮菜馆。",
                   "那就给杭州的餐厅订八个人的位子。"],
    }),
}


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_sessions_numbering_messages_alike_both_come_back_whole(
        client: AppClient, language: str) -> None:
    query, sessions = SESSIONS[language]
    for session_id, contents in sessions.items():
        await store(client, [{"msg_id": str(i + 1), "role": "user" if i % 2 == 0 else
                              "assistant", "content": c} for i, c in enumerate(contents)],
                    session_id=session_id)
    stored = {m["session_id"]: m for m in await all_memories(client)}
    assert set(stored) == set(sessions)

    response = await client.post("/v1/recall", json={"namespace": "alice", "query": query,
                                                     "top_k": 5, "max_tokens": 2000})
    assert response.status_code == 200, response.text
    recalled = {m["session_id"]: m for m in response.json()["memories"]}
    assert set(recalled) == set(sessions), response.json()["memories"]
    for session_id, memory in recalled.items():
        assert memory["msg_ids"] == ["1", "2", "3"]
        assert memory["text"] == stored[session_id]["text"]
