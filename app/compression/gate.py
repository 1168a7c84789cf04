"""The quality gate: a pass is committed only if recall still finds what it compressed.

Before a pass writes anything, it asks its own **probe questions**, derived from the
memories it is about to compress: every proposition (sentence with its speaker) that
carries a fact someone may ask for — a number, a time or date, a named entity (not a
speaker) — is a probe whose *answer* is those facts and whose *question* is the sentence
with them masked ("Melanie: I signed up for a pottery class on …"), if at least three
content words are left to ask with. Each question is
embedded and searched, by cosine, among the namespace's searchable memories twice: as
they are (**before**) and as the pass would leave them — its sources gone from search,
its summaries in (**after**). An answer word counts as found when one of the `TOP_K`
nearest memories holds it.

    coverage = Σ answer words found after (of those found before) / Σ found before

Probes whose answer nothing found before say nothing about the pass and are left out.
When `coverage` is below the policy's `min_coverage` (0.97) the pass's compression is not
committed: no archive row, summary, text or state changes; the result names the coverage
and the probes that failed (what they lost). Scores and decisions are still recorded.

Pure functions over vectors and texts; the service embeds the questions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from app.compression import lexicon
from app.compression.text import content_tokens, propositions
from app.storage.records import MemoryRecord

TOP_K: Final = 5  # memories a recall puts first; the gate's notion of "found"
MAX_PROBES: Final = 150  # per pass, spread over its memories: bounds the embedding work
MAX_REPORTED: Final = 10
# Content words a masked sentence must keep to be a question at all.
MIN_QUESTION_WORDS: Final = 3


@dataclass(frozen=True, slots=True)
class Probe:
    memory_id: str
    question: str
    answer: frozenset[str]


def entity_names(memory: MemoryRecord, speakers: Sequence[str] = ()) -> list[str]:
    """The named entities stored on a memory (not its speakers): the facts besides
    numbers and dates."""
    try:
        data = json.loads(memory.entities or "{}")
    except ValueError:
        return []
    names = [*data.get("technologies", []), *data.get("hashtags", []), *data.get("quotes", []),
             *data.get("proper_nouns", [])]
    return [n for n in names if isinstance(n, str) and len(n) > 1 and n not in speakers]


def probes_of(memories: Sequence[MemoryRecord], *, limit: int = MAX_PROBES) -> list[Probe]:
    """The probe questions of the memories a pass compresses (at most `limit`, spread)."""
    found: list[Probe] = []
    for memory in memories:
        props = propositions([memory.text])
        names = entity_names(memory, [p.speaker for p in props])
        for prop in props:
            anchors = [m.group(0) for m in lexicon.NUMBER_DATE_RE.finditer(prop.text)]
            anchors += [n for n in names if n.casefold() in prop.text.casefold()]
            answer = frozenset(t for a in anchors for t in content_tokens(a))
            if not answer:
                continue
            question = prop.text
            for anchor in sorted(set(anchors), key=len, reverse=True):
                question = re.sub(re.escape(anchor), "…", question, flags=re.IGNORECASE)
            if len(set(content_tokens(question)) - answer) < MIN_QUESTION_WORDS:
                continue  # "Melanie: …!" (a capitalised "Congrats") asks nothing
            found.append(Probe(memory.id, f"{prop.speaker}: {question}" if prop.speaker
                               else question, answer))
    if len(found) > limit:
        step = len(found) / limit
        found = [found[int(i * step)] for i in range(limit)]
    return found


@dataclass
class GateOutcome:
    probes: int
    evaluated: int
    coverage: float
    failed_count: int
    failed: list[dict[str, Any]]  # the first MAX_REPORTED


def evaluate(probes: Sequence[Probe], questions: np.ndarray[Any, Any],
             before: tuple[list[str], np.ndarray[Any, Any]],
             after: tuple[list[str], np.ndarray[Any, Any]],
             texts: dict[str, str], *, top_k: int = TOP_K) -> GateOutcome:
    """Coverage of the probes' answers after the pass against before it.

    Args:
        probes: the pass's probe questions.
        questions: their unit query vectors, one row each.
        before, after: (memory ids, unit vectors) of what recall can search, as the
            namespace is and as the pass would leave it.
        texts: memory id -> text, for every id in `before` and `after`.
    """
    bags: dict[str, set[str]] = {}

    def bag(memory_id: str) -> set[str]:
        if memory_id not in bags:
            bags[memory_id] = set(content_tokens(texts[memory_id]))
        return bags[memory_id]

    def found(corpus: tuple[list[str], np.ndarray[Any, Any]], row: int,
              answer: frozenset[str]) -> set[str]:
        ids, vectors = corpus
        if not ids:
            return set()
        sims = vectors @ questions[row]
        nearest = np.argsort(-sims)[:top_k]
        seen: set[str] = set()
        for index in nearest:
            seen |= answer & bag(ids[int(index)])
        return seen

    total = kept = evaluated = failed_count = 0
    failed: list[dict[str, Any]] = []
    for row, probe in enumerate(probes):
        had = found(before, row, probe.answer)
        if not had:
            continue
        evaluated += 1
        still = found(after, row, probe.answer) & had
        total += len(had)
        kept += len(still)
        if still != had:
            failed_count += 1
        if still != had and len(failed) < MAX_REPORTED:
            failed.append({"memory_id": probe.memory_id, "question": probe.question,
                           "missing": sorted(had - still)})
    coverage = kept / total if total else 1.0
    return GateOutcome(probes=len(probes), evaluated=evaluated, coverage=coverage,
                       failed_count=failed_count, failed=failed)
