"""POST /v1/context: pinned first, then durable facts, then the latest session's gist,
within the budget, in recall's block format (Chinese and English)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import store

PIN_EN = [{"msg_id": "p1", "role": "user",
           "content": "My daughter Mia is allergic to peanuts, never suggest peanut recipes."}]
PIN_ZH = [{"msg_id": "p1", "role": "user", "content": "我女儿对花生过敏，千万不要推荐含花生的菜。"}]
DECISION_EN = [{"msg_id": "d1", "role": "user",
                "content": "We decided to use PostgreSQL for the billing service."}]
DECISION_ZH = [{"msg_id": "d1", "role": "user",
                "content": "我们决定账单服务使用PostgreSQL数据库。"}]
OLD_EN = [{"msg_id": "o1", "role": "user", "content": "The weather was grey on Monday."}]
LATEST_EN = [
    {"msg_id": "l1", "role": "user", "content": "Today I repainted the fence in the garden."},
    {"msg_id": "l2", "role": "assistant", "content": "Sounds like a productive afternoon."},
]
LATEST_ZH = [
    {"msg_id": "l1", "role": "user", "content": "今天我把花园的篱笆重新刷了一遍漆。"},
    {"msg_id": "l2", "role": "assistant", "content": "听起来是个充实的下午。"},
]


async def context(client: Any, expect: int = 200, **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/context", json={"namespace": "alice", **body})
    assert response.status_code == expect, response.text
    result: dict[str, Any] = response.json()
    return result


async def fill(client: Any, *, pin: list[dict[str, Any]], decision: list[dict[str, Any]],
               latest: list[dict[str, Any]]) -> dict[str, str]:
    ids = {}
    ids["old"] = (await store(client, OLD_EN, session_id="s-old"))["memories_created"][0]
    ids["pinned"] = (await store(client, pin, session_id="s-pin", pinned=True)
                     )["memories_created"][0]
    (ids["decision"],) = (await store(client, decision, session_id="s-decision")
                          )["memories_created"]
    response = await client.patch(f"/v1/memories/{ids['decision']}", json={"importance": 9})
    assert response.status_code == 200
    (ids["latest"],) = (await store(client, latest, session_id="s-latest"))["memories_created"]
    return ids


class TestSections:
    async def test_pinned_then_durable_then_latest_session_en(self, client: Any) -> None:
        ids = await fill(client, pin=PIN_EN, decision=DECISION_EN, latest=LATEST_EN)
        body = await context(client)
        assert [(m["id"], m["reason"]) for m in body["memories"]] == [
            (ids["pinned"], "pinned"), (ids["decision"], "durable"),
            (ids["latest"], "latest_session")]
        assert ids["old"] not in {m["id"] for m in body["memories"]}
        assert body["session_id"] == "s-latest" and body["language"] == "en"
        assert body["block"].startswith("What you remember about this user")
        assert body["block"].index("peanuts") < body["block"].index("PostgreSQL") \
            < body["block"].index("fence")
        assert body["tokens"] == sum(m["tokens"] for m in body["memories"]) <= 1500
        assert body["block_tokens"] > body["tokens"]

    async def test_pinned_then_durable_then_latest_session_zh(self, client: Any) -> None:
        ids = await fill(client, pin=PIN_ZH, decision=DECISION_ZH, latest=LATEST_ZH)
        body = await context(client)
        assert [m["reason"] for m in body["memories"]] == ["pinned", "durable",
                                                           "latest_session"]
        assert body["memories"][0]["id"] == ids["pinned"]
        assert body["language"] == "zh"
        assert body["block"].startswith("以下是你从与该用户以往的对话中记得的信息")
        assert "花生" in body["block"] and "篱笆" in body["block"]

    async def test_session_id_picks_the_gist(self, client: Any) -> None:
        ids = await fill(client, pin=PIN_EN, decision=DECISION_EN, latest=LATEST_EN)
        body = await context(client, session_id="s-old", language="zh")
        assert body["memories"][-1] == {**body["memories"][-1], "id": ids["old"],
                                        "reason": "latest_session"}
        assert body["language"] == "zh" and body["block"].startswith("以下是")

    async def test_empty_namespace_gives_an_empty_block(self, client: Any) -> None:
        body = await context(client)
        assert body["memories"] == [] and body["block"] == "" and body["block_tokens"] == 0
        assert body["session_id"] is None


class TestBudget:
    async def test_budget_keeps_pinned_first_and_is_respected(self, client: Any) -> None:
        ids = await fill(client, pin=PIN_EN, decision=DECISION_EN, latest=LATEST_EN)
        full = await context(client)
        pinned_tokens = full["memories"][0]["tokens"]
        body = await context(client, max_tokens=pinned_tokens)
        assert [m["id"] for m in body["memories"]] == [ids["pinned"]]
        assert body["tokens"] <= pinned_tokens and body["left_out"] == 2
        assert body["max_tokens"] == pinned_tokens

    async def test_bad_requests_are_422(self, client: Any) -> None:
        await context(client, expect=422, max_tokens=0)
        await context(client, expect=422, max_tokens="100")
        await context(client, expect=422, language="fr")
        await context(client, expect=422, query="what do I know?")

    async def test_a_scoped_key_reads_only_its_namespace(self, open_client: Any) -> None:
        keys = {"alice-key-0123456789": ["alice"]}
        async with open_client(token="alice-key-0123456789", namespace_keys=keys) as client:
            await context(client)
            response = await client.post("/v1/context", json={"namespace": "bob"})
            assert response.status_code == 403


class _CountingModel:
    """The real model, noting every text its tokenizer is asked to count."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.counted: list[str] = []

    def count_tokens(self, text: str) -> int:
        self.counted.append(text)
        result: int = self._model.count_tokens(text)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class TestBlockTokens:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_the_block_is_counted_from_its_pieces_like_recalls(
            self, open_client: Any, model: Any, language: str) -> None:
        """A context's block is counted as recall counts its own (`TokenCounter.block`): from
        the memories' counts, the frame's and a fixed count per join, never by tokenizing
        the whole block again, and exactly what the tokenizer says of the whole."""
        counting = _CountingModel(model)
        pin, decision, latest, query = (
            (PIN_EN, DECISION_EN, LATEST_EN, "peanut allergy") if language == "en"
            else (PIN_ZH, DECISION_ZH, LATEST_ZH, "花生过敏"))
        async with open_client(with_model=counting) as client:
            await fill(client, pin=pin, decision=decision, latest=latest)
            response = await client.post("/v1/recall", json={"namespace": "alice",
                                                             "query": query})
            assert response.status_code == 200, response.text
            for body in (await context(client), response.json()):
                assert body["block"] and body["language"] == language
                assert body["block_tokens"] == model.count_tokens(body["block"])
                assert body["block"] not in counting.counted, "the block was tokenized whole"
