"""Cut a session's messages into memory-sized chunks.

A chunk is a window of about `max_turns` messages and at most about `max_chars` characters;
neighbouring chunks share `overlap` messages so a fact on a boundary is never cut in half. A
message longer than `max_chars` becomes chunks of its own, split at sentence ends.
Pure functions: no storage, no model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.storage.records import KEY_SEPARATOR, MessageRecord

# Sentence ends in English and Chinese; the split keeps the punctuation with its sentence.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;…\n])\s*")


@dataclass(frozen=True)
class Chunk:
    messages: tuple[MessageRecord, ...]
    part: int = 0  # which piece of a long single message; 0 otherwise
    piece: str | None = None  # the text of that piece
    # The id of the stored memory this chunk rebuilds or extends (None: a new chunk). A
    # rebuilt chunk keeps its memory's id whatever message now comes first, so a delete
    # never turns one chunk into another's id (the neighbour overlapping it).
    keeps: str | None = None

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


def memory_id(namespace: str, session_id: str, first_msg_id: str, part: int, *,
              attempt: int = 0) -> str:
    """The id of a new chunk, derived from its own identity (session, first message, part).

    Deterministic, so replaying a build after a crash writes the same memory, never adds
    one. `attempt` > 0 derives the next candidate when that id is taken already (a rebuilt
    memory kept it); see `assign_ids`.
    """
    fields = [namespace, session_id, first_msg_id, str(part)]
    if attempt:
        fields.append(f"attempt={attempt}")
    raw = KEY_SEPARATOR.join(fields)
    return "mem_" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def assign_ids(namespace: str, session_id: str, chunks: Sequence[Chunk], *,
               taken: Iterable[str]) -> list[str]:
    """One memory id per chunk, unique among the chunks and the session's stored memories.

    A chunk that rebuilds a memory keeps that memory's id (once: a second chunk claiming it
    is treated as new). A new chunk takes the first candidate of `memory_id` that neither a
    stored memory (`taken`) nor an earlier chunk holds. The result depends only on the
    chunks and `taken`, so a replayed build assigns the same ids.
    """
    kept = {c.keeps for c in chunks if c.keeps is not None}
    used = set(taken) - kept
    ids: list[str] = []
    for chunk in chunks:
        if chunk.keeps is not None and chunk.keeps not in used:
            mid = chunk.keeps
        else:
            attempt = 0
            while (mid := memory_id(namespace, session_id, chunk.first.msg_id, chunk.part,
                                    attempt=attempt)) in used or mid in kept:
                attempt += 1
        used.add(mid)
        ids.append(mid)
    return ids


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
