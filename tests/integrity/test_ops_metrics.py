"""Issue 13, item 8: /metrics leaks no namespace names, and every declared metric moves."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from tests.helpers import messages, store

ADMIN = "admin-key-0123456789"
TENANT_KEY = "tenant-key-0123456789"
SECRET_EN = "acme-payroll"
AUTH = {"admin_keys": [ADMIN], "namespace_keys": {TENANT_KEY: ["public-ns"]}}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def sample(text: str, name: str) -> float | None:
    """The value of an unlabelled series `name`, or None when absent."""
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return None if found is None else float(found.group(1))


async def _namespace_with_gauges(client: Any, namespace: str) -> None:
    """Memories in `namespace` and a compression pass there (it sets per-namespace gauges)."""
    zh = [{"msg_id": f"z{i}", "role": "user", "content": f"第{i}次会议讨论了季度预算和招聘计划。"}
          for i in range(6)]
    response = await client.post("/v1/store", json={
        "namespace": namespace, "session_id": "s1", "messages": messages(0, 8) + zh,
        "wait": "built"},
        headers=bearer(ADMIN))
    assert response.status_code == 200, response.text
    response = await client.post("/v1/compression/run", json={"namespace": namespace,
                                                               "dry_run": True},
                                 headers=bearer(ADMIN))
    assert response.status_code == 200, response.text


class TestNamespaceNames:
    async def test_anonymous_and_tenant_scrapes_show_totals_not_names(
            self, open_client: Callable[..., Any]) -> None:
        async with open_client(**AUTH) as client:
            await _namespace_with_gauges(client, SECRET_EN)
            await _namespace_with_gauges(client, "other-tenant")
            admin = (await client.get("/metrics", headers=bearer(ADMIN))).text
            assert f'engram_memory_pressure_score{{namespace="{SECRET_EN}"}}' in admin
            for headers in ({}, bearer(TENANT_KEY)):
                response = await client.get("/metrics", headers=headers)
                assert response.status_code == 200
                text = response.text
                assert SECRET_EN not in text and "other-tenant" not in text
                assert 'namespace="' not in text
                # the folded series: the worst namespace, and how many report
                pressure = sample(text, "engram_memory_pressure_score")
                assert pressure is not None and pressure > 0
                assert 'engram_namespaces_reporting{metric="engram_memory_pressure_score"} 2.0' \
                    in text
                # everything else is still there
                assert 'engram_table_rows{table="memories"}' in text

    async def test_a_wrong_key_is_refused_not_served_anonymously(
            self, open_client: Callable[..., Any]) -> None:
        async with open_client(**AUTH) as client:
            response = await client.get("/metrics", headers=bearer("not-a-key-0123456789"))
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "unauthorized"

    async def test_the_setting_shows_names_to_everyone(
            self, open_client: Callable[..., Any]) -> None:
        async with open_client(metrics_namespace_labels=True, **AUTH) as client:
            await _namespace_with_gauges(client, SECRET_EN)
            text = (await client.get("/metrics")).text
            assert f'engram_memory_pressure_score{{namespace="{SECRET_EN}"}}' in text


class TestDeclaredMetricsMove:
    async def test_every_recall_is_observed(self, open_client: Callable[..., Any]) -> None:
        async with open_client() as client:
            await store(client, messages(0, 6))
            zh = [{"msg_id": "c1", "role": "user",
                   "content": "我下周二要去北京出差，住在王府井附近。"}]
            await store(client, zh, session_id="s-zh")
            for query in ("topic number 3", "我什么时候去北京出差？", "nothing like it at all"):
                response = await client.post("/v1/recall", json={"namespace": "alice",
                                                                  "query": query})
                assert response.status_code == 200, response.text
            # a recall that fails (unknown namespace is fine: 200 with nothing) still counts
            await client.post("/v1/recall", json={"namespace": "nobody", "query": "hello"})
            text = (await client.get("/metrics")).text
            assert sample(text, "engram_recall_seconds_count") == 4.0
            seconds = sample(text, "engram_recall_seconds_sum")
            assert seconds is not None and seconds > 0

    async def test_embedding_queue_depth_is_the_live_queue(
            self, client: Any) -> None:
        pool = client.app.state.engram.pool
        # Five batches' worth at once: while the first pass encodes, the rest wait queued.
        burst = [pool.embed_query(f"query number {i} 查询{i}") for i in range(5 * 32)]
        waiting = asyncio.gather(*burst)
        await asyncio.sleep(0)  # the queries are queued now
        during = sample((await client.get("/metrics")).text, "engram_embedding_queue_depth")
        await waiting
        after = sample((await client.get("/metrics")).text, "engram_embedding_queue_depth")
        assert during is not None and during > 0
        assert after == 0.0

    async def test_every_declared_metric_has_a_sample(self, client: Any) -> None:
        """Each metric on the registry was touched by ordinary traffic (nothing stays 0)."""
        await store(client, messages(0, 8))
        await client.post("/v1/recall", json={"namespace": "alice", "query": "topic 2"})
        # A recall past its deadline (the suite's default is none): degraded, a stage skipped.
        await client.post("/v1/recall", json={"namespace": "alice", "query": "topic 3",
                                               "deadline_ms": 1})
        await client.post("/v1/compression/run", json={"namespace": "alice", "force": True})
        text = (await client.get("/metrics")).text
        registry = client.app.state.metrics
        declared = [name for name, value in vars(registry).items()
                    if hasattr(value, "_name") and name != "registry"]
        assert len(declared) >= 12
        for attribute in declared:
            metric = getattr(registry, attribute)
            name = metric._name
            kind = metric._type
            if kind == "histogram":
                count = re.findall(rf"^{name}_count(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
                assert count and max(float(c) for c in count) > 0, f"{name} never observed"
            elif kind == "counter":
                total = re.findall(rf"^{name}_total(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
                assert total and max(float(c) for c in total) > 0, f"{name} never counted"
            elif attribute != "embed_queue":  # a live depth: 0 when idle is right
                values = re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
                assert values and max(float(v) for v in values) > 0, f"{name} never set"
