"""Text understanding for memories: category, entities, importance, small talk.

Pure functions over text, no storage and no I/O; :func:`analyze` combines them.
"""

from app.classify.analyzer import Analysis, analyze
from app.classify.categories import Category, CategoryResult, classify_category
from app.classify.entities import Entities, extract_entities, subtopics, warm_up
from app.classify.importance import estimate_importance
from app.classify.smalltalk import is_small_talk

__all__ = [
    "Analysis",
    "Category",
    "CategoryResult",
    "Entities",
    "analyze",
    "classify_category",
    "estimate_importance",
    "extract_entities",
    "is_small_talk",
    "subtopics",
    "warm_up",
]
