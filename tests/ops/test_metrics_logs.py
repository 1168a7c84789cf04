"""Prometheus metrics and request ids, as an operator sees them."""

from __future__ import annotations

from typing import Any

from tests.helpers import messages, metric_by_label, metrics_after_bilingual_use, store


class TestMetrics:
    async def test_requests_tables_and_embedding_are_measured(self, client: Any) -> None:
        await store(client, messages(0, 10))
        await client.get("/v1/memories/mem_missing")
        text = (await client.get("/metrics")).text
        assert 'engram_http_requests_total{method="POST",route="/v1/store",status="200"} 1.0' \
            in text
        # by route template, never by raw path
        assert 'route="/v1/memories/{memory_id}",status="404"' in text
        assert "mem_missing" not in text
        assert 'engram_table_rows{table="messages"} 10.0' in text
        assert 'engram_store_messages_total{outcome="new"} 10.0' in text
        assert "engram_embedding_batch_size_count" in text
        assert "engram_lock_wait_seconds_count" in text

    async def test_lancedb_caches_question_waits_and_loop_lag_are_reported(
            self, client: Any) -> None:
        text = await metrics_after_bilingual_use(client)
        held = metric_by_label(text, "engram_memory_held", "what")
        # LanceDB's caches, within their caps (16 + 8 MB by default).
        assert 0 < held["lancedb_cache_bytes"] <= (16 + 8) * 2**20
        # Each recall's question waited for its vector (the query lane), each store's chunks
        # for theirs (a recall may also embed a second text: at least one wait each).
        waits = metric_by_label(text, "engram_embedding_wait_seconds_count", "lane")
        assert waits["query"] >= 2 and waits["passage"] >= 2, waits
        assert "engram_event_loop_lag_seconds_count" in text

    async def test_recall_search_steps_are_reported(self, client: Any) -> None:
        """Where a recall's search stage goes (one English, one Chinese recall): the keyword
        search, the wait for the question's vector, the vector search and what is left of the
        keyword search then, each once per searched part; and the namespace copies loaded."""
        text = await metrics_after_bilingual_use(client)
        steps = metric_by_label(text, "engram_recall_search_seconds_count", "step")
        for step in ("keyword", "vector_ready", "vector", "keyword_left"):
            assert steps.get(step, 0) >= 2, (step, steps)
        loads = [line for line in text.splitlines()
                 if line.startswith("engram_namespace_cache_loads ")]
        assert loads and float(loads[0].rsplit(" ", 1)[1]) >= 1, loads

    async def test_store_stages_are_reported(self, client: Any) -> None:
        """Where a store's time goes: each stage of a waiting store (two, one English and
        one Chinese), then an acknowledged append and its background build."""
        text = await metrics_after_bilingual_use(client)
        stages = metric_by_label(text, "engram_store_stage_seconds_count", "stage")
        for stage in ("log_and_read", "firewall", "embed", "memories", "events", "done",
                      "jobs"):
            assert stages.get(stage) == 2, (stage, stages)
        response = await client.post("/v1/store", json={
            "namespace": "alice", "session_id": "s2", "wait": False,
            "messages": [{"role": "user", "content": "我下周二去杭州出差。"},
                         {"role": "user", "content": "The flight leaves at 9 am."}]})
        assert response.status_code == 202, response.text
        await client.app.state.engram.store.idle()
        text = (await client.get("/metrics")).text
        stages = metric_by_label(text, "engram_store_stage_seconds_count", "stage")
        assert stages["ack"] == 1 and stages["read"] == 1 and stages["embed"] == 3, stages

    async def test_metrics_content_type(self, client: Any) -> None:
        response = await client.get("/metrics")
        assert response.headers["content-type"].startswith("text/plain")


class TestRequestIds:
    async def test_every_response_carries_a_request_id(self, client: Any) -> None:
        response = await client.get("/healthz")
        assert len(response.headers["x-request-id"]) >= 8

    async def test_a_client_request_id_is_kept(self, client: Any) -> None:
        response = await client.get("/healthz", headers={"X-Request-ID": "trace-42"})
        assert response.headers["x-request-id"] == "trace-42"
