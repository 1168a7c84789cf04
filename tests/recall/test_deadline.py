"""A recall within a deadline (`deadline_ms`, `recall_deadline_ms`), through the HTTP API with
the real model: a late stage is skipped and named, never an error.

Not timing luck: a 1 ms deadline has passed before either search can be done (their tasks
have not even run once when the search starts waiting), so one search is skipped every
time, whichever finishes second; the assertions hold for either. No deadline (0) or a
minute is never reached by a recall of a few notes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from app.config import Settings
from app.recall.deadline import Deadline
from app.recall.schemas import Stage
from tests.helpers import metric_by_label
from tests.recall.test_focus_and_hops import HOP_DAYS, HOP_QUERIES, returned_ids
from tests.recall.test_focus_and_hops import store_notes as store_days
from tests.recall.test_recall_api import CHINESE, ENGLISH, first_text, recall, store_notes

KEYWORD_QUESTIONS = {"zh": ("体检安排", "体检"), "en": ("dentist appointment", "dentist")}
NOTES = {"zh": CHINESE, "en": ENGLISH}


class TestDeadline:
    """The mechanism alone, on plain tasks (no model, no store)."""

    async def test_what_is_done_by_the_deadline_counts(self) -> None:
        deadline = Deadline.after(50, started=time.perf_counter())
        quick = asyncio.create_task(asyncio.sleep(0, result="quick"))
        slow = asyncio.create_task(asyncio.sleep(60))
        await deadline.settle(quick, slow)
        assert not deadline.late(quick, Stage.keyword)
        assert deadline.late(slow, Stage.vector)
        assert deadline.skipped == [Stage.vector]
        await asyncio.sleep(0)
        assert slow.cancelled()  # dropped, not waited for

    async def test_when_nothing_is_done_the_first_to_finish_answers(self) -> None:
        deadline = Deadline.after(1, started=time.perf_counter() - 1)  # long passed
        first = asyncio.create_task(asyncio.sleep(0.01, result="first"))
        second = asyncio.create_task(asyncio.sleep(60))
        await deadline.settle(first, second)
        assert first.result() == "first"
        assert deadline.late(second, Stage.vector) and not deadline.late(first, Stage.keyword)

    async def test_a_late_task_ends_cancelled_never_failing_the_recall(self) -> None:
        async def fails() -> None:
            await asyncio.sleep(0.01)
            raise RuntimeError("late and broken")

        deadline = Deadline.after(1, started=time.perf_counter() - 1)
        done = asyncio.create_task(asyncio.sleep(0))
        late = asyncio.create_task(fails())
        await deadline.settle(done, late)
        assert deadline.late(late, Stage.vector)
        await asyncio.sleep(0.02)
        assert late.cancelled()

    async def test_a_second_hop_waits_for_no_search_past_the_deadline(self) -> None:
        # The first search answered: a hop whose searches are both late adds nothing and
        # keeps nothing waiting (it waited for the first to finish: 0.2-0.6 s under load).
        deadline = Deadline.after(1, started=time.perf_counter() - 1)
        slow = [asyncio.create_task(asyncio.sleep(60)) for _ in range(2)]
        started = time.perf_counter()
        await deadline.settle(*slow, need_one=False)
        assert time.perf_counter() - started < 1
        assert not any(task.done() for task in slow)
        for task in slow:
            deadline.late(task, Stage.second_hop)
        assert deadline.skipped == [Stage.second_hop]

    async def test_no_deadline_waits_for_everything(self) -> None:
        deadline = Deadline.after(0, started=time.perf_counter())
        tasks = [asyncio.create_task(asyncio.sleep(0.01 * i)) for i in range(3)]
        await deadline.settle(*tasks)
        assert all(t.done() for t in tasks) and deadline.skipped == []
        assert not deadline.passed


def answer(body: dict[str, Any]) -> list[tuple[str, float]]:
    """What a recall returned, to compare two recalls of the same store."""
    return [(m["id"], m["score"]) for m in body["memories"]]


def one_search_skipped(body: dict[str, Any]) -> str:
    """The search a degraded recall skipped: after 1 ms neither search is done (their tasks
    have not run once when the recall starts waiting), so the first to finish answers and
    the other is skipped; a hop from the line found, if any, has no time left either."""
    assert body["degraded"] is True
    skipped: list[str] = body["skipped"]
    assert skipped[0] in ("vector", "keyword") and skipped[1:] in ([], ["second_hop"]), skipped
    return skipped[0]


class TestTinyDeadline:
    @pytest.mark.parametrize("language", ["zh", "en"])
    async def test_a_clear_keyword_question_is_still_answered(self, client: Any,
                                                              language: str) -> None:
        """After 1 ms one search answers alone, and the response says which was skipped."""
        await store_notes(client, NOTES[language])
        question, word = KEYWORD_QUESTIONS[language]
        body = await recall(client, question, deadline_ms=1)
        skipped = one_search_skipped(body)
        assert word in first_text(body)
        best = body["memories"][0]["explain"]
        if skipped == "vector":
            # No cosine without the question's vector: the keyword part is the relevance.
            assert best["cosine"] == 0 and best["relevance"] == best["keyword"] > 0
        else:
            assert best["cosine"] > 0 and best["keyword"] > 0

    @pytest.mark.parametrize("language", ["zh", "en"])
    async def test_the_second_hop_is_skipped_and_named(self, open_client: Any,
                                                       language: str) -> None:
        """"How old is the nurse in Shenzhen?": the line naming the person is found; the
        hop that would find their age has no time left."""
        async with open_client(recall_equivalents=False) as client:
            await store_days(client, HOP_DAYS[language], namespace=language)
            late = await recall(client, HOP_QUERIES[language], namespace=language,
                                max_tokens=60, deadline_ms=1)
            one_search_skipped(late)
            assert late["skipped"][-1] == "second_hop"
            assert "n1" in returned_ids(late), late["memories"]
            full = await recall(client, HOP_QUERIES[language], namespace=language,
                                max_tokens=60, deadline_ms=0)
            assert full["degraded"] is False and full["skipped"] == []
            assert {"n1", "n8"} <= returned_ids(full), full["memories"]

    async def test_degraded_recalls_are_counted_by_stage(self, client: Any) -> None:
        await store_notes(client, ENGLISH)
        late = await recall(client, "dentist appointment", deadline_ms=1)
        await recall(client, "dentist appointment", deadline_ms=0)
        text = (await client.get("/metrics")).text
        assert "engram_recall_degraded_total 1.0" in text
        assert metric_by_label(text, "engram_recall_skipped_total", "stage") == {
            stage: 1.0 for stage in late["skipped"]}
        one_search_skipped(late)


class TestTheServerDefault:
    def test_is_a_real_deadline(self, data_dir: Any) -> None:
        """The suite's apps run without one (tests/conftest.py says why); a server has one."""
        assert Settings(data_dir=data_dir, _env_file=None).recall_deadline_ms > 0  # type: ignore[call-arg]

    async def test_applies_unless_the_call_says(self, open_client: Any) -> None:
        async with open_client(recall_deadline_ms=1) as client:
            await store_notes(client, ENGLISH)
            one_search_skipped(await recall(client, "dentist appointment"))
            body = await recall(client, "dentist appointment", deadline_ms=0)
            assert body["degraded"] is False


class TestNoDeadline:
    @pytest.mark.parametrize("language", ["zh", "en"])
    async def test_zero_or_a_generous_deadline_answers_in_full(self, open_client: Any,
                                                               language: str) -> None:
        """Against a server without a default deadline: the same memories and scores."""
        async with open_client(recall_deadline_ms=0) as client:
            await store_notes(client, NOTES[language])
            question, word = KEYWORD_QUESTIONS[language]
            unbounded = await recall(client, question)
            assert unbounded["degraded"] is False and unbounded["skipped"] == []
            assert word in first_text(unbounded)
            assert unbounded["memories"][0]["explain"]["cosine"] > 0
            for deadline_ms in (0, 60_000):
                body = await recall(client, question, deadline_ms=deadline_ms)
                assert body["degraded"] is False and body["skipped"] == []
                assert answer(body) == answer(unbounded)

    async def test_why_not_explains_the_complete_recall(self, client: Any) -> None:
        """`why_not` ignores the deadline: its cosines are the vector search's."""
        await store_notes(client, ENGLISH)
        full = await recall(client, "dentist appointment", deadline_ms=0)
        wanted = full["memories"][0]["id"]
        response = await client.post("/v1/recall/why_not", json={
            "namespace": "alice", "query": "dentist appointment", "deadline_ms": 1,
            "memory_ids": [wanted]})
        assert response.status_code == 200, response.text
        item = response.json()["items"][0]
        assert item["verdict"] == "recalled" and item["cosine"] > 0


class TestBadDeadline:
    @pytest.mark.parametrize("value", [-1, 60_001, "100", 1.5])
    async def test_is_422_naming_the_field(self, client: Any, value: Any) -> None:
        response = await client.post("/v1/recall", json={
            "namespace": "alice", "query": "dentist", "deadline_ms": value})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "invalid_request"
        assert "deadline_ms" in response.text
