"""Cut a session's messages into memory-sized chunks.

A chunk is a window of about `max_turns` messages and at most about `max_chars` characters;
neighbouring chunks share `overlap` messages so a fact on a boundary is never cut in half. A
message longer than `max_chars` becomes chunks of its own, split at sentence ends.
Pure functions: no storage, no model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.storage.records import KEY_SEPARATOR, MessageRecord

# Sentence ends in English and Chinese; the split keeps the punctuation with its sentence.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;…\n])\s*")


@dataclass(frozen=True)
class Chunk:
    messages: tuple[MessageRecord, ...]
    part: int = 0  # which piece of a long single message; 0 otherwise
    piece: str | None = None  # the text of that piece

    @property
    def first(self) -> MessageRecord:
        return self.messages[0]

    @property
    def text(self) -> str:
        if self.piece is not None:
            return f"{self.first.role}: {self.piece}"
        return "\n".join(render_line(m) for m in self.messages)


def render_line(message: MessageRecord) -> str:
    return f"{message.role}: {message.content}"


def memory_id(namespace: str, session_id: str, first_msg_id: str, part: int) -> str:
    """Deterministic: rebuilding or replaying a chunk updates the same memory, never adds one."""
    raw = KEY_SEPARATOR.join((namespace, session_id, first_msg_id, str(part)))
    return "mem_" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def split_long(text: str, max_chars: int) -> list[str]:
    """Split text into pieces of at most `max_chars`, at sentence ends where possible."""
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > max_chars:  # one sentence longer than a chunk: hard cut
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:max_chars])
            sentence = sentence[max_chars:]
        if current and len(current) + len(sentence) + 1 > max_chars:
            pieces.append(current)
            current = ""
        current = f"{current} {sentence}" if current else sentence
    if current.strip():
        pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]


def is_long(message: MessageRecord, max_chars: int) -> bool:
    return len(render_line(message)) > max_chars


def plan_chunks(
    new: Sequence[MessageRecord],
    *,
    context: Sequence[MessageRecord] = (),
    max_turns: int,
    max_chars: int,
    overlap: int,
) -> list[Chunk]:
    """Chunks covering every message of `new`, in order.

    Args:
        new: messages not yet in any memory, sorted by seq.
        context: messages that open the first window: the tail of the session's last chunk
            (for overlap) or that whole chunk (to extend it while it has room).
        max_turns, max_chars: window limits.
        overlap: messages a window shares with the one before it.
    """
    chunks: list[Chunk] = []
    window: list[MessageRecord] = list(context)
    has_new = False

    def chars(messages: Sequence[MessageRecord]) -> int:
        return sum(len(render_line(m)) + 1 for m in messages)

    def flush() -> None:
        nonlocal window, has_new
        if has_new:
            chunks.append(Chunk(tuple(window)))
            tail = window[-overlap:] if overlap else []
            window = [m for m in tail if not is_long(m, max_chars)]
        has_new = False

    for message in new:
        if is_long(message, max_chars):
            flush()
            budget = max_chars - len(message.role) - 2
            for part, piece in enumerate(split_long(message.content, budget)):
                chunks.append(Chunk((message,), part=part, piece=piece))
            window = []
            continue
        line = len(render_line(message)) + 1
        if len(window) + 1 > max_turns or chars(window) + line > max_chars:
            flush()
            # Drop overlap context until the message fits beside it.
            while window and (len(window) + 1 > max_turns or chars(window) + line > max_chars):
                window.pop(0)
        window.append(message)
        has_new = True
    flush()
    return chunks
