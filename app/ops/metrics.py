"""Prometheus metrics, one registry per app (tests build many apps in one process).

Request counts and latencies per route template, store, recall and embedding timings, batch
sizes and the live queue depth, lock waits, table sizes and versions (read at scrape time),
background runs.

Namespace names are tenants' data: a series labelled with them (the compression gauges, any
`namespace` label) is shown as is only to admin callers, or to everyone with
`ENGRAM_METRICS_NAMESPACE_LABELS=true`. Everyone else gets one unlabelled series per
metric: counters and histograms summed over namespaces, gauges as their maximum (the worst
namespace is what an alert watches) plus `engram_namespaces_reporting{metric}`.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.periodic import Periodic

NAMESPACE_LABEL = "namespace"

_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60)
# Finer, for the steps of a recall's search (tens of ms each).
_STEP_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.125,
                 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 1, 2, 5)


def lap_timer(stages: Histogram | None, *, started: float | None = None
              ) -> Callable[[str], None]:
    """`lap(stage)`: observe the time since the last lap (or since `started`, default now)
    as `stage` in the `stages` histogram; nothing without one."""
    last = time.perf_counter() if started is None else started

    def lap(stage: str) -> None:
        nonlocal last
        now = time.perf_counter()
        if stages is not None:
            stages.labels(stage).observe(now - last)
        last = now

    return lap


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
        # Where a recall's time goes (RecallService.recall): read the question, search and
        # score (the question's vector wait is in engram_embedding_wait_seconds{lane="query"}),
        # order (newer statements first), pack and render.
        self.recall_stage = Histogram("engram_recall_stage_seconds", "Recall time per stage",
                                      ["stage"], buckets=_LATENCY_BUCKETS, registry=r)
        # Where a store's time goes (StoreService, MemoryBuilder.build_session): the raw-log
        # write (with the build's reads for wait=true), the build's own reads (background
        # builds), the firewall search, analysis and embedding, the memories write, the
        # superseded search and events, the raw log marked done with the ledger, the jobs.
        # Inside the search stage (app/recall/search.py): the keyword search (with the
        # namespace copy's check or load), the vector search once the question's vector is
        # there, what was left of the keyword search then, the extra (date, session) searches;
        # and the namespace copies (re)loaded from LanceDB (namespace_cache.py).
        self.recall_search = Histogram("engram_recall_search_seconds",
                                       "Recall search time per step", ["step"],
                                       buckets=_STEP_BUCKETS, registry=r)
        # Recalls answered from what was ready at their deadline (app/recall/deadline.py),
        # and the stages skipped (vector, keyword, second_hop, pending): a recall may skip
        # several.
        self.recall_degraded = Counter("engram_recall_degraded_total",
                                       "Recalls that skipped a stage for their deadline",
                                       registry=r)
        self.recall_skipped = Counter("engram_recall_skipped_total",
                                      "Recall stages skipped for the deadline", ["stage"],
                                      registry=r)
        self.store_stage = Histogram("engram_store_stage_seconds", "Store time per stage",
                                     ["stage"], buckets=_LATENCY_BUCKETS, registry=r)
        self.embed_batch = Histogram("engram_embedding_batch_size", "Texts per forward pass",
                                     buckets=(1, 2, 4, 8, 16, 32, 64, 128), registry=r)
        # Per kind of text: a question's own encoding, against its wait (embed_wait).
        self.embed_seconds = Histogram("engram_embedding_batch_seconds",
                                       "Encoding time of one batch, questions or stored text",
                                       ["kind"], buckets=_LATENCY_BUCKETS, registry=r)
        # Queue and passes together, per lane: what a recall's question waits for its vector
        # while stores and background work use the model.
        self.embed_wait = Histogram("engram_embedding_wait_seconds",
                                    "From asking for vectors to getting them, per lane",
                                    ["lane"], buckets=_LATENCY_BUCKETS, registry=r)
        # How late the event loop runs a timer (`sample_loop_lag`): the wait any request's
        # next step has, from CPU work on the loop or the GIL held by other threads.
        self.loop_lag = Histogram("engram_event_loop_lag_seconds",
                                  "Delay of a 100 ms timer on the event loop",
                                  buckets=_LATENCY_BUCKETS, registry=r)
        # How long each of Python's cycle collections stopped the process (app/ops/heap.py):
        # a full one over a large heap stops the event loop, and every recall in flight.
        self.gc_pause = Histogram("engram_gc_pause_seconds",
                                  "Duration of Python's cycle collections, per generation",
                                  ["generation"], buckets=_STEP_BUCKETS, registry=r)
        self.embed_queue = Gauge("engram_embedding_queue_depth",
                                 "Queries waiting for a forward pass", registry=r)
        # What builds and background work waited for recalls in flight, per boundary
        # (app/ops/recall_first.py): the price of recall first, paid by the ingest.
        self.recall_first_wait = Histogram("engram_recall_first_wait_seconds",
                                           "Wait of a build step for recalls (0: none in flight)",
                                           buckets=_LATENCY_BUCKETS, registry=r)
        self.lock_wait = Histogram("engram_lock_wait_seconds", "Wait for a namespace lock",
                                   buckets=_LATENCY_BUCKETS, registry=r)
        self.table_rows = Gauge("engram_table_rows", "Rows per table", ["table"], registry=r)
        self.table_version = Gauge("engram_table_version", "Version per table", ["table"],
                                   registry=r)
        # What the process holds in memory, read at scrape time (`watch_memory`).
        self.memory_held = Gauge("engram_memory_held", "What the server holds in memory "
                                 "(rows, bytes, queued items), all namespaces together",
                                 ["what"], registry=r)
        # Namespace copies loaded from LanceDB since the start (namespace_cache.py): a recall
        # whose copy was dropped waits for the load.
        self.namespace_loads = Gauge("engram_namespace_cache_loads",
                                     "Namespace copies loaded since the start", registry=r)
        self.background_runs = Counter("engram_background_runs_total", "Background job runs",
                                       ["job", "outcome"], registry=r)

    def watch_memory(self, readers: Mapping[str, Callable[[], float]]) -> None:
        """Report each reader's figure as `engram_memory_held{what=name}` at every scrape;
        the process's resident set size is always added (`resident_bytes`), with its
        anonymous and file-backed parts."""
        own = {"resident_bytes": resident_bytes,
               "resident_anonymous_bytes": lambda: resident_bytes("RssAnon"),
               "resident_file_bytes": lambda: resident_bytes("RssFile")}
        for name, reader in {**readers, **own}.items():
            self.memory_held.labels(name).set_function(reader)

    async def sample_loop_lag(self, every: float = 0.1) -> None:
        """Run forever (a task of the lifespan): observe how late each timer fires."""
        loop = asyncio.get_running_loop()
        due = loop.time() + every

        async def sample() -> None:
            nonlocal due
            self.loop_lag.observe(max(0.0, loop.time() - due))
            due = loop.time() + every  # the next wait starts now

        await Periodic("loop-lag", sample, interval=every).run()

    def watch_queue(self, depth: Callable[[], int]) -> None:
        """Read the embedding queue's depth at scrape time (a last-set value goes stale)."""
        self.embed_queue.set_function(lambda: float(depth()))

    def render(self, *, namespace_labels: bool) -> bytes:
        """The Prometheus text; `namespace_labels=False` folds namespaces away (module doc)."""
        if namespace_labels:
            return generate_latest(self.registry)
        without = CollectorRegistry(auto_describe=False)
        without.register(_WithoutNamespaces(self.registry))
        return generate_latest(without)


class _WithoutNamespaces(Collector):
    """The registry's metrics with every `namespace` label folded into one series."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        reporting = Metric("engram_namespaces_reporting",
                           "Namespaces with a series of the metric (names shown to admins "
                           "only)", "gauge")
        for family in self._source.collect():
            if not any(NAMESPACE_LABEL in sample.labels for sample in family.samples):
                yield family
                continue
            folded = Metric(family.name, family.documentation, family.type, family.unit)
            folded.samples = list(_fold(family.samples, maximum=family.type == "gauge"))
            namespaces = {s.labels[NAMESPACE_LABEL] for s in family.samples
                          if NAMESPACE_LABEL in s.labels}
            reporting.add_sample("engram_namespaces_reporting", {"metric": family.name},
                                 float(len(namespaces)))
            yield folded
        if reporting.samples:
            yield reporting


def _fold(samples: Iterable[Sample], *, maximum: bool) -> Iterator[Sample]:
    values: defaultdict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = (
        defaultdict(list))
    for sample in samples:
        labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != NAMESPACE_LABEL))
        values[(sample.name, labels)].append(sample.value)
    for (name, labels), found in values.items():
        if name.endswith("_created"):  # a time stamp: the first series' start
            yield Sample(name, dict(labels), min(found))
        else:
            yield Sample(name, dict(labels), max(found) if maximum else sum(found))


def resident_bytes(field: str = "VmRSS") -> float:
    """A size from /proc/self/status (Linux), in bytes; 0 where /proc is missing.

    VmRSS is the resident set: RssAnon (the heaps: Python objects, tensors, LanceDB's and
    Arrow's buffers) plus RssFile (mapped files, mostly the libraries' code: ~0.28 GB at an
    idle start, shared with other processes mapping the same files).
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith(field + ":"):
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
