"""The embedding pool's micro-batching, with the real model."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.embedding.pool import EmbeddingPool
from tests.conftest import make_settings


async def test_queries_of_one_turn_share_a_pass_and_a_lone_one_does_not_wait(
        model: Any) -> None:
    # A 10 s wait for companions (the settings allow 100 ms; the pool itself takes any): a
    # pass that waited is unmistakable, and a busy machine's slow encode cannot pass for one.
    pool = EmbeddingPool(model, name="test", batch_size=32, batch_wait_ms=10_000)
    try:
        a, _ = await asyncio.gather(pool.embed_query("dentist on Thursday"),
                                    pool.embed_query("下周二上午体检"))
        assert pool.batches == 1 and pool.texts_encoded == 2
        assert np.allclose(a, pool.encode_blocking(["dentist on Thursday"])[0], atol=1e-5)
        started = time.perf_counter()
        await pool.embed_query("a lone query")
        assert time.perf_counter() - started < 5
        assert pool.batches == 3
    finally:
        await pool.close()


async def test_counting_tokens_while_the_worker_encodes_leaves_its_batches_padded(
        model: Any, tmp_path: Path) -> None:
    # Recall counts tokens on the event loop while the worker thread encodes a batch of
    # texts of different lengths. A thread switch after nearly every bytecode makes the
    # interleaving that once left a batch unpadded happen within a few batches.
    pool = EmbeddingPool.from_model(model, make_settings(tmp_path))
    texts = ["short", "the dentist appointment moved to Thursday morning at nine " * 3] * 8
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        encoding = asyncio.create_task(encode_repeatedly(pool, texts, times=20))
        counted = 0
        while not encoding.done():
            assert pool.count_tokens("下周二上午体检 dentist") > 0
            counted += 1
            await asyncio.sleep(0)
        vectors = await encoding
        assert counted > 0 and all(v.shape == (len(texts), pool.dim) for v in vectors)
    finally:
        sys.setswitchinterval(interval)
        await pool.close()


async def encode_repeatedly(pool: EmbeddingPool, texts: list[str], *, times: int) -> list[Any]:
    # All queued at once: the worker thread goes from one batch to the next without a pause.
    return list(await asyncio.gather(*(pool.embed_many(texts) for _ in range(times))))
