"""Helpers for API tests: build messages, store them, read memories back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

AppClient = httpx.AsyncClient


def messages(start: int, stop: int, *, prefix: str = "message") -> list[dict[str, Any]]:
    """Alternating user/assistant turns with ids `start..stop-1` and distinct content."""
    return [
        {"msg_id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
         "content": f"{prefix} {i}: we talked about topic number {i} in detail."}
        for i in range(start, stop)
    ]


async def store(client: AppClient, msgs: list[dict[str, Any]], *, namespace: str = "alice",
                session_id: str = "s1", expect: int = 200, wait: bool | str = "built",
                **extra: Any) -> dict[str, Any]:
    """POST /v1/store; by default built before the answer (the memories' ids in it), as
    most tests read the memories next. The default `wait=true` has tests of its own
    (tests/recall/test_findable_writes.py)."""
    response = await client.post("/v1/store", json={
        "namespace": namespace, "session_id": session_id, "messages": msgs, "wait": wait,
        **extra})
    assert response.status_code == expect, response.text
    body: dict[str, Any] = response.json()
    return body


async def all_memories(client: AppClient, namespace: str = "alice", **params: Any
                       ) -> list[dict[str, Any]]:
    response = await client.get("/v1/memories",
                                params={"namespace": namespace, "limit": 500, **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def sleep_until_cancelled_then_return() -> None:
    """Wait until cancelled, then return normally: what `asyncio.wait_for` does on Python
    3.11 when its awaited result was ready as the cancel came (the cancellation is lost)."""
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    ready.set_result(None)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await ready


async def wait_idle(client: AppClient) -> None:
    await client.app.state.engram.store.idle()  # type: ignore[attr-defined]



async def job_state(client: AppClient, job_id: str, *, seconds: float) -> str:
    """A background store job's state once it is no longer queued, or after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        response = await client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        state: str = response.json()["state"]
        if state != "queued" or time.monotonic() > deadline:
            return state
        await asyncio.sleep(0.2)


async def metrics_after_bilingual_use(client: AppClient) -> str:
    """/metrics after one English and one Chinese memory were stored and recalled."""
    for session, text in (("s1", "I moved to Lisbon in May."), ("s2", "我下周二去杭州出差。")):
        response = await client.post("/v1/store", json={
            "namespace": "alice", "session_id": session,
            "messages": [{"role": "user", "content": text}], "wait": "built"})
        assert response.status_code == 200, response.text
        response = await client.post("/v1/recall", json={"namespace": "alice", "query": text})
        assert response.status_code == 200, response.text
    return str((await client.get("/metrics")).text)


def metric_by_label(text: str, metric: str, label: str) -> dict[str, float]:
    """Values of the Prometheus series `metric{label="…"}` in `text`, by that label."""
    return {line.split(f'{label}="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(f"{metric}{{")}
