"""Found by the stateful test (tests/integrity/test_stateful.py) on main at 0cfaea8.

Sequence: store a session, compress it (forced, every memory a candidate), export the
namespace and import the file into a fresh namespace. On main the import took the source's
summary ids as they were and upserted them by id, so the source's summary moved into the
copy: the source's export lost its `sum_…` memory and its compressed memories pointed at a
summary it no longer owned (issue 13 item 1; fixed on branch `import`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import httpx

from tests.helpers import store
from tests.procs import chat_messages

COMPRESS_ALL = {"preset": "default", "overrides": {
    "weights": {"novelty": 0, "entropy": 0, "task": 1, "emotion": 0},
    "base_threshold": 0.99, "emergency_hold": 1.0, "run_length": 2}}


async def export_lines(client: httpx.AsyncClient, namespace: str) -> list[str]:
    response = await client.get(f"/v1/namespaces/{namespace}/export")
    assert response.status_code == 200, response.text
    return sorted(response.text.splitlines()[1:])  # the header carries exported_at


async def test_import_into_another_namespace_leaves_the_source_as_it_was(
        open_client: Callable[..., Any]) -> None:

    async with open_client(chunk_max_turns=3, compression_enabled=False) as client:
        response = await client.put("/v1/compression/policies/src", json=COMPRESS_ALL)
        assert response.status_code == 200, response.text
        # English and Chinese turns.
        await store(client, chat_messages(random.Random(7), 8, zh_share=0.5),
                    namespace="src", session_id="s1")
        response = await client.post("/v1/compression/run",
                                     json={"namespace": "src", "force": True})
        assert response.status_code == 200, response.text
        (result,) = response.json()["namespaces"]
        assert result["summaries"], result  # the case needs a summary to move
        before = await export_lines(client, "src")

        body = (await client.get("/v1/namespaces/src/export")).content
        response = await client.post("/v1/namespaces/copy/import", content=body,
                                     headers={"content-type": "application/x-ndjson"})
        assert response.status_code == 200, response.text

        assert await export_lines(client, "src") == before
        copied = [json.loads(line) for line in await export_lines(client, "copy")]
        memories = [r["data"] for r in copied if r["type"] == "memory"]
        assert any(m["summary_of"] for m in memories), "the copy has no summary of its own"
        assert all(m["namespace"] == "copy" for m in memories)
