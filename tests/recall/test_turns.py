"""Turns with nothing to look up return nothing (and record no hit); a question about a
period as a whole returns that period's memories. Chinese, English and mixed, via HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from app.recall.turns import nothing_to_look_up
from tests.helpers import all_memories, store

FACTS = [
    {"msg_id": "1", "role": "user", "content": "I'm allergic to shellfish, so no shrimp for me."},
    {"msg_id": "2", "role": "user", "content": "我们上个月从柏林搬到了慕尼黑。"},
    {"msg_id": "3", "role": "user", "content": "My brother Sam works night shifts."},
    {"msg_id": "4", "role": "user", "content": "我每天早上都会量血压。"},
]


async def recall(client: Any, query: str, **extra: Any) -> dict[str, Any]:
    response = await client.post("/v1/recall", json={"namespace": "alice", "query": query,
                                                     **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


class TestNothingToLookUp:
    @pytest.mark.parametrize("query", [
        "tell me a joke", "thanks!", "hello", "good night", "haha that's funny",
        "you're the best", "给我讲个笑话", "谢谢！", "早上好", "再讲一个笑话吧", "你真棒",
        "ok 谢谢", "hello 呀", "good night 晚安"])
    async def test_a_chat_turn_returns_nothing_and_promotes_nothing(
            self, client: Any, query: str) -> None:
        await store(client, FACTS)
        for _ in range(3):
            body = await recall(client, query, min_score=0.0)
            assert body["count"] == 0 and body["block"] == ""
        await client.app.state.engram.hits.flush()
        assert all(m["hit_count"] == 0 for m in await all_memories(client))

    @pytest.mark.parametrize(("query", "answer"), [
        ("I love jokes about my brother Sam, what does he do?", "Sam"),
        ("我早上要做什么检查？", "血压"),
        ("what am I allergic to?", "shellfish"),
    ])
    async def test_a_question_with_content_is_looked_up(self, client: Any, query: str,
                                                        answer: str) -> None:
        await store(client, FACTS)
        body = await recall(client, query)
        assert body["memories"] and answer in body["memories"][0]["text"]

    @pytest.mark.parametrize("text", ["what jokes do I like?", "谁给我讲过笑话？", "我住哪？",
                                      "what do I like?", "who told me that story?"])
    def test_questions_are_not_chat_turns(self, text: str) -> None:
        assert not nothing_to_look_up(text)


class TestAPeriodAsAWhole:
    @pytest.mark.parametrize(("query", "sessions"), [
        ("What did we talk about on November 27?", {"nov27"}),
        ("11 月 27 号我们聊了什么？", {"nov27"}),
        ("11月27号那天我们聊了什么？", {"nov27"}),
        ("上周我们聊了什么？", {"nov26", "nov27", "nov28"}),
        ("what did we discuss yesterday?", {"dec3"}),
        ("前天我们聊了什么？", {"dec2"}),
        # A bare month, where the month is all the question asks about.
        ("九月份我们聊了什么？", {"sep15"}),
        ("What did we talk about in September?", {"sep15"}),
    ])
    async def test_the_periods_memories_are_returned(self, client: Any, query: str,
                                                     sessions: set[str]) -> None:
        """Only the period's: the days around a named day are searched (a late-night
        session) but do not answer a question about the day itself."""
        for sid, day, text in [
                ("sep15", "2026-09-15", "九月中旬我们去看了两套房子。"),
                ("oct1", "2026-10-01", "We planned the garden: tomatoes and basil."),
                ("nov26", "2026-11-26", "The plumber came to fix the kitchen sink."),
                ("nov27", "2026-11-27", "我们讨论了年底去京都旅行的预算，大概两万块。"),
                ("nov28", "2026-11-28", "周六带孩子去了动物园，看了大熊猫。"),
                ("dec2", "2026-12-02", "Theo wants a Lego set for Christmas."),
                ("dec3", "2026-12-03", "I finally booked the dentist for next Tuesday.")]:
            await store(client, [{"msg_id": "1", "role": "user", "content": text,
                                  "timestamp": f"{day}T10:00:00Z"}], session_id=sid)
        body = await recall(client, query, as_of="2026-12-04T12:00:00Z")
        assert body["time_window"] is not None and not body["time_window"]["empty"]
        assert {m["session_id"] for m in body["memories"]} == sessions

    @pytest.mark.parametrize("query", ["Which appliance did I buy last month?",
                                       "上个月买了什么电器？"])
    async def test_a_question_naming_a_period_is_answered_from_it(
            self, client: Any, query: str) -> None:
        """Once a memory of the named time answers, memories of other times are not
        returned beside it (the kitchen plan of October for "last month")."""
        for sid, day, text in [
                ("oct20", "2026-10-20", "We picked the kitchen design, white cabinets. "
                 "厨房装修定了方案，橱柜选白色的。"),
                ("nov4", "2026-11-04", "Ordered a dishwasher in the Black Friday sale. "
                 "双十一买了一台洗碗机。"),
                ("nov24", "2026-11-24", "A colleague recommended a ramen place near work.")]:
            await store(client, [{"msg_id": "1", "role": "user", "content": text,
                                  "timestamp": f"{day}T10:00:00Z"}], session_id=sid)
        body = await recall(client, query, as_of="2026-12-04T12:00:00Z")
        assert [m["session_id"] for m in body["memories"]][:1] == ["nov4"]
        assert "oct20" not in {m["session_id"] for m in body["memories"]}

    async def test_an_empty_period_returns_nothing(self, client: Any) -> None:
        await store(client, [{"msg_id": "1", "role": "user", "content": "Tomatoes and basil.",
                              "timestamp": "2026-10-01T10:00:00Z"}], session_id="oct1")
        body = await recall(client, "what did we talk about on November 27?",
                            as_of="2026-12-04T12:00:00Z")
        assert body["time_window"]["empty"] and body["count"] == 0
