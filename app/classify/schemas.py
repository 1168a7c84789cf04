"""Request and response models of `POST /v1/classify`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.classify.analyzer import Analysis
from app.classify.categories import Category
from app.classify.entities import Entities

_EXAMPLE_TEXT = "我们决定使用 LanceDB 和 #向量检索 来构建记忆系统"


class ClassifyRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"text": _EXAMPLE_TEXT},
                {"text": "Remind me to renew my passport before the trip in May."},
            ]
        },
    )

    text: str = Field(
        min_length=1,
        max_length=20_000,
        description="Any text to understand: one message or a chunk of several, in "
        "English, Chinese or both.",
    )


class EntitiesPublic(BaseModel):
    technologies: list[str] = Field(
        description="Inline `code`, **bold** phrases and known technology names in their "
        "canonical spelling (LanceDB, PostgreSQL, Python …), with their version when it is "
        "glued to the name (Qwen2.5, Llama-3.1)."
    )
    concepts: list[str] = Field(
        description="Key words, most frequent first: English words of 3–15 letters and "
        "Chinese words from jieba, without stop words."
    )
    hashtags: list[str] = Field(description="`#tags` without the `#`, Chinese included.")
    quotes: list[str] = Field(description='Quoted phrases ("…", “…”, 「…」, 『…』).')
    proper_nouns: list[str] = Field(
        description="Names of people, places and organisations: capitalised English names, "
        "Chinese names (张伟, 杭州, 北京协和医院, 云栖大会) and names with a version "
        "(iPhone15), in order of appearance.")
    bigrams: list[str] = Field(description="Adjacent key-word pairs that stand out.")

    @classmethod
    def from_entities(cls, entities: Entities) -> EntitiesPublic:
        """Build from the extractor's result."""
        return cls.model_validate(entities.to_dict())


class ClassifyPublic(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "category": "decision",
                    "categories": ["decision"],
                    "confidence": 0.699,
                    "scores": {
                        "decision": 3.0,
                        "preference": 0.0,
                        "learning": 0.0,
                        "task": 0.0,
                        "progress": 0.0,
                        "question": 0.0,
                        "note": 0.0,
                        "general": 0.0,
                    },
                    "entities": {
                        "technologies": ["LanceDB"],
                        "concepts": ["向量", "检索", "构建", "记忆系统", "记忆", "系统"],
                        "hashtags": ["向量检索"],
                        "quotes": [],
                        "proper_nouns": [],
                        "bigrams": ["向量检索", "构建记忆系统"],
                    },
                    "subtopics": ["LanceDB", "向量检索", "构建记忆系统"],
                    "importance": 8,
                    "small_talk": False,
                }
            ]
        }
    )

    category: Category = Field(description="The kind of memory; `general` when no rule fits.")
    categories: list[Category] = Field(
        description="Every category the text's lines have, `category` first: a stored "
        "memory of several messages carries them all and is listed under each.")
    confidence: float = Field(ge=0, le=1, description="How sure the rules are, 0–1.")
    scores: dict[str, float] = Field(
        description="Rule evidence per category: summed pattern weights (strong 3, medium "
        "2, weak 1), not probabilities. The category with the most evidence wins."
    )
    entities: EntitiesPublic
    subtopics: list[str] = Field(description="A few labels for what the text is about.")
    importance: int = Field(ge=1, le=10, description="Estimated importance, 1–10.")
    small_talk: bool = Field(
        description="Pure greeting, thanks, acknowledgement or filler: nothing to remember."
    )

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> ClassifyPublic:
        """Build from :func:`app.classify.analyzer.analyze`'s result."""
        return cls(
            category=analysis.category,
            categories=list(analysis.categories),
            confidence=analysis.confidence,
            scores=analysis.scores,
            entities=EntitiesPublic.from_entities(analysis.entities),
            subtopics=list(analysis.subtopics),
            importance=analysis.importance,
            small_talk=analysis.small_talk,
        )
