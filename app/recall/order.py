"""Ordering: which candidates are packed, in what order, in which tier.

`min_score` decides whether the question has an answer here (abstention: nothing passes,
nothing is returned). Once a memory passes, weaker matches holding a word of the question
(or its translation) down to `CONTEXT_THRESHOLD_FACTOR` of it (the context floor, stated in
the response) fill what the budget leaves after every passing memory: the context of an
answer ("when did we move, and why?", the turns around an event) shares fewer of the
question's words than the answer does, but some. One near in meaning alone is any other fact
of the same user ("My sister lives in Dublin" for "what does my job involve?"), which an
assistant would read beside every answer. (Only a passing memory's own session as context
cost 0.8-1.7 points of evidence recall on LoCoMo and MemDaily; a shared word costs nothing
there.) Best
first; near-equal scores, the more recent memory first; a later statement of a fact just
ahead of the older one it restates or changes (newer.py), taken in from the context floor
when it did not pass, never below it.

Two tiers: what passes the configured `min_score`, then what only a lower per-call
`min_score` lets in, so lowering it never returns less (`pack` fills the second tier
only with what the first left).
"""

from __future__ import annotations

import functools

import numpy as np

from app.recall.candidates import Candidate
from app.recall.lines import lines, one_speaker
from app.recall.newer import Change, Rarity, announces_change, newer_first, share_words
from app.recall.query import Query
from app.recall.score import overlaps
from app.recall.text import Coverage
from app.recall.tuning import (
    CONTEXT_THRESHOLD_FACTOR,
    NEWER_WINDOW,
    NOW_CHANGE_SHARE,
    TIE_DECIMALS,
)
from app.storage.repository import Repository


async def order(candidates: list[Candidate], query: Query, matcher: Coverage | None, *,
                repo: Repository, supersede_cosine: float) -> list[list[Candidate]]:
    """The tiers to pack, each in packing order (module docstring). `supersede_cosine`:
    the model profile's cosine from which two memories may state the same fact."""
    min_score = query.min_score
    if query.parsed.reference_only:
        # "记得刚才说的吗" alone: the cue is the whole match for the sessions it names.
        for c in candidates:
            if c.memory.session_id in query.favoured:
                c.relevance = max(c.relevance, min_score)
    if query.about_period_only and query.hint is not None:
        # "上周我们聊了什么？": the date is the whole question. Every memory of the period
        # answers it, best first (the date search put them among the candidates), and
        # nothing outside it does.
        period = query.hint.only_the_period()
        for c in candidates:
            inside = overlaps(c.memory, period)
            c.relevance = max(c.relevance, min_score) if inside else 0.0
    elif query.hint is not None and any(
            c.relevance >= min_score and overlaps(c.memory, query.hint) for c in candidates):
        # "上个月买了什么电器？": the question names when. Once a memory of that time
        # answers it, memories of other times are no answer to it, nor its context. (When
        # none does, the date was perhaps misremembered: it only boosts.)
        for c in candidates:
            if not overlaps(c.memory, query.hint):
                c.relevance = 0.0
    context_floor = min_score * CONTEXT_THRESHOLD_FACTOR
    answered = any(c.relevance >= min_score for c in candidates)
    ranked = sorted(
        (c for c in candidates if c.relevance >= min_score
         or (answered and context(c, context_floor))),
        # Near-equal scores (same to 3 decimals): the more recent memory first.
        key=lambda c: (round(c.score, TIE_DECIMALS), c.when, c.memory.id), reverse=True,
    )
    # What passes the configured threshold is packed first; a lower per-call min_score
    # only adds what fits after it (`pack`).
    floor = max(min_score, query.default_min_score)
    passing = [c for c in ranked if c.relevance >= floor]
    # A newer statement of a returned fact comes with it from the context floor, not below.
    first, taken = await newer_first_tier(
        passing, [c for c in candidates if context_floor <= c.relevance < floor], matcher,
        repo=repo, supersede_cosine=supersede_cosine, floor=floor,
        band=context_floor)
    kept = {c.memory.id for c in taken}
    rest, _ = await newer_first_tier(
        [c for c in ranked if c.relevance < floor and c.memory.id not in kept], [], matcher,
        repo=repo, supersede_cosine=supersede_cosine, floor=floor,
        band=context_floor)
    return [first, rest]


def context(candidate: Candidate, context_floor: float) -> bool:
    """Whether a candidate below the threshold fills after an answer: above the context
    floor and holding a word of the question (or its translation). Near in meaning alone
    is what any fact of the same user is to a short question ("My sister lives in Dublin"
    for "what does my job involve?", 0.29 against 0.35): an assistant would read it
    beside every answer."""
    return candidate.relevance >= context_floor and candidate.keyword > 0


async def newer_first_tier(ranked: list[Candidate], below: list[Candidate],
                           matcher: Coverage | None, *, repo: Repository,
                           supersede_cosine: float, floor: float, band: float
                           ) -> tuple[list[Candidate], list[Candidate]]:
    """A later statement of a fact ahead of the older ones it restates or changes
    (newer.py), also one from `below` (candidates under the threshold) that changes a
    returned fact; each older one ordered so carries the newer one (`superseded_by`).
    Per tier, so what a lower `min_score` lets in never reorders the default's tier.
    `floor`: the threshold a memory must pass to change a returned answer without
    repeating its words, `band` (the context floor) a statement that names the change.
    Returns the reordered tier and the candidates it took
    from `below`."""
    head = ranked[:NEWER_WINDOW]
    newcomers = sorted(below, key=lambda c: (c.score, c.when), reverse=True
                       )[:NEWER_WINDOW] if head else []
    if len(head) + len(newcomers) < 2:
        return ranked, []
    both = [*head, *newcomers]
    # The searches returned the vectors with the memories; reading them again was a
    # LanceDB query per tier (10-20 ms of a 40 ms recall at 100k memories). Pending
    # messages found by keyword have none and are no memory: asking LanceDB for them was
    # that query on every recall into a namespace being written, where it is slowest.
    missing = [c.memory.id for c in both if c.stored is None and not c.provisional]
    records = await repo.get_memories(missing, with_vector=True) if missing else []
    fetched = {r.id: np.asarray(r.vector, dtype=np.float32) for r in records
               if r.vector is not None}
    vectors = {i: c.stored if c.stored is not None else fetched[c.memory.id]
               for i, c in enumerate(both)
               if c.stored is not None or c.memory.id in fetched}
    memory = {i: c.memory for i, c in enumerate(both)}
    # How well each answers this question: its share of the question's words, and the
    # date or session the question names (an older memory on "3 June" stays first).
    shares = [(matcher.share(c.memory.text) if matcher else 1.0) * c.time * c.reference
              for c in both]
    # Terms weighed by their rarity among the memories compared here, the question's
    # best candidates (a speaker's name is in all of them); not all the candidates:
    # tokenizing is the cost (~1 ms a chunk), and these are the texts read anyway.
    rarity = Rarity([c.memory.text for c in both])

    def changes(i: int, older: int) -> bool:
        """Whether `both[i]` answers the question and says that `both[older]`'s answer
        changed: a statement (one line, or a user's line and the reply to it) or a memory
        of one speaker's statements (notes), in its line that best matches the question.
        Not a stretch of dialogue: "now" and the speakers' names are in many of its lines,
        and its sessions are close to each other (on LoCoMo, dialogue taken in cost 11
        points of hit@1). A line that only says "now" or "现在" counts alone (a statement
        of one line) and must answer the question about as well as the older memory: chat
        says "现在" and "不再" of anything (MemDaily: -1 point of hit@1 otherwise)."""
        c = both[i]
        change, units = said_of_a_change(i)
        if not (change == Change.said or (
                change == Change.now and units == 1 and c.relevance >= floor
                and c.relevance >= NOW_CHANGE_SHARE * both[older].relevance)):
            return False
        # And a word of the older one's (rarity-weighted): e5 puts any two short Chinese
        # sentences close, and "女儿的钢琴课改到周四晚上" changes nothing of "下周二上午体检".
        return share_words(c.memory.text, both[older].memory.text, rarity)

    @functools.cache
    def said_of_a_change(i: int) -> tuple[Change, int]:
        """What `both[i]` says of a change (none where it cannot announce one), and its
        number of lines: the same whatever older memory it is compared with, so read once
        per recall (a long memory's lines are searched for cues)."""
        c = both[i]
        units = lines(c.memory)
        if c.relevance < floor and not (c.relevance >= band and len(units) <= 2):
            # Below the threshold only a statement, from the context floor: "we moved to
            # Munich last month" for "where do I live?" (a weak match of a stretch of chat
            # that says "changed" is no answer: LoCoMo -0.6 hit@1).
            return Change.none, len(units)
        if len(units) > 2 and not one_speaker(units):
            return Change.none, len(units)
        best = units[0][1] if len(units) == 1 or matcher is None else \
            max(units, key=lambda u: matcher.share(u[1]))[1]
        return announces_change(best), len(units)

    reordered, taken, pairs = newer_first(head, newcomers, memory, vectors,
                                          threshold=supersede_cosine,
                                          covers=shares.__getitem__, changes=changes,
                                          rarity=rarity)
    for older, newer in pairs:
        older.superseded_by = newer.memory
    return reordered + ranked[len(head):], taken
