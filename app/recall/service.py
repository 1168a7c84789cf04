"""Recall: the memories that matter for a query, packed into a token budget.

Pipeline (one request):

1. **Read the query**: cut reference phrases ("as I said before", "记得刚才说的") and
   chit-chat wrappers (`references.py`), and a date it names (`when.py`: "on 3 June, 2023",
   "上周") from the search text; keep the cues.
2. **Searches, one filter**: the full-text (BM25) search runs while the query is embedded,
   the vector (cosine) search as soon as the embedding is there; both filter by namespace
   first, so no other namespace can ever appear. Each returns `CANDIDATES`
   memories. A named date or a referenced session adds a small search inside it.
3. **Score** every candidate on one 0–1 scale:
   `relevance = (1 − w) · vector + w · keyword`. `vector` is the cosine mapped linearly
   from the model profile's `cosine_floor` (0) to its `cosine_ceiling` (1), a band the
   profile shifts for a Chinese question against a Chinese memory (e5 puts any two Chinese
   texts closer than two English ones: `ModelProfile.cosine_band`); `keyword` is half the
   IDF-weighted share of the query's terms the memory contains (`text.coverage`) and half
   its BM25 relative to the best keyword hit, scaled by that hit's share. Both are absolute,
   so one `min_score` means the same in every store. `w` = the profile's `keyword_weight`, higher
   for Chinese queries with MiniLM, whose cosine says little about Chinese, so
   exact matches must carry the ranking. A memory in another script than every word of the
   query (an English question, a Chinese memory, or the reverse) can have no keyword part:
   for a model that reads both, its relevance (not its ranking) is the vector part alone, on
   a band a little stricter (`ModelProfile.cross_script_shift`). `min_score` applies to
   relevance. The ranking uses
   the same mix with the vector's weight scaled by the share of the query the model can
   read (`ranking`; most Chinese characters are [UNK] to MiniLM, none to e5), and for a
   memory of one speaker's statements its best line's share of the query counting half
   (`_ranking_cover`: one line holding the question's words answers it, several lines
   holding one each do not). Then
   `score = ranking × decay × boosts`: decay for age beyond `recall_decay_after_days`
   (half-life, floor), importance, tier (long-term facts up), other branches (down), the
   named date (up), what a reference phrase points to (up).
4. **Pack** best first until `top_k` or the token budget is reached, counting tokens with
   the model's tokenizer; a message already returned by a better memory (neighbouring
   chunks overlap by design) is not returned twice: the later memory keeps only its new
   lines, and is skipped if nothing new is left. A dialogue about one of its speakers
   ("what does Leo do as a hobby?") gives that speaker's turns first, the others back
   while the budget allows. A memory of one speaker's statements gives its lines that
   match the question first, and the lines naming what a second hop identified ("the
   person who works in Shenzhen" is 婶婶: `_hop_names`). What passes the configured `min_score`
   is packed before what only a lower per-call `min_score` lets in, so lowering it never
   returns less; the search size does not grow with `top_k`, so the best memory is the
   same whatever `top_k` is.
5. **Present**: long-term facts, then details; an injection block in Chinese or English.
6. **Hits** go to the in-memory `HitRecorder`, written in the background in batches.

Why age is measured from the newest matching memory and not from the wall clock: a user
who comes back after a quiet year asks about the same history as before, and an imported
2023 conversation must not be wiped out by being old as a whole. What decay should do is
let a recent memory beat an older one that matches as well; relative to the store's own
present it does exactly that, and the floor keeps an old exact match ahead of a vague
recent one. A client can pass `as_of` to measure from a given time. docs/benchmarks.md
has what each of these choices bought on LoCoMo.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import numpy as np

from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.ops.metrics import Metrics
from app.recall.hits import HitRecorder
from app.recall.newer import RECALL_WINDOW, Rarity, newer_first
from app.recall.references import ParsedQuery, ReferenceScope, parse_query, split_questions
from app.recall.schemas import (
    BlockLanguage,
    Layer,
    RecalledMemory,
    RecallRequest,
    RecallResponse,
    ReferenceInfo,
    ScoreParts,
    TimeWindow,
)
from app.recall.text import Coverage, QueryTerms, in_another_script, query_terms
from app.recall.when import TimeHint, find_time_hint, strip_phrase
from app.scripts import HAN, has_han
from app.storage.records import MemoryRecord, SessionRecord
from app.storage.repository import Repository, SearchFilter, SearchHit

_ROLE_LINE = re.compile(r"\n(?=(?:user|assistant|system|tool): )")
# A speaker's name opening a message: up to three words (or a CJK name) and a colon.
_NAME_LABEL = re.compile(rf"([^\W\d_][\w.'-]*(?: [\w.'-]+){{0,2}}|[{HAN}]{{1,8}})(?:: |：)")
_SECONDS_PER_DAY = 86_400.0


@dataclass
class _Candidate:
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
    # The memory's stored vector, as the search returned it (`_newer_first` compares
    # candidates with each other); None if the search did not have it.
    stored: np.ndarray | None = None

    @property
    def boost(self) -> float:
        return self.importance * self.tier * self.branch * self.time * self.reference


_Unit = tuple[tuple[str, ...], str]  # a memory's line: (its msg_ids, its text)


class PassedOver(StrEnum):
    """Why `_pack` looked at a memory and did not pack it."""

    duplicate = "duplicate"  # every line it holds was returned by a better memory
    matched_lines_returned = "matched_lines_returned"  # statements: the lines matching the
    # query were returned by a better memory, what is left does not match
    budget = "budget"  # it did not fit in the tokens left, even as its matching lines


@dataclass
class _Packed:
    candidate: _Candidate
    text: str
    msg_ids: list[str]
    tokens: int
    trimmed: bool
    part: int = 0
    units: list[_Unit] = field(default_factory=list)  # all the memory's lines
    choice: list[_Unit] = field(default_factory=list)  # the lines returned


@dataclass
class _SizeCache:
    """Memories per namespace, refreshed at most every `ttl` seconds (decides index use)."""

    ttl: float = 60.0
    sizes: dict[str, tuple[int, float]] = field(default_factory=dict)


class RecallService:
    def __init__(self, repo: Repository, pool: EmbeddingPool, hits: HitRecorder,
                 settings: Settings, *, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        self._repo = repo
        self._pool = pool
        self._hits = hits
        self._settings = settings
        self._sizes = _SizeCache()
        self._tokens = TokenCounter(pool.count_tokens)

    async def recall(self, request: RecallRequest) -> RecallResponse:
        # Held while a recall runs: builds and background work wait for it at their
        # boundaries (app/ops/recall_first.py; the app's gate is its pool's).
        with self._pool.recall_first.recalling():
            return await self._recall(request)

    async def _recall(self, request: RecallRequest) -> RecallResponse:
        started = lap_started = time.perf_counter()

        def lap(stage: str) -> None:
            """Observe the stage that ends now (engram_recall_stage_seconds)."""
            nonlocal lap_started
            now = time.perf_counter()
            if self._metrics is not None:
                self._metrics.recall_stage.labels(stage).observe(now - lap_started)
            lap_started = now

        s = self._settings
        parsed = parse_query(request.query)
        hint = find_time_hint(parsed.text, reference=_utc(request.as_of or datetime.now(UTC)))
        search_text = strip_phrase(parsed.text, hint.phrase) if hint else parsed.text
        default_min_score = s.model_profile.min_score
        min_score = default_min_score if request.min_score is None else request.min_score
        if parsed.reference is not None:
            # The user says the memory exists: accept a weaker match for it.
            min_score *= REFERENCE_THRESHOLD_FACTOR
            default_min_score *= REFERENCE_THRESHOLD_FACTOR
        if parsed.counts:
            # Every instance is asked for, also those the question's condition rules out.
            # How much weaker such a memory scores is the model's (its profile).
            min_score *= s.model_profile.count_threshold_factor
            default_min_score *= s.model_profile.count_threshold_factor
        max_tokens = request.max_tokens or s.recall_max_tokens
        favoured = await self._favoured_sessions(request.namespace, parsed)
        lap("read")
        candidates, matcher, named = await self._candidates(request, parsed, search_text,
                                                            hint=hint, favoured=favoured)
        lap("search")
        if parsed.reference_only:
            # "记得刚才说的吗" alone: the cue is the whole match for the sessions it names.
            for c in candidates:
                if c.memory.session_id in favoured:
                    c.relevance = max(c.relevance, min_score)
        # min_score decides whether the question has an answer here (abstention: nothing
        # passes, nothing is returned). Once a memory passes, weaker matches down to a share
        # of it fill what the budget leaves after every passing memory: the context of an
        # answer ("when did we move, and why?", the turns around an event) shares fewer of
        # the question's words than the answer does. They are not counted as hits.
        admitted = min_score
        if any(c.relevance >= min_score for c in candidates):
            admitted = min_score * CONTEXT_THRESHOLD_FACTOR
        ranked = sorted(
            (c for c in candidates if c.relevance >= admitted),
            # Near-equal scores (same to 3 decimals): the more recent memory first.
            key=lambda c: (round(c.score, 3), c.when, c.memory.id), reverse=True,
        )
        # What passes the configured threshold is packed first; a lower per-call min_score
        # only adds what fits after it (`_pack`).
        floor = max(min_score, default_min_score)
        passing = [c for c in ranked if c.relevance >= floor]
        first, taken = await self._newer_first(
            passing, [c for c in candidates if c.relevance < floor], matcher)
        kept = {c.memory.id for c in taken}
        rest, _ = await self._newer_first(
            [c for c in ranked if c.relevance < floor and c.memory.id not in kept], [], matcher)
        tiers = [first, rest]
        lap("order")
        packed = self._pack(tiers, top_k=request.top_k, max_tokens=max_tokens,
                            matcher=matcher, query=search_text, named=named)
        # Long-term facts first, otherwise the packing order (best first, a newer statement
        # of a fact ahead of the older one: `_newer_first`). The sort is stable.
        packed.sort(key=lambda p: _layer(p.candidate.memory) != Layer.longterm)
        self._hits.record(request.namespace, [p.candidate.memory.id for p in packed
                                              if p.candidate.relevance >= min_score])

        language = request.language
        if language == BlockLanguage.auto:
            language = BlockLanguage.zh if has_han(request.query) else BlockLanguage.en
        block, frame = render_block(packed, language=language)
        block_tokens = self._tokens.block(block, frame, [p.text for p in packed],
                                          [p.tokens for p in packed])
        lap("pack")
        return RecallResponse(
            namespace=request.namespace,
            query=request.query,
            search_text=search_text,
            memories=[_public(p) for p in packed],
            count=len(packed),
            tokens=sum(p.tokens for p in packed),
            max_tokens=max_tokens,
            min_score=round(min_score, 4),
            language=language.value,
            block=block,
            block_tokens=block_tokens,
            reference=ReferenceInfo(phrase=parsed.reference.phrase,
                                    scope=parsed.reference.scope.value)
            if parsed.reference else None,
            time_window=TimeWindow(phrase=hint.phrase, start=hint.start, end=hint.end)
            if hint else None,
            candidates=len(candidates),
            took_ms=round((time.perf_counter() - started) * 1000, 2),
        )

    async def _newer_first(self, ranked: list[_Candidate], below: list[_Candidate],
                           matcher: Coverage | None
                           ) -> tuple[list[_Candidate], list[_Candidate]]:
        """A later statement of a fact ahead of the older ones it restates (newer.py), also
        one from `below` (candidates under the threshold) that changes a returned fact.
        Per tier, so what a lower `min_score` lets in never reorders the default's tier.
        Returns the reordered tier and the candidates it took from `below`."""
        head = ranked[:RECALL_WINDOW]
        newcomers = sorted(below, key=lambda c: (c.score, c.when), reverse=True
                           )[:RECALL_WINDOW] if head else []
        if len(head) + len(newcomers) < 2:
            return ranked, []
        both = [*head, *newcomers]
        # The searches returned the vectors with the memories; reading them again was a
        # LanceDB query per tier (10-20 ms of a 40 ms recall at 100k memories).
        missing = [c.memory.id for c in both if c.stored is None]
        records = await self._repo.get_memories(missing, with_vector=True) if missing else []
        fetched = {r.id: np.asarray(r.vector, dtype=np.float32) for r in records
                   if r.vector is not None}
        vectors = {i: c.stored if c.stored is not None else fetched[c.memory.id]
                   for i, c in enumerate(both)
                   if c.stored is not None or c.memory.id in fetched}
        memory = {i: c.memory for i, c in enumerate(both)}
        threshold = self._settings.model_profile.supersede_cosine
        # How well each answers this question: its share of the question's words, and the
        # date or session the question names (an older memory on "3 June" stays first).
        shares = [(matcher.share(c.memory.text) if matcher else 1.0) * c.time * c.reference
                  for c in both]
        # Terms weighed by their rarity among the memories compared here, the question's
        # best candidates (a speaker's name is in all of them); not all the candidates:
        # tokenizing is the cost (~1 ms a chunk), and these are the texts read anyway.
        rarity = Rarity([c.memory.text for c in both])
        reordered, taken = newer_first(head, newcomers, memory, vectors, threshold=threshold,
                                       covers=shares.__getitem__, rarity=rarity)
        return reordered + ranked[len(head):], taken

    # --- search ------------------------------------------------------------------------

    def _filter(self, request: RecallRequest) -> SearchFilter:
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
        )

    async def _candidates(self, request: RecallRequest, parsed: ParsedQuery, text: str, *,
                          hint: TimeHint | None, favoured: set[str]
                          ) -> tuple[list[_Candidate], Coverage | None, Coverage | None]:
        """Searched and scored candidates, the query's term weights over them, and what a
        second hop's line names beyond the question's words (`_hop_names`), if anything.

        A compound query ("我堂哥几岁了？另外，星河草地音乐节的规模是什么？") is searched and
        scored per sub-question, concurrently (their embeddings share one model batch); a
        memory keeps its best score over the parts, so the second question's answer is not
        outranked by the first question's weak matches.
        """
        def read(piece: str) -> QueryTerms:
            # A counting question needs every memory holding the attribute: its numbers
            # are the condition to apply, not words to find.
            found = query_terms(piece)
            return found.without_numbers() if parsed.counts else found

        terms = read(text)
        pieces = split_questions(text)
        parts = [(p, t) for p in pieces if (t := read(p))] if len(pieces) > 1 else []
        if len(parts) < 2:
            parts = [(text, terms)]

        async def one(part: str, part_terms: QueryTerms
                      ) -> tuple[list[_Candidate], Coverage | None]:
            found = await self._search(request, part, hint=hint, favoured=favoured)
            unknown = self._pool.unknown_share(part)
            return found, self._score(found, request, parsed, terms=part_terms,
                                      chinese=has_han(part), unknown=unknown, hint=hint,
                                      favoured=favoured)

        results = await asyncio.gather(*(one(part, t) for part, t in parts))
        bridges = []
        names = QueryTerms(latin=frozenset(), cjk=frozenset())  # see `_hop_names`
        for (part, part_terms), (found, matcher) in zip(parts, results, strict=True):
            line = self._bridge(part, found, matcher)
            if line is not None and matcher is not None:
                bridge = f"{line} {part}"
                # Scored without the question's words that none of the first search's
                # candidates held (its scaffolding: "下列哪一项最符合"), so a memory
                # sharing only the line's name still passes `min_score`.
                hop_terms = read(bridge).without(matcher.absent)
                bridges.append((bridge, hop_terms))
                if matcher.held_share(line) >= _NAMES_FROM:
                    names = names.merged(_beyond(read(line), part_terms))
        if bridges:
            results += await asyncio.gather(*(one(b, t) for b, t in bridges))
        if len(results) == 1:
            return *results[0], None
        best: dict[str, _Candidate] = {}
        for found, _ in results:
            for c in found:
                kept = best.get(c.memory.id)
                if kept is None or c.score > kept.score:
                    best[c.memory.id] = c
        merged = list(best.values())
        matcher = None
        if terms:
            # One question and its hop: the first search's candidates were read for these
            # very terms already.
            first, first_matcher = results[0]
            known = first_matcher.rows_by([c.memory.id for c in first]) \
                if first_matcher is not None and parts[0][1] is terms else {}
            matcher = Coverage(terms, [c.memory.text for c in merged],
                               equivalents=self._settings.recall_equivalents,
                               drop_absent=parsed.counts,
                               rows=[known.get(c.memory.id) for c in merged])
        return merged, matcher, _hop_names(names, merged)

    def _bridge(self, part: str, found: list[_Candidate], matcher: Coverage | None
                ) -> str | None:
        """A second hop's line, searched with the question: the best-matching line of the
        best memories ("那个规模是八百人的活动，时间是哪天？" finds "秋季厨艺交流会的规模是
        八百人"; the hop then finds that event's time). Also when the line holds every word of the
        question: "我常去的商场是星光百货" answers "我常去的商场怎么样" by name only.

        Only from one speaker's statements (or a memory of one message), whose lines name
        the thing they are about; the best line of a dialogue mostly repeats the question's
        own words, and hopping from it cost LoCoMo 2.5 points (docs/benchmarks.md).

        The line is chosen among the lines of the `_HOP_FROM` best such memories, not only
        the best one's: a day of notes whose several lines each share one common word of
        the question ("活动", "时间") can outrank, as a whole, the day whose one line names
        the thing asked about ("规模是八百人"); a model that puts all short notes of a
        language close together (e5) ranks them by such words. The line with the largest
        share of the question's (IDF-weighted) terms names it best; a tie goes to the
        better memory.
        """
        if matcher is None or not found:
            return None
        lines: list[str] = []
        for rank, c in enumerate(sorted(found, key=lambda c: c.score, reverse=True
                                        )[:_HOP_FROM]):
            units = _lines(c.memory)
            if len(units) > 1 and not _one_speaker(units):
                if rank == 0:
                    return None  # the best memory is a dialogue: no hop (see above)
                continue
            lines += [line for _, line in units]
        shares = [matcher.share(line) for line in lines]
        best = max(range(len(lines)), key=lambda i: shares[i])  # the first of equals
        # Also from a line holding every word of the question: "我路过的景区是X" leaves
        # "what is X like" to another memory.
        if shares[best] <= 0:
            return None
        return lines[best].split(": ", 1)[-1]

    async def _search(self, request: RecallRequest, text: str, *, hint: TimeHint | None,
                      favoured: set[str]) -> list[_Candidate]:
        where = self._filter(request)
        # Not more with a larger top_k: the candidates are also the corpus of the keyword
        # weights (`Coverage`), so the best memory would change with top_k.
        limit = CANDIDATES
        # The keyword search needs no vector: it runs while the query is being embedded,
        # and the vector search starts the moment the embedding is there.
        step = self._metrics.recall_search if self._metrics is not None else None
        started = time.perf_counter()

        async def keyword_search() -> tuple[list[SearchHit], Any]:
            found = await self._repo.text_search(text, where, limit=limit)
            if step is not None:
                step.labels("keyword").observe(time.perf_counter() - started)
            return found

        keyword = asyncio.create_task(keyword_search())
        try:
            query_vector, exact = await asyncio.gather(
                self._pool.embed_query(text), self._exact_search(request.namespace))
            vector = query_vector.tolist()
            at = time.perf_counter()
            vector_hits = list(await self._repo.vector_search(vector, where, limit=limit,
                                                              exact=exact))
            done = time.perf_counter()
            keyword_hits, keyword_vectors = await keyword
            if step is not None:
                step.labels("vector_ready").observe(at - started)
                step.labels("vector").observe(done - at)
                step.labels("keyword_left").observe(time.perf_counter() - done)
        finally:
            if not keyword.done():
                keyword.cancel()
        # What a date or a reference phrase points to competes even if the plain searches
        # ranked it too low: a small extra search inside that window or session (all at
        # once; their hits are appended in this order).
        extra: list[SearchFilter] = []
        if hint is not None:
            start = max(hint.start, _utc(request.time_from)) if request.time_from else hint.start
            end = min(hint.end, _utc(request.time_to)) if request.time_to else hint.end
            if start < end:
                extra.append(replace(where, time_from=start, time_to=end))
        for session_id in sorted(favoured):
            if request.session_id is None or request.session_id == session_id:
                extra.append(replace(where, session_id=session_id))
        at = time.perf_counter()
        for hits in await asyncio.gather(*(self._repo.vector_search(vector, w, limit=_EXTRA,
                                                                    exact=True) for w in extra)):
            vector_hits += hits
        if step is not None and extra:
            step.labels("extra").observe(time.perf_counter() - at)
        return _merge(vector_hits, keyword_hits, keyword_vectors, query_vector)

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

    async def _favoured_sessions(self, namespace: str, parsed: ParsedQuery) -> set[str]:
        """The sessions a reference phrase points to: the latest one for "just now / 刚才",
        the latest three for "before / last time"."""
        if parsed.reference is None:
            return set()
        sessions = await self._repo.list_sessions(namespace)

        def last_active(session: SessionRecord) -> datetime:
            when = session.time_end or session.updated_at or session.stored_at
            return _utc(when) if when else datetime.min.replace(tzinfo=UTC)

        keep = 1 if parsed.reference.scope == ReferenceScope.recent else 3
        return {x.session_id for x in sorted(sessions, key=last_active, reverse=True)[:keep]}

    # --- scoring -----------------------------------------------------------------------

    def _score(self, candidates: list[_Candidate], request: RecallRequest, parsed: ParsedQuery,
               *, terms: QueryTerms, chinese: bool, unknown: float = 0.0,
               hint: TimeHint | None,
               favoured: set[str]) -> Coverage | None:
        """Score every candidate in place; returns the query's term weights over them."""
        if not candidates:
            return None
        s = self._settings
        matcher = Coverage(terms, [c.memory.text for c in candidates],
                           equivalents=s.recall_equivalents,
                           drop_absent=parsed.counts) if terms else None
        covered = matcher.scores if matcher else [0.0] * len(candidates)
        best = max(range(len(candidates)), key=lambda i: candidates[i].bm25)
        best_bm25 = candidates[best].bm25
        best_cover = covered[best] if best_bm25 > 0 else 0.0
        profile = s.model_profile
        weight = profile.keyword_weight_zh if chinese else profile.keyword_weight
        # The ranking trusts the cosine only as far as the model can read the query: the
        # bundled English model sees most Chinese characters as [UNK], and its cosine then
        # measures how much unknown text a memory has, not what it says. `min_score` keeps
        # applying to `relevance` (the configured weights), so what passes is unchanged.
        ranking_weight = 1 - (1 - weight) * (1 - unknown)
        bands = _cosine_bands(s)
        shift = s.model_profile.cross_script_shift
        across_band = None if shift is None else (bands[False][0] + shift,
                                                  bands[False][1] + shift)
        reference = _utc(request.as_of) if request.as_of else _newest(candidates)
        about_question = parsed.reference is not None and parsed.reference.about_question
        for index, (c, cover) in enumerate(zip(candidates, covered, strict=True)):
            floor, ceiling = bands[chinese and has_han(c.memory.text)]
            c.vector = min(1.0, max(0.0, (c.cosine - floor) / max(1e-6, ceiling - floor)))
            rank_part = best_cover * (c.bm25 / best_bm25) if best_bm25 > 0 else 0.0
            c.keyword = 0.5 * cover + 0.5 * rank_part
            c.relevance = (1 - weight) * c.vector + weight * c.keyword
            c.ranking = (1 - ranking_weight) * c.vector + ranking_weight * (
                0.5 * _ranking_cover(c.memory, cover, matcher, index) + 0.5 * rank_part)
            if across_band is not None and in_another_script(terms, c.memory.text):
                # No word of the question can be in it: its relevance is the vector part
                # alone, on a stricter band (`ModelProfile.cross_script_shift`). The ranking
                # keeps the mix: a memory whose words match stays ahead of one in the other
                # language that only reads close ("我在哪里上班" and a note about Anna's work).
                floor, ceiling = across_band
                c.relevance = min(1.0, max(0.0, (c.cosine - floor) / max(1e-6, ceiling - floor)))
            c.decay = self._decay(c.memory, reference)
            c.importance = 1 + _IMPORTANCE_BOOST * (c.memory.importance - 5) / 5
            c.tier = _TIER_BOOST["longterm"] if c.memory.summary_of else \
                _TIER_BOOST.get(c.memory.tier, 1.0)
            if request.other_branches and c.memory.branch != request.branch:
                c.branch = _OTHER_BRANCH_FACTOR
            if hint is not None and _overlaps(c.memory, hint):
                c.time = _TIME_BOOST
            if c.memory.session_id in favoured:
                c.reference *= _REFERENCE_BOOST
            if about_question and c.memory.category == "question":
                c.reference *= _REFERENCE_BOOST
            c.score = c.ranking * c.decay * c.boost
        return matcher

    def _decay(self, memory: MemoryRecord, reference: datetime | None) -> float:
        s = self._settings
        when = memory.time_end or memory.time_start or memory.created_at
        if reference is None or when is None:
            return 1.0
        age_days = (reference - _utc(when)).total_seconds() / _SECONDS_PER_DAY
        excess = age_days - s.recall_decay_after_days
        if excess <= 0:
            return 1.0
        floor = s.recall_decay_floor
        return float(floor + (1 - floor) * 0.5 ** (excess / s.recall_decay_half_life_days))

    # --- packing -----------------------------------------------------------------------

    def _pack(self, tiers: Sequence[Sequence[_Candidate]], *, top_k: int, max_tokens: int,
              matcher: Coverage | None, query: str = "", named: Coverage | None = None
              ) -> list[_Packed]:
        """Best first until `top_k` memories or `max_tokens` tokens.

        `tiers` are packed one after the other, each best first: the memories that pass the
        configured threshold, then (with a lower per-call `min_score`) the others, which
        only fill what budget the first tier left. So a lower `min_score` never returns
        less than the default: its weaker fragments come after, never in place of, what the
        default returns.

        Lines (messages) already returned by a better memory are left out. A memory that
        does not fit whole contributes its core: the lines that match the query (see
        `_core`). A memory of one speaker's statements (notes, a list of facts; the speaker
        is the name a line starts with, else its role: `_speaker`) is packed as its core
        first, since its other lines are unrelated facts; once its tier is exhausted or the
        budget full, those memories get their other lines back, best first, while the
        budget allows, also lines a weaker memory of the tier had returned (they move to
        the better memory), so the best memory's lines do not depend on `top_k`. A
        dialogue keeps its turns together: the answer to a question rarely repeats its
        words (on LoCoMo, packing dialogue by matching lines cost 6 points at 500 tokens;
        only as a fallback it gained 2). But a question that names one of its speakers is
        answered by that speaker's turns, whatever words they use: those are packed first
        like a statement memory's core (`_asked_about`), the others given back the same way.
        `named`: what a second hop identified (`_hop_names`); a statement memory's core also
        keeps the lines naming it.
        """
        packed: list[_Packed | None] = []
        used = 0
        # A message is known by (session, msg_id, part), never msg_id alone: clients number
        # each session's messages 1, 2, 3 (the README does), and another session's message 1
        # is a different line. `part` tells the pieces of one long message apart. Each maps
        # to the index of the packed memory that returned it.
        returned: dict[tuple[str, str, int], int] = {}
        for ranked in tiers:
            focused: list[int] = []  # memories of this tier that may get other lines back
            misses = 0
            for c in ranked:
                if len(packed) >= top_k or max_tokens - used < 8:
                    break
                units = _lines(c.memory)
                part = c.memory.part if len(c.memory.msg_ids) == 1 else 0
                session = c.memory.session_id
                fresh = [u for u in units
                         if any((session, i, part) not in returned for i in u[0])]
                if not fresh:
                    self._passed_over(c, PassedOver.duplicate, 0)
                    continue  # every message already returned by a better memory
                # The matching lines are worked out only when they can be used: packed
                # first (statements), or in place of a whole that does not fit.
                core: list[_Unit] | None = None
                if _one_speaker(units):
                    core = self._core(fresh, matcher, whole=units, named=named)
                    if not core:
                        self._passed_over(c, PassedOver.matched_lines_returned, 0)
                        continue  # its matching lines were returned by a better memory
                elif packed:
                    # A dialogue about one of its speakers: that speaker's turns first,
                    # the others back when the budget allows (`_restore`). Not the first
                    # memory: whether its turns come back would depend on how many
                    # memories `top_k` lets in after it.
                    core = _asked_about(fresh, query) or None
                core_first = core is not None and len(core) < len(fresh)
                choice = core if core is not None and core_first else fresh
                tokens = self._units_tokens(c.memory, units, choice)
                if used + tokens > max_tokens and not core_first:
                    core = core if core is not None else self._core(fresh, matcher)
                    if len(core) < len(fresh):
                        choice = core
                        tokens = self._units_tokens(c.memory, units, choice)
                if used + tokens > max_tokens:
                    # Try smaller memories further down, but not forever: each try costs a
                    # tokenization, and far down the list they barely match.
                    self._passed_over(c, PassedOver.budget, tokens)
                    misses += 1
                    if misses > 2 * top_k:
                        break
                    continue
                if core_first:
                    focused.append(len(packed))
                returned.update(((session, i, part), len(packed))
                                for ids, _ in choice for i in ids)
                packed.append(self._packed(c, units, choice, tokens, part))
                used += tokens
            for index in focused:
                used += self._restore(packed, index, returned, max_tokens - used)
        return [p for p in packed if p is not None]

    def _passed_over(self, candidate: _Candidate, why: PassedOver, tokens: int) -> None:
        """Called by `_pack` for each memory it looked at and did not pack, with the rule
        and the tokens it needed (0 unless `budget`). Recall needs nothing from it;
        why_not.py overrides it to explain the real packing instead of re-deriving it."""

    def _restore(self, packed: list[_Packed | None], index: int,
                 returned: dict[tuple[str, str, int], int], room: int) -> int:
        """Give the focused memory `packed[index]` its other lines back if they fit in
        `room` more tokens, taking them from weaker memories that returned them (a weaker
        memory left with no line is dropped). Returns the tokens this added."""
        p = packed[index]
        if p is None:
            return 0  # a better memory took all its lines
        session = p.candidate.memory.session_id
        extra = [u for u in p.units if u not in p.choice
                 and any(returned.get((session, i, p.part), index) >= index for i in u[0])]
        if not extra:
            return 0
        choice = [u for u in p.units if u in p.choice or u in extra]
        tokens = self._units_tokens(p.candidate.memory, p.units, choice)
        moved = {(session, i, p.part) for ids, _ in extra for i in ids}
        losers: dict[int, _Packed | None] = {}
        for key in moved:
            owner = returned.get(key)
            if owner is not None and owner > index and owner not in losers:
                q = packed[owner]
                assert q is not None
                q_session = q.candidate.memory.session_id
                keep = [u for u in q.choice
                        if not all((q_session, i, q.part) in moved for i in u[0])]
                losers[owner] = self._packed(
                    q.candidate, q.units, keep,
                    self._units_tokens(q.candidate.memory, q.units, keep), q.part) \
                    if keep else None
        change = tokens - p.tokens + sum(
            (q.tokens if q is not None else 0) - old.tokens
            for owner, q in losers.items() if (old := packed[owner]) is not None)
        if change > room:
            return 0
        for owner, q in losers.items():
            packed[owner] = q
        returned.update((key, index) for key in moved)
        packed[index] = self._packed(p.candidate, p.units, choice, tokens, p.part)
        return change

    def _core(self, units: list[_Unit], matcher: Coverage | None,
              whole: list[_Unit] | None = None, named: Coverage | None = None
              ) -> list[_Unit]:
        """The lines that carry the memory's keyword match: at least `_FOCUS_RATIO`
        of its best line's share of the query terms; with `named` (what a second hop
        identified: `_hop_names`), also the lines that name it.

        `units` may be what is left of the memory's lines (`whole`) after better memories
        returned the others: if what is left matches far less than the memory's best line,
        the match was in lines already returned, and the core is only the lines naming what
        the hop identified (often none).
        """
        if matcher is None or (len(units) < 2 and whole is None):
            return units
        ratio = _FOCUS_RATIO
        share = {u: matcher.share(u[1]) for u in whole or units}  # `units` ⊆ `whole`
        shares = [share[u] for u in units]
        best = max(shares)
        naming = {u for u in units if named.share(u[1]) > 0} if named is not None else set()
        if whole is not None and len(whole) > len(units) and best < ratio * max(share.values()):
            return [u for u in units if u in naming]
        if best <= 0 or len(units) < 2:
            return units  # matched as a whole (by meaning): no line stands out
        return [u for u, line_share in zip(units, shares, strict=True)
                if line_share >= ratio * best or u in naming]

    def _packed(self, c: _Candidate, units: list[_Unit], choice: list[_Unit], tokens: int,
                part: int) -> _Packed:
        whole = len(choice) == len(units)
        text = c.memory.text if whole else "\n".join(line for _, line in choice)
        msg_ids = [i for ids, _ in choice for i in ids if i != c.memory.id]
        return _Packed(c, text, msg_ids, tokens, not whole, part, units, choice)

    def _units_tokens(self, memory: MemoryRecord, units: list[_Unit], choice: list[_Unit]
                      ) -> int:
        if len(choice) == len(units):
            return self._count_tokens(memory.text)
        return self._count_tokens("\n".join(line for _, line in choice))

    def _count_tokens(self, text: str) -> int:
        return self._tokens.count(text)


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
        # None while unknown, _NOT_ADDITIVE when a block must be counted whole.
        self._join: int | None = None

    def count(self, text: str) -> int:
        key = (len(text), hash(text))
        tokens = self._cache.get(key)
        if tokens is None:
            tokens = self._cache[key] = self._count(text)
            if len(self._cache) > _TOKEN_CACHE_SIZE:
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
        if join == _NOT_ADDITIVE or any(t != t.strip() or not t for t in texts):
            return self._count(block)
        pieces = len(frame) + len(texts)
        return sum(tokens) + sum(self.count(f) for f in frame) + join * (pieces - 1)


_TOKEN_CACHE_SIZE = 50_000
# Constants of the pipeline above, not settings: each was chosen by measuring on both role
# protocols and MemDaily (docs/benchmarks.md §3, §5b, §12, §13), no deployment has a reason of
# its own to turn one, and a change moves the figures only together with the others.
CANDIDATES = 50  # memories taken from each search; also the corpus of the keyword weights
_TIME_BOOST = 1.4  # memories inside a date the query names ("on 3 June", "上周")
_IMPORTANCE_BOOST = 0.05  # importance 10 multiplies the score by 1.05, importance 1 by 0.96
_OTHER_BRANCH_FACTOR = 0.8  # a memory of another branch, when other_branches is asked for
_REFERENCE_BOOST = 1.25  # what a reference phrase ("as I said before") points to
# The user says the memory exists ("as I said before"): min_score is lowered by this.
REFERENCE_THRESHOLD_FACTOR = 0.7
# Once a memory passes min_score, weaker ones down to this share of it fill what the budget
# leaves, as the answer's context (`recall`); 0.7 gave the whole gain of min_score 0 on
# LoCoMo (docs/benchmarks.md §12) while a question without an answer still gets nothing.
CONTEXT_THRESHOLD_FACTOR = 0.7
# A statement memory's matching lines (`_core`): at least this share of its best line's
# share of the query's terms.
_FOCUS_RATIO = 0.5
_HOP_FROM = 3  # memories whose lines a second hop may start from (`_bridge`)
# What a hop's line names beyond the question (`_hop_names`) counts when the line holds at
# least this share of the question's terms that some candidate holds (it is the fact the
# question identifies its subject by), and in a term held by at most this share of the
# candidates.
_NAMES_FROM = 0.5
_NAMES_HELD_BY = 0.5
_EXTRA = 20  # memories taken from a date window or a referenced session


def _ranking_cover(memory: MemoryRecord, cover: float, matcher: Coverage | None,
                   index: int) -> float:
    """The share of the question a memory covers, as its ranking counts it (`index`: the
    memory's among the documents of `matcher`).

    A memory of one speaker's statements (a day of notes, a list of facts; `_one_speaker`)
    is a set of facts, one a line: the line holding the question's words answers it
    ("城市设计论坛的持续时间是三天" for "城市设计论坛的持续时间是什么？"), several lines
    holding one word each do not ("城市设计论坛的主要内容是…", "高尔夫友谊赛的持续时间是
    一天"), though both memories hold every word. Its best line's share counts half.
    A dialogue's answer spans turns: its whole share. Only the ranking: whether a memory
    passes `min_score` (its relevance) does not depend on how its facts are split into
    lines.
    """
    if matcher is None or cover <= 0:
        return cover
    units = _lines(memory)
    if not _one_speaker(units):
        return cover
    return 0.5 * (cover + matcher.best_part_share(index, [line for _, line in units]))


def _hop_names(names: QueryTerms, candidates: list[_Candidate]) -> Coverage | None:
    """What the second hop was for: the terms its line names beyond the question's own
    words ("那个在深圳工作的人，年龄是多少？" → "我婶婶在深圳工作" → 婶婶), as a matcher
    of lines. Once the person or thing is identified, what is stored about it answers
    the question, also a line that shares no word with the question ("我婶婶今年五十
    九岁"): a statement memory's core keeps the lines naming it (`_core`).

    Only terms that tell candidates apart: a term held by more than half of them (the
    speakers of a dialogue, named in every line; the user's own label) names nothing.
    """
    if not names or not candidates:
        return None
    texts = [c.memory.text for c in candidates]
    found = Coverage(names, texts)
    rare = frozenset(n for n, held in found.holding.items()
                     if 0 < held <= len(texts) * _NAMES_HELD_BY)
    return found.only(names.only(rare)) if rare else None


def _beyond(line: QueryTerms, question: QueryTerms) -> QueryTerms:
    """The terms of a line that are not the question's words, nor part of one or holding
    one ("广州" asked, "广东广州" stated)."""
    asked = question.names()
    return line.without(frozenset(t for t in line.names()
                                  if any(t in a or a in t for a in asked)))


def _overlaps(memory: MemoryRecord, hint: TimeHint) -> bool:
    start = memory.time_start or memory.time_end or memory.created_at
    end = memory.time_end or start
    if start is None or end is None:
        return False
    return _utc(start) < hint.end and _utc(end) >= hint.start


def _cosine_bands(s: Settings) -> dict[bool, tuple[float, float]]:
    """The cosine's (floor, ceiling) for a question and a memory, by whether both are
    Chinese (`ModelProfile.cosine_band`)."""
    return {chinese: s.model_profile.cosine_band(chinese_pair=chinese)
            for chinese in (False, True)}


_TIER_BOOST = {"longterm": 1.15, "daily": 1.05, "session": 1.0}


def _merge(vector_hits: Sequence[SearchHit], keyword_hits: Sequence[SearchHit],
           keyword_vectors: np.ndarray, query_vector: np.ndarray) -> list[_Candidate]:
    by_id: dict[str, _Candidate] = {}
    for hit in vector_hits:
        if hit.memory.id not in by_id:
            by_id[hit.memory.id] = _Candidate(hit.memory, cosine=hit.cosine or 0.0,
                                              stored=hit.vector)
    if len(keyword_hits):
        # Keyword-only hits get their cosine from their stored vectors: one scale for all.
        cosines = keyword_vectors @ query_vector.astype(np.float32)
        for hit, cosine, vector in zip(keyword_hits, cosines, keyword_vectors, strict=True):
            existing = by_id.get(hit.memory.id)
            if existing is None:
                existing = by_id[hit.memory.id] = _Candidate(hit.memory, cosine=float(cosine))
            existing.bm25 = hit.bm25 or 0.0
            if existing.stored is None:
                existing.stored = vector
    for c in by_id.values():
        when = c.memory.time_end or c.memory.time_start or c.memory.created_at
        c.when = _utc(when).timestamp() if when else 0.0
    return list(by_id.values())


def _newest(candidates: Sequence[_Candidate]) -> datetime | None:
    newest = max((c.when for c in candidates), default=0.0)
    return datetime.fromtimestamp(newest, UTC) if newest > 0 else None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _lines(memory: MemoryRecord) -> list[_Unit]:
    """The memory's text as (msg_ids, line) units: one line per message ("role: content").

    A message whose content holds line breaks is rejoined by splitting only before a role
    prefix; if the text still does not line up with msg_ids, the memory is one unit.
    """
    ids = memory.msg_ids
    if len(ids) > 1:
        lines = memory.text.split("\n")
        if len(lines) != len(ids):
            lines = _ROLE_LINE.split(memory.text)
        if len(lines) == len(ids):
            return [((i,), line) for i, line in zip(ids, lines, strict=True)]
    return [(tuple(ids) or (memory.id,), memory.text)]


def _speaker(line: str) -> str:
    """Who said a line ("role: content"): the name its content starts with when it has one
    ("user: Caroline: …", the shape of imports, group chats and transcripts, where every
    turn is often sent as `user`), else its role. Roles alone would make a two-person
    chat sent all as `user` look like one person's notes, and trim its answers away."""
    return _name(line) or line.partition(": ")[0]


def _name(line: str) -> str | None:
    """The speaker's name a line's content starts with (casefolded), None without one."""
    named = _NAME_LABEL.match(line.partition(": ")[2])
    return named.group(1).casefold() if named else None


def _asked_about(units: Sequence[_Unit], query: str) -> list[_Unit] | None:
    """The lines of the one speaker of a dialogue the question names ("what did Tom say
    about the budget?", "Caroline 去年搬去了哪里？"), or None if it names none or several.

    What a named person did, thinks or plans is in that person's own turns; the other
    speaker's replies around them ("Wow, that sounds great!") are what a tight budget can
    do without. Only names that label lines count, never roles: a name is the same in a
    chat sent as user/assistant and one sent all as `user`, so both keep the same lines.
    """
    if not query:
        return None
    lowered = query.casefold()
    speakers = {_name(line) for _, line in units}
    asked = {n for n in speakers if n is not None and _names_in(n, lowered)}
    if len(asked) != 1 or len(speakers) < 2:
        return None
    return [u for u in units if _name(u[1]) in asked]


def _names_in(name: str, query: str) -> bool:
    """Whether a casefolded query names a speaker: the whole name or the given name people
    call them by. A name of several words by its first word, as a word ("Anna" names
    "Anna Lee", "Anna's" names Anna, "Annabel" does not; a CJK character next to it is not
    part of the word: "Anna去了哪里"). A Chinese name of three or four characters also by
    its last two, the given name after a family name of one or two characters ("阿杰" names
    林阿杰, "娜娜" names 欧阳娜娜); one of two characters only whole (its given name is one
    character, too short to tell from any other word)."""
    forms = [name, name.split(" ")[0]]
    if has_han(name) and len(name) in (3, 4):
        forms.append(name[-2:])
    for form in dict.fromkeys(forms):
        if has_han(form):
            if form in query:
                return True
        elif re.search(rf"(?<!{_LATIN_WORD}){re.escape(form)}(?!{_LATIN_WORD})", query):
            return True
    return False


# A word character that is not CJK: what a Latin name must not touch to be a whole word.
_LATIN_WORD = rf"[^\W\u3040-\u30ff{HAN}\uac00-\ud7af]"  # kana, Han, hangul excluded


def _one_speaker(units: Sequence[_Unit]) -> bool:
    """Whether every line of a memory comes from the same speaker (`_speaker`)."""
    return len(units) > 1 and len({_speaker(line) for _, line in units}) == 1


def _layer(memory: MemoryRecord) -> Layer:
    return Layer.longterm if memory.tier == "longterm" or memory.summary_of else Layer.detail


def _public(p: _Packed) -> RecalledMemory:
    c, m = p.candidate, p.candidate.memory
    return RecalledMemory(
        id=m.id, text=p.text, msg_ids=p.msg_ids, session_id=m.session_id,
        time_start=m.time_start, time_end=m.time_end, category=m.category, tier=m.tier,
        importance=m.importance, branch=m.branch, layer=_layer(m), tokens=p.tokens,
        score=round(c.score, 4), trimmed=p.trimmed,
        explain=ScoreParts(
            cosine=round(c.cosine, 4), vector=round(c.vector, 4), keyword=round(c.keyword, 4),
            relevance=round(c.relevance, 4), ranking=round(c.ranking, 4),
            decay=round(c.decay, 4), boost=round(c.boost, 4),
            importance=round(c.importance, 4), tier=round(c.tier, 4), branch=round(c.branch, 4),
            time=round(c.time, 4), reference=round(c.reference, 4)),
    )


# --- injection block -------------------------------------------------------------------

_PREFACE = {
    BlockLanguage.en: (
        "What you remember about this user from earlier conversations is below. Use it "
        "where it helps; answer naturally and never say \"according to my memory\" or "
        "that you are recalling anything."),
    BlockLanguage.zh: (
        "以下是你从与该用户以往的对话中记得的信息。需要时自然地使用，直接回答，"
        "不要说“根据我的记忆”，也不要提到你在回忆。"),
}
_HEADINGS = {
    BlockLanguage.en: {Layer.longterm: "Long-term facts:", Layer.detail: "Details:"},
    BlockLanguage.zh: {Layer.longterm: "长期事实：", Layer.detail: "相关细节："},
}


def _date(memory: MemoryRecord) -> str:
    start = memory.time_start or memory.time_end or memory.created_at
    end = memory.time_end or start
    if start is None or end is None:
        return ""
    first, last = _utc(start).date().isoformat(), _utc(end).date().isoformat()
    return first if first == last else f"{first} – {last}"


def render_block(packed: Sequence[_Packed], *, language: BlockLanguage
                 ) -> tuple[str, list[str]]:
    """The text to append to the system prompt: a preface, then each memory with its date,
    long-term facts first (with headings when both layers are present).

    Returns the block and its frame: every piece of it that is not memory text (preface,
    headings, "- [date]" markers), each set off from its neighbours by whitespace.
    """
    if not packed:
        return "", []
    layers = {_layer(p.candidate.memory) for p in packed}
    parts = [_PREFACE[language], ""]
    frame = [_PREFACE[language]]
    current: Layer | None = None
    for p in packed:
        layer = _layer(p.candidate.memory)
        if len(layers) > 1 and layer != current:
            parts.append(_HEADINGS[language][layer])
            frame.append(_HEADINGS[language][layer])
            current = layer
        date = _date(p.candidate.memory)
        marker = f"- [{date}]" if date else "-"
        parts.append(f"{marker} {p.text.replace(chr(10), chr(10) + '  ')}")
        frame.append(marker)
    return "\n".join(parts), frame


def whitespace_join_tokens(count_tokens: Callable[[str], int]) -> int:
    """The tokens that joining two texts with whitespace adds to the sum of their counts,
    if that is the same for every join; else `_NOT_ADDITIVE`.

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
    return join if join >= 0 and extra[1] == join * (len(pieces) - 1) else _NOT_ADDITIVE


_NOT_ADDITIVE = -1
