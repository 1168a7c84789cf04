"""The embedding pool's micro-batching, with the real model."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.embedding.pool import EmbeddingPool
from tests.conftest import make_settings


async def test_queries_of_one_turn_share_a_pass_and_a_lone_one_does_not_wait(
        model: Any, tmp_path: Path) -> None:
    pool = EmbeddingPool.from_model(model, make_settings(tmp_path,
                                                         embedding_batch_wait_ms=100))
    try:
        a, _ = await asyncio.gather(pool.embed_query("dentist on Thursday"),
                                    pool.embed_query("下周二上午体检"))
        assert pool.batches == 1 and pool.texts_encoded == 2
        assert np.allclose(a, pool.encode_blocking(["dentist on Thursday"])[0], atol=1e-5)
        started = time.perf_counter()
        await pool.embed_query("a lone query")
        # Far below the 100 ms a waiting pass would take, even on a busy machine.
        assert time.perf_counter() - started < 0.09
        assert pool.batches == 3
    finally:
        await pool.close()
