"""Compression: weight scores, decision rules, summaries and the background scheduler.

    scoring.py     the four dimensions, urgency and the weight score (pure)
    policy.py      rule parameters and scenario presets
    rules.py       the decision rules of SPEC.md §8 (pure)
    feedback.py    reference boosts, context hit rate, online weights (pure)
    clustering.py  candidates → clusters (embeddings + TF-IDF)
    summarize.py   extractive summaries; optional OpenAI-compatible abstractive ones
    triples.py     the subject–verb–object form of compressed originals
    gate.py        the quality gate: probe questions and answer coverage (pure)
    archive.py     restoring a compressed memory byte for byte
    service.py     one pass over one namespace
    scheduler.py   the background task, manual runs, status
    router.py      /v1/compression/*

docs/compression.md explains the whole and reports the benchmark.
"""

from __future__ import annotations

from app.compression.metrics import compression_metrics
from app.compression.scheduler import CompressionScheduler
from app.compression.service import CompressionService
from app.compression.summarize import AbstractiveSummarizer
from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.locks import NamespaceLocks
from app.ops.metrics import Metrics
from app.scheduler import Maintenance
from app.storage.repository import Repository


def build_compression(repo: Repository, pool: EmbeddingPool, locks: NamespaceLocks,
                      settings: Settings, *, maintenance: Maintenance, metrics: Metrics
                      ) -> CompressionScheduler:
    """The compression service and its scheduler, as the lifespan needs them (not started)."""
    summarizer = None
    if settings.compression_llm_url:
        summarizer = AbstractiveSummarizer(
            settings.compression_llm_url, model=settings.compression_llm_model,
            api_key=settings.compression_llm_api_key.get_secret_value(),
            timeout=settings.compression_llm_timeout_seconds)
    service = CompressionService(repo, pool, locks, settings,
                                 metrics=compression_metrics(metrics), summarizer=summarizer)
    return CompressionScheduler(service, repo, maintenance,
                                interval=settings.compression_interval_seconds,
                                enabled=settings.compression_enabled,
                                wait_seconds=settings.lock_timeout_seconds, metrics=metrics)


__all__ = ["CompressionScheduler", "CompressionService", "build_compression"]
