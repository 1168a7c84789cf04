"""Prometheus metrics, one registry per app (tests build many apps in one process).

Request counts and latencies per route template, store and embedding timings, batch sizes
and queue depth, lock waits, table sizes and versions (read at scrape time), background runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("engram_http_requests_total", "HTTP requests",
                                ["method", "route", "status"], registry=r)
        self.latency = Histogram("engram_http_request_seconds", "HTTP request latency",
                                 ["method", "route"], buckets=_LATENCY_BUCKETS, registry=r)
        self.store_seconds = Histogram("engram_store_seconds", "Store call duration",
                                       ["mode"], buckets=_LATENCY_BUCKETS, registry=r)
        self.store_messages = Counter("engram_store_messages_total", "Messages by outcome",
                                      ["outcome"], registry=r)
        self.recall_seconds = Histogram("engram_recall_seconds", "Recall duration",
                                        buckets=_LATENCY_BUCKETS, registry=r)
        self.embed_batch = Histogram("engram_embedding_batch_size", "Texts per forward pass",
                                     buckets=(1, 2, 4, 8, 16, 32, 64, 128), registry=r)
        self.embed_seconds = Histogram("engram_embedding_batch_seconds", "Forward pass time",
                                       buckets=_LATENCY_BUCKETS, registry=r)
        self.embed_queue = Gauge("engram_embedding_queue_depth",
                                 "Queries waiting for a forward pass", registry=r)
        self.lock_wait = Histogram("engram_lock_wait_seconds", "Wait for a namespace lock",
                                   buckets=_LATENCY_BUCKETS, registry=r)
        self.table_rows = Gauge("engram_table_rows", "Rows per table", ["table"], registry=r)
        self.table_version = Gauge("engram_table_version", "Version per table", ["table"],
                                   registry=r)
        # What the process holds in memory, read at scrape time (`watch_memory`).
        self.memory_held = Gauge("engram_memory_held", "What the server holds in memory "
                                 "(rows, bytes, queued items), all namespaces together",
                                 ["what"], registry=r)
        self.background_runs = Counter("engram_background_runs_total", "Background job runs",
                                       ["job", "outcome"], registry=r)

    def watch_memory(self, readers: Mapping[str, Callable[[], float]]) -> None:
        """Report each reader's figure as `engram_memory_held{what=name}` at every scrape;
        the process's resident set size is always added (`resident_bytes`)."""
        for name, reader in {**readers, "resident_bytes": resident_bytes}.items():
            self.memory_held.labels(name).set_function(reader)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def resident_bytes() -> float:
    """VmRSS of this process (Linux); 0 where /proc is missing."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return float(int(line.split()[1]) * 1024)
    return 0.0


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path: str | None = getattr(route, "path", None)
    return path or "unmatched"  # never the raw path: ids would explode the label space


class MetricsMiddleware:
    """Count and time every HTTP request by its route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route, method = _route_template(scope), scope["method"]
            self._metrics.requests.labels(method, route, str(status)).inc()
            self._metrics.latency.labels(method, route).observe(time.perf_counter() - started)
