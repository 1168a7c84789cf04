"""Feedback over HTTP: a recalled memory used by a later message counts for the context hit
rate; a reference phrase boosts the memory it points to."""

from __future__ import annotations

from typing import Any

from tests.compression.fixtures import FACTS, messages
from tests.compression.helpers import dump, only, run
from tests.helpers import store


class TestFeedback:
    async def test_hit_rate_and_reference_boost(self, open_client: Any) -> None:
        async with open_client() as client:
            await store(client, messages(FACTS[:2], prefix="f"), session_id="facts")
            first = only(await run(client, "alice"))  # scores the memory, no recall yet
            assert first["hit_rate"] is None
            recall = await client.post("/v1/recall", json={
                "namespace": "alice", "query": "where does the team wiki move to?"})
            assert recall.status_code == 200, recall.text
            recalled = [m["id"] for m in recall.json()["memories"]]
            assert recalled
            await client.app.state.engram.hits.flush()

            await store(client, [
                {"msg_id": "l1", "role": "user",
                 "content": "Done: I exported all the wiki pages to Notion this morning."},
                {"msg_id": "l2", "role": "user",
                 "content": "As I said before, the team wiki moves to Notion, export by Friday."},
            ], session_id="later")
            result = only(await run(client, "alice"))
            assert result["hit_rate"] == 1.0
            assert result["references"] == 1

            items = {i["id"]: i for i in (await dump(client, "alice"))["items"]}
            assert items[recalled[0]]["scores"]["feedback"] == 0.1
            assert (await dump(client, "alice"))["metrics"]["context_hit_rate"] == 1.0
            history = (await client.get(f"/v1/memories/{recalled[0]}/evolution")).json()
            assert any(e["note"].startswith("referenced") for e in history["events"])
            policy = (await client.get("/v1/compression/policies/alice")).json()
            assert policy["feedback"]["recalled_total"] == 1
            assert policy["feedback"]["referenced_total"] == 1
            metrics = (await client.get("/metrics")).text
            assert 'engram_context_hit_rate{namespace="alice"} 1.0' in metrics
