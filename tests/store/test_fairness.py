"""Fairness both ways (app/ops/recall_first.py): recalls go first, but a store behind a
stream of recalls that never pauses is delayed by them at most one build budget in total,
whatever its size (before: a wait at every boundary, one per text it analyses)."""

from __future__ import annotations

import asyncio
import random
import time

from app.ops.recall_first import BUILD_BUDGET_SECONDS, RecallFirst
from tests.helpers import AppClient, store
from tests.procs import chat_messages

_FACTS = [
    {"msg_id": "f1", "role": "user", "content": "My landlord Mr. Okafor raised the rent to "
     "1,450 euros from October."},
    {"msg_id": "f2", "role": "assistant", "content": "Noted: rent 1,450 euros from October."},
    {"msg_id": "f3", "role": "user", "content": "我女儿的钢琴老师姓魏，每周四下午五点上课。"},
    {"msg_id": "f4", "role": "assistant", "content": "记下了：钢琴课每周四下午五点，魏老师。"},
]
_QUESTIONS = ("How much is my rent now?", "钢琴课是星期几？", "Who is my landlord?")
# The default per-boundary bound (Settings.recall_first_max_wait_ms).
_MAX_WAIT = 0.05


def waited_seconds(metrics_text: str) -> float:
    prefix = "engram_recall_first_wait_seconds_sum "
    return next(float(line[len(prefix):]) for line in metrics_text.splitlines()
                if line.startswith(prefix))


async def test_a_store_behind_a_stream_of_recalls_waits_for_them_only_so_long(
        client: AppClient) -> None:
    await store(client, _FACTS, namespace="fair", session_id="facts")
    stop, flowing = asyncio.Event(), asyncio.Event()
    answered = [0]

    async def ask(question: str) -> None:
        while not stop.is_set():
            response = await client.post("/v1/recall", json={
                "namespace": "fair", "query": question, "top_k": 5})
            assert response.status_code == 200, response.text
            answered[0] += 1
            if answered[0] >= len(_QUESTIONS):
                flowing.set()

    askers = [asyncio.create_task(ask(q)) for q in _QUESTIONS]
    try:
        await flowing.wait()  # the stream is flowing
        before, asked = waited_seconds((await client.get("/metrics")).text), answered[0]
        started = time.perf_counter()
        # ~30 chunks: ~30 texts analysed, each a boundary where the build steps aside.
        body = await store(client, chat_messages(random.Random(37), 120, id_prefix="imp-"),
                           namespace="fair", session_id="import", wait="built")
        took = time.perf_counter() - started
        during = answered[0] - asked
    finally:
        stop.set()
        await asyncio.gather(*askers)
    metrics = (await client.get("/metrics")).text
    waited = waited_seconds(metrics) - before
    print(f"\nstore of 120 messages behind {during} recalls: {took:.1f} s, "
          f"of which stepping aside {waited:.3f} s")
    assert len(body["memories_created"]) >= 20
    assert during >= len(_QUESTIONS), "the recalls did not run beside the store"
    # Recall first held: the build did step aside for them, but within its budget.
    # (On failure, the waits and the loop's lag say whether a build waited outside a budget
    # or the loop stalled.)
    assert 0 < waited <= BUILD_BUDGET_SECONDS + _MAX_WAIT + 0.1, "\n".join(
        [f"waited {waited:.3f} s"] + [line for line in metrics.splitlines() if line.startswith(
            ("engram_recall_first_wait_seconds", "engram_event_loop_lag_seconds"))])


async def test_a_build_spends_one_budget_over_all_its_boundaries() -> None:
    gate = RecallFirst(max_wait_seconds=0.05, build_budget_seconds=0.2)
    with gate.recalling():  # a recall that never ends
        started = time.perf_counter()
        for _ in range(4):  # outside a build: each boundary waits its own bound
            await gate.step_aside()
        assert time.perf_counter() - started >= 0.2

        with gate.build():
            started = time.perf_counter()
            # A build's boundaries in tasks it starts (its analysis) share its budget.
            await asyncio.gather(*(gate.step_aside() for _ in range(3)))
            await asyncio.create_task(gate.each_in_thread(str, list(range(20))))
            for _ in range(20):
                await gate.step_aside()
            assert time.perf_counter() - started < 0.2 + 0.05 + 0.15

        with gate.build():  # a new build has its own budget: it steps aside again
            started = time.perf_counter()
            await gate.step_aside()
            assert time.perf_counter() - started >= 0.05

    with gate.build():  # no recall in flight: nothing waits, nothing is spent
        started = time.perf_counter()
        for _ in range(50):
            await gate.step_aside()
        assert time.perf_counter() - started < 0.1
