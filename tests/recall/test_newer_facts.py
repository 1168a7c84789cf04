"""Newer facts win (issue 15): a later message that restates or changes a stored fact is
recalled first, and the older memory is marked superseded in its evolution log, not deleted.

Pairs written for this test, Chinese and English, each older fact among unrelated notes of
its day; the change comes days later in another session.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import all_memories, store

# (older fact, its day's other notes, the later change, a question, a word of the answer
# only the newer statement holds, an unrelated later note that shares no subject)
CASES = [
    ("zh", "下周二上午我要去医院体检，要空腹。", ["今天下午开了一个很长的会。"],
     "体检改到周四了，还是上午。", "我的体检是哪天？", "周四",
     "周末想去图书馆看看书。"),
    ("en", "My dentist appointment is on Tuesday at 3pm.", ["Sat through a very long meeting."],
     "The dentist appointment moved to Thursday morning.", "When is my dentist appointment?",
     "Thursday", "Thinking of going to the library this weekend."),
]


async def store_day(client: Any, namespace: str, session_id: str, day: str,
                    notes: list[str]) -> None:
    await store(client, [{"msg_id": f"{session_id}-{i}", "role": "user", "content": note,
                          "timestamp": f"2026-03-{day}T09:0{i}:00Z"}
                         for i, note in enumerate(notes)],
                namespace=namespace, session_id=session_id)


async def events_of(client: Any, memory_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/memories/{memory_id}/evolution")
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_the_newer_statement_is_recalled_first_and_the_older_is_superseded(
        client: Any, case: tuple[Any, ...]) -> None:
    namespace, old, others, new, question, answer, unrelated = case
    await store_day(client, namespace, "day1", "02", [old, *others])
    await store_day(client, namespace, "day2", "05", [unrelated])
    await store_day(client, namespace, "day3", "09", [new])

    body = (await client.post("/v1/recall", json={
        "namespace": namespace, "query": question})).json()
    texts = [m["text"] for m in body["memories"]]
    assert texts and answer in texts[0], texts
    assert any(old.split("，")[0].split(",")[0] in t for t in texts[1:]), \
        "the older statement is still returned, after the newer one"

    memories = {m["session_id"]: m for m in await all_memories(client, namespace)}
    assert set(memories) == {"day1", "day2", "day3"}, "nothing was deleted"
    superseded = [e for e in await events_of(client, memories["day1"]["id"])
                  if e["event"] == "superseded"]
    assert [e["metadata"]["by"] for e in superseded] == [memories["day3"]["id"]]
    # A later note about something else supersedes nothing.
    for session in ("day2", "day3"):
        assert not [e for e in await events_of(client, memories[session]["id"])
                    if e["event"] == "superseded"]


async def test_storing_the_change_again_logs_it_once(client: Any) -> None:
    namespace, old, others, new, *_ = CASES[0]
    await store_day(client, namespace, "day1", "02", [old, *others])
    await store_day(client, namespace, "day3", "09", [new])
    await store_day(client, namespace, "day3", "09", [new])  # a client's retry
    day1 = next(m for m in await all_memories(client, namespace) if m["session_id"] == "day1")
    assert len([e for e in await events_of(client, day1["id"])
                if e["event"] == "superseded"]) == 1
