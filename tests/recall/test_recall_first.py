"""Recall first (issue 14, app/ops/recall_first.py): a recall is not held behind a build.

A user's assistant recalls while a long conversation is imported into the same namespace
(`wait=true`, one long build): its recalls, in English and Chinese, come back while the
import is still being built, each with the memory it asks for, and the build steps aside
for them (it waited at its boundaries: `engram_recall_first_wait_seconds`), yet finishes
while the recalls never stop (the wait is bounded).
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from app.ops.recall_first import RecallFirst
from tests.helpers import AppClient, store
from tests.procs import chat_messages

_FACTS = [
    {"msg_id": "f1", "role": "user", "content": "My sister Ingrid is a nurse at a hospital "
     "in Tromsø, she moved there in March."},
    {"msg_id": "f2", "role": "assistant", "content": "Noted: Ingrid works as a nurse in "
     "Tromsø."},
    {"msg_id": "f3", "role": "user", "content": "我的车牌号是浙A·7Q2K9，下个月要年检。"},
    {"msg_id": "f4", "role": "assistant", "content": "好的，记下了：车牌浙A·7Q2K9，下个月年检。"},
]
_QUESTIONS = ("Where does my sister Ingrid work?", "我的车牌号是多少？")


def waited_seconds(metrics_text: str) -> float:
    prefix = "engram_recall_first_wait_seconds_sum "
    return next(float(line[len(prefix):]) for line in metrics_text.splitlines()
                if line.startswith(prefix))


async def test_recalls_during_a_long_build_come_back_first_and_the_build_still_finishes(
        client: AppClient) -> None:
    await store(client, _FACTS, namespace="mei", session_id="facts")
    # A long import: ~100 chunks to analyse and embed, several seconds of build.
    imported = chat_messages(random.Random(14), 400, id_prefix="imp-")
    before = waited_seconds((await client.get("/metrics")).text)
    importing = asyncio.create_task(client.post("/v1/store", json={
        "namespace": "mei", "session_id": "import", "messages": imported, "wait": "built"}))
    await asyncio.sleep(0)  # the store call has started

    answered_during_import = 0
    deadline = time.monotonic() + 600
    while not importing.done():
        assert time.monotonic() < deadline, "the import never finished: builds starved"
        for question in _QUESTIONS:
            response = await client.post("/v1/recall", json={
                "namespace": "mei", "query": question, "top_k": 5})
            assert response.status_code == 200, response.text
            found = response.json()["memories"]
            assert any(m["session_id"] == "facts" for m in found), (question, found)
            answered_during_import += not importing.done()
    response = await importing
    assert response.status_code == 200, response.text
    assert response.json()["memories_created"]

    # Recalls were not held behind the build: many came back while it was still running.
    assert answered_during_import >= 6
    # And the build stepped aside for them at its boundaries.
    assert waited_seconds((await client.get("/metrics")).text) > before


async def test_stepping_aside_waits_for_a_recall_in_flight_but_only_so_long() -> None:
    first = RecallFirst(max_wait_seconds=0.2)
    started = time.perf_counter()
    await first.step_aside()  # no recall in flight: no wait
    assert time.perf_counter() - started < 0.05

    with first.recalling():  # a recall that never ends: the wait is bounded
        started = time.perf_counter()
        await first.step_aside()
        assert 0.2 <= time.perf_counter() - started < 5

    order: list[str] = []

    async def recall() -> None:
        with first.recalling():
            await asyncio.sleep(0.05)
            order.append("recall")

    async def build_step() -> None:
        await first.step_aside()
        order.append("build")

    recalling = asyncio.create_task(recall())
    await asyncio.sleep(0)  # the recall is in flight
    await asyncio.gather(build_step(), recalling)
    assert order == ["recall", "build"]


async def test_a_stalled_loop_is_not_charged_as_stepping_aside() -> None:
    """A wait is charged (budget, metric) for what recall-first chose to wait: when the loop
    stalls past the bound, the lag is the loop's, and the build keeps its budget."""
    charged: list[float] = []
    first = RecallFirst(max_wait_seconds=0.05, build_budget_seconds=0.2)
    first.on_wait = charged.append
    loop = asyncio.get_running_loop()
    with first.recalling(), first.build():
        loop.call_later(0.01, time.sleep, 0.4)  # the loop stalls during the wait
        started = time.perf_counter()
        await first.step_aside()
        assert time.perf_counter() - started >= 0.4  # the build was held that long ...
        assert charged == [pytest.approx(0.05, abs=0.005)]  # ... but waited 50 ms by choice
        for _ in range(3):  # so its budget still holds three more waits
            await first.step_aside()
        assert sum(charged) == pytest.approx(0.2, abs=0.01)
        await first.step_aside()  # and then it is spent
        assert charged[-1] < 0.001
