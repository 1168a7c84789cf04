""""Why not this memory?": for memories a recall did not return, what kept each one out.

`POST /v1/recall/why_not` takes a recall request plus `memory_ids` and runs that recall
exactly as `POST /v1/recall` would (same searches, scores, threshold and packing: it calls
`RecallService`, it does not copy it), watching its intermediate steps. For each id the
answer is the first rule that excluded the memory, in the order recall applies them:

1. `not_found`: no such memory in this namespace (a memory of another namespace is
   reported the same way, so its existence does not leak);
2. `state`: compressed or forgotten, so no search sees it (restore brings it back);
3. `filter`: the request's branch, categories, tiers, session or time range leave it out;
4. `not_candidate`: neither the vector nor the keyword search ranked it among the
   candidates they keep (`CANDIDATES`); its cosine to the query is given;
5. `below_threshold`: scored, but its `relevance` is below the threshold applied (and it
   is not the newer statement of a returned fact, which recall takes in below it);
6. `duplicate`: every line it holds was already returned by a better memory (chunks
   overlap by design), or, for one speaker's statements, the lines matching the query were;
7. `top_k` / `budget`: it passed, but `top_k` memories or the token budget were full
   before its turn;
8. `recalled`: it was returned after all.

The packing order is the recall's: what passes the configured `min_score` first (a lower
per-call `min_score` only adds what fits after it), and within that a newer statement of a
fact just ahead of the older one (newer.py). `rank` is the position in that order, and the
packing reports each memory it passed over and why (`RecallService._passed_over`), so the
verdicts follow the packing's rules rather than re-deriving them.

A why-not call records no hits: asking about a memory must not promote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import override

from app.recall.hits import HitRecorder
from app.recall.references import ParsedQuery
from app.recall.schemas import RecallRequest, RecallResponse, ScoreParts
from app.recall.service import (
    CANDIDATES,
    CONTEXT_THRESHOLD_FACTOR,
    PassedOver,
    RecallService,
    _Candidate,
    _Packed,
)
from app.recall.text import Coverage
from app.recall.when import TimeHint
from app.storage.records import MemoryRecord
from app.storage.repository import SearchFilter
from app.time_range import as_utc
from app.validation import MessageId

# --- API shapes --------------------------------------------------------------------------


class WhyNotRequest(RecallRequest):
    """A recall request (every field means what it means for `POST /v1/recall`) and the
    memories to explain."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"namespace": "alice", "query": "我的体检安排是哪天", "memory_ids": ["mem-id-1"]},
    ]})

    memory_ids: list[MessageId] = Field(
        min_length=1, max_length=50,
        description="Memories to explain (typically ones the recall did not return).")


class Verdict(StrEnum):
    recalled = "recalled"
    not_found = "not_found"
    state = "state"
    filter = "filter"
    not_candidate = "not_candidate"
    below_threshold = "below_threshold"
    duplicate = "duplicate"
    top_k = "top_k"
    budget = "budget"


class WhyNotItem(BaseModel):
    memory_id: str
    verdict: Verdict
    reason: str = Field(description="One readable sentence: what excluded it, with numbers.")
    filter: str | None = Field(default=None, description="`filter`: the request field that "
                               "excluded it (branch, categories, tiers, session_id, "
                               "time_from, time_to).")
    state: str | None = Field(default=None, description="The memory's state.")
    relevance: float | None = Field(default=None, description="Its relevance, when scored.")
    min_score: float = Field(description="The threshold the recall applied.")
    rank: int | None = Field(default=None, description="1-based position in the packing "
                             "order (what passes the configured min_score first, best first, "
                             "a newer statement of a fact just ahead of the older one).")
    tokens: int | None = Field(default=None, description="`budget`: tokens it needed.")
    tokens_left: int | None = Field(default=None, description="`budget`: tokens left of "
                                    "`max_tokens` when the recall ended.")
    covered_by: list[str] = Field(default_factory=list, description="`duplicate`: the "
                                  "returned memories that hold its lines.")
    cosine: float | None = Field(default=None, description="Cosine of query and memory "
                                 "embeddings (also for `not_candidate`).")
    explain: ScoreParts | None = Field(default=None, description="Its score parts, when it "
                                       "was scored (as in a recall's `explain`).")


class WhyNotResponse(BaseModel):
    namespace: str
    query: str
    min_score: float
    top_k: int
    max_tokens: int
    tokens: int = Field(description="Tokens the recall returned.")
    recalled: list[str] = Field(description="Ids the recall returned, in block order.")
    candidates: int
    items: list[WhyNotItem] = Field(description="One per requested id, in request order.")


# --- watching a recall -------------------------------------------------------------------


@dataclass
class _Trace:
    candidates: list[_Candidate] = field(default_factory=list)
    ranked: list[_Candidate] = field(default_factory=list)  # the packing order, all tiers
    lower_tier: set[str] = field(default_factory=set)  # only the per-call min_score let in
    packed: list[_Packed] = field(default_factory=list)
    passed_over: dict[str, tuple[PassedOver, int]] = field(default_factory=dict)


class _NoHits(HitRecorder):
    """A hit recorder that records nothing (see the module docstring)."""

    def __init__(self) -> None:  # nothing to flush, so none of the parent's state
        pass

    @override
    def record(self, namespace: str, memory_ids: object) -> None:
        return None


class _TracedRecall(RecallService):
    """The real recall, keeping its candidates, the ranked list and what it packed."""

    def __init__(self, parent: RecallService) -> None:
        super().__init__(parent._repo, parent._pool, _NoHits(), parent._settings)
        self._sizes = parent._sizes  # share the caches: same data, same answers
        self._tokens = parent._tokens  # the same TokenCounter
        self.trace = _Trace()
        self._query_vector: np.ndarray | None = None

    async def query_vector(self, text: str) -> np.ndarray:
        """The query's embedding, computed once per why-not call."""
        if self._query_vector is None:
            self._query_vector = (await self._pool.embed_query(text)).astype(np.float32)
        return self._query_vector

    @override
    async def _candidates(self, request: RecallRequest, parsed: ParsedQuery, text: str, *,
                          hint: TimeHint | None, favoured: set[str]
                          ) -> tuple[list[_Candidate], Coverage | None, Coverage | None]:
        found, matcher, named = await super()._candidates(request, parsed, text, hint=hint,
                                                          favoured=favoured)
        self.trace.candidates = found
        return found, matcher, named

    @override
    def _pack(self, tiers: Sequence[Sequence[_Candidate]], *, top_k: int, max_tokens: int,
              matcher: Coverage | None, query: str = "", named: Coverage | None = None
              ) -> list[_Packed]:
        packed = super()._pack(tiers, top_k=top_k, max_tokens=max_tokens, matcher=matcher,
                               query=query, named=named)
        self.trace.ranked = [c for tier in tiers for c in tier]
        self.trace.lower_tier = {c.memory.id for tier in tiers[1:] for c in tier}
        self.trace.packed = list(packed)
        return packed

    @override
    def _passed_over(self, candidate: _Candidate, why: PassedOver, tokens: int) -> None:
        self.trace.passed_over.setdefault(candidate.memory.id, (why, tokens))

    def count(self, text: str) -> int:
        return self._count_tokens(text)


class WhyNotService:
    def __init__(self, recall: RecallService) -> None:
        self._recall = recall

    async def explain(self, request: WhyNotRequest) -> WhyNotResponse:
        traced = _TracedRecall(self._recall)
        result = await traced.recall(request)  # a recall request with one more field
        trace = traced.trace
        wanted = list(dict.fromkeys(request.memory_ids))
        found = {m.id: m for m in await traced._repo.get_memories(wanted, with_vector=True)
                 if m.namespace == request.namespace}
        where = traced._filter(request)
        scored = {c.memory.id: c for c in trace.candidates}
        items: list[WhyNotItem] = []
        for memory_id in request.memory_ids:
            items.append(await self._one(memory_id, found.get(memory_id), result, trace,
                                         scored, where, traced, request))
        return WhyNotResponse(
            namespace=request.namespace, query=request.query, min_score=result.min_score,
            top_k=request.top_k, max_tokens=result.max_tokens, tokens=result.tokens,
            recalled=[m.id for m in result.memories], candidates=result.candidates,
            items=items)

    async def _one(self, memory_id: str, memory: MemoryRecord | None, result: RecallResponse,
                   trace: _Trace, scored: dict[str, _Candidate], where: SearchFilter,
                   traced: _TracedRecall, request: RecallRequest) -> WhyNotItem:
        threshold = result.min_score
        if memory is None:
            return WhyNotItem(memory_id=memory_id, verdict=Verdict.not_found,
                              min_score=threshold,
                              reason=f"no memory {memory_id!r} in namespace "
                              f"{request.namespace!r}")
        if memory.state not in where.states:
            return WhyNotItem(
                memory_id=memory_id, verdict=Verdict.state, state=memory.state,
                min_score=threshold,
                reason=f"it is {memory.state}: recall searches active memories only "
                "(restore brings it back)")
        excluded = _excluded_by(memory, where)
        if excluded is not None:
            name, sentence = excluded
            return WhyNotItem(memory_id=memory_id, verdict=Verdict.filter, filter=name,
                              state=memory.state, min_score=threshold, reason=sentence)
        candidate = scored.get(memory_id)
        if candidate is None:
            cosine = await self._cosine(memory, result.search_text or request.query, traced)
            limit = CANDIDATES  # the same whatever top_k
            return WhyNotItem(
                memory_id=memory_id, verdict=Verdict.not_candidate, state=memory.state,
                min_score=threshold, cosine=None if cosine is None else round(cosine, 4),
                reason=f"neither the vector nor the keyword search ranked it among their "
                f"top {limit} for this query"
                + (f" (cosine to the query {cosine:.3f})" if cosine is not None else "")
                + "; it shares too little with the query")
        base = WhyNotItem(memory_id=memory_id, verdict=Verdict.recalled, reason="",
                          state=memory.state, min_score=threshold,
                          relevance=round(candidate.relevance, 4),
                          cosine=round(candidate.cosine, 4), explain=_explain(candidate),
                          rank=_rank(trace.ranked, memory_id))
        if memory_id in {m.id for m in result.memories}:
            return base.model_copy(update={"reason": "it was recalled"})
        if base.rank is None:
            return base.model_copy(update={
                "verdict": Verdict.below_threshold,
                "reason": f"its relevance {candidate.relevance:.3f} is below the threshold "
                f"{threshold:.3f} (vector part {candidate.vector:.3f}, keyword part "
                f"{candidate.keyword:.3f})"})
        context_floor = threshold * CONTEXT_THRESHOLD_FACTOR
        if candidate.relevance >= threshold:
            passed = "it passed the threshold"
        elif candidate.relevance >= context_floor:
            passed = ("below the threshold but above the context floor "
                      f"{context_floor:.3f}, it fills the budget after the memories that pass "
                      "(the question has an answer) and is not counted as a hit")
        else:
            passed = "below the threshold, it was taken in as the newer statement of a " \
                "returned fact"
        if memory_id in trace.lower_tier:
            passed += (" (only the per-call min_score lets it in, so it is packed after "
                       "every memory that passes the configured one)")
        over = trace.passed_over.get(memory_id)
        why, tried = over if over is not None else (None, 0)
        covering = _covering(memory, trace.packed)
        if covering or why is PassedOver.duplicate:
            return base.model_copy(update={
                "verdict": Verdict.duplicate, "covered_by": covering,
                "reason": "every line it holds was already returned by a better memory: "
                + ", ".join(covering)})
        if why is PassedOver.matched_lines_returned:
            holders = _holders(memory, trace.packed)
            return base.model_copy(update={
                "verdict": Verdict.duplicate, "covered_by": holders,
                "reason": "its lines that match the query were already returned by a "
                "better memory (" + ", ".join(holders) + "); its other lines do not match"})
        left = result.max_tokens - result.tokens
        if why is PassedOver.budget:
            return base.model_copy(update={
                "verdict": Verdict.budget, "tokens": tried, "tokens_left": left,
                "reason": f"{passed} (rank #{base.rank}) but needs {tried} tokens, more "
                f"than were left at its turn; {left} of max_tokens {result.max_tokens} "
                "were left at the end"})
        if len(trace.packed) >= request.top_k:
            return base.model_copy(update={
                "verdict": Verdict.top_k,
                "reason": f"{passed} but ranked #{base.rank}; top_k "
                f"{request.top_k} memories were returned before its turn"})
        needed = traced.count(memory.text)
        return base.model_copy(update={
            "verdict": Verdict.budget, "tokens": needed, "tokens_left": left,
            "reason": f"{passed} (rank #{base.rank}) but the budget was full before its "
            f"turn: it needs {needed} tokens and only {left} of max_tokens "
            f"{result.max_tokens} were left"})

    async def _cosine(self, memory: MemoryRecord, text: str, traced: _TracedRecall
                      ) -> float | None:
        if not memory.vector:
            return None
        query = await traced.query_vector(text)
        return float(np.asarray(memory.vector, dtype=np.float32) @ query)


def _explain(c: _Candidate) -> ScoreParts:
    return ScoreParts(
        cosine=round(c.cosine, 4), vector=round(c.vector, 4), keyword=round(c.keyword, 4),
        relevance=round(c.relevance, 4), ranking=round(c.ranking, 4), decay=round(c.decay, 4),
        boost=round(c.boost, 4), importance=round(c.importance, 4), tier=round(c.tier, 4),
        branch=round(c.branch, 4), time=round(c.time, 4), reference=round(c.reference, 4))


def _rank(ranked: Sequence[_Candidate], memory_id: str) -> int | None:
    for index, c in enumerate(ranked, start=1):
        if c.memory.id == memory_id:
            return index
    return None


def _covering(memory: MemoryRecord, packed: Sequence[_Packed]) -> list[str]:
    """The returned memories that hold all of `memory`'s messages, if together they do."""
    mine = {(memory.session_id, i) for i in memory.msg_ids}
    if not mine:
        return []
    holders: list[str] = []
    for p in packed:
        m = p.candidate.memory
        held = mine & {(m.session_id, i) for i in p.msg_ids}
        if held:
            holders.append(m.id)
            mine -= held
    return holders if not mine else []


def _holders(memory: MemoryRecord, packed: Sequence[_Packed]) -> list[str]:
    """The returned memories that hold any of `memory`'s messages."""
    mine = {(memory.session_id, i) for i in memory.msg_ids}
    return [p.candidate.memory.id for p in packed
            if mine & {(p.candidate.memory.session_id, i) for i in p.msg_ids}]


def _excluded_by(memory: MemoryRecord, where: SearchFilter) -> tuple[str, str] | None:
    """The request field whose filter leaves `memory` out (as `SearchFilter.to_sql` does)."""
    checks: list[tuple[str, tuple[str, ...] | None, str]] = [
        ("branch", where.branches, memory.branch),
        ("categories", where.categories, memory.category),
        ("tiers", where.tiers, memory.tier),
    ]
    for name, allowed, value in checks:
        if allowed is not None and value not in allowed:
            return name, f"{name} filter {list(allowed)} leaves it out: it is {value!r}"
    if where.session_id is not None and memory.session_id != where.session_id:
        return "session_id", (f"session_id filter {where.session_id!r} leaves it out: it "
                              f"belongs to session {memory.session_id!r}")
    end = memory.time_end or memory.created_at
    start = memory.time_start or memory.created_at
    if where.time_from is not None and end is not None \
            and as_utc(end) < as_utc(where.time_from):
        return "time_from", (f"its messages end {as_utc(end).isoformat()}, before time_from "
                             f"{as_utc(where.time_from).isoformat()}")
    if where.time_to is not None and start is not None \
            and as_utc(start) > as_utc(where.time_to):
        return "time_to", (f"its messages start {as_utc(start).isoformat()}, after time_to "
                           f"{as_utc(where.time_to).isoformat()}")
    return None

