"""The searches: full-text (BM25) and vector (cosine), one filter, merged into candidates.

The keyword search (the question's words, and their translations: bilingual.py) runs while
the question is embedded, the vector search as soon as the embedding is there; both filter
by namespace first, so no other namespace can ever appear. Each returns `CANDIDATES`
memories. A named date or a referenced session adds a small vector
search inside it. A keyword-only hit gets its cosine from its stored vector: one scale for all.
A search not done by the recall's deadline is dropped, and the other one answers
(deadline.py). The pending search (pending.py) adds the namespace's messages not built into
memories yet that hold a word of the question, or whose own vector (a `wait=true` store's)
passes `min_score`, as provisional memories (read-your-writes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from prometheus_client import Histogram

from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.ops.metrics import Metrics
from app.recall.candidates import Candidate, utc
from app.recall.deadline import Deadline
from app.recall.pending import PendingSearch
from app.recall.query import Query
from app.recall.schemas import RecallRequest, Stage
from app.recall.text import QueryTerms
from app.recall.tuning import CANDIDATES, NAMESPACE_SIZE_TTL, WINDOW_CANDIDATES
from app.scripts import has_han
from app.storage.repository import Repository, SearchFilter, SearchHit


def search_filter(request: RecallRequest) -> SearchFilter:
    """What the request's filters let a search see (its namespace always)."""
    branches = (request.branch,) if request.branch and not request.other_branches else None
    return SearchFilter(
        namespace=request.namespace,
        branches=branches,
        categories=tuple(c.value for c in request.categories) if request.categories
        else None,
        tiers=tuple(t.value for t in request.tiers) if request.tiers else None,
        session_id=request.session_id,
        time_from=request.time_from,
        time_to=request.time_to,
        as_of=request.as_of,
    )


@dataclass
class Searched:
    """A search's candidates, and which searches are in them: not one that was late for
    the recall's deadline (deadline.py)."""

    candidates: list[Candidate]
    with_vector: bool
    with_keyword: bool


@dataclass
class _SizeCache:
    """Memories per namespace, refreshed at most every `ttl` seconds (decides index use)."""

    ttl: float = NAMESPACE_SIZE_TTL
    sizes: dict[str, tuple[int, float]] = field(default_factory=dict)


class Searcher:
    """Runs one question's searches against the repository and the embedding pool."""

    def __init__(self, repo: Repository, pool: EmbeddingPool, settings: Settings) -> None:
        self._repo = repo
        self._pool = pool
        self._settings = settings
        self._sizes = _SizeCache()
        self._pending = PendingSearch(repo, pool, settings)

    async def search(self, query: Query, text: str, *, terms: QueryTerms, deadline: Deadline,
                     metrics: Metrics | None, hop: bool = False) -> Searched:
        """The candidates for `text` (the question or a part or hop of it, whose words are
        `terms`), unscored; without the vector searches if the question's vector is not
        there by `deadline` (deadline.py). A second `hop`'s searches give nothing when
        neither is done by then (`Stage.second_hop`): the first search answered. `metrics`
        observes the steps' times (engram_recall_search_seconds)."""
        request = query.request
        where = search_filter(request)
        # Not more with a larger top_k: the candidates are also the corpus of the keyword
        # weights (`Coverage`), so the best memory would change with top_k.
        limit = CANDIDATES
        # The keyword search needs no vector: it runs while the query is being embedded,
        # and the vector search starts the moment the embedding is there.
        step = metrics.recall_search if metrics is not None else None
        started = time.perf_counter()

        # The question's words in the other language too (bilingual.py): a memory in
        # Chinese is found by an English question's words, and the reverse.
        keywords = " ".join([text, *terms.translations()]) \
            if self._settings.recall_across_languages else text

        async def keyword_search() -> tuple[list[SearchHit], Any]:
            found = await self._repo.text_search(keywords, where, limit=limit)
            if step is not None:
                step.labels("keyword").observe(time.perf_counter() - started)
            return found

        keyword = asyncio.create_task(keyword_search())
        pending = asyncio.create_task(self._pending.read(where))
        vector = asyncio.create_task(self._vector_search(query, text, where, step=step,
                                                         started=started))
        finished: dict[asyncio.Task[Any], float] = {}  # when each search's task ended

        def ended(task: asyncio.Task[Any]) -> None:
            finished[task] = time.perf_counter()

        keyword.add_done_callback(ended)
        vector.add_done_callback(ended)
        try:
            # What is done by the deadline counts (or the first search to finish, when
            # neither is); the other is cancelled and named as skipped (`late`).
            await deadline.settle(keyword, vector, need_one=not hop)
        except BaseException:  # the request went away: nothing waits for the searches
            keyword.cancel()
            vector.cancel()
            pending.cancel()
            raise
        if not keyword.done() and not vector.done():  # a hop, late: nothing of it counts
            for task in (keyword, vector, pending):
                deadline.late(task, Stage.second_hop)
            return Searched([], with_vector=False, with_keyword=False)
        with_keyword = not deadline.late(keyword, Stage.keyword)
        with_vector = not deadline.late(vector, Stage.vector)
        if step is not None and with_keyword and with_vector:
            # What was left of the keyword search once the vector searches were done.
            now = time.perf_counter()
            step.labels("keyword_left").observe(
                max(0.0, finished.get(keyword, now) - finished.get(vector, now)))
        keyword_hits, keyword_vectors = keyword.result() if with_keyword else ([], None)
        query_vector, vector_hits = vector.result() if with_vector else (None, [])
        found = merge(vector_hits, keyword_hits, keyword_vectors, query_vector)
        # After the other searches: a memory they found was built before the pending
        # search reads which messages are built (pending.py). A cached read (~1 ms).
        at = time.perf_counter()
        found += await self._pending.candidates(await pending, terms,
                                                query_vector=query_vector, found=found,
                                                min_score=query.min_score,
                                                chinese=has_han(text),
                                                deadline=deadline, hop=hop)
        if step is not None:
            step.labels("pending").observe(time.perf_counter() - at)
        return Searched(found, with_vector=with_vector, with_keyword=with_keyword)

    async def _vector_search(self, query: Query, text: str, where: SearchFilter, *,
                             step: Histogram | None, started: float
                             ) -> tuple[np.ndarray, list[SearchHit]]:
        """The question's vector and its vector searches: the plain one, then those inside
        the date or the sessions the question points to."""
        request, hint = query.request, query.hint
        query_vector, exact = await asyncio.gather(
            self._pool.embed_query(text), self._exact_search(request.namespace))
        vector = query_vector.tolist()
        at = time.perf_counter()
        vector_hits = list(await self._repo.vector_search(vector, where, limit=CANDIDATES,
                                                          exact=exact))
        if step is not None:
            step.labels("vector_ready").observe(at - started)
            step.labels("vector").observe(time.perf_counter() - at)
        # What a date or a reference phrase points to competes even if the plain searches
        # ranked it too low: a small extra search inside that window or session (all at
        # once; their hits are appended in this order).
        extra: list[SearchFilter] = []
        if hint is not None:
            start = max(hint.start, utc(request.time_from)) if request.time_from else hint.start
            end = min(hint.end, utc(request.time_to)) if request.time_to else hint.end
            if start < end:
                extra.append(replace(where, time_from=start, time_to=end))
        for session_id in sorted(query.favoured):
            if request.session_id is None or request.session_id == session_id:
                extra.append(replace(where, session_id=session_id))
        at = time.perf_counter()
        for hits in await asyncio.gather(*(
                self._repo.vector_search(vector, w, limit=WINDOW_CANDIDATES, exact=True)
                for w in extra)):
            vector_hits += hits
        if step is not None and extra:
            step.labels("extra").observe(time.perf_counter() - at)
        return query_vector, vector_hits

    async def _exact_search(self, namespace: str) -> bool:
        """Scan a small namespace exhaustively even when the table has a vector index.

        An IVF index probes a few partitions of the whole table; with a namespace filter
        first, a namespace holding 1 % of the rows may have too few rows in those partitions
        for a full top-k. Below the index threshold an exact scan of the namespace is as
        fast as the index and exact.
        """
        now = time.monotonic()
        cached = self._sizes.sizes.get(namespace)
        if cached is None or now - cached[1] > self._sizes.ttl:
            size = await self._repo.count_memories(namespace)
            self._sizes.sizes[namespace] = (size, now)
        else:
            size = cached[0]
        return size < self._settings.vector_index_min_rows


def merge(vector_hits: Sequence[SearchHit], keyword_hits: Sequence[SearchHit],
          keyword_vectors: np.ndarray | None, query_vector: np.ndarray | None
          ) -> list[Candidate]:
    """One candidate per memory, vector hits first; a keyword hit's cosine from its vector
    (0 without the question's vector: a recall past its deadline)."""
    by_id: dict[str, Candidate] = {}
    for hit in vector_hits:
        if hit.memory.id not in by_id:
            by_id[hit.memory.id] = Candidate(hit.memory, cosine=hit.cosine or 0.0,
                                             stored=hit.vector)
    if len(keyword_hits) and keyword_vectors is not None:
        # Keyword-only hits get their cosine from their stored vectors: one scale for all.
        cosines = keyword_vectors @ query_vector.astype(np.float32) \
            if query_vector is not None else np.zeros(len(keyword_hits), dtype=np.float32)
        for hit, cosine, vector in zip(keyword_hits, cosines, keyword_vectors, strict=True):
            existing = by_id.get(hit.memory.id)
            if existing is None:
                existing = by_id[hit.memory.id] = Candidate(hit.memory, cosine=float(cosine))
            existing.bm25 = hit.bm25 or 0.0
            if existing.stored is None:
                existing.stored = vector
    for c in by_id.values():
        when = c.memory.time_end or c.memory.time_start or c.memory.created_at
        c.when = utc(when).timestamp() if when else 0.0
    return list(by_id.values())
