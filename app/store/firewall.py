"""The recall firewall: Engram's own output, sent back inside a later message, is not made
into a new memory (the raw log keeps the message as sent).

Assistants that log their whole prompt send Engram's injection block back with the next
turn, and an assistant often repeats a recalled memory word for word. Storing that again
would duplicate memories and, worse, make each recall feed the next store. A message is
Engram's echo when either holds:

1. **It carries an injection block** (any role): the preface of recall's Chinese or English
   template (`app/recall/block.py`, imported, so a changed template is followed) appears
   in it. Compared after normalising both sides (`normalised`: Unicode NFKC, case folded,
   whitespace and punctuation dropped), so a block re-wrapped, re-indented or with its
   quotes changed is still recognised.
2. **It quotes stored memories and nothing else** (system, assistant and tool messages
   only): every line that carries text, after dropping the block's frame (preface,
   headings, `- [date]` markers), is a line of a memory of the same namespace as Engram
   gives it, speaker included (`user: …`, the form of a memory's text in the block and in
   recall's response), by normalised equality; and the lines together hold at least
   `MIN_QUOTED_CHARS` characters (a short quote is no evidence). The memories compared are
   found by a full-text search with the message's own words, so a large namespace is never
   read whole.

The speaker is part of the match on purpose: an assistant that says a sentence a stored
memory also holds ("The tests passed.") is speaking, not quoting Engram; only the memory's
own text, `role: content`, is Engram's output. A user message is never dropped for
repeating a memory: people legitimately say the same thing twice (a fact confirmed, a
preference restated), and that repetition is information. A message that adds anything of
its own to a quote (one line that is not a memory's) is stored as usual.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from app.recall.block import HEADINGS, PREFACE
from app.recall.schemas import BlockLanguage

# Roles whose messages may quote Engram's memories back (the model's own output and the
# prompt an assistant built); a user repeating a memory is new information.
QUOTING_ROLES = frozenset({"system", "assistant", "tool"})
# Normalised characters the quoted lines must hold together: a short reply that happens to
# equal a memory's line ("好的", "Sounds good!") is not an echo.
MIN_QUOTED_CHARS = 12

_DROPPED = re.compile(r"[\W_]+")
_MARKER = re.compile(r"^\s*-\s*(?:\[[^\]\n]{0,64}\]\s*)?")
_ROLE = re.compile(r"^\s*(?:user|assistant|system|tool)\s*[:：]\s*", re.IGNORECASE)


def normalised(text: str) -> str:
    """Text reduced to what a copy keeps: NFKC, case folded, no whitespace or punctuation."""
    return _DROPPED.sub("", unicodedata.normalize("NFKC", text).casefold())


_PREFACES = tuple(normalised(PREFACE[language]) for language in BlockLanguage
                  if language in PREFACE)
_FRAME = frozenset(normalised(text) for language in BlockLanguage if language in HEADINGS
                   for text in (PREFACE[language], *HEADINGS[language].values()))


def carries_block(content: str) -> bool:
    """Whether `content` holds an injection block (its preface, in either language)."""
    flat = normalised(content)
    return any(preface in flat for preface in _PREFACES)


def _line_text(line: str) -> str:
    """A line without the block's `- [date]` marker, normalised (its speaker kept)."""
    return normalised(_MARKER.sub("", line, count=1))


def quoted_lines(content: str) -> list[str]:
    """The normalised lines of a message that carry text, the block's frame left out."""
    lines = (_line_text(line) for line in content.split("\n"))
    return [line for line in lines if line and line not in _FRAME]


def memory_lines(texts: Iterable[str]) -> set[str]:
    """Every normalised line of these memory texts ("role: content" lines)."""
    return {line for text in texts for raw in text.split("\n") if (line := normalised(raw))}


def words_of(content: str) -> str:
    """The message's text without role prefixes: what the full-text search looks for."""
    return "\n".join(_ROLE.sub("", line, count=1) for line in content.split("\n"))


def long_enough_to_quote(lines: list[str]) -> bool:
    """Whether these normalised lines together are long enough to be a quote rather than a
    coincidence (`MIN_QUOTED_CHARS`)."""
    return sum(len(line) for line in lines) >= MIN_QUOTED_CHARS


def quotes_only_memories(lines: list[str], known: set[str]) -> bool:
    """Whether a message's text lines (`quoted_lines`) are all lines of stored memories
    (`known`), and together long enough to be a quote rather than a coincidence."""
    return bool(lines) and all(line in known for line in lines) \
        and long_enough_to_quote(lines)
