"""The store worker outlives a build that fails with a CancelledError it was not sent
(app/store/service.py). A build waiting for a namespace's copy that a recall had started
loading got the recall's cancellation when the recall was late (fixed in
app/storage/namespace_cache.py); the worker took it for its own stop and ended, and no
`wait=false` store was built again until a restart (/readyz: "the store worker has not
reported"). The failure is injected here at the builder; everything else is real."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.helpers import job_state, sleep_until_cancelled_then_return

TURNS = {
    "en": [{"msg_id": "a1", "role": "user", "content": "The plumber comes on Thursday at 8."}],
    "zh": [{"msg_id": "a1", "role": "user", "content": "水管工周四早上八点上门。"}],
}


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_a_stray_cancellation_fails_one_build_not_the_worker(client: Any,
                                                                   language: str) -> None:
    state = client.app.state.engram
    builder = state.builder
    build = builder.build_session
    calls = 0

    async def cancelled_once(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise asyncio.CancelledError  # as a shared wait ended by another's cancel
        return await build(*args, **kwargs)

    builder.build_session = cancelled_once
    jobs = []
    for session in ("s1", "s2"):
        response = await client.post("/v1/store", json={
            "namespace": "alice", "session_id": session, "wait": False,
            "messages": TURNS[language]})
        assert response.status_code == 202, response.text
        jobs.append(response.json()["job_id"])
    # The first build is retried after the failure; both sessions are built.
    assert [await job_state(client, job, seconds=60) for job in jobs] == ["done", "done"]
    assert calls >= 3
    assert not state.store._worker.done()
    recalled = await client.post("/v1/recall", json={
        "namespace": "alice", "query": "When does the plumber come?" if language == "en"
        else "水管工什么时候来？"})
    assert recalled.json()["count"] >= 1
    assert not any(m.get("provisional") for m in recalled.json()["memories"])


async def test_a_stop_a_build_swallowed_still_ends_the_worker(client: Any) -> None:
    """On Python 3.11 `asyncio.wait_for` returns a result that was ready as the cancel came
    instead of raising it: the build goes on to its end, and the worker must still stop
    there (its `stop()` once waited for good: a test hung in it)."""
    state = client.app.state.engram
    builder = state.builder
    build = builder.build_session
    started = asyncio.Event()

    async def swallowing(*args: Any, **kwargs: Any) -> Any:
        started.set()
        await sleep_until_cancelled_then_return()
        return await build(*args, **kwargs)

    builder.build_session = swallowing
    response = await client.post("/v1/store", json={
        "namespace": "alice", "session_id": "s1", "wait": False, "messages": TURNS["en"]})
    assert response.status_code == 202, response.text
    await asyncio.wait_for(started.wait(), 30)
    async with asyncio.timeout(30):
        await state.store.stop()
    builder.build_session = build
    state.store.start()
    assert await job_state(client, response.json()["job_id"], seconds=60) == "done"
