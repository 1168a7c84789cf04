"""The embedding pool: micro-batching, recall first, query/passage encoding, with the real
models."""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.embedding.names import MINILM_NAME
from app.embedding.pool import EmbeddingPool
from app.ops.priority import lower_default_executor
from tests.conftest import make_settings
from tests.procs import chat_messages


async def test_queries_of_one_turn_share_a_pass_and_a_lone_one_does_not_wait(
        model: Any) -> None:
    # A 10 s wait for companions (the settings allow 100 ms; the pool itself takes any): a
    # pass that waited is unmistakable, and a busy machine's slow encode cannot pass for one.
    pool = EmbeddingPool(model, name="test", batch_size=32, batch_wait_ms=10_000)
    try:
        a, _ = await asyncio.gather(pool.embed_query("dentist on Thursday"),
                                    pool.embed_query("下周二上午体检"))
        assert pool.batches == 1 and pool.texts_encoded == 2
        # The text's own vector, whatever shared its pass: e5's bf16 kernels round a little
        # differently per batch shape (max 5e-4 per component), a mix-up would not be close.
        alone = pool.encode_blocking(["dentist on Thursday"], query=True)[0]
        assert float(a @ alone) > 0.9999
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
        asked_at = pool.batches
        query = asyncio.create_task(pool.embed_query("when is the meeting"))
        done, _ = await asyncio.wait({store, query, background},
                                     return_when=asyncio.FIRST_COMPLETED)
        assert done == {query}
        # It waited at most for the slice being encoded: a few passes, not the 25 slices.
        # Counted from when it was asked: on a loaded machine the polling above can wake
        # a pass or two late.
        assert pool.batches - asked_at <= 3, (asked_at, pool.batches)
        done, _ = await asyncio.wait({store, background}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {store}  # background work yields to stores too
        assert (await store).shape == (200, pool.dim)
        assert (await background).shape == (200, pool.dim)
    finally:
        await pool.close()


async def test_a_findable_stores_turns_do_not_wait_behind_a_large_store(e5: Any) -> None:
    # wait="findable" answers once the new turns have vectors (decision 0015): behind an
    # ingest's slices that took seconds. They are encoded beside the questions, as stored
    # text ("passage: "), and a batch too large for that still goes with stored text.
    pool = EmbeddingPool(e5, name="test", batch_size=8, batch_wait_ms=2)
    texts = [f"第{i}条：我们下周二上午在会议室讨论 LanceDB 的索引方案 number {i}"
             for i in range(200)]
    turns = ["user: 我的护照明年一月十五号到期。", "user: My passport expires in January."]
    alone = pool.encode_blocking(turns)
    try:
        store = asyncio.create_task(pool.embed_many(texts))
        while pool.batches < 3:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        asked_at = pool.batches
        now = asyncio.create_task(pool.embed_now(turns))
        done, _ = await asyncio.wait({store, now}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {now}
        assert pool.batches - asked_at <= 3, (asked_at, pool.batches)
        np.testing.assert_allclose(await now, alone, atol=1e-5)  # as stored text
        large = await pool.embed_now(texts[:9])  # more than a few: with stored text
        cosines = np.sum(large * pool.encode_blocking(texts[:9]), axis=1)
        assert float(cosines.min()) > 0.999  # as stored text (in slices: bf16 padding)
        assert (await store).shape == (200, pool.dim)
    finally:
        await pool.close()


def _chunks(count: int) -> list[str]:
    """Stored chunks as a build makes them: 6 turns of mixed English and Chinese chat."""
    rng = random.Random(14)
    return ["\n".join(f"{m['role']}: {m['content']}" for m in chat_messages(rng, 6))
            for _ in range(count)]


async def test_a_question_asked_during_a_slice_of_stored_text_is_answered_inside_it(
        e5: Any) -> None:
    # One slice of 12 chunks (~290 tokens each): e5 encodes it in ~12 forward passes of at
    # most 512 tokens, seconds in all. A question asked meanwhile is encoded on its own
    # thread at once; once, it waited for the whole slice.
    pool = EmbeddingPool(e5, name="test", batch_size=64, batch_wait_ms=2)
    texts = _chunks(12)
    questions = ["when is the dentist appointment?", "下周二上午在哪里开会？"]
    slice_alone = pool.encode_blocking(texts)
    questions_alone = pool.encode_blocking(questions, query=True)
    try:
        store = asyncio.create_task(pool.embed_many(texts))
        await asyncio.sleep(0.05)  # the worker has taken the slice and is encoding it
        assert pool.queue_depth == 0 and not store.done()
        asked = [asyncio.create_task(pool.embed_query(q)) for q in questions]
        done, _ = await asyncio.wait({store, *asked}, return_when=asyncio.FIRST_COMPLETED)
        assert store not in done, "the questions waited for the whole slice"
        answered = await asyncio.gather(*asked)
        assert not store.done()
        # Their own vectors (one pass of both, as alone), and the slice's are unchanged by
        # the questions encoded inside it.
        for vector, alone in zip(answered, questions_alone, strict=True):
            assert float(vector @ alone) > 0.9999
        np.testing.assert_allclose(await store, slice_alone, atol=1e-6)
        assert pool.batches == 2 + 2  # the two alone above, the questions, the slice
    finally:
        await pool.close()


async def test_questions_and_stored_texts_are_encoded_differently(e5: Any) -> None:
    # e5 reads a question with its "query: " prefix and a memory with "passage: ".
    pool = EmbeddingPool(e5, name="test", batch_size=8, batch_wait_ms=2)
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


def test_tokens_are_counted_without_the_prefix_and_chinese_is_known(e5: Any) -> None:
    assert e5.count_tokens("") == 0
    assert e5.count_tokens("hello world") == 2
    assert 0 < e5.count_tokens("年度读书分享会的报名时间") < 12
    assert e5.unknown_share("年度读书分享会的报名时间") == 0.0


def test_minilm_reads_chinese_as_unknown(minilm: Any) -> None:
    # Why MiniLM's ranking discounts its cosine on Chinese queries (unknown_share).
    assert minilm.unknown_share("年度读书分享会的报名时间") > 0.5
    assert minilm.unknown_share("annual book club sign-up") == 0.0


async def test_a_stream_of_questions_does_not_hold_back_a_store(model: Any) -> None:
    # Four askers, each with one question in flight: questions are always waiting. With one
    # thread for both, strict priority served every question before the store; on their own
    # thread the questions never stand in the store's way, and recall still goes first.
    pool = EmbeddingPool(model, name="test", batch_size=2, batch_wait_ms=0)
    questions = ["when is the dentist appointment", "下周二上午在哪里开会",
                 "what does Alice like to drink", "我们的预算是多少"]
    finished: list[str] = []

    async def asker(index: int) -> None:
        for turn in range(50):
            await pool.embed_query(f"{questions[(index + turn) % len(questions)]} {turn}")
            finished.append("query")

    try:
        askers = [asyncio.create_task(asker(i)) for i in range(4)]
        while len(finished) < 4:  # the askers are in full flow (polling the list)  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        vectors = await pool.embed_many(["user: 我下周二上午去看牙医",
                                         "assistant: Noted, Tuesday morning at the dentist."])
        assert vectors.shape == (2, pool.dim)
        assert len(finished) < 200 and not all(a.done() for a in askers)
        await asyncio.gather(*askers)
        assert finished.count("query") == 200
    finally:
        await pool.close()


async def test_background_work_lets_a_bounded_number_of_store_slices_go_ahead(
        model: Any) -> None:
    # Two imports keep the store lane full; a compression summary (background) waits for at
    # most `max_jobs_ahead` of their slices, not for both imports to finish.
    pool = EmbeddingPool(model, name="test", batch_size=2, batch_wait_ms=0, max_jobs_ahead=3)
    texts = [f"第{i}条：the renovation budget discussion number {i}" for i in range(16)]
    try:
        imports = [asyncio.create_task(pool.embed_many(texts)) for _ in range(2)]
        while pool.batches < 1:  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        queued_at = pool.batches
        await pool.embed_many(["summary: 装修预算 discussion"], background=True)
        passes_until_done = pool.batches - queued_at
        await asyncio.gather(*imports)
        # The slice being encoded when it arrived, 3 slices ahead of it, then its own pass.
        assert passes_until_done <= 1 + 3 + 1, passes_until_done
        assert pool.batches == 17
    finally:
        await pool.close()


class _ThreadRecorder(EmbeddingPool):
    """The real pool, noting the OS thread of each forward pass: question or stored text."""

    threads: dict[bool, set[int]]

    def encode_blocking(self, texts: list[str], query: bool = False) -> Any:
        self.threads.setdefault(query, set()).add(threading.get_native_id())
        return super().encode_blocking(texts, query)


def _niceness(thread: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, thread)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
async def test_stored_text_is_encoded_on_a_lowered_thread_and_questions_are_not(
        model: Any) -> None:
    pool = _ThreadRecorder(model, name="test", batch_size=4, batch_wait_ms=0,
                           stored_niceness=7)
    pool.threads = {}
    server = _niceness(threading.get_native_id())
    try:
        await asyncio.gather(pool.embed_many(["user: 我下周二上午去看牙医"] * 6),
                             pool.embed_query("when is the dentist appointment?"),
                             pool.embed_many(["summary: 装修预算"], background=True))
        (stored,), (question,) = pool.threads[False], pool.threads[True]
        assert stored != question
        assert _niceness(stored) == min(19, server + 7)
        assert _niceness(question) == server == _niceness(threading.get_native_id())
    finally:
        await pool.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_the_loops_default_threads_run_lowered_for_builds() -> None:
    # A loop of its own: the tests' shared loop already has the apps' build executor.
    async def build_thread_niceness() -> int:
        lower_default_executor(5)
        lower_default_executor(5)  # a second app on the same loop changes nothing
        return await asyncio.to_thread(lambda: _niceness(threading.get_native_id()))

    server = _niceness(threading.get_native_id())
    assert asyncio.run(build_thread_niceness()) == min(19, server + 5)
    assert _niceness(threading.get_native_id()) == server


async def test_minilm_encodes_questions_and_stored_text_at_once_without_failing(
        minilm: Any, tmp_path: Path) -> None:
    # The pool's two threads both call the model: sentence-transformers' encode() sets
    # padding on one shared Rust tokenizer, and the backend serialises its calls. Questions
    # get their own vectors while stored text is encoded, with a thread switch after nearly
    # every bytecode.
    pool = EmbeddingPool.from_model(minilm, make_settings(tmp_path, embedding_model=MINILM_NAME))
    texts = ["short", "the dentist appointment moved to Thursday morning at nine " * 3] * 4
    question = "下周二上午在哪里开会？ where is the meeting"
    alone = pool.encode_blocking([question], query=True)[0]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        stored = asyncio.gather(*(pool.embed_many(texts) for _ in range(10)))
        answers = [await pool.embed_query(question) for _ in range(10)]
        assert all(v.shape == (len(texts), pool.dim) for v in await stored)
        assert all(float(a @ alone) > 0.9999 for a in answers)
    finally:
        sys.setswitchinterval(interval)
        await pool.close()
