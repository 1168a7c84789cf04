"""The application factory and the lifespan that owns every long-lived object."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from fastapi import Depends, FastAPI

from app.classify import warm_up as warm_up_classifier
from app.classify.router import router as classify_router
from app.compression import build_compression
from app.compression.router import router as compression_router
from app.config import Settings
from app.context.router import router as context_router
from app.debug.router import router as debug_router
from app.deps import reject_unknown_query_params
from app.embedding.identity import ensure_model_matches
from app.embedding.pool import EmbeddingPool
from app.errors import Unavailable, error_responses, install_error_handlers
from app.locks import NamespaceLocks
from app.logging import RequestIdMiddleware, configure_logging
from app.mcp.http import mcp_route
from app.memories.router import router as memories_router
from app.memories.service import MemoryService
from app.ops.disk import DiskSpace
from app.ops.heap import freeze_startup_heap, thaw_startup_heap, watch_collections
from app.ops.malloc import limit_arenas, release_free_memory
from app.ops.metrics import Metrics, MetricsMiddleware
from app.ops.priority import lower_default_executor
from app.ops.recall_first import RecallFirst
from app.ops.router import router as ops_router
from app.ops.stalls import StallWatch
from app.ops.task_stacks import log_task_stacks_on_signal, stop_logging_task_stacks
from app.recall.bilingual import warm_up as warm_up_dictionary
from app.recall.hits import HitRecorder
from app.recall.router import router as recall_router
from app.recall.service import RecallService
from app.scheduler import Maintenance
from app.state import AppState
from app.storage.repository import Repository
from app.store.builder import MemoryBuilder
from app.store.router import router as store_router
from app.store.service import StoreService
from app.store.sweep import PendingSweep
from app.transfer.router import router as transfer_router
from app.transfer.service import TransferService
from app.ui import mount_ui
from app.validation import EncodedSlashMiddleware

log = structlog.get_logger(__name__)


def create_app(settings: Settings | None = None, *, pool: EmbeddingPool | None = None) -> FastAPI:
    """Build a fresh app.

    Args:
        settings: defaults to `Settings()` from the environment.
        pool: an already-loaded embedding pool to share (tests load the model once); by
            default the lifespan loads the configured model.
    """
    settings = settings or Settings()
    configure_logging(level=settings.log_level, json=settings.is_production())
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        limit_arenas(settings.malloc_arena_max)  # before the threads below allocate
        embedding = pool or await EmbeddingPool.load(settings)
        # jieba loads its dictionary on first use (~1 s): pay it at start-up, not in a request.
        await asyncio.to_thread(warm_up_classifier)
        if settings.recall_across_languages:  # the dictionary's tables (~2 s), likewise
            await asyncio.to_thread(warm_up_dictionary)
        # From here `asyncio.to_thread` work (builds' analysis, compression) runs on threads
        # the kernel puts behind recall's (app/ops/priority.py).
        lower_default_executor(settings.build_niceness)
        repo = await Repository.open(settings, embedding_dim=embedding.dim)
        await ensure_model_matches(repo, embedding, reembed=settings.reembed_on_model_change)
        locks = NamespaceLocks(settings.resolved_lock_dir, timeout=settings.lock_timeout_seconds,
                               leases=repo.leases, max_idle=settings.namespace_locks_max_idle)
        embedding.metrics = metrics
        metrics.watch_queue(lambda: embedding.queue_depth)
        locks.on_wait = metrics.lock_wait.observe
        # Recalls go first: builds and background work wait for them (bounded). One gate,
        # held by the pool that every recall and build goes through.
        recall_first = RecallFirst(settings.recall_first_max_wait_ms / 1000)
        recall_first.on_wait = metrics.recall_first_wait.observe
        embedding.recall_first = recall_first
        builder = MemoryBuilder(repo, embedding, settings, metrics=metrics)
        store = StoreService(repo, builder, locks, settings, metrics=metrics)
        maintenance = Maintenance(repo, every_versions=settings.compact_every_versions,
                                  every_rows=settings.compact_every_rows,
                                  vector_index_min_rows=settings.vector_index_min_rows)
        hits = HitRecorder(repo, locks, flush_seconds=settings.hit_flush_seconds,
                           max_pending=settings.hit_flush_max_pending,
                           per_memory_per_day=settings.hits_per_memory_per_day,
                           maintenance=maintenance.busy)
        compression = build_compression(repo, embedding, locks, settings,
                                        maintenance=maintenance, metrics=metrics)
        metrics.watch_memory({**repo.memory_held(), "hit_buffer_ids": lambda: hits.pending,
                              "store_queue_sessions": lambda: store.queued_sessions,
                              "namespace_locks": lambda: locks.known})
        metrics.namespace_loads.set_function(lambda: float(repo.namespace_cache.loads))
        app.state.engram = AppState(
            settings=settings, repo=repo, pool=embedding, locks=locks, builder=builder,
            store=store, memories=MemoryService(repo, builder, locks, settings,
                                                       pool=embedding),
            maintenance=maintenance,
            transfer=TransferService(repo, embedding, builder, locks, settings),
            recall=RecallService(repo, embedding, hits, settings, metrics=metrics),
            hits=hits,
            compression=compression,
        )
        hits.after_flush = app.state.engram.memories.promote_due  # tiers earned by hits
        store.start()
        await store.resume_pending()
        # A dead server's acknowledged messages, built by the live ones (app/store/sweep.py).
        sweep = PendingSweep(repo, store, locks, interval=settings.pending_sweep_seconds,
                             min_age=settings.pending_sweep_min_age_seconds)
        sweep.start()
        maintenance.start()
        hits.start()
        compression.start()
        loop_lag = asyncio.create_task(metrics.sample_loop_lag(), name="loop-lag")
        stall_watch = StallWatch(app.state.engram.heartbeats())  # a stuck worker's awaits
        stall_watch.start()
        loop = asyncio.get_running_loop()
        stacks_on_signal = log_task_stacks_on_signal(loop)  # kill -USR1: what waits
        release_free_memory()  # what loading the model and the tables freed
        # What start-up built lives as long as the server: no collection walks it again
        # (app/ops/heap.py: a full one over it stopped every recall in flight ~0.25 s).
        frozen = freeze_startup_heap()
        stop_watching_collections = watch_collections(metrics.gc_pause)
        if not settings.auth_enabled:
            log.warning("auth_disabled", detail="no API keys configured: serving local callers "
                        "only", host=settings.host)
        log.info("ready", lancedb=settings.resolved_lancedb_uri, model=embedding.name,
                 frozen_objects=frozen)
        try:
            async with mcp_endpoint.running():
                yield
        finally:
            # Reverse order of creation.
            stop_watching_collections()
            thaw_startup_heap()
            if stacks_on_signal:
                stop_logging_task_stacks(loop)
            await stall_watch.stop()
            loop_lag.cancel()
            await compression.stop()  # a pass cut short here is repaired by the next one
            await hits.stop()  # writes the buffered hits
            await maintenance.stop()
            await sweep.stop()
            await store.stop()
            await repo.close()  # a compaction under way finishes
            if pool is None:
                await embedding.close()
            app.state.engram = None

    app = FastAPI(
        title="Engram",
        version="0.1.0",
        summary="Long-term memory for AI assistants: store sessions, recall what matters.",
        lifespan=lifespan,
        # operationIds are the endpoint function names: generated clients get readable
        # method names (`store`, `recall`) instead of `store_v1_store_post`.
        generate_unique_id_function=lambda route: route.name,
        # Unknown query parameters are a 422 on every route (one check, not per route).
        dependencies=[Depends(reject_unknown_query_params)],
        responses=error_responses(422),
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.engram = None
    app.state.disk = disk = DiskSpace(settings.data_dir, min_free_mb=settings.min_free_disk_mb)
    install_error_handlers(app, on_disk_full=disk.record_full)  # innermost middleware
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(EncodedSlashMiddleware)  # outermost: routing reads its path
    for router in (store_router, recall_router, context_router, memories_router, classify_router,
                   transfer_router, compression_router, debug_router, ops_router):
        app.include_router(router)
    # /mcp: the MCP tools over the same services, behind the same keys (app/mcp/).
    mcp, mcp_endpoint = mcp_route(lambda: get_state_of(app), settings)
    app.router.routes.append(mcp)
    mount_ui(app)  # the memory inspector at /ui (static files over the public API)
    return app


def get_state_of(app: FastAPI) -> AppState:
    """The app's long-lived objects. Raises: Unavailable: the lifespan has not set them."""
    state: AppState | None = app.state.engram
    if state is None:
        raise Unavailable("the service is starting up")
    return state
