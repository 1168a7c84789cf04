"""Shared steps of the compression HTTP tests."""

from __future__ import annotations

from typing import Any

import httpx

from tests.compression.fixtures import CHATTER_EN, CHATTER_ZH, FACTS, TRICKY, messages
from tests.helpers import store

# Small chunks without overlap: every two messages are one memory, so a short fixture
# gives a stream long enough for the rules.
SMALL_CHUNKS: dict[str, Any] = {"chunk_max_turns": 2, "chunk_overlap_ratio": 0.0,
                                "compression_capacity_chars": 1000}
# Score = task relevance only: chatter scores ~0–0.35, the facts ~0.7, whatever the other
# dimensions' calibration, so the tests pin the rules rather than the scoring formulas.
TASK_ONLY: dict[str, Any] = {
    "weights": {"novelty": 0, "entropy": 0, "task": 1, "emotion": 0},
    "base_threshold": 0.45, "emergency_hold": 0.6,
}


async def set_policy(client: httpx.AsyncClient, namespace: str, *, preset: str = "default",
                     overrides: dict[str, Any] | None = None,
                     shadow: dict[str, Any] | None = None) -> dict[str, Any]:
    response = await client.put(f"/v1/compression/policies/{namespace}", json={
        "preset": preset, "overrides": overrides if overrides is not None else TASK_ONLY,
        "shadow": shadow})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def run(client: httpx.AsyncClient, namespace: str | None = None, *, expect: int = 200,
              **options: Any) -> dict[str, Any]:
    body = {"namespace": namespace, **options} if namespace else options
    response = await client.post("/v1/compression/run", json=body)
    assert response.status_code == expect, response.text
    result: dict[str, Any] = response.json()
    return result


def only(result: dict[str, Any]) -> dict[str, Any]:
    (namespace,) = result["namespaces"]
    assert namespace["ok"], namespace["error"]
    found: dict[str, Any] = namespace
    return found


async def dump(client: httpx.AsyncClient, namespace: str, level: int = 2) -> dict[str, Any]:
    response = await client.post("/debug/memory_dump",
                                 json={"namespace": namespace, "compress_level": level})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def everything(client: httpx.AsyncClient, namespace: str) -> dict[str, dict[str, Any]]:
    response = await client.get("/v1/memories", params={"namespace": namespace,
                                                        "state": "any", "limit": 500})
    assert response.status_code == 200, response.text
    return {m["id"]: m for m in response.json()["items"]}


async def store_chatter(client: httpx.AsyncClient, namespace: str, *, facts_first: bool = True
                        ) -> None:
    """Facts, then English chatter (with tricky bytes), then Chinese chatter — or the facts
    last, where their emergency hold freezes the chatter before them."""
    sessions = [("en", CHATTER_EN[:6] + TRICKY + CHATTER_EN[6:]), ("zh", CHATTER_ZH)]
    facts = ("facts", FACTS)
    ordered = [facts, *sessions] if facts_first else [*sessions, facts]
    for session_id, contents in ordered:
        await store(client, messages(contents, prefix=session_id), namespace=namespace,
                    session_id=session_id)
