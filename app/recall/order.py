"""Ordering: which candidates are packed, in what order, in which tier.

`min_score` decides whether the question has an answer here (abstention: nothing passes,
nothing is returned). Once a memory passes, weaker matches down to `CONTEXT_THRESHOLD_FACTOR`
of it fill what the budget leaves after every passing memory: the context of an answer
("when did we move, and why?", the turns around an event) shares fewer of the question's
words than the answer does. Best first; near-equal scores, the more recent memory first;
a later statement of a fact just ahead of the older one it restates (newer.py).

Two tiers: what passes the configured `min_score`, then what only a lower per-call
`min_score` lets in, so lowering it never returns less (`pack` fills the second tier
only with what the first left).
"""

from __future__ import annotations

import numpy as np

from app.recall.candidates import Candidate
from app.recall.newer import Rarity, newer_first
from app.recall.query import Query
from app.recall.score import overlaps
from app.recall.text import Coverage
from app.recall.tuning import CONTEXT_THRESHOLD_FACTOR, NEWER_WINDOW, TIE_DECIMALS
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
        for c in candidates:
            inside = overlaps(c.memory, query.hint)
            c.relevance = max(c.relevance, min_score) if inside else 0.0
    admitted = min_score
    if any(c.relevance >= min_score for c in candidates):
        admitted = min_score * CONTEXT_THRESHOLD_FACTOR
    ranked = sorted(
        (c for c in candidates if c.relevance >= admitted),
        # Near-equal scores (same to 3 decimals): the more recent memory first.
        key=lambda c: (round(c.score, TIE_DECIMALS), c.when, c.memory.id), reverse=True,
    )
    # What passes the configured threshold is packed first; a lower per-call min_score
    # only adds what fits after it (`pack`).
    floor = max(min_score, query.default_min_score)
    passing = [c for c in ranked if c.relevance >= floor]
    first, taken = await newer_first_tier(
        passing, [c for c in candidates if c.relevance < floor], matcher,
        repo=repo, supersede_cosine=supersede_cosine)
    kept = {c.memory.id for c in taken}
    rest, _ = await newer_first_tier(
        [c for c in ranked if c.relevance < floor and c.memory.id not in kept], [], matcher,
        repo=repo, supersede_cosine=supersede_cosine)
    return [first, rest]


async def newer_first_tier(ranked: list[Candidate], below: list[Candidate],
                           matcher: Coverage | None, *, repo: Repository,
                           supersede_cosine: float
                           ) -> tuple[list[Candidate], list[Candidate]]:
    """A later statement of a fact ahead of the older ones it restates (newer.py), also
    one from `below` (candidates under the threshold) that changes a returned fact.
    Per tier, so what a lower `min_score` lets in never reorders the default's tier.
    Returns the reordered tier and the candidates it took from `below`."""
    head = ranked[:NEWER_WINDOW]
    newcomers = sorted(below, key=lambda c: (c.score, c.when), reverse=True
                       )[:NEWER_WINDOW] if head else []
    if len(head) + len(newcomers) < 2:
        return ranked, []
    both = [*head, *newcomers]
    # The searches returned the vectors with the memories; reading them again was a
    # LanceDB query per tier (10-20 ms of a 40 ms recall at 100k memories).
    missing = [c.memory.id for c in both if c.stored is None]
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
    reordered, taken = newer_first(head, newcomers, memory, vectors,
                                   threshold=supersede_cosine,
                                   covers=shares.__getitem__, rarity=rarity)
    return reordered + ranked[len(head):], taken
