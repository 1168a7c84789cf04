"""The recall firewall: Engram's own output, sent back inside a later message, is not made
into a new memory (the raw log keeps the message as sent); the user's own words around it are.

Assistants that log their whole prompt send Engram's injection block back with the next
turn, and an assistant often repeats a recalled memory word for word. Storing that again
would duplicate memories and, worse, make each recall feed the next store. Two rules:

1. **An injection block is cut out** (any role): from the line holding the preface of
   recall's Chinese or English template (`app/recall/block.py`, imported, so a changed template is
   followed) through the block's headings, `- [date] role: …` entries and their indented
   continuation lines. What is left is the message's own words, and only they become a
   memory ("<block> By the way, we moved to Munich" keeps the move); a message with nothing
   left, or of another role than `user` (a system prompt around the block is scaffolding),
   is kept out whole. A preface is recognised after normalising (`normalised`: NFKC,
   look-alike letters folded to Latin by Unicode's confusables table, case folded,
   whitespace and punctuation dropped) and with a word changed (a fuzzy match of at least
   `PREFACE_SIMILARITY`), also inside JSON (a recall response passed on as a tool result,
   `\\u` escapes and all: `readable`). A block whose preface no single line holds (a client
   that hard-wrapped it) keeps the whole message out, as before.
2. **A message that quotes stored memories and nothing else** (system, assistant and tool
   messages only; after rule 1) is kept out: every line that carries text, the block's
   frame dropped, is a line of a memory of the same namespace as Engram gives it, speaker
   included (`user: …`), or several such lines run together, by normalised equality; and
   the lines together hold at least `MIN_QUOTED_CHARS` characters (a short quote is no
   evidence). A JSON value's strings count as its lines. The memories compared are found by
   a full-text search with the message's own words, so a large namespace is never read
   whole.

The speaker is part of rule 2 on purpose: an assistant that says a sentence a stored memory
also holds ("The tests passed.") is speaking, not quoting Engram; only the memory's own
text, `role: content`, is Engram's output. A user message is never dropped for repeating a
memory: people legitimately say the same thing twice (a fact confirmed, a preference
restated), and that repetition is information. A message that adds anything of its own to a
quote (one line that is not a memory's) is stored as usual.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import cache, lru_cache

from confusable_homoglyphs import utils as confusable_data
from rapidfuzz import fuzz

from app.recall.block import HEADINGS, PREFACE
from app.recall.schemas import BlockLanguage

# Roles whose messages may quote Engram's memories back (the model's own output and the
# prompt an assistant built); a user repeating a memory is new information.
QUOTING_ROLES = frozenset({"system", "assistant", "tool"})
# Normalised characters the quoted lines must hold together: a short reply that happens to
# equal a memory's line ("好的", "Sounds good!") is not an echo.
MIN_QUOTED_CHARS = 12

# How close (0-100, rapidfuzz's partial ratio on normalised text) a line must come to a
# preface to be one: a changed word of the English preface scores ~95, of the Chinese ~94;
# unrelated prose stays below 60.
PREFACE_SIMILARITY = 90

_DROPPED = re.compile(r"[\W_]+")
# JSON's escapes of a pasted fragment (`\\u4ee5\\u4e0b…`, `\\n`): a recall response passed on
# as ASCII-escaped JSON text inside a longer message.
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\n")
# Escapes that make a message's text worth decoding: a few, not one stray backslash.
_MIN_ESCAPES = 4
# A line of a block's memory entry: "- [date] " or "- " then "role: ".
_ENTRY = re.compile(r"^\s*(?:-\s*(?:\[[^\]\n]{0,64}\]\s*)?)?"
                    r"(?:user|assistant|system|tool)\s*[:：]", re.IGNORECASE)
_MARKER = re.compile(r"^\s*-\s*(?:\[[^\]\n]{0,64}\]\s*)?")
_ROLE = re.compile(r"^\s*(?:user|assistant|system|tool)\s*[:：]\s*", re.IGNORECASE)


def normalised(text: str) -> str:
    """Text reduced to what a copy keeps: NFKC, look-alike letters folded to Latin, case
    folded, no whitespace or punctuation."""
    return _DROPPED.sub("", _folded(text).casefold())


def _folded(text: str) -> str:
    """NFKC, with look-alike letters replaced by the Latin letters they imitate."""
    text = unicodedata.normalize("NFKC", text)
    table, letters = _look_alikes()
    return text if letters.isdisjoint(text) else text.translate(table)


@cache
def _look_alikes() -> tuple[dict[int, str], frozenset[str]]:
    """A translation table: each non-Latin letter that Unicode's confusables table (TR39, as
    confusable_homoglyphs ships it) lists as a look-alike of one ASCII letter (Cyrillic
    "а", Greek "ο") to that letter. Han, kana and hangul have none. Built once (~10 ms);
    `str.translate` then folds a message, only one that holds such a letter (a set test
    is many times faster than translating every message)."""
    table: dict[int, str] = {}
    for char, homoglyphs in confusable_data.load("confusables.json").items():
        if len(char) != 1 or char.isascii() or not unicodedata.category(char).startswith("L"):
            continue
        latin = [g["c"] for g in homoglyphs
                 if len(g["c"]) == 1 and g["c"].isascii() and g["c"].isalpha()]
        if latin:
            table[ord(char)] = latin[0]
    return table, frozenset(chr(c) for c in table)


def readable(content: str) -> str:
    """The text a message shows a reader: a JSON value's strings, each on its own lines (a
    tool result passed on verbatim), or the content with the escapes of pasted JSON text
    undone; else the content as it is."""
    stripped = content.strip()
    if stripped[:1] in ("[", "{", '"'):
        try:
            value = json.loads(stripped)
        except ValueError:
            pass
        else:
            return "\n".join(_strings(value))
    if len(_ESCAPE.findall(content)) >= _MIN_ESCAPES:
        return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else "\n", content)
    return content


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


_PREFACES = tuple(normalised(PREFACE[language]) for language in BlockLanguage
                  if language in PREFACE)
_FRAME = frozenset(normalised(text) for language in BlockLanguage if language in HEADINGS
                   for text in (PREFACE[language], *HEADINGS[language].values()))


def carries_block(content: str) -> bool:
    """Whether `content` holds an injection block (its preface, in either language)."""
    return _holds_preface(normalised(readable(content)))


def _holds_preface(flat: str) -> bool:
    """Whether normalised text holds a preface, exactly or with a word changed."""
    return any(preface in flat or (
        len(flat) >= 0.8 * len(preface)
        and fuzz.partial_ratio(preface, flat, score_cutoff=PREFACE_SIMILARITY) > 0)
        for preface in _PREFACES)


# Every build of a session reads all its messages again: each message's answer is kept.
@lru_cache(maxsize=8192)
def own_words(content: str, role: str) -> str | None:
    """The message without the injection blocks it carries (rule 1), stripped: the user's
    own words around them, "" if nothing is left; None if it carries no block. Only a
    user's words are kept: around a block, a system prompt's or a tool's text is the
    assistant's scaffolding ("You are a helpful travel assistant."), not something said.

    A block runs from its preface's line through blank lines, headings, memory entries
    ("- [date] role: …") and lines indented deeper than the preface's, its entries'
    continuations. The first other line is the message's own again.
    """
    text = readable(content)
    if not _holds_preface(normalised(text)):
        return None
    if role != "user":
        return ""
    lines = text.split("\n")
    kept: list[str] = []
    cut = False
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not _holds_preface(normalised(line)):
            kept.append(line)
            continue
        cut = True
        indent = _indent(line)
        while index < len(lines) and _in_block(lines[index], indent):
            index += 1
    # A preface no single line holds (hard-wrapped): the whole message is the block.
    return "\n".join(kept).strip() if cut else ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _in_block(line: str, indent: int) -> bool:
    """Whether a line after a block's preface is still the block's (`own_words`)."""
    flat = normalised(line)
    return not flat or flat in _FRAME or bool(_ENTRY.match(line)) or _indent(line) > indent


def _line_text(line: str) -> str:
    """A line without the block's `- [date]` marker, normalised (its speaker kept)."""
    return normalised(_MARKER.sub("", line, count=1))


def quoted_lines(content: str) -> list[str]:
    """The normalised lines of a message that carry text (a JSON value's strings), the
    block's frame left out."""
    lines = (_line_text(line) for line in readable(content).split("\n"))
    return [line for line in lines if line and line not in _FRAME]


def memory_lines(texts: Iterable[str]) -> set[str]:
    """Every normalised line of these memory texts ("role: content" lines)."""
    return {line for text in texts for raw in text.split("\n") if (line := normalised(raw))}


def words_of(content: str) -> str:
    """The message's text without role prefixes: what the full-text search looks for."""
    return "\n".join(_ROLE.sub("", line, count=1)
                     for line in _folded(readable(content)).split("\n"))


def long_enough_to_quote(lines: list[str]) -> bool:
    """Whether these normalised lines together are long enough to be a quote rather than a
    coincidence (`MIN_QUOTED_CHARS`)."""
    return sum(len(line) for line in lines) >= MIN_QUOTED_CHARS


def quotes_only_memories(lines: list[str], known: set[str]) -> bool:
    """Whether a message's text lines (`quoted_lines`) are all lines of stored memories
    (`known`), or such lines run together, and together long enough to be a quote rather
    than a coincidence."""
    return bool(lines) and all(line in known or _joined(line, known) for line in lines) \
        and long_enough_to_quote(lines)


def _joined(line: str, known: set[str]) -> bool:
    """Whether a normalised line is several known lines run together ("user: A user: B"
    once the line break between them was lost)."""
    lengths = sorted({len(k) for k in known if k})
    reachable = [True] + [False] * len(line)  # reachable[i]: line[:i] is known lines
    for end in range(1, len(line) + 1):
        reachable[end] = any(reachable[end - n] and line[end - n:end] in known
                             for n in lengths if n <= end)
    return reachable[-1]
