"""POST /v1/recall through the HTTP API: real LanceDB in a temporary directory, real model."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from app.embedding.names import DEFAULT_MODEL, E5_NAME
from app.recall.block import whitespace_join_tokens
from app.storage.records import MemoryRecord
from tests.helpers import store

KEY_A = "key-for-alice-only-0001"
KEY_B = "key-for-bob-only-000002"


async def store_notes(client: Any, notes: list[str], *, namespace: str = "alice",
                      when: list[datetime] | None = None, prefix: str = "s") -> None:
    """One session (hence one memory) per note, so each note is its own memory."""
    for i, note in enumerate(notes):
        message: dict[str, Any] = {"msg_id": f"{prefix}{i}", "role": "user", "content": note}
        if when is not None:
            message["timestamp"] = when[i].isoformat()
        await store(client, [message], namespace=namespace, session_id=f"{prefix}{i}")


async def recall(client: Any, query: str, *, namespace: str = "alice", expect: int = 200,
                 **extra: Any) -> dict[str, Any]:
    response = await client.post("/v1/recall", json={"namespace": namespace, "query": query,
                                                     **extra})
    assert response.status_code == expect, response.text
    body: dict[str, Any] = response.json()
    return body


def first_text(body: dict[str, Any]) -> str:
    assert body["memories"], f"nothing recalled for {body['query']!r}"
    text: str = body["memories"][0]["text"]
    return text


CHINESE = [
    "下周二上午体检，医生说前一天晚上十点以后不要吃东西。",
    "我喜欢喝咖啡，每天早上一杯拿铁，不加糖。",
    "周末打算和朋友去爬香山，看红叶。",
    "项目的截止日期是月底，需要准备一份演示文稿给客户。",
    "我女儿下个月过生日，想送她一辆粉色的自行车。",
    "最近在学吉他，每天练习半个小时指法。",
]
ENGLISH = [
    "My dentist appointment is on Thursday at 3pm at the clinic on Main Street.",
    "We decided to use PostgreSQL for the billing service instead of MongoDB.",
    "I'm training for a half marathon in October, running four times a week.",
    "My sister lives in Lisbon and works as an architect on museum projects.",
    "The quarterly sales report is due next Friday and needs the new charts.",
    "Our cat Miso is allergic to chicken, so she only eats fish-based food.",
]
MIXED = [
    "我们决定用 LanceDB 做向量存储，因为它是嵌入式的，不需要单独的服务。",
    "下周二上午体检，记得空腹。",
    "I prefer dark roast coffee, never with milk.",
    "周五下午和 Alice 开会讨论 Q3 roadmap，要带上预算表。",
    "The flight to Tokyo leaves at 7:40 on Saturday morning from Terminal 2.",
    "我的护照下个月过期，需要去出入境管理局续签。",
]


class TestKeywordQuestions:
    """Short keyword questions find the right memory first, in every language mix."""

    async def test_chinese_store(self, client: Any) -> None:
        await store_notes(client, CHINESE)
        assert "体检" in first_text(await recall(client, "我的体检安排是哪天"))
        assert "自行车" in first_text(await recall(client, "女儿生日送什么"))
        assert "吉他" in first_text(await recall(client, "我在学什么乐器？"))

    async def test_english_store(self, client: Any) -> None:
        await store_notes(client, ENGLISH)
        assert "dentist" in first_text(await recall(client, "when is the dentist?"))
        assert "PostgreSQL" in first_text(await recall(client, "which database for billing?"))
        assert "Miso" in first_text(await recall(client, "what can the cat eat"))

    async def test_mixed_store(self, client: Any) -> None:
        await store_notes(client, MIXED)
        assert "体检" in first_text(await recall(client, "我的体检安排是哪天"))
        assert "LanceDB" in first_text(await recall(client, "向量存储用的是什么？"))
        assert "LanceDB" in first_text(await recall(client, "why LanceDB?"))
        assert "coffee" in first_text(await recall(client, "how do I take my coffee"))
        assert "Tokyo" in first_text(await recall(client, "东京的航班几点起飞 flight time"))
        assert "roadmap" in first_text(await recall(client, "Q3 roadmap 会议"))

    async def test_nothing_relevant_returns_nothing(self, client: Any) -> None:
        await store_notes(client, ENGLISH)
        body = await recall(client, "quantum chromodynamics lattice simulation results")
        assert body["memories"] == [] and body["block"] == "" and body["tokens"] == 0


class TestNamespaceIsolation:
    async def test_other_namespace_never_appears(self, client: Any) -> None:
        await store_notes(client, CHINESE + ENGLISH, namespace="alice")
        await store_notes(client, ["Bob likes tea."], namespace="bob")
        for query in [*CHINESE, *ENGLISH, "我的体检安排是哪天", "dentist"]:
            body = await recall(client, query, namespace="bob", min_score=0, top_k=100)
            assert {m["session_id"] for m in body["memories"]} <= {"s0"}
            assert all("Bob" in m["text"] for m in body["memories"])

    async def test_keys_limited_to_a_namespace(self, open_client: Any) -> None:
        keys = {KEY_A: ["alice"], KEY_B: ["bob"]}
        async with open_client(token=KEY_A, namespace_keys=keys) as client:
            await store_notes(client, ENGLISH)
            assert (await recall(client, "dentist"))["memories"]
        async with open_client(token=KEY_B, namespace_keys=keys) as client:
            body = await recall(client, "dentist", namespace="alice", expect=403)
            assert body["error"]["code"] == "forbidden"


class TestBudget:
    async def test_budget_is_never_exceeded(self, client: Any, model: Any) -> None:
        notes = [f"{text} (note {i})" for i, text in enumerate(ENGLISH + CHINESE + MIXED)]
        await store_notes(client, notes)
        for max_tokens in (20, 60, 150, 400):
            for query in ("what did we decide", "体检", "coffee and tea", "travel plans"):
                body = await recall(client, query, max_tokens=max_tokens, top_k=100,
                                    min_score=0)
                counted = [model.count_tokens(m["text"])
                           for m in body["memories"]]
                assert counted == [m["tokens"] for m in body["memories"]]
                assert sum(counted) == body["tokens"] <= max_tokens
                assert body["max_tokens"] == max_tokens
                block = model.count_tokens(body["block"])
                assert block == body["block_tokens"]
            assert body["memories"], "a 20-token budget still fits the short notes"

    def test_block_count_adds_a_fixed_count_per_join(self, model: Any, minilm: Any) -> None:
        """The block's count is summed from its pieces (`whitespace_join_tokens`), not
        tokenized again: exact only if every join adds the same tokens, for any text."""
        texts = [*ENGLISH, *CHINESE, *MIXED, "user: Caroline: 好的 ok\nassistant: 9:30 见"]
        # e5's SentencePiece: a text counted alone leaves out the "▁" that starts it.
        for encoder, expected in ((model, 1 if DEFAULT_MODEL == E5_NAME else 0), (minilm, 0)):
            join = whitespace_join_tokens(encoder.count_tokens)
            assert join == expected
            for sep in ("\n", "\n  ", " "):
                whole = encoder.count_tokens(sep.join(texts))
                assert whole == sum(encoder.count_tokens(t) for t in texts) + \
                    join * (len(texts) - 1)

    async def test_default_budget_and_top_k(self, client: Any) -> None:
        await store_notes(client, ENGLISH + MIXED)
        body = await recall(client, "plans", min_score=0, top_k=3)
        assert body["max_tokens"] == 1500 and body["count"] <= 3

    async def test_overlapping_memories_do_not_repeat_messages(self, client: Any) -> None:
        # 14 messages -> chunks of 6 that share one message with their neighbour.
        msgs = [{"msg_id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                 "content": f"Kayak trip planning, item {i}: paddles, dry bags and maps."}
                for i in range(14)]
        await store(client, msgs)
        body = await recall(client, "kayak trip planning paddles", min_score=0, top_k=10)
        returned = [i for m in body["memories"] for i in m["msg_ids"]]
        assert len(returned) == len(set(returned)) == 14
        assert any(m["trimmed"] for m in body["memories"])
        for m in body["memories"]:
            assert len(m["text"].splitlines()) == len(m["msg_ids"])


class TestTime:
    async def test_recent_beats_equally_similar_older(self, client: Any) -> None:
        now = datetime.now(UTC)
        text = "The team offsite will be in Porto, at the riverside hotel."
        await store_notes(client, [text, text], when=[now - timedelta(days=200), now])
        body = await recall(client, "where is the team offsite?", min_score=0)
        old, new = sorted(body["memories"], key=lambda m: m["time_end"])
        assert body["memories"][0]["id"] == new["id"]
        assert old["explain"]["decay"] < 1 == new["explain"]["decay"]
        assert old["explain"]["relevance"] == pytest.approx(new["explain"]["relevance"])

    async def test_old_exact_match_beats_vague_recent(self, client: Any) -> None:
        now = datetime.now(UTC)
        notes = ["My passport renewal appointment is at the embassy on May 5 at 9am.",
                 "I need to sort out some travel paperwork at some point."]
        await store_notes(client, notes, when=[now - timedelta(days=400), now])
        body = await recall(client, "when is my passport renewal appointment?")
        assert "passport" in first_text(body)
        assert body["memories"][0]["explain"]["decay"] < 1

    async def test_age_is_measured_from_the_store_not_the_clock(self, client: Any) -> None:
        # A conversation imported from 2023: its own newest memory is "now" for decay.
        base = datetime(2023, 5, 8, tzinfo=UTC)
        await store_notes(client, ENGLISH, when=[base + timedelta(days=i) for i in range(6)])
        body = await recall(client, "dentist appointment")
        assert body["memories"][0]["explain"]["decay"] == 1.0
        # ... unless the client says when "now" is.
        body = await recall(client, "dentist appointment", as_of="2024-05-08T00:00:00Z")
        assert body["memories"][0]["explain"]["decay"] < 1.0

    async def test_a_date_in_the_query_favours_that_day(self, client: Any) -> None:
        days = [datetime(2023, 6, d, 18, tzinfo=UTC) for d in (1, 3, 9, 15)]
        notes = ["Went to a pottery class with the kids." for _ in days]
        await store_notes(client, notes, when=days)
        body = await recall(client, "What did I do on 3 June, 2023?", min_score=0)
        assert body["time_window"]["phrase"] == "on 3 June, 2023"
        assert body["search_text"] == "What did I do?"
        assert body["memories"][0]["time_end"].startswith("2023-06-03")
        assert body["memories"][0]["explain"]["time"] > 1


class TestReferencePhrases:
    async def test_just_now_points_to_the_latest_session(self, client: Any) -> None:
        t0 = datetime(2024, 3, 1, tzinfo=UTC)
        notes = ["We tuned the LanceDB index: nprobes 20 and refine factor 5.",
                 "We set up nightly LanceDB backups to the S3 bucket."]
        await store_notes(client, notes, when=[t0, t0 + timedelta(days=3)])
        body = await recall(client, "记得刚才说的 LanceDB 吗")
        assert body["reference"]["scope"] == "recent"
        assert "LanceDB" in body["search_text"] and "刚才" not in body["search_text"]
        assert "backups" in first_text(body)
        assert body["memories"][0]["explain"]["reference"] > 1

    async def test_phrase_alone_returns_the_latest_session(self, client: Any) -> None:
        t0 = datetime(2024, 3, 1, tzinfo=UTC)
        await store_notes(client, ENGLISH[:3], when=[t0, t0 + timedelta(days=1),
                                                     t0 + timedelta(days=2)])
        body = await recall(client, "as I said before")
        assert body["reference"] is not None and body["memories"]
        assert {m["session_id"] for m in body["memories"]} <= {"s0", "s1", "s2"}


class TestHits:
    async def test_burst_updates_each_memory_once_with_few_versions(
            self, open_client: Any) -> None:
        # A long flush interval: the burst is buffered, then one flush writes it. (Promotions
        # are off here: each is its own write, once per memory and tier, not per hit.)
        async with open_client(hit_flush_seconds=3600, promote_daily_hits=10**9,
                               promote_longterm_hits=10**9) as client:
            await store_notes(client, ENGLISH + CHINESE)
            state = client.app.state.engram
            before = (await state.repo.table_stats())["memories"]["version"]
            queries = ["dentist", "体检", "marathon", "咖啡", "database", "吉他"] * 167
            bodies = await asyncio.gather(*(recall(client, q) for q in queries[:1000]))
            # A hit is a returned memory that passes min_score (not context after it),
            # once per question: the same question asked again is one use (hits.py).
            returned = Counter(m["id"] for b in {b["query"]: b for b in bodies}.values()
                               for m in b["memories"]
                               if m["explain"]["relevance"] >= b["min_score"])
            assert state.hits.pending == len(returned)
            await state.hits.flush()
            after = (await state.repo.table_stats())["memories"]["version"]
            assert after - before == 1, "one write per namespace and flush"
            # Found by several questions, a memory counts at most its day's hits.
            per_day = state.settings.hits_per_memory_per_day
            for memory_id, count in returned.items():
                memory = (await client.get(f"/v1/memories/{memory_id}")).json()
                assert memory["hit_count"] == min(count, per_day)
                assert memory["last_accessed"] is not None

    async def test_buffered_hits_are_written_at_shutdown(self, open_client: Any) -> None:
        async with open_client(hit_flush_seconds=3600) as client:
            await store_notes(client, ENGLISH)
            body = await recall(client, "dentist")
            memory_id = body["memories"][0]["id"]
        async with open_client(hit_flush_seconds=3600) as client:
            memory = (await client.get(f"/v1/memories/{memory_id}")).json()
            assert memory["hit_count"] == 1


class TestIndexes:
    async def test_rows_written_after_indexing_are_found(self, client: Any) -> None:
        await store_notes(client, ENGLISH)
        state = client.app.state.engram
        await state.maintenance.run_once(force=True)  # builds the FTS index over these rows
        await store_notes(client, ["The boiler service is booked for the 14th."], prefix="n")
        body = await recall(client, "boiler")
        assert "boiler" in first_text(body)

    async def test_vector_index_is_built_past_the_threshold(self, open_client: Any) -> None:
        async with open_client(vector_index_min_rows=256) as client:
            state = client.app.state.engram
            await store_notes(client, ["Fresh note: the greenhouse heater is broken."])
            # Bulk rows written straight through the repository: scale, not realism.
            rng = np.random.default_rng(1)
            vectors = rng.standard_normal((300, state.pool.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            await state.repo.upsert_memories([
                MemoryRecord(id=f"bulk{i}", namespace="alice", session_id="bulk",
                             text=f"user: inventory line {i}", vector=v.tolist(),
                             msg_ids=[f"b{i}"], msg_count=1)
                for i, v in enumerate(vectors)])
            await state.maintenance.run_once(force=True)
            assert await state.repo.has_vector_index()
            # Written after the index was built: searched outside it until compaction.
            await store_notes(client, ["Later note: the greenhouse door hinge squeaks."],
                              prefix="h")
            body = await recall(client, "greenhouse heater", top_k=3)
            assert "heater" in first_text(body)
            body = await recall(client, "greenhouse door hinge", top_k=3)
            assert "hinge" in first_text(body)


class TestRequest:
    async def test_filters(self, client: Any) -> None:
        t0 = datetime(2024, 1, 10, tzinfo=UTC)
        await store_notes(client, ENGLISH[:4], when=[t0 + timedelta(days=30 * i)
                                                     for i in range(4)])
        body = await recall(client, "plans", min_score=0, top_k=100, session_id="s1")
        assert {m["session_id"] for m in body["memories"]} == {"s1"}
        body = await recall(client, "plans", min_score=0, top_k=100,
                            time_from="2024-02-01T00:00:00Z", time_to="2024-03-31T00:00:00Z")
        assert {m["session_id"] for m in body["memories"]} == {"s1", "s2"}
        body = await recall(client, "plans", min_score=0, branch="experiment")
        assert body["memories"] == []

    async def test_injection_block_templates(self, client: Any) -> None:
        await store_notes(client, MIXED, when=[datetime(2024, 5, 1, tzinfo=UTC)] * 6)
        zh = await recall(client, "我的体检安排是哪天")
        assert zh["language"] == "zh" and "根据我的记忆" in zh["block"]
        assert "[2024-05-01]" in zh["block"] and "体检" in zh["block"]
        en = await recall(client, "我的体检安排是哪天", language="en")
        assert en["language"] == "en" and "according to my memory" in en["block"]
        assert zh["memories"][0]["explain"]["keyword"] > 0

    @pytest.mark.parametrize("body", [
        {"namespace": "alice", "query": "   "},
        {"namespace": "alice", "query": "x", "max_tokens": 0},
        {"namespace": "alice", "query": "x", "min_score": 1.5},
        {"namespace": "alice", "query": "x", "other_branches": True},
        {"namespace": "../etc", "query": "x"},
        {"namespace": "alice", "query": "x", "categories": ["nonsense"]},
    ])
    async def test_bad_requests_are_422(self, client: Any, body: dict[str, Any]) -> None:
        response = await client.post("/v1/recall", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "invalid_request"


class TestDocumentedTrimming:
    async def test_trimmed_names_every_way_a_memory_is_trimmed(self, client: Any) -> None:
        """`trimmed` is documented with each packing rule that leaves lines out (`_pack`):
        overlap, the budget, one speaker's statements, a named speaker, lines given back."""
        schema = (await client.get("/openapi.json")).json()
        trimmed = schema["components"]["schemas"]["RecalledMemory"]["properties"]["trimmed"]
        text = trimmed["description"]
        for rule in ("better memory already returned", "does not fit whole",
                     "one speaker", "names exactly one of its speakers", "lines back"):
            assert rule in text, rule
