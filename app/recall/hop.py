"""A question's searches: per sub-question, and a second hop from what the first found.

A compound query ("我堂哥几岁了？另外，星河草地音乐节的规模是什么？") is searched and
scored per sub-question, concurrently (their embeddings share one model batch); a memory
keeps its best score over the parts, so the second question's answer is not outranked by
the first question's weak matches. A question that identifies its subject by a fact ("那个
在深圳工作的人，年龄是多少？") gets a second search with the line that states that fact
("我婶婶在深圳工作"): the hop (`bridge`), and what the line names beyond the question's
words (婶婶: `hop_names`) keeps the lines about it when packing. Past the recall's deadline
the hop is skipped, and so are its searches when neither is done by then (deadline.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.compression.text import sentences
from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.ops.metrics import Metrics
from app.recall.candidates import Candidate
from app.recall.deadline import Deadline
from app.recall.lines import lines, one_speaker
from app.recall.pending import without_built
from app.recall.query import Query
from app.recall.references import split_questions
from app.recall.schemas import Stage
from app.recall.score import coverage, score
from app.recall.search import Searcher
from app.recall.text import Coverage, QueryTerms, query_terms
from app.recall.tuning import HOP_FROM, NAMES_FROM, NAMES_HELD_BY
from app.scripts import has_han


@dataclass
class Found:
    """Searched and scored candidates, the query's term weights over them (`matcher`), and
    what a second hop's line names beyond the question's words (`named`), if anything."""

    candidates: list[Candidate]
    matcher: Coverage | None
    named: Coverage | None


async def find(query: Query, *, searcher: Searcher, pool: EmbeddingPool, settings: Settings,
               deadline: Deadline, metrics: Metrics | None) -> Found:
    """Search and score the question, per sub-question, and its hop (module docstring);
    what is late for `deadline` is skipped and named in it (deadline.py)."""
    if query.nothing_to_look_up:
        return Found([], None, None)  # no search: a greeting finds nothing by definition
    parsed, text = query.parsed, query.search_text

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

    async def one(part: str, part_terms: QueryTerms, *, hop: bool = False
                  ) -> tuple[list[Candidate], Coverage | None]:
        searched = await searcher.search(query, part, terms=part_terms, deadline=deadline,
                                         metrics=metrics, hop=hop)
        found = searched.candidates
        unknown = pool.unknown_share(part)
        return found, score(found, query, settings, terms=part_terms,
                            chinese=has_han(part), unknown=unknown,
                            keyword_only=not searched.with_vector,
                            without_bm25=not searched.with_keyword)

    results = await asyncio.gather(*(one(part, t) for part, t in parts))
    # (the hop's text, its terms, the memory that is its line alone, if one is)
    bridges: list[tuple[str, QueryTerms, str | None]] = []
    names = QueryTerms(latin=frozenset(), cjk=frozenset())  # see `hop_names`
    for (part, part_terms), (found, matcher) in zip(parts, results, strict=True):
        taken = bridge(found, matcher)
        if taken is not None and matcher is not None:
            line, alone = taken
            hop = f"{line} {part}"
            # Scored without the question's words that none of the first search's
            # candidates held (its scaffolding: "下列哪一项最符合"), so a memory
            # sharing only the line's name still passes `min_score`.
            hop_terms = read(hop).without(matcher.absent)
            bridges.append((hop, hop_terms, alone))
            if matcher.held_share(line) >= NAMES_FROM:
                names = names.merged(beyond(read(line), part_terms))
    if bridges and deadline.passed:
        # No time left for the hop's searches: the first search's answer.
        deadline.skip(Stage.second_hop)
        bridges, names = [], QueryTerms(latin=frozenset(), cjk=frozenset())
    if bridges:
        hops = await asyncio.gather(*(one(b, t, hop=True) for b, t, _ in bridges))
        # A hop cannot confirm its own line: searched with that line, a memory that is
        # nothing but the line matches itself (relevance ~1), whatever the question asked
        # of it ("我老公喜欢什么运动？" → "我老公叫陈磊"). It keeps the question's own score.
        results += [([c for c in found if c.memory.id != alone], matcher)
                    for (found, matcher), (_, _, alone) in zip(hops, bridges, strict=True)]
    if len(results) == 1:
        return Found(*results[0], None)
    best: dict[str, Candidate] = {}
    for found, _ in results:
        for c in found:
            kept = best.get(c.memory.id)
            if kept is None or c.score > kept.score:
                best[c.memory.id] = c
    merged = without_built(list(best.values()))
    matcher = None
    if terms:
        # One question and its hop: the first search's candidates were read for these
        # very terms already.
        first, first_matcher = results[0]
        known = first_matcher.rows_by([c.memory.id for c in first]) \
            if first_matcher is not None and parts[0][1] is terms else {}
        matcher = coverage(terms, [c.memory.text for c in merged], settings,
                           counts=parsed.counts, rows=[known.get(c.memory.id) for c in merged])
    return Found(merged, matcher, hop_names(names, merged))


def bridge(found: list[Candidate], matcher: Coverage | None
           ) -> tuple[str, str | None] | None:
    """A second hop's line, searched with the question, and the memory that is that line
    alone (None if its memory holds more: `find` keeps it from confirming itself).

    The best-matching line of the best memories ("那个规模是八百人的活动，时间是
    哪天？" finds "秋季厨艺交流会的规模是八百人"; the hop then finds that event's
    time). Also when the line holds every word of the question: "我常去的商场是星光
    百货" answers "我常去的商场怎么样" by name only.

    Only from one speaker's statements (or a memory of one message), whose lines name
    the thing they are about; the best line of a dialogue mostly repeats the question's
    own words, and hopping from it cost LoCoMo 2.5 points.

    The line is chosen among the lines of the `HOP_FROM` best such memories, not only
    the best one's: a day of notes whose several lines each share one common word of
    the question ("活动", "时间") can outrank, as a whole, the day whose one line names
    the thing asked about ("规模是八百人"); a model that puts all short notes of a
    language close together (e5) ranks them by such words. The line with the largest
    share of the question's (IDF-weighted) terms names it best; a tie goes to the
    better memory.
    """
    if matcher is None or not found:
        return None
    texts: list[tuple[str, str | None]] = []  # (line, the memory that is that line alone)
    for rank, c in enumerate(sorted(found, key=lambda c: c.score, reverse=True
                                    )[:HOP_FROM]):
        units = lines(c.memory)
        if len(units) > 1 and not one_speaker(units):
            if rank == 0:
                return None  # the best memory is a dialogue: no hop (see above)
            continue
        # A memory of that one line would match the hop as itself (`find`); a line of a
        # day of notes may lift its day over days sharing only common words (above).
        alone = c.memory.id if len(units) == 1 else None
        texts += [(line, alone) for _, line in units]
    shares = [matcher.share(line) for line, _ in texts]
    best = max(range(len(texts)), key=lambda i: shares[i])  # the first of equals
    # Also from a line holding every word of the question: "我路过的景区是X" leaves
    # "what is X like" to another memory.
    if shares[best] <= 0:
        return None
    line, alone = texts[best]
    # Of a line of several sentences, the one that matches best: the hop carries the
    # statement naming the thing, and an assistant's whole answer of 900 characters
    # took 50-160 ms to encode, where a statement takes ~15.
    content = line.split(": ", 1)[-1]
    return max(sentences(content) or [content], key=matcher.share), alone


def hop_names(names: QueryTerms, candidates: list[Candidate]) -> Coverage | None:
    """What the second hop was for: the terms its line names beyond the question's own
    words ("那个在深圳工作的人，年龄是多少？" → "我婶婶在深圳工作" → 婶婶), as a matcher
    of lines. Once the person or thing is identified, what is stored about it answers
    the question, also a line that shares no word with the question ("我婶婶今年五十
    九岁"): a statement memory's core keeps the lines naming it (`pack.core`).

    Only terms that tell candidates apart: a term held by more than half of them (the
    speakers of a dialogue, named in every line; the user's own label) names nothing.
    """
    if not names or not candidates:
        return None
    texts = [c.memory.text for c in candidates]
    found = Coverage(names, texts)
    rare = frozenset(n for n, held in found.holding.items()
                     if 0 < held <= len(texts) * NAMES_HELD_BY)
    return found.only(names.only(rare)) if rare else None


def beyond(line: QueryTerms, question: QueryTerms) -> QueryTerms:
    """The terms of a line that are not the question's words, nor part of one or holding
    one ("广州" asked, "广东广州" stated)."""
    asked = question.names()
    return line.without(frozenset(t for t in line.names()
                                  if any(t in a or a in t for a in asked)))
