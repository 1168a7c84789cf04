""""Why not this memory?": for memories a recall did not return, what kept each one out.

`POST /v1/recall/why_not` takes a recall request plus `memory_ids` and runs that recall
exactly as `POST /v1/recall` would (same searches, scores, threshold and packing: it calls
`RecallService.trace`, it does not copy it) and reads the steps it returns. For each id the
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
packing reports each memory it passed over and why (`Packing.passed_over`), so the
verdicts follow the packing's rules rather than re-deriving them.

A why-not call records no hits: asking about a memory must not promote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from app.embedding.pool import EmbeddingPool
from app.recall.candidates import (
    PENDING_PREFIX,
    Candidate,
    Packed,
    PassedOver,
    Trace,
    score_parts,
)
from app.recall.schemas import RecallRequest, RecallResponse, ScoreParts
from app.recall.search import search_filter
from app.recall.service import RecallService
from app.recall.tuning import CANDIDATES, CONTEXT_THRESHOLD_FACTOR
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
                               "time_from, time_to, as_of).")
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


# --- reading a recall's trace ------------------------------------------------------------


class WhyNotService:
    def __init__(self, recall: RecallService) -> None:
        self._recall = recall

    async def explain(self, request: WhyNotRequest) -> WhyNotResponse:
        # A recall request with one more field; the trace records no hits.
        result, trace = await self._recall.trace(request)
        wanted = list(dict.fromkeys(request.memory_ids))
        found = {m.id: m for m in await self._recall.repo.get_memories(wanted, with_vector=True)
                 if m.namespace == request.namespace}
        where = search_filter(request)
        scored = {c.memory.id: c for c in trace.candidates}
        vector = _QueryVector(self._recall.pool)
        items: list[WhyNotItem] = []
        for memory_id in request.memory_ids:
            items.append(await self._one(memory_id, found.get(memory_id), result, trace,
                                         scored, where, vector, request))
        return WhyNotResponse(
            namespace=request.namespace, query=request.query, min_score=result.min_score,
            top_k=request.top_k, max_tokens=result.max_tokens, tokens=result.tokens,
            # Memories only: a provisional one (pending messages, pending.py) is none.
            recalled=[m.id for m in result.memories if not m.provisional],
            candidates=result.candidates,
            items=items)

    async def _one(self, memory_id: str, memory: MemoryRecord | None, result: RecallResponse,
                   trace: Trace, scored: dict[str, Candidate], where: SearchFilter,
                   vector: _QueryVector, request: RecallRequest) -> WhyNotItem:
        threshold = result.min_score
        if memory is None:
            provisional = (" (a provisional id stands for messages not built into a memory "
                           "yet: it is no memory)" if memory_id.startswith(PENDING_PREFIX)
                           else "")
            return WhyNotItem(memory_id=memory_id, verdict=Verdict.not_found,
                              min_score=threshold,
                              reason=f"no memory {memory_id!r} in namespace "
                              f"{request.namespace!r}{provisional}")
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
            cosine = await vector.cosine(memory, result.search_text or request.query)
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
                          cosine=round(candidate.cosine, 4), explain=score_parts(candidate),
                          rank=_rank([c for tier in trace.tiers for c in tier], memory_id))
        if memory_id in {m.id for m in result.memories}:
            return base.model_copy(update={"reason": "it was recalled"})
        context_floor = threshold * CONTEXT_THRESHOLD_FACTOR
        if base.rank is None:
            unshared = ("; above the context floor, but it holds no word of the question, "
                        "so it does not fill after an answer"
                        if candidate.relevance >= context_floor and candidate.keyword <= 0
                        else "")
            return base.model_copy(update={
                "verdict": Verdict.below_threshold,
                "reason": f"its relevance {candidate.relevance:.3f} is below the threshold "
                f"{threshold:.3f} (vector part {candidate.vector:.3f}, keyword part "
                f"{candidate.keyword:.3f}){unshared}"})
        if candidate.relevance >= threshold:
            passed = "it passed the threshold"
        elif candidate.relevance >= context_floor:
            passed = ("below the threshold but above the context floor "
                      f"{context_floor:.3f}, it fills the budget after the memories that pass "
                      "(the question has an answer) and is not counted as a hit")
        else:
            passed = "below the threshold, it was taken in as the newer statement of a " \
                "returned fact"
        if any(c.memory.id == memory_id for tier in trace.tiers[1:] for c in tier):
            passed += (" (only the per-call min_score lets it in, so it is packed after "
                       "every memory that passes the configured one)")
        over = trace.packing.passed_over.get(memory_id)
        why, tried = over if over is not None else (None, 0)
        covering = _covering(memory, trace.packing.packed)
        if covering or why is PassedOver.duplicate:
            return base.model_copy(update={
                "verdict": Verdict.duplicate, "covered_by": covering,
                "reason": "every line it holds was already returned by a better memory: "
                + ", ".join(covering)})
        if why is PassedOver.matched_lines_returned:
            holders = _holders(memory, trace.packing.packed)
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
        if len(trace.packing.packed) >= request.top_k:
            return base.model_copy(update={
                "verdict": Verdict.top_k,
                "reason": f"{passed} but ranked #{base.rank}; top_k "
                f"{request.top_k} memories were returned before its turn"})
        needed = self._recall.tokens.count(memory.text)
        return base.model_copy(update={
            "verdict": Verdict.budget, "tokens": needed, "tokens_left": left,
            "reason": f"{passed} (rank #{base.rank}) but the budget was full before its "
            f"turn: it needs {needed} tokens and only {left} of max_tokens "
            f"{result.max_tokens} were left"})


class _QueryVector:
    """The query's embedding, computed once per why-not call, and cosines to it."""

    def __init__(self, pool: EmbeddingPool) -> None:
        self._pool = pool
        self._vector: np.ndarray | None = None

    async def cosine(self, memory: MemoryRecord, text: str) -> float | None:
        if not memory.vector:
            return None
        if self._vector is None:
            self._vector = (await self._pool.embed_query(text)).astype(np.float32)
        return float(np.asarray(memory.vector, dtype=np.float32) @ self._vector)


def _rank(ranked: Sequence[Candidate], memory_id: str) -> int | None:
    for index, c in enumerate(ranked, start=1):
        if c.memory.id == memory_id:
            return index
    return None


def _covering(memory: MemoryRecord, packed: Sequence[Packed]) -> list[str]:
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


def _holders(memory: MemoryRecord, packed: Sequence[Packed]) -> list[str]:
    """The returned memories that hold any of `memory`'s messages."""
    mine = {(memory.session_id, i) for i in memory.msg_ids}
    return [p.candidate.memory.id for p in packed
            if mine & {(p.candidate.memory.session_id, i) for i in p.msg_ids}]


def _excluded_by(memory: MemoryRecord, where: SearchFilter) -> tuple[str, str] | None:
    """The request field whose filter leaves `memory` out (as `SearchFilter.to_sql` does)."""
    checks: list[tuple[str, tuple[str, ...] | None, list[str]]] = [
        ("branch", where.branches, [memory.branch]),
        # The main category or any other its lines have (`categories`).
        ("categories", where.categories,
         list(dict.fromkeys([memory.category, *(memory.categories or [])]))),
        ("tiers", where.tiers, [memory.tier]),
    ]
    for name, allowed, values in checks:
        if allowed is not None and not set(values) & set(allowed):
            shown = values[0] if len(values) == 1 else values
            return name, f"{name} filter {list(allowed)} leaves it out: it is {shown!r}"
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
    if where.as_of is not None and start is not None \
            and as_utc(start) > as_utc(where.as_of):
        return "as_of", (f"its messages start {as_utc(start).isoformat()}, after as_of "
                         f"{as_utc(where.as_of).isoformat()}: it did not exist yet")
    return None

