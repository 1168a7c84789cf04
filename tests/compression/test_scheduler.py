"""The background scheduler in a live app: runs by itself, isolates a failing namespace,
reports a heartbeat; manual runs, status and metrics, scoped by API key."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.compression.fixtures import FACTS, messages
from tests.compression.helpers import SMALL_CHUNKS, everything, only, run, set_policy
from tests.helpers import store

ADMIN = "admin-key-0123456789"
ALICE = "alice-key-0123456789"
KEYS: dict[str, Any] = {"admin_keys": [ADMIN], "namespace_keys": {ALICE: ["alice"]}}


async def wait_for(predicate: Any, *, seconds: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


class TestBackground:
    async def test_runs_by_itself_and_survives_a_failing_namespace(
            self, open_client: Any, seeded: Any) -> None:
        seeded("small")
        async with open_client(compression_interval_seconds=0.2, **SMALL_CHUNKS) as client:
            scheduler = client.app.state.engram.compression
            original = scheduler.service.run_namespace

            async def flaky(namespace: str, **options: Any) -> Any:
                if namespace == "bob":
                    raise RuntimeError("disk on fire")
                return await original(namespace, **options)

            scheduler.service.run_namespace = flaky
            await set_policy(client, "alice")
            await store(client, messages(FACTS, prefix="b"), namespace="bob")

            async def both_seen() -> bool:
                status = (await client.get("/v1/compression/status")).json()
                bob = status["namespaces"].get("bob")
                return bob is not None and "alice" in status["namespaces"]

            await wait_for(both_seen)
            status = (await client.get("/v1/compression/status")).json()
            assert status["last_pass"]["trigger"] == "scheduled"
            assert status["namespaces"]["bob"]["ok"] is False
            assert "disk on fire" in status["namespaces"]["bob"]["error"]
            alice = status["namespaces"]["alice"]
            assert alice["ok"] and alice["memories"] > 0
            states = {m["state"] for m in (await everything(client, "alice")).values()}
            assert "compressed" in states  # the pass over alice did its work

            # Unchanged namespaces are skipped by later scheduled passes; a failed one is
            # retried; a store makes the namespace due again.
            passes, alice_at = status["passes"], alice["started_at"]

            async def two_more() -> bool:
                now = (await client.get("/v1/compression/status")).json()
                return bool(now["passes"] >= passes + 2)

            await wait_for(two_more)
            status = (await client.get("/v1/compression/status")).json()
            assert status["namespaces"]["alice"]["started_at"] == alice_at
            assert [r["namespace"] for r in status["last_pass"]["namespaces"]] == ["bob"]
            await store(client, messages(FACTS[:1], prefix="n"), session_id="new")

            async def alice_again() -> bool:
                now = (await client.get("/v1/compression/status")).json()
                return bool(now["namespaces"]["alice"]["started_at"] != alice_at)

            await wait_for(alice_again)

            ready = (await client.get("/readyz")).json()
            assert ready["compression_heartbeat"] is not None
            metrics = (await client.get("/metrics")).text
            assert 'engram_background_runs_total{job="compression",outcome="failed"}' in metrics
            assert 'engram_memory_pressure_score{namespace="alice"}' in metrics
            assert 'engram_compress_candidate_ratio{namespace="alice"}' in metrics

    async def test_store_during_a_pass_is_not_lost(self, open_client: Any, seeded: Any
                                                   ) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            await set_policy(client, "alice")
            pass_task = asyncio.create_task(run(client, "alice"))
            stored = await store(client, messages(FACTS, prefix="late"), session_id="late")
            result = only(await pass_task)
            assert stored["memories_created"]
            memories = await everything(client, "alice")
            assert set(stored["memories_created"]) <= set(memories)
            assert result["lock_seconds"] < 5


class TestAccess:
    async def test_keys_are_scoped(self, open_client: Any) -> None:
        async with open_client(token=ALICE, **KEYS) as client:
            await store(client, messages(FACTS[:2], prefix="a"), namespace="alice")
            assert (await client.post("/v1/compression/run",
                                      json={"namespace": "bob"})).status_code == 403
            assert (await client.put("/v1/compression/policies/bob",
                                     json={"preset": "default"})).status_code == 403
            mine = await run(client)  # no namespace: the key's own namespaces
            assert [r["namespace"] for r in mine["namespaces"]] == ["alice"]
            status = (await client.get("/v1/compression/status")).json()
            assert set(status["namespaces"]) == {"alice"}
