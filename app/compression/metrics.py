"""Per-namespace compression gauges on the app's Prometheus registry.

    engram_memory_pressure_score{namespace}     active text size / capacity
    engram_compress_candidate_ratio{namespace}  share of the stream that is a candidate
    engram_context_hit_rate{namespace}          smoothed share of recalled memories used

Registered once per registry (an app may run its lifespan more than once in tests).
"""

from __future__ import annotations

import contextlib
import weakref

from prometheus_client import CollectorRegistry, Gauge

from app.ops.metrics import Metrics


class CompressionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.pressure = Gauge("engram_memory_pressure_score",
                              "Memory pressure: active text size / capacity",
                              ["namespace"], registry=registry)
        self.candidate_ratio = Gauge("engram_compress_candidate_ratio",
                                     "Share of the memory stream that is a compression "
                                     "candidate", ["namespace"], registry=registry)
        self.hit_rate = Gauge("engram_context_hit_rate",
                              "Smoothed share of recalled memories referenced afterwards",
                              ["namespace"], registry=registry)

    def set(self, namespace: str, *, pressure: float, candidate_ratio: float,
            hit_rate: float | None) -> None:
        self.pressure.labels(namespace).set(pressure)
        self.candidate_ratio.labels(namespace).set(candidate_ratio)
        if hit_rate is not None:
            self.hit_rate.labels(namespace).set(hit_rate)

    def forget(self, namespace: str) -> None:
        """Drop a deleted namespace's series."""
        for gauge in (self.pressure, self.candidate_ratio, self.hit_rate):
            with contextlib.suppress(KeyError):  # never set for this namespace
                gauge.remove(namespace)


_BY_METRICS: weakref.WeakKeyDictionary[Metrics, CompressionMetrics] = (
    weakref.WeakKeyDictionary())


def compression_metrics(metrics: Metrics) -> CompressionMetrics:
    """The gauges on `metrics`' registry, created on first use."""
    found = _BY_METRICS.get(metrics)
    if found is None:
        found = CompressionMetrics(metrics.registry)
        _BY_METRICS[metrics] = found
    return found
