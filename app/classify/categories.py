"""Rule-based memory categories for English, Chinese and mixed text.

Each category owns a few weighted rules; a rule is one alternation of phrases. A rule that
fires adds its weight to the category's evidence; further hits of the same rule (the same
phrase again, or another phrase of it) add half the weight, at most twice, so one long
chunk does not drown the rest. The category with the most evidence wins; ``general`` is the
answer when no category collects enough evidence, or when the text is pure small talk.

Weights follow one scale (strong 3, medium 2, weak 1). English alternatives are matched on
the lower-cased text inside ASCII letter boundaries (``\\b`` would fail where English sits
directly beside Chinese), and a script's rules are skipped when the text has none of its
letters.

The rules themselves are data, ``data/category_rules.txt`` (one section per rule, one
alternative a line), read and compiled once at import. They were written from how people
phrase these things in chat, then checked against ``tests/data/classify_labelled.jsonl``;
``bench/classify_report.py`` prints the accuracy.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Final

from app.classify.smalltalk import is_small_talk
from app.classify.wordlists import data_lines
from app.scripts import has_han

__all__ = ["Category", "CategoryResult", "classify_category", "line_categories"]


class Category(StrEnum):
    """What kind of memory a piece of text is."""

    DECISION = "decision"
    PREFERENCE = "preference"
    LEARNING = "learning"
    TASK = "task"
    PROGRESS = "progress"
    QUESTION = "question"
    NOTE = "note"
    GENERAL = "general"


@dataclass(frozen=True, slots=True)
class CategoryResult:
    """The winning category, how sure the rules are (0–1), and the evidence per category.

    ``scores`` maps every category name to its summed rule weight (0 when nothing fired);
    the values are unbounded evidence, not probabilities.
    """

    category: Category
    confidence: float
    scores: dict[str, float] = field(default_factory=dict)


STRONG: Final = 3.0
MEDIUM: Final = 2.0
WEAK: Final = 1.0

# Below this much evidence the text is "general": a single weak hint such as "tomorrow"
# or "already" appears in ordinary chatter too often to decide a category by itself.
_MIN_EVIDENCE: Final = 1.5
# Each further hit of the same rule adds this fraction of its weight, at most
# _MAX_REPEATS times, so repetition counts without letting one rule dominate.
_REPEAT_FACTOR: Final = 0.5
_MAX_REPEATS: Final = 2
# Confidence = share of evidence * saturation(evidence); the saturation scale makes one
# strong pattern alone worth ~0.7 and two strong patterns ~0.9.
_SATURATION: Final = 2.5
_CONFIDENCE_NO_SIGNAL: Final = 0.6
_CONFIDENCE_WEAK_SIGNAL: Final = 0.4
_CONFIDENCE_SMALL_TALK: Final = 0.9

# Ties go to the category that is most useful to remember.
_PRIORITY: Final = (
    Category.DECISION,
    Category.TASK,
    Category.PREFERENCE,
    Category.NOTE,
    Category.LEARNING,
    Category.PROGRESS,
    Category.QUESTION,
)


class _Script(Enum):
    """Which text a pattern reads: English patterns read the lower-cased text."""

    LATIN = "latin"
    CJK = "cjk"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class _Pattern:
    regex: re.Pattern[str]
    script: _Script


@dataclass(frozen=True, slots=True)
class _Rule:
    category: Category
    weight: float
    pattern: _Pattern


_ESCAPE_RE: Final = re.compile(r"\\.")


def _en(*alternatives: str) -> _Pattern:
    """English alternatives inside ASCII letter boundaries, matched on lower-cased text.

    Lower-casing the text once and compiling without ``re.IGNORECASE`` is about three
    times faster, so the patterns themselves must be lower case.
    """
    body = "|".join(alternatives)
    if any(ch.isupper() for ch in _ESCAPE_RE.sub("", body)):
        raise ValueError(f"English patterns must be lower case: {body!r}")
    regex = re.compile(rf"(?<![a-z])(?:{body})(?![a-z])", re.MULTILINE)
    return _Pattern(regex, _Script.LATIN)


def _zh(*alternatives: str) -> _Pattern:
    """Chinese alternatives; Chinese needs no word boundaries."""
    return _Pattern(re.compile("|".join(alternatives), re.MULTILINE), _Script.CJK)


def _any(*alternatives: str) -> _Pattern:
    """Script-neutral alternatives (punctuation, numbers)."""
    return _Pattern(re.compile("|".join(alternatives), re.MULTILINE), _Script.ANY)


_BUILDERS: Final = {"en": _en, "zh": _zh, "any": _any}
_WEIGHTS: Final = {"strong": STRONG, "medium": MEDIUM, "weak": WEAK}


def _load_rules(name: str = "category_rules.txt") -> tuple[_Rule, ...]:
    """The rule table of ``data/category_rules.txt`` (its header says how it reads)."""
    macros: dict[str, str] = {}
    sections: list[tuple[Category, float, str, list[str]]] = []
    for line in data_lines(name):
        if line.startswith("define "):
            _, key, value = line.split(" ", 2)
            macros["{" + key + "}"] = value
        elif line.startswith("== "):
            category, weight, script = line[3:].split()
            sections.append((Category(category), _WEIGHTS[weight], script, []))
        else:
            for key, value in macros.items():
                line = line.replace(key, value)
            sections[-1][3].append(line)
    return tuple(
        _Rule(category, weight, _BUILDERS[script](*alternatives))
        for category, weight, script, alternatives in sections
    )


# Compiled once at import: the classifier runs on every stored chunk.
_RULES: Final = _load_rules()


_LATIN_RE: Final = re.compile(r"[A-Za-z]")


def _targets(text: str) -> dict[_Script, str | None]:
    """The text each script's rules read; None skips a whole script's rules when the text
    has none of its letters."""
    return {
        _Script.LATIN: text.lower() if _LATIN_RE.search(text) else None,
        _Script.CJK: text if has_han(text) else None,
        _Script.ANY: text,
    }


def _evidence(text: str) -> dict[Category, float]:
    targets = _targets(text)
    scores = dict.fromkeys(Category, 0.0)
    for rule in _RULES:
        target = targets[rule.pattern.script]
        if target is None:
            continue
        hits = 0
        for _ in rule.pattern.regex.finditer(target):
            hits += 1
            if hits > _MAX_REPEATS:
                break
        if hits:
            scores[rule.category] += rule.weight * (1 + _REPEAT_FACTOR * (hits - 1))
    return scores


def classify_category(text: str, *, small_talk: bool | None = None) -> CategoryResult:
    """Classify text into one memory category with a confidence in [0, 1].

    Works on English, Chinese and mixed text. Pure small talk and text without enough
    evidence for any category come back as ``general``.

    Args:
        text: a message or a chunk of several messages.
        small_talk: whether the text is small talk, when the caller already knows;
            computed with :func:`is_small_talk` otherwise.

    Returns:
        The winning category, its confidence, and the evidence of every category.

    Example:
        >>> classify_category("我们决定使用 LanceDB").category
        <Category.DECISION: 'decision'>
    """
    if small_talk is None:
        small_talk = is_small_talk(text)
    return _decide(_evidence(text), small_talk=small_talk)


def _decide(scores: dict[Category, float], *, small_talk: bool) -> CategoryResult:
    """The category that evidence `scores` elect, with its confidence."""
    public_scores = {category.value: round(score, 2) for category, score in scores.items()}
    if small_talk:
        return CategoryResult(Category.GENERAL, _CONFIDENCE_SMALL_TALK, public_scores)

    best = max(_PRIORITY, key=lambda category: scores[category])  # max keeps the first tie
    top = scores[best]
    if top == 0:
        return CategoryResult(Category.GENERAL, _CONFIDENCE_NO_SIGNAL, public_scores)
    if top < _MIN_EVIDENCE:
        return CategoryResult(Category.GENERAL, _CONFIDENCE_WEAK_SIGNAL, public_scores)

    share = top / sum(scores.values())
    saturation = 1 - math.exp(-top / _SATURATION)
    return CategoryResult(best, round(share * saturation, 3), public_scores)


# A memory's text is its messages rendered "role: content", one a line (app/store/chunker.py);
# the label is ours, not the speaker's words.
_ROLE_LABEL_RE: Final = re.compile(r"^(?:user|assistant|system|tool): ")
_NEWLINE_RE: Final = re.compile("\n")


def line_categories(text: str, main: Category) -> tuple[Category, ...]:
    """Every category the lines of a text have, `main` (the whole text's) first.

    A memory is several messages; the whole text gets one category, but a decision beside
    a reminder is a decision too. The others follow by the evidence of the lines they won,
    ties in the usual priority. Lines without a category (``general``, small talk) add none.

    Example:
        >>> line_categories("user: 下周二上午我要去体检\nuser: We decided to use LanceDB.",
        ...                 Category.TASK)
        (<Category.TASK: 'task'>, <Category.DECISION: 'decision'>)
    """
    lines = text.split("\n")
    if len(lines) < 2:
        return (main,)
    evidence: dict[Category, float] = {}
    for line, scores in zip(lines, _line_evidence(text, len(lines)), strict=True):
        if not any(scores.values()):
            continue
        result = _decide(scores, small_talk=is_small_talk(_ROLE_LABEL_RE.sub("", line)))
        if result.category is not Category.GENERAL:
            evidence[result.category] = evidence.get(result.category, 0.0) + scores[result.category]
    others = sorted((c for c in evidence if c is not main),
                    key=lambda c: (-evidence[c], _PRIORITY.index(c)))
    return (main, *others)


def _line_evidence(text: str, count: int) -> list[dict[Category, float]]:
    """The evidence of each of the `count` lines of `text`: every rule runs once over the
    whole text (as many regex passes as one classification, not one per line) and each
    hit counts on the line where it starts."""
    scores = [dict.fromkeys(Category, 0.0) for _ in range(count)]
    targets = _targets(text)
    # Where each target's lines start (lower-casing may change a text's length).
    line_starts = {
        script: [0, *(m.end() for m in _NEWLINE_RE.finditer(target))]
        for script, target in targets.items() if target is not None
    }
    for rule in _RULES:
        script = rule.pattern.script
        target = targets[script]
        if target is None:
            continue
        hits: dict[int, int] = {}
        for m in rule.pattern.regex.finditer(target):
            line = bisect.bisect_right(line_starts[script], m.start()) - 1
            hits[line] = hits.get(line, 0) + 1
        for line, n in hits.items():
            n = min(n, _MAX_REPEATS + 1)
            scores[line][rule.category] += rule.weight * (1 + _REPEAT_FACTOR * (n - 1))
    return scores
