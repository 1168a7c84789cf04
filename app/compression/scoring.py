"""The memory weight score: four dimensions in [0, 1] and their weighted sum.

**Topic novelty** — how much a memory adds to what the namespace already held before it::

    novelty_i = 1 - max(0, max_{j in the LOOKBACK memories before i} cos(v_i, v_j))

with the embedding vectors in time order (the first memory of a namespace is fully novel).
A chunk that repeats an earlier topic scores low; a new subject scores high.

**Information entropy** — how much information the text carries: the Shannon entropy, in
bits, of its content-token distribution (English words, Chinese jieba words, numbers; stop
words and function characters removed), against a reference of ``ENTROPY_REF_BITS``, scaled
by how much of the text is content at all::

    entropy = min(1, H / ENTROPY_REF_BITS) * (0.6 + 0.4 * min(1, content_share / 0.5))

"ok ok thanks 哈哈" has almost none; a dense paragraph of distinct facts approaches 1.
Repetition lowers H, so a chunk saying one thing five times scores like one saying it once.

**Task relevance** — whether the text is about getting something done::

    task = 0.45 * category + 0.20 * entities + 0.20 * imperatives + 0.15 * numbers

``category`` is the classifier's verdict (task/decision 1.0, progress 0.8, preference/note
0.6, learning 0.5, question 0.3, general 0) times ``0.5 + 0.5 * confidence``; ``entities``
saturates with the named entities (technologies, hashtags, quotes, proper nouns other than
the speakers), ``imperatives`` with requests and obligations ("please", "need to", "记得",
"务必"), ``numbers`` with numbers, times and dates ("3pm", "下周二") — each as
``1 - exp(-count / scale)``.

**Emotional intensity** — how strongly feelings show: emotion words of the bilingual lexicon
(``lexicon.py``), intensifiers next to them, exclamation marks, emoji and shouting, per
length (a long chunk with one "happy" is calmer than "I'm SO happy!!!")::

    raw = words + 0.5 * intensified + 0.5 * exclamations + 0.7 * emoji + 0.5 * shouting
    emotion = 1 - exp(-(raw / max(1, sqrt(tokens / 30))) / 4)

**Urgency** — a near time together with something at stake, per line (the most urgent
line counts): a weighted mean cannot single out a short urgent message, whose entropy and
novelty are ordinary, so urgency raises the score on its own::

    time    = 1 near (now, today, tomorrow, 明天, 十点前…), 0.6 a deadline with a date
              ("by Friday", 月底前), 0.35 none
    stakes  = 1 - exp(-k / 0.7),  k = 1.5 trouble or loss (lost, stolen, crashed, 丢了,
              宕机…) + 0.8 distress (scared, 害怕…; 1.5 intensified: "so scared", 好害怕)
              + 1 consequence (otherwise, 不然…) + 0.5 obligation (must, 必须…)
              + 0.3 exclamation (only beside another stake), each class once
    urgency = time * stakes

An obligation with a near time ("I have to go, see you tomorrow") stays well below the
emergency hold; a loss or a threat together with a deadline reaches it.

**Weight score** = the weighted mean of the four (weights normalised to sum 1), raised by
the urgency as a probabilistic "or" — ``mean + (1 - mean) * urgency``, so either alone can
make a memory important — plus the feedback boost earned by explicit references, clamped
to [0, 1].

Pure functions: the service loads memories and writes the results.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from app.classify.analyzer import Analysis
from app.classify.categories import Category
from app.compression import lexicon
from app.compression.text import is_content, split_speaker, strip_roles, tokens

ENTROPY_REF_BITS: Final = 6.5  # ~90 equally frequent distinct content words
NOVELTY_LOOKBACK: Final = 500  # earlier memories compared; bounds the cost per memory

CATEGORY_TASK: Final[dict[Category, float]] = {
    Category.TASK: 1.0,
    Category.DECISION: 1.0,
    Category.PROGRESS: 0.8,
    Category.PREFERENCE: 0.6,
    Category.NOTE: 0.6,
    Category.LEARNING: 0.5,
    Category.QUESTION: 0.3,
    Category.GENERAL: 0.0,
}


@dataclass(frozen=True, slots=True)
class Dimensions:
    novelty: float
    entropy: float
    task: float
    emotion: float

    def as_dict(self) -> dict[str, float]:
        return {"novelty": self.novelty, "entropy": self.entropy, "task": self.task,
                "emotion": self.emotion}


DIMENSIONS: Final = ("novelty", "entropy", "task", "emotion")


@dataclass(frozen=True, slots=True)
class Weights:
    """Weights of the four dimensions; only their ratios matter (normalised on use)."""

    novelty: float
    entropy: float
    task: float
    emotion: float

    def as_dict(self) -> dict[str, float]:
        return {"novelty": self.novelty, "entropy": self.entropy, "task": self.task,
                "emotion": self.emotion}

    @classmethod
    def from_dict(cls, values: dict[str, float]) -> Weights:
        return cls(**{d: float(values[d]) for d in DIMENSIONS})

    def normalised(self) -> Weights:
        total = self.novelty + self.entropy + self.task + self.emotion
        if total <= 0:
            return Weights(0.25, 0.25, 0.25, 0.25)
        return Weights(self.novelty / total, self.entropy / total, self.task / total,
                       self.emotion / total)


def combine(dims: Dimensions, weights: Weights, *, feedback: float = 0.0,
            urgency: float = 0.0) -> float:
    """The weight score: weighted mean of the dimensions, raised by the urgency, plus the
    feedback boost, in [0, 1]."""
    w = weights.normalised()
    mean = (w.novelty * dims.novelty + w.entropy * dims.entropy + w.task * dims.task
            + w.emotion * dims.emotion)
    value = mean + (1.0 - mean) * urgency + feedback
    return min(1.0, max(0.0, value))


def _distress(line: str) -> float:
    """1.5 for an intensified feeling of distress ("so scared", 好害怕), 0.8 for a plain one."""
    words = [w for w in tokens(line) if w.isascii()]
    found = 0.0
    for i, word in enumerate(words):
        if word in lexicon.EN_DISTRESS:
            found = max(found, 1.5 if i and words[i - 1] in lexicon.EN_INTENSIFIERS else 0.8)
    for word in lexicon.ZH_DISTRESS:
        at = line.find(word)
        if at >= 0:
            before = line[max(0, at - 2): at]
            found = max(found, 1.5 if any(before.endswith(i) for i in lexicon.ZH_INTENSIFIERS)
                        else 0.8)
    return found


def _line_urgency(line: str) -> float:
    if lexicon.IMMINENT_RE.search(line):
        time = 1.0
    elif lexicon.DEADLINE_RE.search(line) and lexicon.NUMBER_DATE_RE.search(line):
        time = 0.6
    else:
        time = 0.35
    k = (1.5 * bool(lexicon.TROUBLE_RE.search(line)) + _distress(line)
         + 1.0 * bool(lexicon.CONSEQUENCE_RE.search(line))
         + 0.5 * bool(lexicon.OBLIGATION_RE.search(line)))
    # An exclamation amplifies a stake; on its own ("see you today!") it is none.
    if k and lexicon.EXCLAMATION_RE.search(line):
        k += 0.3
    return time * _saturate(k, 0.7)


def urgency_score(text: str) -> float:
    """The urgency of the most urgent line of `text` (see the module docstring)."""
    return max((_line_urgency(line) for line in strip_roles(text).splitlines() if line.strip()),
               default=0.0)


def _saturate(count: float, scale: float) -> float:
    return 1.0 - math.exp(-count / scale) if count > 0 else 0.0


def entropy_score(text: str) -> float:
    all_tokens = tokens(text)
    content = [t for t in all_tokens if is_content(t)]
    if not content:
        return 0.0
    counts = Counter(content)
    n = len(content)
    bits = max(0.0, -sum((c / n) * math.log2(c / n) for c in counts.values()))
    share = n / len(all_tokens)
    return min(1.0, bits / ENTROPY_REF_BITS) * (0.6 + 0.4 * min(1.0, share / 0.5))


def _speakers(text: str) -> set[str]:
    return {split_speaker(line)[0] for line in text.splitlines() if line.strip()}


def task_score(text: str, analysis: Analysis) -> float:
    category = CATEGORY_TASK.get(analysis.category, 0.0) * (0.5 + 0.5 * analysis.confidence)
    speakers = _speakers(text)
    e = analysis.entities
    named = [*e.technologies, *e.hashtags, *e.quotes,
             *(p for p in e.proper_nouns if p not in speakers)]
    imperatives = len(lexicon.IMPERATIVE_RE.findall(text))
    numbers = len(lexicon.NUMBER_DATE_RE.findall(text))
    value = (0.45 * category + 0.20 * _saturate(len(named), 3.0)
             + 0.20 * _saturate(imperatives, 1.5) + 0.15 * _saturate(numbers, 2.0))
    return min(1.0, value)


def emotion_score(text: str) -> float:
    words = tokens(text)
    lowered = [w for w in words if w.isascii()]
    en_hits = [i for i, w in enumerate(lowered) if w in lexicon.EN_EMOTION]
    intensified = sum(1 for i in en_hits if i > 0 and lowered[i - 1] in lexicon.EN_INTENSIFIERS)
    zh_hits = 0
    for word in lexicon.ZH_EMOTION:
        start = text.find(word)
        while start >= 0:
            zh_hits += 1
            before = text[max(0, start - 2): start]
            if any(before.endswith(i) for i in lexicon.ZH_INTENSIFIERS):
                intensified += 1
            start = text.find(word, start + len(word))
    shouting = sum(1 for w in lexicon.CAPS_RE.findall(text) if w not in lexicon.NOT_SHOUTING)
    raw = (len(en_hits) + zh_hits + 0.5 * intensified
           + 0.5 * len(lexicon.EXCLAMATION_RE.findall(text))
           + 0.7 * len(lexicon.EMOJI_RE.findall(text)) + 0.5 * shouting)
    per_length = raw / max(1.0, math.sqrt(len(words) / 30))
    return _saturate(per_length, 4.0)


def text_dimensions(text: str, analysis: Analysis) -> tuple[float, float, float]:
    """(entropy, task, emotion) of one memory text (role prefixes are not content)."""
    body = strip_roles(text)
    return entropy_score(body), task_score(body, analysis), emotion_score(body)


def novelty_scores(vectors: np.ndarray[Any, Any], todo: list[int], *,
                   lookback: int = NOVELTY_LOOKBACK,
                   overlapping: dict[int, set[int]] | None = None) -> dict[int, float]:
    """Novelty of the rows `todo` of `vectors` (unit vectors in time order) against the
    `lookback` rows before each.

    `overlapping[i]` lists earlier rows that share messages with row i (neighbouring chunks
    overlap by design): they are left out, since repeating a shared message is an artefact
    of chunking, not a repeated topic.
    """
    result: dict[int, float] = {}
    for i in todo:
        start = max(0, i - lookback)
        skip = (overlapping or {}).get(i, set())
        earlier = [j for j in range(start, i) if j not in skip]
        if not earlier:
            result[i] = 1.0
            continue
        sims = vectors[earlier] @ vectors[i]
        result[i] = float(min(1.0, max(0.0, 1.0 - max(0.0, float(sims.max())))))
    return result


def named_terms(entities_json: str) -> list[str]:
    """Technologies, hashtags and quotes of a memory's stored entities (the terms the long
    technical preset keeps)."""
    try:
        data = json.loads(entities_json or "{}")
    except ValueError:
        return []
    return [*data.get("technologies", []), *data.get("hashtags", []), *data.get("quotes", [])]
