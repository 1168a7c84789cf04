"""Newer facts win (issue 15): a later message that restates or changes a stored fact is
recalled first, and the older memory is marked superseded in its evolution log, not deleted.

Pairs written for this test, Chinese and English, each older fact among unrelated notes of
its day; the change comes days later in another session.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.embedding.names import E5_NAME, MINILM_NAME
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
    ("en-moved", "We live in Berlin, our flat is near the park.", [],
     "We moved from Berlin to Munich, our new flat is near the river.",
     "Where is our flat?", "Munich", "Thinking of going to the library this weekend."),
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


# One long chat between two people, a session a week: every line opens with a speaker's
# name and the chat words recur ("really", "feel", 感觉, 时间), and a later session touches an
# earlier one's words in passing (a bicycle ridden, a printer to fix) while being about
# something else. (language, the sessions' lines, a question about the first session, a
# word only its answer holds)
CHATS = [
    ("en", [
        ["Anna: Hey Ben! This weekend I finally fixed my old bicycle, the brakes work again.",
         "Ben: That's really great, Anna! Did you ride it to the lake?",
         "Anna: Yes, I rode it to the lake on Sunday, it felt really amazing."],
        ["Anna: Hey Ben! My sister visited this weekend, we cooked dumplings all Sunday.",
         "Ben: That sounds really nice, Anna. How is she doing?",
         "Anna: She is great, she just started a job at a bookshop."],
        ["Anna: Hey Ben! I rode my bicycle to the office today, then I had to fix the printer.",
         "Ben: Oh no, that sounds really tiring, Anna.",
         "Anna: Yes, I feel really tired, the whole week felt long."],
    ], "When did Anna fix her bicycle?", "brakes"),
    ("zh", [
        ["小雨：阿杰，这个周末我终于把旧自行车修好了，刹车又能用了。",
         "阿杰：真的太好了，小雨！你骑去湖边了吗？",
         "小雨：骑了，周日骑到湖边，感觉特别好，时间过得真快。"],
        ["小雨：阿杰，这个周末我姐姐来了，我们周日包了一天饺子。",
         "阿杰：听起来真不错，小雨。她最近怎么样？",
         "小雨：她挺好的，刚在一家书店找到工作，感觉很开心。"],
        ["小雨：阿杰，今天我骑自行车去公司，然后还得把打印机修好。",
         "阿杰：听起来真的好累啊，小雨。",
         "小雨：是啊，感觉特别累，这周时间过得好慢。"],
    ], "小雨什么时候把自行车修好的？", "刹车"),
]


# Not reached in Chinese: the last session shares the question's 自行车 and 修好 and the chat
# words with the first, and in a namespace of three memories their rarity cannot tell it
# from a restatement (a fifth of its weighted terms are in the first session).
_NOT_YET = pytest.mark.xfail(strict=True, reason="zh: shares 自行车 + 修好 + chat words")
CHAT_CASES = [pytest.param(c, id=c[0], marks=[_NOT_YET] if c[0] == "zh" else []) for c in CHATS]


@pytest.mark.parametrize("model_name", [MINILM_NAME, E5_NAME])
@pytest.mark.parametrize("chat", CHAT_CASES)
async def test_later_sessions_of_one_chat_about_other_things_are_not_moved_ahead(
        open_client: Any, minilm: Any, e5: Any, model_name: str,
        chat: tuple[Any, ...]) -> None:
    """The chat's later sessions share the speakers' names and chat words with the first,
    and the last one holds the question's words too (a bicycle, fixing): none restates the
    first session's fact, so the answer stays first and nothing is marked superseded."""
    namespace, sessions, question, answer = chat
    with_model = e5 if model_name == E5_NAME else minilm
    async with open_client(with_model=with_model, embedding_model=model_name) as client:
        for week, lines in enumerate(sessions):
            speakers = [line.split(":")[0].split("：")[0] for line in lines]
            await store(client, [
                {"msg_id": f"w{week}-{i}", "role": "user" if who == speakers[0] else "assistant",
                 "content": line, "timestamp": f"2026-03-{2 + 7 * week:02d}T19:0{i}:00Z"}
                for i, (who, line) in enumerate(zip(speakers, lines, strict=True))],
                namespace=namespace, session_id=f"week{week}")
        body = (await client.post("/v1/recall", json={
            "namespace": namespace, "query": question})).json()
        texts = [m["text"] for m in body["memories"]]
        assert texts and answer in texts[0], texts
        for memory in await all_memories(client, namespace):
            assert not [e for e in await events_of(client, memory["id"])
                        if e["event"] == "superseded"], memory["text"]


# A change worded without the question's words (issue 34): the older statement repeats
# them, the newer one says what changed. (language, older, newer, question, a word only the
# newer holds, the block's mark of the earlier statement, a later note that changes
# something else)
CHANGES = [
    ("zh", "我的网球教练是李教练，每周六上课。", "李教练回老家了，现在换成了陈教练带我。",
     "我的网球教练是谁？", "陈教练", "已有变更", "我们搬家了，现在住在城东。"),
    ("en", "I keep my savings at ING, in a fixed-term account.",
     "I closed the ING account and moved everything to Bunq.",
     "Which bank are my savings with?", "Bunq", "changed on",
     "I switched my phone plan to a cheaper one."),
]


@pytest.mark.parametrize("case", CHANGES, ids=[c[0] for c in CHANGES])
async def test_a_change_without_the_questions_words_comes_first_and_marks_the_older(
        client: Any, case: tuple[str, ...]) -> None:
    namespace, old, new, question, answer, mark, elsewhere = case
    await store_day(client, namespace, "day1", "02", [old])
    await store_day(client, namespace, "day2", "05", [elsewhere])
    await store_day(client, namespace, "day3", "09", [new])

    body = (await client.post("/v1/recall", json={
        "namespace": namespace, "query": question})).json()
    memories = body["memories"]
    assert memories and answer in memories[0]["text"], [m["text"] for m in memories]
    older = [m for m in memories if m["session_id"] == "day1"]
    assert older, "the older statement is still returned (history), after the newer one"
    assert older[0]["superseded_by"]["id"] == memories[0]["id"]
    assert older[0]["superseded_by"]["time"].startswith("2026-03-09")
    assert f"{mark}" in body["block"] and "2026-03-09" in body["block"]
    assert body["block"].index(answer) < body["block"].index(old[:6])
    # A later change of something else (a move, a phone plan) is no answer here.
    assert all(m["superseded_by"] is None for m in memories if m["session_id"] != "day1")
    assert all(m["session_id"] != "day2" for m in memories[:1])

    omitted = (await client.post("/v1/recall", json={
        "namespace": namespace, "query": question, "superseded": "omit"})).json()
    assert [m["session_id"] for m in omitted["memories"]][:1] == ["day3"]
    assert all(m["session_id"] != "day1" for m in omitted["memories"])
    assert mark not in omitted["block"]
