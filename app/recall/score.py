"""Scoring: every candidate on one 0–1 scale, then its ranking score.

`relevance = (1 − w) · vector + w · keyword`. `vector` is the cosine mapped linearly from
the model profile's `cosine_floor` (0) to its `cosine_ceiling` (1), a band the profile
shifts for a Chinese question against a Chinese memory (e5 puts any two Chinese texts
closer than two English ones: `ModelProfile.cosine_band`); `keyword` is half the
IDF-weighted share of the query's terms the memory contains (`text.coverage`) and half its
BM25 relative to the best keyword hit, scaled by that hit's share. Both are absolute, so
one `min_score` means the same in every store. `w` = the profile's `keyword_weight`, higher
for Chinese queries with MiniLM, whose cosine says little about Chinese, so exact matches
must carry the ranking. A memory in another script than every word of the query (an
English question, a Chinese memory, or the reverse) has a keyword part only through the
dictionary's translations of the question's words (bilingual.py: "hotpot" holds in "火锅"); one
holding none, for a model that reads both, has as relevance (not ranking) the vector part
alone, on its pair's band made a little stricter (`ModelProfile.cross_script_shift`): a
question written in Chinese around an English word ("我的 salary 是多少？") against a
Chinese memory is still a Chinese pair. `min_score` applies to relevance.

The ranking uses the same mix with the vector's weight scaled by the share of the query
the model can read (most Chinese characters are [UNK] to MiniLM, none to e5), and for a
memory of one speaker's statements its best line's share of the query counting half
(`ranking_cover`). Then `score = ranking × decay × boosts`: decay for age beyond
`recall_decay_after_days` (half-life, floor), importance, tier (long-term facts up), other
branches (down), the named date (up), what a reference phrase points to (up).

Why age is measured from the newest matching memory and not from the wall clock: a user
who comes back after a quiet year asks about the same history as before, and an imported
2023 conversation must not be wiped out by being old as a whole. What decay should do is
let a recent memory beat an older one that matches as well; relative to the store's own
present it does exactly that, and the floor keeps an old exact match ahead of a vague
recent one. A client can pass `as_of` to measure from a given time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.config import Settings
from app.recall.candidates import Candidate, utc
from app.recall.lines import lines, one_speaker
from app.recall.query import Query
from app.recall.text import Coverage, QueryTerms, in_another_script
from app.recall.tuning import (
    IMPORTANCE_BOOST,
    OTHER_BRANCH_FACTOR,
    REFERENCE_BOOST,
    TIER_BOOST,
    TIME_BOOST,
)
from app.recall.when import TimeHint
from app.scripts import has_han
from app.storage.records import MemoryRecord

_SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class Matched:
    """What `relevance` read of the candidates' words, for the ranking: the query's term
    weights over them, each candidate's IDF-weighted share of the terms, and its BM25 part
    (its BM25 relative to the best keyword hit, scaled by that hit's share)."""

    matcher: Coverage | None
    covered: list[float]
    bm25_parts: list[float]
    without_bm25: bool = False  # no full-text search: the share stands for the rank


def coverage(terms: QueryTerms, documents: Sequence[str], settings: Settings, *,
             counts: bool = False, rows: Sequence[list[bool] | None] | None = None
             ) -> Coverage:
    """The question's words over `documents` as recall matches them with these settings
    (their equivalents, their translations): one matcher for memories, a hop's merged
    candidates and pending messages alike. `counts`: a counting question (`Coverage`'s
    `drop_absent`); `rows`: what is already known of some documents (`Coverage`)."""
    return Coverage(terms, documents, equivalents=settings.recall_equivalents,
                    across_languages=settings.recall_across_languages, drop_absent=counts,
                    rows=rows)


def relevance(candidates: Sequence[Candidate], settings: Settings, *, terms: QueryTerms,
              chinese: bool, counts: bool = False, keyword_only: bool = False,
              without_bm25: bool = False) -> Matched:
    """Set every candidate's `vector`, `keyword` and `relevance` (in place): the 0–1 scale
    `min_score` applies to (module docstring). Also the listing's `q=` search scores with it.

    `terms`: the words searched for; `chinese`: whether that text is Chinese; `counts`: a
    counting question (terms no candidate holds are dropped from the shares: `Coverage`);
    `keyword_only`: the question's vector was late for the recall's deadline (deadline.py),
    so there is no cosine and the keyword part is the whole relevance; `without_bm25`: the
    full-text search was late, so there is no BM25 rank and the share of the question's
    words a memory holds is its whole keyword part.
    """
    s = settings
    matcher = coverage(terms, [c.memory.text for c in candidates], s, counts=counts) \
        if terms and candidates else None
    covered = matcher.scores if matcher else [0.0] * len(candidates)
    if not candidates:
        return Matched(matcher, covered, [], without_bm25)
    best = max(range(len(candidates)), key=lambda i: candidates[i].bm25)
    best_bm25 = candidates[best].bm25
    best_cover = covered[best] if best_bm25 > 0 else 0.0
    profile = s.model_profile
    weight = 1.0 if keyword_only else (
        profile.keyword_weight_zh if chinese else profile.keyword_weight)
    bands = cosine_bands(s)
    shift = profile.cross_script_shift
    bm25_parts = []
    for c, cover in zip(candidates, covered, strict=True):
        floor, ceiling = bands[chinese and has_han(c.memory.text)]
        c.vector = min(1.0, max(0.0, (c.cosine - floor) / max(1e-6, ceiling - floor)))
        rank_part = best_cover * (c.bm25 / best_bm25) if best_bm25 > 0 else 0.0
        bm25_parts.append(rank_part)
        if c.words_only:
            # Pending messages whose vector was late (pending.py): no cosine, and no
            # full-text rank (they are in no index), so their share of the question's words
            # is their whole relevance, as in a recall whose vector was late.
            c.vector, c.keyword, c.relevance = 0.0, cover, cover
            continue
        c.keyword = cover if without_bm25 else 0.5 * cover + 0.5 * rank_part
        c.relevance = (1 - weight) * c.vector + weight * c.keyword
        if (shift is not None and not keyword_only and cover <= 0
                and in_another_script(terms, c.memory.text)):
            # No word of the question can be in it, and it holds no translation of one
            # (bilingual.py): its relevance is the vector part alone, on its pair's band
            # made stricter (`ModelProfile.cross_script_shift`). The pair's band, not the
            # English one: "我的 salary 是多少？" against "房租每个月 7,200 块" is two Chinese
            # texts (cosine 0.86, unrelated for that pair), which the English band read as
            # relevance 0.81. The ranking keeps the mix: a memory whose words match stays
            # ahead of one in the other language that only reads close ("我在哪里上班" and a
            # note about Anna's work).
            c.relevance = min(1.0, max(0.0, (c.cosine - floor - shift)
                                       / max(1e-6, ceiling - floor)))
    return Matched(matcher, covered, bm25_parts, without_bm25)


def score(candidates: list[Candidate], query: Query, settings: Settings, *,
          terms: QueryTerms, chinese: bool, unknown: float = 0.0,
          keyword_only: bool = False, without_bm25: bool = False) -> Coverage | None:
    """Score every candidate in place; returns the query's term weights over them.

    `terms`: the words of the question (or its part or hop) searched for; `chinese`: whether
    that text is Chinese; `unknown`: the share of it the model cannot read; `keyword_only`,
    `without_bm25`: a search was late for the recall's deadline (`relevance`).
    """
    if not candidates:
        return None
    s = settings
    request, parsed, hint, favoured = query.request, query.parsed, query.hint, query.favoured
    matched = relevance(candidates, s, terms=terms, chinese=chinese, counts=parsed.counts,
                        keyword_only=keyword_only, without_bm25=without_bm25)
    matcher = matched.matcher
    profile = s.model_profile
    weight = 1.0 if keyword_only else (
        profile.keyword_weight_zh if chinese else profile.keyword_weight)
    # The ranking trusts the cosine only as far as the model can read the query: the
    # bundled English model sees most Chinese characters as [UNK], and its cosine then
    # measures how much unknown text a memory has, not what it says. `min_score` keeps
    # applying to `relevance` (the configured weights), so what passes is unchanged.
    ranking_weight = 1 - (1 - weight) * (1 - unknown)
    reference = utc(request.as_of) if request.as_of else newest(candidates)
    about_question = parsed.reference is not None and parsed.reference.about_question
    for index, (c, cover, rank_part) in enumerate(zip(candidates, matched.covered,
                                                      matched.bm25_parts, strict=True)):
        covers = ranking_cover(c.memory, cover, matcher, index)
        # Without the full-text search the share stands for the rank it would have had.
        ranked = covers if matched.without_bm25 else 0.5 * covers + 0.5 * rank_part
        # A pending message with no vector (`relevance`) ranks by its share alone.
        c.ranking = covers if c.words_only \
            else (1 - ranking_weight) * c.vector + ranking_weight * ranked
        c.decay = decay(c.memory, reference, s)
        c.importance = 1 + IMPORTANCE_BOOST * (c.memory.importance - 5) / 5
        c.tier = TIER_BOOST["longterm"] if c.memory.summary_of else \
            TIER_BOOST.get(c.memory.tier, 1.0)
        if request.other_branches and c.memory.branch != request.branch:
            c.branch = OTHER_BRANCH_FACTOR
        if hint is not None and overlaps(c.memory, hint):
            c.time = TIME_BOOST
        if c.memory.session_id in favoured:
            c.reference *= REFERENCE_BOOST
        if about_question and c.memory.category == "question":
            c.reference *= REFERENCE_BOOST
        c.score = c.ranking * c.decay * c.boost
    return matcher


def decay(memory: MemoryRecord, reference: datetime | None, settings: Settings) -> float:
    """The score's factor for age: 1 up to `recall_decay_after_days` before `reference`,
    then halving every `recall_decay_half_life_days` down to `recall_decay_floor`."""
    s = settings
    when = memory.time_end or memory.time_start or memory.created_at
    if reference is None or when is None:
        return 1.0
    age_days = (reference - utc(when)).total_seconds() / _SECONDS_PER_DAY
    excess = age_days - s.recall_decay_after_days
    if excess <= 0:
        return 1.0
    floor = s.recall_decay_floor
    return float(floor + (1 - floor) * 0.5 ** (excess / s.recall_decay_half_life_days))


def ranking_cover(memory: MemoryRecord, cover: float, matcher: Coverage | None,
                  index: int) -> float:
    """The share of the question a memory covers, as its ranking counts it (`index`: the
    memory's among the documents of `matcher`).

    A memory of one speaker's statements (a day of notes, a list of facts; `one_speaker`)
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
    units = lines(memory)
    if not one_speaker(units):
        return cover
    return 0.5 * (cover + matcher.best_part_share(index, [line for _, line in units]))


def cosine_bands(s: Settings) -> dict[bool, tuple[float, float]]:
    """The cosine's (floor, ceiling) for a question and a memory, by whether both are
    Chinese (`ModelProfile.cosine_band`)."""
    return {chinese: s.model_profile.cosine_band(chinese_pair=chinese)
            for chinese in (False, True)}


def overlaps(memory: MemoryRecord, hint: TimeHint) -> bool:
    """Whether the memory's time span meets the date the question names."""
    start = memory.time_start or memory.time_end or memory.created_at
    end = memory.time_end or start
    if start is None or end is None:
        return False
    return utc(start) < hint.end and utc(end) >= hint.start


def newest(candidates: Sequence[Candidate]) -> datetime | None:
    """The time of the newest candidate: the present that decay measures age from."""
    latest = max((c.when for c in candidates), default=0.0)
    return datetime.fromtimestamp(latest, UTC) if latest > 0 else None
