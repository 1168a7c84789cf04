"""The embedding pool: one model per process, shared by every request, recall first.

Encoding runs on one dedicated thread (the model already uses `embedding_threads` cores inside
a forward pass; two passes at once on a 2-core machine only make both slower). Work waits in
three lanes and the thread always takes the most urgent one next:

1. `query`: recall's questions. Single queries from concurrent callers are micro-batched: one
   pass serves every query queued when it starts (the parts of a compound question, queries
   that arrived during the previous pass). While queries come concurrently the first also
   waits up to `embedding_batch_wait_ms` for companions; a lone query does not wait.
2. `passage`: texts being stored (the store builder, memory edits, imports).
3. `background`: compression summaries, re-embedding after a model change.

Large batches go through in slices of `embedding_batch_size` texts, one slice in the queue per
caller at a time, so a recall waits at most for the slice being encoded, never behind a whole
import, and concurrent imports take turns slice by slice.

Priority is bounded, so no lane starves: a job lets at most `embedding_max_jobs_ahead` jobs of
more urgent lanes go ahead of it (counted when they are taken for a pass, a query being one
job), then it goes next. Strict priority let two recall clients hold back a 10-message store
for 48 s (1,433 recalls went first); now a store waits at most for that many queries plus the
pass being encoded. Counting jobs, not milliseconds, keeps the rule the same on a busy
machine and a quiet one. A due job never follows another slice while questions wait: they
take one pass between, so a question waits for at most one slice of stored text, as before.

Questions also go *inside* a slice of stored text: the model (e5 in torch) encodes a slice in
forward passes of at most ~512 padded tokens, and between two of them the worker thread
encodes the questions waiting at that moment (`_answer_waiting_questions`). A 32-chunk slice
is ~1.5 s on one thread of this machine, one pass of it ~50–90 ms: a recall during an import
waited for the slice; now it waits for one pass. The slice keeps its batches (the stored
vectors do not change), and it moves on by at least one pass between two question passes.
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
from app.ops.recall_first import RecallFirst

if TYPE_CHECKING:
    from app.ops.metrics import Metrics

log = structlog.get_logger(__name__)

__all__ = ["EmbeddingPool", "Lane", "Vector", "load_model"]


class Lane(IntEnum):
    """Priority of queued encoding work: lower runs first."""

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
    # Jobs of more urgent lanes taken for a pass while this one waited.
    overtaken: int = field(compare=False, default=0)


class EmbeddingPool:
    """Async front of one loaded model. Vectors are L2-normalised (cosine = dot product)."""

    def __init__(self, encoder: Encoder, *, name: str, batch_size: int, batch_wait_ms: float,
                 profile: ModelProfile | None = None, max_jobs_ahead: int = 16) -> None:
        self.encoder = encoder
        self.name = name
        self.profile = profile or profile_for(name)
        self.dim: int = int(encoder.dim)
        self._batch_size = batch_size
        self._batch_wait = batch_wait_ms / 1000
        self._max_jobs_ahead = max(1, max_jobs_ahead)
        self._last_lane = Lane.query  # the lane of the pass encoded last
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._jobs: list[_Job] = []
        # `_jobs` is changed on the event loop and, between forward passes of stored text, by
        # the worker thread taking the waiting questions: both hold this lock to touch it.
        self._jobs_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = itertools.count()
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
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
        )

    # --- encoding ----------------------------------------------------------------------

    def encode_blocking(self, texts: list[str], query: bool = False, *,
                        yield_to_questions: bool = False) -> Vector:
        """Encode on the calling thread (benchmarks and the pool's own worker thread).

        `yield_to_questions`: the worker thread encoding a slice of stored text answers the
        questions queued meanwhile between its forward passes (the module's doc).
        """
        started = time.perf_counter()
        between = self._answer_waiting_questions if yield_to_questions else None
        if query:
            vectors = self.encoder.encode_queries(texts, between_passes=between)
        else:
            vectors = self.encoder.encode_passages(texts, between_passes=between)
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

    async def embed_many(self, texts: list[str], *, query: bool = False,
                         background: bool = False) -> Vector:
        """Encode many texts slice by slice; queued questions go between slices.

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

    async def _submit(self, texts: list[str], lane: Lane, *, query: bool = False) -> Vector:
        if self._worker is None or self._arrived is None:
            self._arrived = asyncio.Event()
            self._worker = asyncio.create_task(self._run())
        self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Vector] = self._loop.create_future()
        job = _Job(lane, next(self._seq), texts, future, as_query=query or lane == Lane.query)
        with self._jobs_lock:
            heapq.heappush(self._jobs, job)
        self._arrived.set()
        started = time.perf_counter()
        vectors = await future
        if self.metrics is not None:
            self.metrics.embed_wait.labels(lane.name).observe(time.perf_counter() - started)
        return vectors

    @property
    def queue_depth(self) -> int:
        """Jobs waiting for a forward pass now, all lanes (metrics read it at scrape time)."""
        return len(self._jobs)

    async def _next_query_batch(self, batch: list[_Job], concurrent: bool) -> list[_Job]:
        # One turn of the event loop: callers started in the same turn (gather) are in.
        await asyncio.sleep(0)
        self._take_queries(batch)
        if concurrent and self._arrived is not None:
            deadline = asyncio.get_running_loop().time() + self._batch_wait
            while len(batch) < self._batch_size:
                timeout = deadline - asyncio.get_running_loop().time()
                if timeout <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), timeout)
                except TimeoutError:
                    break
                self._take_queries(batch)
        return batch

    def _take_queries(self, batch: list[_Job], *, unless_overdue: bool = True) -> None:
        """Move waiting questions into `batch`, up to a batch; with `unless_overdue`, none
        while a less urgent job is due (inside a pass of stored text that job is the one
        being encoded, so questions are taken regardless)."""
        with self._jobs_lock:
            while (len(batch) < self._batch_size and self._jobs
                   and self._jobs[0].lane == Lane.query
                   and (not unless_overdue or self._overdue() is None)):
                self._taken(heapq.heappop(self._jobs), batch)

    def _answer_waiting_questions(self) -> None:
        """Between two forward passes of stored text, on the worker thread: encode the
        questions queued now (up to a batch) and hand each its vector on the event loop.

        Called only inside a pass of the passage or background lane, never inside a pass
        of questions, so it does not nest. The pass it interrupts is a job already taken,
        so the bounded-priority rule (`max_jobs_ahead`) still holds for the waiting ones:
        these questions count as going ahead of them.
        """
        if self._loop is None:  # nothing was ever submitted: nobody to answer
            return
        batch: list[_Job] = []
        self._take_queries(batch, unless_overdue=False)
        if not batch:
            return
        texts = [t for job in batch for t in job.texts]
        try:
            vectors = self.encode_blocking(texts, True)
        except Exception as exc:  # the questions' failure, not the slice's: it goes on
            self._loop.call_soon_threadsafe(self._deliver, batch, None, exc)
            return
        self._loop.call_soon_threadsafe(self._deliver, batch, vectors, None)

    @staticmethod
    def _deliver(batch: list[_Job], vectors: Vector | None,
                 error: BaseException | None) -> None:
        """Hand a pass's vectors (or its failure) to its callers (on the event loop)."""
        start = 0
        for job in batch:
            end = start + len(job.texts)
            if not job.future.done():
                if error is not None:
                    job.future.set_exception(error)
                else:
                    assert vectors is not None
                    job.future.set_result(vectors[start:end])
            start = end

    def _taken(self, job: _Job, batch: list[_Job]) -> None:
        """Add `job` to the pass being formed; every less urgent job waiting is overtaken."""
        batch.append(job)
        for waiting in self._jobs:
            if waiting.lane > job.lane:
                waiting.overtaken += 1

    def _overdue(self) -> _Job | None:
        """The oldest waiting job that has let `max_jobs_ahead` jobs go ahead of it."""
        due = [job for job in self._jobs if job.overtaken >= self._max_jobs_ahead]
        return min(due, key=lambda job: job.seq) if due else None

    def _pop_next(self) -> _Job:
        """The most urgent job, unless a less urgent one has waited its turn (and the last
        pass was not already one that questions waited behind)."""
        with self._jobs_lock:
            return self._pop_next_locked()

    def _pop_next_locked(self) -> _Job:
        due = self._overdue()
        questions_wait = self._jobs[0].lane == Lane.query
        if due is None or (questions_wait and self._last_lane != Lane.query):
            return heapq.heappop(self._jobs)
        self._jobs.remove(due)
        heapq.heapify(self._jobs)
        return due

    async def _run(self) -> None:
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        concurrent = False  # whether queries arrived while the previous pass was encoding
        while True:
            while not self._jobs:
                self._arrived.clear()
                await self._arrived.wait()
            first = self._pop_next()
            self._last_lane = first.lane
            batch: list[_Job] = []
            with self._jobs_lock:
                self._taken(first, batch)
            if first.lane == Lane.query:
                batch = await self._next_query_batch(batch, concurrent)
            texts = [t for job in batch for t in job.texts]
            encode = functools.partial(self.encode_blocking, texts, first.as_query,
                                       yield_to_questions=first.lane != Lane.query)
            try:
                vectors = await loop.run_in_executor(self._executor, encode)
            except Exception as exc:  # hand the failure to every waiting caller
                self._deliver(batch, None, exc)
                continue
            finally:
                concurrent = bool(self._jobs) and self._jobs[0].lane == Lane.query
            self._deliver(batch, vectors, None)

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
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
            self._arrived = None
        with self._jobs_lock:
            for job in self._jobs:
                if not job.future.done():
                    job.future.cancel()
            self._jobs.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
