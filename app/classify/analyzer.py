"""One call that understands a text: category, entities, subtopics, importance."""

from __future__ import annotations

from dataclasses import dataclass

from app.classify.categories import Category, classify_category, line_categories
from app.classify.entities import Entities, extract_entities, subtopics
from app.classify.importance import estimate_importance
from app.classify.smalltalk import is_small_talk

__all__ = ["MAX_ANALYSED_CHARS", "Analysis", "analyze"]

MAX_ANALYSED_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the classifier knows about one text."""

    category: Category
    categories: tuple[Category, ...]  # every category of its lines, `category` first
    confidence: float
    scores: dict[str, float]
    entities: Entities
    subtopics: tuple[str, ...]
    importance: int
    small_talk: bool


def analyze(text: str, *, weight_score: float | None = None) -> Analysis:
    """Classify a text (as a whole and line by line), extract its entities and estimate
    its importance.

    Runs on every stored chunk, so it stays rule-based and in-process (a few milliseconds
    for a 900-character chunk once jieba is loaded).

    Args:
        text: a message or chunk, English, Chinese or mixed.
        weight_score: the chunk's memory weight score (0–1), if known; blended into
            the importance.

    Returns:
        The combined analysis.

    Example:
        >>> a = analyze("我们决定使用 LanceDB 和 #向量检索 来构建记忆系统")
        >>> a.category, a.entities.technologies
        (<Category.DECISION: 'decision'>, ('LanceDB',))
    """
    # Memories are chunks of ~900 characters; only edits and /classify send more. The rules
    # need no more than the opening to judge a text, and some digit patterns cost time
    # quadratic in the length of a digit run, so the analysis reads a bounded prefix.
    text = text[:MAX_ANALYSED_CHARS]
    small_talk = is_small_talk(text)
    result = classify_category(text, small_talk=small_talk)
    entities = extract_entities(text)
    return Analysis(
        category=result.category,
        categories=line_categories(text, result.category),
        confidence=result.confidence,
        scores=result.scores,
        entities=entities,
        subtopics=tuple(subtopics(entities)),
        importance=estimate_importance(
            result.category,
            result.confidence,
            entities,
            weight_score=weight_score,
            small_talk=small_talk,
        ),
        small_talk=small_talk,
    )
