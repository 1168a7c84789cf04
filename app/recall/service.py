"""Recall: the memories that matter for a query, packed into a token budget.

One request, read top to bottom in `RecallService._run`, one stage a module:

1. **Read the query** (`query.py`): its search text, the date it names, its threshold and
   budget, the sessions a reference phrase points to.
2. **Search and score** (`search.py`, `score.py`, `hop.py`): full-text and vector
   searches under one namespace filter, per sub-question and with a second hop; every
   candidate scored on one 0–1 scale (relevance), then ranked (ranking × decay × boosts).
3. **Order** (`order.py`): what passes `min_score`, and the context around it, best first,
   a newer statement of a fact ahead of the older one, in two tiers.
4. **Pack** (`pack.py`): best first until `top_k` or the token budget, line by line where
   that keeps the answer and drops what a better memory returned already.
5. **Present** (`block.py`): long-term facts, then details; an injection block in
   Chinese or English.
6. **Hits** go to the in-memory `HitRecorder`, written in the background in batches.

A recall has a deadline (`deadline_ms`, default `recall_deadline_ms`; `deadline.py`): a
search stage not done by then is skipped, the answer comes from what is ready, and the
response says `degraded` and names the `skipped` stages.

The constants of all stages are in `tuning.py`; the types they pass along in
`candidates.py`. `trace` runs the same recall for `why_not` and returns its steps, without
a deadline: an explanation of a recall that skipped a stage would explain the skip, not the
memory asked about.
"""

from __future__ import annotations

import time

from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.ops.metrics import Metrics, lap_timer
from app.recall.block import TokenCounter, block_language, render_block
from app.recall.candidates import Trace, layer, provisional, public
from app.recall.deadline import Deadline
from app.recall.hits import HitRecorder
from app.recall.hop import find
from app.recall.order import order
from app.recall.pack import pack
from app.recall.query import read_query
from app.recall.schemas import (
    Layer,
    RecallRequest,
    RecallResponse,
    ReferenceInfo,
    Superseded,
    TimeWindow,
)
from app.recall.score import overlaps
from app.recall.search import Searcher
from app.recall.tuning import CONTEXT_THRESHOLD_FACTOR
from app.storage.repository import Repository


class RecallService:
    def __init__(self, repo: Repository, pool: EmbeddingPool, hits: HitRecorder,
                 settings: Settings, *, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        self._repo = repo
        self._pool = pool
        self._hits = hits
        self._settings = settings
        self._searcher = Searcher(repo, pool, settings)
        self.tokens = TokenCounter(pool.count_tokens)

    @property
    def repo(self) -> Repository:
        return self._repo

    @property
    def pool(self) -> EmbeddingPool:
        return self._pool

    async def recall(self, request: RecallRequest) -> RecallResponse:
        # Held while a recall runs: builds and background work wait for it at their
        # boundaries (app/ops/recall_first.py; the app's gate is its pool's).
        with self._pool.recall_first.recalling():
            ms = request.deadline_ms
            response, _ = await self._run(
                request, metrics=self._metrics, record_hits=True,
                deadline_ms=self._settings.recall_deadline_ms if ms is None else ms)
            if self._metrics is not None and response.degraded:
                self._metrics.recall_degraded.inc()
                for stage in response.skipped:
                    self._metrics.recall_skipped.labels(stage.value).inc()
            return response

    async def trace(self, request: RecallRequest) -> tuple[RecallResponse, Trace]:
        """The same recall and its steps, for `why_not`: no hits recorded (asking about a
        memory must not promote it), no stage metrics observed, and no deadline (the
        request's `deadline_ms` is ignored): the explanation is of the complete recall."""
        with self._pool.recall_first.recalling():
            return await self._run(request, metrics=None, record_hits=False, deadline_ms=0)

    async def _run(self, request: RecallRequest, *, metrics: Metrics | None,
                   record_hits: bool, deadline_ms: int) -> tuple[RecallResponse, Trace]:
        started = time.perf_counter()
        deadline = Deadline.after(deadline_ms, started=started)
        # engram_recall_stage_seconds, from the request's start
        lap = lap_timer(metrics.recall_stage if metrics is not None else None,
                        started=started)
        s = self._settings
        query = await read_query(request, s, self._repo)
        lap("read")
        found = await find(query, searcher=self._searcher, pool=self._pool, settings=s,
                           deadline=deadline, metrics=metrics)
        lap("search")
        tiers = await order(found.candidates, query, found.matcher, repo=self._repo,
                            supersede_cosine=s.model_profile.supersede_cosine)
        lap("order")
        packing = pack(tiers, top_k=request.top_k, max_tokens=query.max_tokens,
                       matcher=found.matcher, count=self.tokens.count,
                       query=query.search_text, named=found.named)
        # Long-term facts first, otherwise the packing order (best first, a newer statement
        # of a fact ahead of the older one: `order`). The sort is stable.
        packed = sorted(packing.packed,
                        key=lambda p: layer(p.candidate.memory) != Layer.longterm)
        returned = frozenset(p.candidate.memory.id for p in packed)
        earlier = {p.candidate.memory.id for p in packed
                   if p.candidate.superseded_by is not None
                   and p.candidate.superseded_by.id in returned}
        if request.superseded == Superseded.omit:
            packed = [p for p in packed if p.candidate.memory.id not in earlier]
        if record_hits:
            # A statement a later one changed answers nothing now: it does not climb.
            # Provisional memories (pending messages, pending.py) are no memories to count.
            self._hits.record(request.namespace, [
                p.candidate.memory.id for p in packed
                if p.candidate.relevance >= query.min_score
                and p.candidate.memory.id not in earlier and not provisional(p)],
                question=query.search_text)
        language = block_language(request.language, request.query)
        block, frame = render_block(packed, language=language)
        block_tokens = self.tokens.block(block, frame, [p.text for p in packed],
                                         [p.tokens for p in packed])
        lap("pack")
        parsed, hint = query.parsed, query.hint
        response = RecallResponse(
            namespace=request.namespace,
            query=request.query,
            search_text=query.search_text,
            memories=[public(p, returned) for p in packed],
            count=len(packed),
            tokens=sum(p.tokens for p in packed),
            max_tokens=query.max_tokens,
            min_score=round(query.min_score, 4),
            context_min_score=round(query.min_score * CONTEXT_THRESHOLD_FACTOR, 4),
            language=language.value,
            block=block,
            block_tokens=block_tokens,
            reference=ReferenceInfo(phrase=parsed.reference.phrase,
                                    scope=parsed.reference.scope.value)
            if parsed.reference else None,
            time_window=TimeWindow(
                phrase=hint.phrase, start=hint.start, end=hint.end,
                empty=not any(overlaps(c.memory, hint) for c in found.candidates))
            if hint else None,
            candidates=len(found.candidates),
            degraded=bool(deadline.skipped),
            skipped=deadline.skipped,
            took_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return response, Trace(found.candidates, tiers, packing)
