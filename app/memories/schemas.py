"""Public shapes of memories, sessions and their listings."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.classify.categories import Category
from app.storage.records import MemoryRecord, SessionRecord


class Tier(StrEnum):
    session = "session"
    daily = "daily"
    longterm = "longterm"


class MemoryState(StrEnum):
    active = "active"
    compressed = "compressed"
    forgotten = "forgotten"


class WeightScores(BaseModel):
    novelty: float
    entropy: float
    task: float
    emotion: float
    total: float


class MemoryPublic(BaseModel):
    id: str
    namespace: str
    session_id: str
    text: str
    category: str
    category_confidence: float
    importance: int = Field(ge=1, le=10)
    tags: list[str]
    entities: dict[str, list[str]]
    subtopics: list[str]
    msg_ids: list[str] = Field(description="Every message this memory covers, in order.")
    msg_count: int
    start_msg: str
    end_msg: str
    speaker_pattern: str
    time_start: datetime | None
    time_end: datetime | None
    source: str
    branch: str
    tier: Tier
    state: MemoryState
    protected: bool
    hit_count: int
    access_count: int
    last_accessed: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    language: str
    weight: WeightScores
    summary_of: list[str]
    pinned: bool = Field(description="Pinned by the client: always in `POST /v1/context`, "
                         "never compressed or forgotten.")
    score: float | None = Field(
        default=None, description="Only when listed with `q=`: the search relevance "
        "(higher is better; results are ordered by it).")

    @classmethod
    def from_record(cls, m: MemoryRecord, *, score: float | None = None) -> MemoryPublic:
        return cls(
            id=m.id, namespace=m.namespace, session_id=m.session_id, text=m.text,
            category=m.category, category_confidence=round(m.category_confidence, 4),
            importance=m.importance, tags=m.tags, entities=json.loads(m.entities or "{}"),
            subtopics=m.subtopics, msg_ids=m.msg_ids, msg_count=m.msg_count,
            start_msg=m.start_msg, end_msg=m.end_msg, speaker_pattern=m.speaker_pattern,
            time_start=m.time_start, time_end=m.time_end, source=m.source, branch=m.branch,
            tier=Tier(m.tier), state=MemoryState(m.state), protected=m.protected,
            hit_count=m.hit_count, access_count=m.access_count, last_accessed=m.last_accessed,
            created_at=m.created_at, updated_at=m.updated_at, language=m.language,
            weight=WeightScores(novelty=m.score_novelty, entropy=m.score_entropy,
                                task=m.score_task, emotion=m.score_emotion,
                                total=m.weight_score),
            summary_of=m.summary_of, pinned=m.pinned, score=score,
        )


class MessagePublic(BaseModel):
    msg_id: str = Field(description="The message's id in its session.")
    role: str = Field(description="Who said it: `user`, `assistant`, `system` or `tool`.")
    content: str = Field(description="The message text as stored.")
    timestamp: datetime | None = Field(
        description="When it was said in the conversation (the store time when the client "
        "sent none).")


class MemoryMessages(BaseModel):
    memory_id: str
    items: list[MessagePublic] = Field(description="The memory's messages, in order.")
    count: int
    missing: list[str] = Field(
        description="Ids the memory covers that the raw log no longer holds (deleted since).")


class MemoryList(BaseModel):
    items: list[MemoryPublic]
    count: int = Field(description="Memories matching the filters (all pages).")
    offset: int
    limit: int


class SessionPublic(BaseModel):
    namespace: str
    session_id: str
    source: str
    branch: str
    stored_at: datetime | None
    updated_at: datetime | None
    message_count: int
    chunk_count: int
    chunk_ids: list[str]
    first_msg: str | None
    last_msg: str | None
    time_start: datetime | None
    time_end: datetime | None

    @classmethod
    def from_record(cls, s: SessionRecord) -> SessionPublic:
        return cls.model_validate(s, from_attributes=True)


class SessionList(BaseModel):
    items: list[SessionPublic]
    count: int


class Deleted(BaseModel):
    deleted: bool = True
    memories_deleted: int = 0
    memories_rebuilt: list[str] = Field(default_factory=list)


class AccessRequest(BaseModel):
    note: str = Field(default="", max_length=1000, description="Why it was accessed.")


class MemoryUpdate(BaseModel):
    """Fields a client may edit; a new text is re-embedded and re-analysed."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(default=None, min_length=1, max_length=20_000)
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = Field(
        default=None, max_length=32)
    category: Category | None = None
    importance: int | None = Field(default=None, ge=1, le=10, strict=True,
                                   description="Overrides the estimate from now on.")
    protected: bool | None = Field(default=None, strict=True,
                                   description="Protected memories are never compressed "
                                   "or forgotten.")
    pinned: bool | None = Field(default=None, strict=True,
                                description="Pinned memories are always in the context "
                                "(`POST /v1/context`) and never compressed or forgotten; "
                                "logged as `pinned` / `unpinned`.")

    @property
    def changes(self) -> dict[str, Any]:
        """The fields to change: those given with a value (null means "leave as it is")."""
        return self.model_dump(include=self.model_fields_set, exclude_none=True)

    @model_validator(mode="after")
    def _something_to_change(self) -> MemoryUpdate:
        if not self.changes:
            raise ValueError("nothing to update: give text, tags, category, importance, "
                             "protected or pinned")
        if "text" in self.model_fields_set and self.text is not None and not self.text.strip():
            raise ValueError("text is blank")
        return self


class EventPublic(BaseModel):
    id: str
    event: str
    note: str
    timestamp: datetime | None
    metadata: dict[str, Any]


class Evolution(BaseModel):
    memory_id: str
    events: list[EventPublic]
    summary: str = Field(description="One line per event, with icons: 🆕 ✏️ 📝 ⬆️ 🔀 🗜️ 🗑️ ♻️ "
                         "📌 (pinned) 📍 (unpinned)")


class ForgetResult(BaseModel):
    namespace: str
    forgotten: list[str]


class NamespacePublic(BaseModel):
    namespace: str
    memories: int = Field(description="Memories of every state (active, compressed, "
                          "forgotten).")
    sessions: int = Field(description="Sessions in the ledger.")
    pinned: int = Field(description="Pinned memories.")
    last_stored_at: datetime | None = Field(description="When a store last changed the "
                                            "namespace's sessions.")


class NamespaceList(BaseModel):
    namespaces: list[NamespacePublic] = Field(
        description="Sorted by name: every namespace for an admin key (or without keys), "
        "the key's own namespaces that hold something for a scoped key.")
