"""The embedding pool: micro-batching, recall first, query/passage encoding, with the real
models."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.embedding.names import MINILM_NAME
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
        assert np.allclose(a, pool.encode_blocking(["dentist on Thursday"], query=True)[0],
                           atol=1e-5)
        started = time.perf_counter()
        await pool.embed_query("a lone query")
        assert time.perf_counter() - started < 5
        assert pool.batches == 3
    finally:
        await pool.close()


async def test_counting_tokens_while_the_worker_encodes_leaves_its_batches_padded(
        minilm: Any, tmp_path: Path) -> None:
    # Recall counts tokens on the event loop while the worker thread encodes a batch of
    # texts of different lengths. A thread switch after nearly every bytecode makes the
    # interleaving that once left a batch unpadded happen within a few batches.
    pool = EmbeddingPool.from_model(minilm, make_settings(tmp_path, embedding_model=MINILM_NAME))
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


async def test_a_query_issued_behind_a_large_store_finishes_before_the_store(
        model: Any) -> None:
    pool = EmbeddingPool(model, name="test", batch_size=8, batch_wait_ms=2)
    texts = [f"第{i}条：我们下周二上午在会议室讨论 LanceDB 的索引方案 number {i}"
             for i in range(200)]
    try:
        store = asyncio.create_task(pool.embed_many(texts))
        background = asyncio.create_task(pool.embed_many(texts, background=True))
        # The store is being encoded, most of it still queued (polling the pool's counter).
        while pool.batches < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        query = asyncio.create_task(pool.embed_query("when is the meeting"))
        done, _ = await asyncio.wait({store, query, background},
                                     return_when=asyncio.FIRST_COMPLETED)
        assert done == {query}
        # It waited at most for the slice being encoded: a few passes, not 25 slices.
        assert pool.batches <= 4
        done, _ = await asyncio.wait({store, background}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {store}  # background work yields to stores too
        assert (await store).shape == (200, pool.dim)
        assert (await background).shape == (200, pool.dim)
    finally:
        await pool.close()


async def test_questions_and_stored_texts_are_encoded_differently(model: Any) -> None:
    # e5 reads a question with its "query: " prefix and a memory with "passage: ".
    pool = EmbeddingPool(model, name="test", batch_size=8, batch_wait_ms=2)
    try:
        text = "我最喜欢吃火锅"
        as_query = await pool.embed_query(text)
        as_passage = (await pool.embed_many([text]))[0]
        as_cue = (await pool.embed_many([text], query=True, background=True))[0]
        assert not np.allclose(as_query, as_passage, atol=1e-3)
        assert np.allclose(as_query, as_cue, atol=1e-5)
        assert np.isclose(float(np.linalg.norm(as_passage)), 1.0, atol=1e-3)
    finally:
        await pool.close()


def test_tokens_are_counted_without_the_prefix_and_chinese_is_known(model: Any) -> None:
    assert model.count_tokens("") == 0
    assert model.count_tokens("hello world") == 2
    assert 0 < model.count_tokens("年度读书分享会的报名时间") < 12
    assert model.unknown_share("年度读书分享会的报名时间") == 0.0


def test_minilm_reads_chinese_as_unknown(minilm: Any) -> None:
    # Why MiniLM's ranking discounts its cosine on Chinese queries (unknown_share).
    assert minilm.unknown_share("年度读书分享会的报名时间") > 0.5
    assert minilm.unknown_share("annual book club sign-up") == 0.0
