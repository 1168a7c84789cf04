"""The types recall's stages pass along, public for the modules that read them (why_not,
context): a scored `Candidate`, a `Packed` memory, the `Trace` of one recall, and the
public shape of a packed memory (`public`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

import numpy as np

from app.recall.schemas import Layer, RecalledMemory, ScoreParts, SupersededBy
from app.storage.records import MemoryRecord

# The id prefix of a provisional memory: pending messages not built yet (pending.py).
PENDING_PREFIX = "pending:"


@dataclass
class Candidate:
    memory: MemoryRecord
    cosine: float = 0.0
    vector: float = 0.0  # cosine mapped to 0-1
    bm25: float = 0.0
    keyword: float = 0.0
    relevance: float = 0.0
    ranking: float = 0.0
    decay: float = 1.0
    importance: float = 1.0
    tier: float = 1.0
    branch: float = 1.0
    time: float = 1.0
    reference: float = 1.0
    score: float = 0.0
    when: float = 0.0  # epoch seconds of the memory's latest message, for ties
    # The memory's stored vector, as the search returned it (`order.newer_first_tier`
    # compares candidates with each other); None if the search did not have it.
    stored: np.ndarray | None = None
    # No vector to score it by: pending messages whose lines' vector was late for the
    # recall's deadline (pending.py). Scored on its share of the question's words alone.
    words_only: bool = False
    # A later memory of this recall that restates or changes this one (`order`).
    superseded_by: MemoryRecord | None = None

    @property
    def boost(self) -> float:
        return self.importance * self.tier * self.branch * self.time * self.reference

    @property
    def provisional(self) -> bool:
        """Whether it stands for pending messages, not built into a memory yet (pending.py)."""
        return self.memory.id.startswith(PENDING_PREFIX)


Unit = tuple[tuple[str, ...], str]  # a memory's line: (its msg_ids, its text)


class PassedOver(StrEnum):
    """Why `pack` looked at a memory and did not pack it."""

    duplicate = "duplicate"  # every line it holds was returned by a better memory
    matched_lines_returned = "matched_lines_returned"  # statements: the lines matching the
    # query were returned by a better memory, what is left does not match
    budget = "budget"  # it did not fit in the tokens left, even as its matching lines


@dataclass
class Packed:
    candidate: Candidate
    text: str
    msg_ids: list[str]
    tokens: int
    trimmed: bool
    part: int = 0
    units: list[Unit] = field(default_factory=list)  # all the memory's lines
    choice: list[Unit] = field(default_factory=list)  # the lines returned


@dataclass
class Packing:
    """What `pack` returns: the packed memories in packing order (best first, before the
    block puts long-term facts first), and each memory it looked at and passed over, with
    the rule and the tokens it needed (0 unless `budget`)."""

    packed: list[Packed]
    passed_over: dict[str, tuple[PassedOver, int]] = field(default_factory=dict)


@dataclass
class Trace:
    """One recall's steps, for `why_not`: the scored candidates, the tiers in packing order
    (what passes the configured `min_score`, then what only a lower per-call one lets in)
    and the packing."""

    candidates: list[Candidate]
    tiers: list[list[Candidate]]
    packing: Packing


def utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def layer(memory: MemoryRecord) -> Layer:
    return Layer.longterm if memory.tier == "longterm" or memory.summary_of else Layer.detail


def score_parts(c: Candidate) -> ScoreParts:
    """A candidate's score parts as a response shows them (`explain`)."""
    return ScoreParts(
        cosine=round(c.cosine, 4), vector=round(c.vector, 4), keyword=round(c.keyword, 4),
        relevance=round(c.relevance, 4), ranking=round(c.ranking, 4),
        decay=round(c.decay, 4), boost=round(c.boost, 4),
        importance=round(c.importance, 4), tier=round(c.tier, 4), branch=round(c.branch, 4),
        time=round(c.time, 4), reference=round(c.reference, 4))


def public(p: Packed, returned: frozenset[str] = frozenset()) -> RecalledMemory:
    """`returned`: the ids of the memories returned with it; `superseded_by` names only
    one of those."""
    c, m = p.candidate, p.candidate.memory
    newer = c.superseded_by if c.superseded_by is not None and \
        c.superseded_by.id in returned else None
    return RecalledMemory(
        id=m.id, text=p.text, msg_ids=p.msg_ids, session_id=m.session_id,
        time_start=m.time_start, time_end=m.time_end, category=m.category, tier=m.tier,
        importance=m.importance, branch=m.branch, layer=layer(m), tokens=p.tokens,
        score=round(c.score, 4), trimmed=p.trimmed, explain=score_parts(c),
        superseded_by=SupersededBy(id=newer.id, time=newer.time_start or newer.time_end)
        if newer is not None else None,
        provisional=provisional(p),
    )


def provisional(p: Packed) -> bool:
    """Whether a packed memory stands for pending messages, not built yet (pending.py)."""
    return p.candidate.provisional
