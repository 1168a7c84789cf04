"""Importance (1–10) of a memory from its category, entities and weight score."""

from __future__ import annotations

from typing import Final

from app.classify.categories import Category
from app.classify.entities import Entities

__all__ = ["estimate_importance"]

# What a confident classification of each category is worth. Decisions and tasks are what
# an assistant is most often asked to recall ("what did we decide?", "what is left?");
# small talk and unclassified chatter the least.
CATEGORY_BASE: Final[dict[Category, float]] = {
    Category.DECISION: 8.0,
    Category.TASK: 7.0,
    Category.PREFERENCE: 7.0,
    Category.NOTE: 6.5,
    Category.LEARNING: 6.0,
    Category.PROGRESS: 5.0,
    Category.QUESTION: 4.0,
    Category.GENERAL: 3.0,
}
# An unsure classification is pulled towards this neutral value.
NEUTRAL: Final = 4.0
# Named things (technologies, hashtags, proper nouns, quotes) make a memory more specific
# and easier to recall by; plain concepts count for little. The bonus is capped so a
# keyword-heavy text cannot outrank a decision.
_NAMED_BONUS: Final = 0.4
_CONCEPT_BONUS: Final = 0.05
_MAX_ENTITY_BONUS: Final = 1.5
# Share of the final value taken from the weight score when one is given.
_WEIGHT_BLEND: Final = 0.4
_SMALL_TALK_IMPORTANCE: Final = 1


def estimate_importance(
    category: Category,
    confidence: float,
    entities: Entities,
    *,
    weight_score: float | None = None,
    small_talk: bool = False,
) -> int:
    """Estimate how important a memory is, on a 1–10 scale.

    Formula::

        rule  = NEUTRAL + (BASE[category] - NEUTRAL) * (0.5 + 0.5 * confidence)
              + min(1.5, 0.4 * named + 0.05 * concepts)
        value = rule                                   if weight_score is None
              = 0.6 * rule + 0.4 * (1 + 9 * weight)    otherwise
        importance = clamp(round(value), 1, 10)

    where ``BASE`` is :data:`CATEGORY_BASE` (decision 8 … general 3), ``NEUTRAL`` is 4,
    ``named`` counts technologies, hashtags, proper nouns and quotes, ``concepts`` counts
    concepts, and ``weight`` is the memory weight score clamped to [0, 1]. A confident
    decision with a few named entities lands at 9; a bare "general" sentence at 3–4.
    Small talk is always 1.

    Args:
        category: the classified category.
        confidence: the classifier's confidence, 0–1 (clamped).
        entities: the extracted entities.
        weight_score: the four-dimension memory weight score, 0–1, if already computed.
        small_talk: the text is pure small talk.

    Returns:
        An integer from 1 to 10.
    """
    if small_talk:
        return _SMALL_TALK_IMPORTANCE
    confidence = min(max(confidence, 0.0), 1.0)
    rule = NEUTRAL + (CATEGORY_BASE[category] - NEUTRAL) * (0.5 + 0.5 * confidence)
    named = (
        len(entities.technologies)
        + len(entities.hashtags)
        + len(entities.proper_nouns)
        + len(entities.quotes)
    )
    rule += min(_MAX_ENTITY_BONUS, _NAMED_BONUS * named + _CONCEPT_BONUS * len(entities.concepts))
    value = rule
    if weight_score is not None:
        weight = min(max(weight_score, 0.0), 1.0)
        value = (1 - _WEIGHT_BLEND) * rule + _WEIGHT_BLEND * (1 + 9 * weight)
    return min(10, max(1, round(value)))
