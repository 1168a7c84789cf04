"""Read-your-writes: a `wait=false` store is found by the recall made right after it.

Through the HTTP API with the real model. The build is held back deterministically: the
test holds the namespace's write lock, which every build takes and the acknowledgement
of a `wait=false` store does not (app/store/service.py), so the messages stay pending until
the test lets go.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from app.recall.candidates import Candidate
from app.recall.deadline import Deadline
from app.recall.pending import PendingSearch, without_built
from app.recall.schemas import Stage
from app.recall.score import relevance
from app.recall.text import query_terms
from app.scripts import has_han
from app.storage.records import MemoryRecord, MessageRecord
from app.storage.repository import SearchFilter
from tests.helpers import wait_idle

FACTS = {
    "en": {"content": "My new passport number ends in 4471 and expires in March 2031.",
           "query": "When does my passport expire?", "word": "passport"},
    "zh": {"content": "我的新护照号码尾号是4471，二〇三一年三月到期。",
           "query": "我的护照什么时候到期？", "word": "护照"},
}

# A second new turn in the same session, and a question that only it answers.
OTHER = {"en": "The dentist moved my appointment to Friday at nine.",
         "zh": "牙医把我的预约改到了周五九点。"}
OTHER_QUERY = {"en": "When is the dentist?", "zh": "牙医什么时候？"}


async def recall(client: Any, query: str, namespace: str = "alice", **extra: Any
                 ) -> dict[str, Any]:
    response = await client.post("/v1/recall", json={"namespace": namespace, "query": query,
                                                     **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def store_later(client: Any, content: str, *, namespace: str = "alice",
                      session_id: str = "s1", msg_id: str = "f1") -> str:
    """Store one user message with wait=false; its job id."""
    response = await client.post("/v1/store", json={
        "namespace": namespace, "session_id": session_id, "wait": False,
        "messages": [{"msg_id": msg_id, "role": "user", "content": content}]})
    assert response.status_code == 202, response.text
    job: str = response.json()["job_id"]
    return job


class PendingStage:
    """The pending search's candidates stage alone (`PendingSearch.candidates`), on the
    messages pending in "alice" now, with nothing found by the other searches."""

    def __init__(self, engram: Any, search: PendingSearch, messages: list[MessageRecord]
                 ) -> None:
        self.engram, self.search, self.messages = engram, search, messages

    @classmethod
    async def read(cls, engram: Any) -> PendingStage:
        search = PendingSearch(engram.repo, engram.pool, engram.settings)
        return cls(engram, search, await search.read(SearchFilter(namespace="alice")))

    async def candidates(self, query: str, deadline: Deadline, *, hop: bool = False
                         ) -> list[Candidate]:
        question = await self.engram.pool.embed_query(query)
        return await self.search.candidates(
            self.messages, query_terms(query), query_vector=question, found=[],
            min_score=self.engram.settings.model_profile.min_score, chinese=has_han(query),
            deadline=deadline, hop=hop)


def holding(body: dict[str, Any], msg_id: str, session_id: str = "s1"
            ) -> list[dict[str, Any]]:
    return [m for m in body["memories"]
            if m["session_id"] == session_id and msg_id in m["msg_ids"]]


class TestBeforeTheBuild:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_recall_right_after_the_ack_finds_the_new_fact(
            self, client: Any, language: str) -> None:
        fact = FACTS[language]
        engram = client.app.state.engram
        async with engram.locks.hold("alice"):
            job = await store_later(client, fact["content"])
            body = await recall(client, fact["query"])
            state = (await client.get(f"/v1/jobs/{job}")).json()["state"]
            assert state == "queued"  # the build has not run
            found = holding(body, "f1")
            assert len(found) == 1, body
            memory = found[0]
            assert memory["provisional"] is True
            assert memory["id"] == "pending:s1:f1"
            assert memory["msg_ids"] == ["f1"]
            assert fact["word"] in memory["text"]
            assert memory["tokens"] > 0 and body["tokens"] <= body["max_tokens"]
            assert fact["word"] in body["block"]
            assert engram.hits.pending == 0  # a provisional memory records no hit
        await wait_idle(client)
        assert (await client.get(f"/v1/jobs/{job}")).json()["state"] == "done"

    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_recall_past_its_deadline_still_finds_the_new_fact(
            self, client: Any, language: str) -> None:
        # 1 ms: one search is late (whichever finishes second), and so is the vector of
        # the pending lines when the question's vector came first: the fact is found by
        # its words either way (Candidate.words_only). The promise holds under load.
        fact = FACTS[language]
        async with client.app.state.engram.locks.hold("alice"):
            await store_later(client, fact["content"])
            body = await recall(client, fact["query"], deadline_ms=1)
            assert body["degraded"] is True
            found = holding(body, "f1")
            assert len(found) == 1 and found[0]["provisional"] is True, body
            assert fact["word"] in body["block"]

    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_pending_lines_late_for_the_deadline_are_scored_by_their_words(
            self, client: Any, language: str) -> None:
        # The stage alone, deterministically: the question's vector is there, the pending
        # lines' vector is not computed by a deadline long passed.
        fact = FACTS[language]
        engram = client.app.state.engram
        async with engram.locks.hold("alice"):
            await store_later(client, fact["content"])
            stage = await PendingStage.read(engram)
            deadline = Deadline.after(1, started=time.perf_counter() - 1)
            found = await stage.candidates(fact["query"], deadline)
            assert deadline.skipped == [Stage.pending]
            assert [(c.memory.id, c.words_only) for c in found] == [("pending:s1:f1", True)]
            terms = query_terms(fact["query"])
            relevance(found, engram.settings, terms=terms, chinese=language == "zh")
            assert found[0].vector == 0.0
            min_score = engram.settings.model_profile.min_score
            assert found[0].relevance == found[0].keyword >= min_score
            # On time, the same message has its lines' vector, and no stage is skipped.
            on_time = Deadline.after(0, started=time.perf_counter())
            found = await stage.candidates(fact["query"], on_time)
            assert on_time.skipped == [] and not found[0].words_only
            assert found[0].stored is not None

    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_pending_line_is_encoded_once_for_every_question(
            self, client: Any, language: str) -> None:
        # The vector of a new turn's line is kept by message, not by the question's group
        # of lines: a second question about the same turn (another group text) is scored
        # by it with no model call, even with no time left for one.
        fact = FACTS[language]
        engram = client.app.state.engram
        async with engram.locks.hold("alice"):
            await store_later(client, fact["content"])
            await store_later(client, OTHER[language], msg_id="f2")
            stage = await PendingStage.read(engram)
            on_time = Deadline.after(0, started=time.perf_counter())
            first = await stage.candidates(fact["query"], on_time)
            assert [c.memory.msg_ids for c in first] == [["f1"]]
            late = Deadline.after(1, started=time.perf_counter() - 1)
            both = await stage.candidates(f"{fact['query']} {OTHER_QUERY[language]}", late)
            # f2 is new to this question and late: it alone is skipped. f1 is scored by
            # the vector the first question computed.
            assert late.skipped == [Stage.pending]
            assert [c.memory.msg_ids for c in both] == [["f1", "f2"]]
            assert not both[0].words_only
            assert both[0].stored is not None and first[0].stored is not None
            assert float(both[0].stored @ first[0].stored) > 0.9999

    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_second_hop_waits_for_no_pending_vector(
            self, client: Any, language: str) -> None:
        # A hop adds to the answer of the first search: a new line it matches is scored by
        # its words at once, nothing skipped, and its encoding serves the next search.
        fact = FACTS[language]
        engram = client.app.state.engram
        async with engram.locks.hold("alice"):
            await store_later(client, fact["content"])
            stage = await PendingStage.read(engram)
            no_deadline = Deadline.after(0, started=time.perf_counter())
            [hop] = await stage.candidates(fact["query"], no_deadline, hop=True)
            assert hop.words_only and no_deadline.skipped == []
            [first] = await stage.candidates(fact["query"], no_deadline)
            assert not first.words_only and first.stored is not None

    async def test_nothing_pending_of_another_namespace_is_returned(self, client: Any) -> None:
        engram = client.app.state.engram
        async with engram.locks.hold("alice"), engram.locks.hold("bob"):
            await store_later(client, FACTS["en"]["content"], namespace="bob")
            await store_later(client, FACTS["zh"]["content"], namespace="bob", session_id="s2")
            for language in ("en", "zh"):
                body = await recall(client, FACTS[language]["query"])
                assert body["memories"] == [], body
            for language, session in (("en", "s1"), ("zh", "s2")):
                bob = await recall(client, FACTS[language]["query"], namespace="bob")
                assert f"pending:{session}:f1" in [m["id"] for m in bob["memories"]]
        await wait_idle(client)
        for language in ("en", "zh"):
            assert (await recall(client, FACTS[language]["query"]))["memories"] == []

    async def test_filters_apply_to_pending_messages(self, client: Any) -> None:
        async with client.app.state.engram.locks.hold("alice"):
            await store_later(client, FACTS["en"]["content"])
            other = await recall(client, FACTS["en"]["query"], session_id="s2")
            assert other["memories"] == []
            categorised = await recall(client, FACTS["en"]["query"], categories=["note"])
            assert categorised["memories"] == []
        await wait_idle(client)

    async def test_a_large_pending_session_gives_its_best_lines(self, client: Any) -> None:
        """A whole import not built yet is no memory larger than any budget: the session's
        best matching messages (the latest of equals), in order."""
        notes = [{"msg_id": f"n{i}", "role": "user",
                  "content": f"Garden note {i}: the roses by the fence need water."}
                 for i in range(20)]
        async with client.app.state.engram.locks.hold("alice"):
            response = await client.post("/v1/store", json={
                "namespace": "alice", "session_id": "s1", "wait": False, "messages": notes})
            assert response.status_code == 202, response.text
            body = await recall(client, "Do the roses need water?", max_tokens=2000)
            [memory] = body["memories"]
            assert memory["provisional"] is True
            assert memory["msg_ids"][-1] == "n19"
            assert 0 < len(memory["msg_ids"]) <= 8
        await wait_idle(client)

    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_recall_never_serves_its_own_block_back(self, client: Any,
                                                          language: str) -> None:
        """The recall firewall's rule 1 applies before the build: a pending message
        carrying an injection block is returned as its own words only."""
        fact = FACTS[language]
        response = await client.post("/v1/store", json={
            "namespace": "alice", "session_id": "facts",
            "messages": [{"msg_id": "k1", "role": "user", "content": fact["content"]}]})
        assert response.status_code == 200, response.text
        block = (await recall(client, fact["query"], min_score=0.0))["block"]
        assert fact["word"] in block
        own = {"en": "Thanks! Also, my passport photo is in the blue folder.",
               "zh": "谢谢！另外，我的护照照片在蓝色文件夹里。"}[language]
        async with client.app.state.engram.locks.hold("alice"):
            await store_later(client, f"{block}\n\n{own}")
            body = await recall(client, fact["query"])
            [pending] = [m for m in body["memories"] if m["provisional"]]
            assert pending["text"] == f"user: {own}"
            assert pending["msg_ids"] == ["f1"]
        await wait_idle(client)

    async def test_why_not_offers_no_provisional_memory(self, client: Any) -> None:
        async with client.app.state.engram.locks.hold("alice"):
            await store_later(client, FACTS["en"]["content"])
            response = await client.post("/v1/recall/why_not", json={
                "namespace": "alice", "query": FACTS["en"]["query"],
                "memory_ids": ["pending:s1:f1"]})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["recalled"] == []
            assert body["items"][0]["verdict"] == "not_found"
            assert "provisional" in body["items"][0]["reason"]
        await wait_idle(client)


class TestAfterTheBuild:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_the_real_memory_replaces_the_provisional_one(
            self, client: Any, language: str) -> None:
        fact = FACTS[language]
        async with client.app.state.engram.locks.hold("alice"):
            await store_later(client, fact["content"])
            before = await recall(client, fact["query"])
            assert [m["provisional"] for m in holding(before, "f1")] == [True]
        await wait_idle(client)
        after = await recall(client, fact["query"])
        found = holding(after, "f1")
        assert len(found) == 1, after
        assert found[0]["provisional"] is False
        assert found[0]["id"].startswith("mem_")
        assert not any(m["provisional"] for m in after["memories"])

    async def test_a_message_built_but_not_yet_marked_done_is_not_provisional(
            self, client: Any) -> None:
        """The build writes memories before it marks their messages done: in between, the
        message is both pending and built, and recall returns the memory only."""
        repo = client.app.state.engram.repo
        await store_later(client, FACTS["en"]["content"])
        await wait_idle(client)
        [built] = await repo.session_messages("alice", "s1")
        assert built.state == "done"
        await repo.upsert_messages([dataclasses.replace(built, state="pending")])
        assert [m.msg_id for m in await repo.pending_messages("alice")] == ["f1"]
        body = await recall(client, FACTS["en"]["query"])
        found = holding(body, "f1")
        assert len(found) == 1 and found[0]["provisional"] is False, body

    async def test_an_edited_message_shows_once_while_its_rebuild_is_pending(
            self, client: Any) -> None:
        await store_later(client, FACTS["en"]["content"])
        await wait_idle(client)
        async with client.app.state.engram.locks.hold("alice"):
            await store_later(client, FACTS["en"]["content"].replace("4471", "4472"))
            body = await recall(client, FACTS["en"]["query"])
            assert len(holding(body, "f1")) == 1, body
        await wait_idle(client)


class TestOneRecallsSearches:
    def test_a_build_landing_between_two_searches_is_returned_once(self) -> None:
        """A question's parts and hop search one after another: one may find the message
        pending, a later one its new memory; the recall keeps the memory."""
        def candidate(memory_id: str, session_id: str, msg_ids: list[str]) -> Candidate:
            return Candidate(MemoryRecord(id=memory_id, namespace="alice",
                                          session_id=session_id, msg_ids=msg_ids))

        kept = without_built([
            candidate("pending:s1:f1", "s1", ["f1"]), candidate("mem_a", "s1", ["f0", "f1"]),
            candidate("pending:s2:f1", "s2", ["f1"]), candidate("pending:s1:f2", "s1", ["f2"])])
        assert [c.memory.id for c in kept] == ["mem_a", "pending:s2:f1", "pending:s1:f2"]
