"""The injection block: the text a client appends to its system prompt, and its tokens.

A preface, then each memory with its date, long-term facts first (with headings when both
layers are present). The fixed texts are data (`data/block.txt`); the firewall reads the
same texts (`PREFACE`, `HEADINGS`) to recognise a block quoted back. Recall and context
render and count a block with the same `render_block` and `TokenCounter`.
"""

from __future__ import annotations

import configparser
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

from app.recall.candidates import Packed, layer, utc
from app.recall.schemas import BlockLanguage, Layer
from app.recall.tuning import TOKEN_CACHE_SIZE
from app.scripts import has_han
from app.storage.records import MemoryRecord


def _read_texts() -> tuple[dict[BlockLanguage, str], dict[BlockLanguage, dict[Layer, str]],
                            dict[BlockLanguage, str]]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string((Path(__file__).with_name("data") / "block.txt")
                       .read_text(encoding="utf-8"))
    preface = {language: parser[language.value]["preface"]
               for language in (BlockLanguage.en, BlockLanguage.zh)}
    headings = {language: {layer_: parser[language.value][layer_.value] for layer_ in Layer}
                for language in preface}
    earlier = {language: parser[language.value]["earlier"] for language in preface}
    return preface, headings, earlier


PREFACE, HEADINGS, EARLIER = _read_texts()


def block_language(requested: BlockLanguage, query: str) -> BlockLanguage:
    """The block's language: as asked, or with `auto` the question's (Chinese if it holds
    any Han character)."""
    if requested == BlockLanguage.auto:
        return BlockLanguage.zh if has_han(query) else BlockLanguage.en
    return requested


def _date(memory: MemoryRecord) -> str:
    start = memory.time_start or memory.time_end or memory.created_at
    end = memory.time_end or start
    if start is None or end is None:
        return ""
    first, last = utc(start).date().isoformat(), utc(end).date().isoformat()
    return first if first == last else f"{first} – {last}"


def _marker(memory: MemoryRecord, newer: MemoryRecord | None, language: BlockLanguage) -> str:
    """"- [date]", and for a memory a later one of the block changed, when that was: an
    assistant reads the older statement as history, not as the current fact."""
    date = _date(memory)
    if newer is not None:
        changed = EARLIER[language].format(date=_date(newer).split(" – ")[0])
        date = f"{date}, {changed}" if date else changed
    return f"- [{date}]" if date else "-"


def render_block(packed: Sequence[Packed], *, language: BlockLanguage
                 ) -> tuple[str, list[str]]:
    """The text to append to the system prompt: a preface, then each memory with its date,
    long-term facts first (with headings when both layers are present); a memory that a
    later one of the block changed says so beside its date.

    Returns the block and its frame: every piece of it that is not memory text (preface,
    headings, "- [date]" markers), each set off from its neighbours by whitespace.
    """
    if not packed:
        return "", []
    layers = {layer(p.candidate.memory) for p in packed}
    returned = {p.candidate.memory.id for p in packed}
    parts = [PREFACE[language], ""]
    frame = [PREFACE[language]]
    current: Layer | None = None
    for p in packed:
        this = layer(p.candidate.memory)
        if len(layers) > 1 and this != current:
            parts.append(HEADINGS[language][this])
            frame.append(HEADINGS[language][this])
            current = this
        newer = p.candidate.superseded_by
        marker = _marker(p.candidate.memory, newer if newer is not None and newer.id in
                         returned else None, language)
        parts.append(f"{marker} {p.text.replace(chr(10), chr(10) + '  ')}")
        frame.append(marker)
    return "\n".join(parts), frame


def whitespace_join_tokens(count_tokens: Callable[[str], int]) -> int:
    """The tokens that joining two texts with whitespace adds to the sum of their counts,
    if that is the same for every join; else `NOT_ADDITIVE`.

    0 for WordPiece (MiniLM), which splits on whitespace before anything else. 1 for e5's
    SentencePiece: no piece of its vocabulary holds "▁" (a space) after its first character,
    so a text's pieces decompose at every space, and a text counted alone leaves out the
    "▁" that starts it (it follows the "passage: " prefix, whose own "▁" is subtracted).
    Then the block's count is its frame's plus the memories' (known already) plus one per
    join, exactly, without tokenizing 1,500 tokens again (~2.5 ms per recall with MiniLM's
    Rust tokenizer, 10-20 ms with e5's in Python).
    """
    pieces = ["以下是你记得的信息。", "- [2023-05-08]", "user: Caroline: I went to a LGBTQ "
              "support group yesterday!", "assistant: 好的，下周二上午体检 (9:30)。", "Details:"]
    extra = [count_tokens("\n  ".join(pieces[:n])) - sum(count_tokens(p) for p in pieces[:n])
             for n in (2, len(pieces))]
    join = extra[0]
    return join if join >= 0 and extra[1] == join * (len(pieces) - 1) else NOT_ADDITIVE


NOT_ADDITIVE = -1


class TokenCounter:
    """Token counts under the embedding model's tokenizer, for recall and context alike:
    of texts (memories, their trimmed lines, block frame pieces), cached, and of an
    injection block, summed from its pieces (`block`), so both count a block the same way.

    The cache is keyed by the text's length and hash (an edited text is a new key): texts
    change rarely and tokenizing is the costliest step of packing (~1 ms per memory).
    """

    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self._count = count_tokens
        self._cache: OrderedDict[tuple[int, int], int] = OrderedDict()
        # Tokens a whitespace join adds (`whitespace_join_tokens`), worked out on first use;
        # None while unknown, NOT_ADDITIVE when a block must be counted whole.
        self._join: int | None = None

    def count(self, text: str) -> int:
        key = (len(text), hash(text))
        tokens = self._cache.get(key)
        if tokens is None:
            tokens = self._cache[key] = self._count(text)
            if len(self._cache) > TOKEN_CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return tokens

    def block(self, block: str, frame: Sequence[str], texts: Sequence[str],
              tokens: Sequence[int]) -> int:
        """Tokens of `block` as `render_block` made it from `frame` and the memory `texts`
        (whose counts are `tokens`): the pieces' counts plus the fixed count each
        whitespace join adds, without tokenizing the whole block again (~2.5 ms per block
        with MiniLM's Rust tokenizer, 10-20 ms with e5's in Python)."""
        if not block:
            return 0
        if self._join is None:
            self._join = whitespace_join_tokens(self._count)
        join = self._join
        # A memory's text with whitespace at an end would meet the frame's whitespace in
        # one run (counted once in the block, twice apart): count the block whole then.
        if join == NOT_ADDITIVE or any(t != t.strip() or not t for t in texts):
            return self._count(block)
        pieces = len(frame) + len(texts)
        return sum(tokens) + sum(self.count(f) for f in frame) + join * (pieces - 1)
