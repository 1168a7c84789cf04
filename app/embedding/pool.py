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
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
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


class EmbeddingPool:
    """Async front of one loaded model. Vectors are L2-normalised (cosine = dot product)."""

    def __init__(self, encoder: Encoder, *, name: str, batch_size: int, batch_wait_ms: float,
                 profile: ModelProfile | None = None) -> None:
        self.encoder = encoder
        self.name = name
        self.profile = profile or profile_for(name)
        self.dim: int = int(encoder.dim)
        self._batch_size = batch_size
        self._batch_wait = batch_wait_ms / 1000
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._jobs: list[_Job] = []
        self._seq = itertools.count()
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0
        self.texts_encoded = 0
        self.metrics: Metrics | None = None

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
        )

    # --- encoding ----------------------------------------------------------------------

    def encode_blocking(self, texts: list[str], query: bool = False) -> Vector:
        """Encode on the calling thread (benchmarks and the pool's own worker thread)."""
        started = time.perf_counter()
        if query:
            vectors = self.encoder.encode_queries(texts)
        else:
            vectors = self.encoder.encode_passages(texts)
        self.batches += 1
        self.texts_encoded += len(texts)
        if self.metrics is not None:
            self.metrics.embed_batch.observe(len(texts))
            self.metrics.embed_seconds.observe(time.perf_counter() - started)
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
        parts = [
            await self._submit(texts[i: i + self._batch_size], lane, query=query)
            for i in range(0, len(texts), self._batch_size)
        ]
        return np.concatenate(parts)

    async def _submit(self, texts: list[str], lane: Lane, *, query: bool = False) -> Vector:
        if self._worker is None or self._arrived is None:
            self._arrived = asyncio.Event()
            self._worker = asyncio.create_task(self._run())
        future: asyncio.Future[Vector] = asyncio.get_running_loop().create_future()
        job = _Job(lane, next(self._seq), texts, future, as_query=query or lane == Lane.query)
        heapq.heappush(self._jobs, job)
        self._arrived.set()
        if self.metrics is not None:
            self.metrics.embed_queue.set(len(self._jobs))
        return await future

    async def _next_query_batch(self, first: _Job, concurrent: bool) -> list[_Job]:
        batch = [first]
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

    def _take_queries(self, batch: list[_Job]) -> None:
        while (len(batch) < self._batch_size and self._jobs
               and self._jobs[0].lane == Lane.query):
            batch.append(heapq.heappop(self._jobs))

    async def _run(self) -> None:
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        concurrent = False  # whether queries arrived while the previous pass was encoding
        while True:
            while not self._jobs:
                self._arrived.clear()
                await self._arrived.wait()
            first = heapq.heappop(self._jobs)
            if first.lane == Lane.query:
                batch = await self._next_query_batch(first, concurrent)
            else:
                batch = [first]
            texts = [t for job in batch for t in job.texts]
            try:
                vectors = await loop.run_in_executor(self._executor, self.encode_blocking,
                                                     texts, first.as_query)
            except Exception as exc:  # hand the failure to every waiting caller
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(exc)
                continue
            finally:
                concurrent = bool(self._jobs) and self._jobs[0].lane == Lane.query
                if self.metrics is not None:
                    self.metrics.embed_queue.set(len(self._jobs))
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
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
            self._arrived = None
        for job in self._jobs:
            if not job.future.done():
                job.future.cancel()
        self._jobs.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
