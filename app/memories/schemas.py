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


AS_OF = (
    "A point in time (ISO 8601; naive: UTC): only the memories that existed then, by "
    "conversation time: those whose first message was said at or before it (a memory without "
    "message times counts from when it was stored). A memory whose messages go on past it is "
    "kept. Facts are superseded as they were then: a restatement said after it is not "
    "seen, so it does not go ahead of the fact it changes. Limits: a memory is shown as it "
    "is today (its current text, state, tier, importance, counts and categories), not as "
    "it read then: compressed originals are not restored (a summary stands for them from its "
    "earliest memory's time on, and may hold what its later memories said), forgotten or "
    "deleted memories do not come back, edits are not undone, and a memory's evolution log "
    "(`GET /v1/memories/{id}/evolution`) lists every event, also `superseded` ones logged "
    "after it."
)


class WeightScores(BaseModel):
    novelty: float = Field(
        description="How new it was against the namespace when last scored (0..1).")
    entropy: float = Field(description="Information density of the text (0..1).")
    task: float = Field(description="Task relevance: decisions, dates, to-dos (0..1).")
    emotion: float = Field(description="Emotional weight (0..1).")
    total: float = Field(
        description="The weighted total the compression policy compares with its threshold "
        "(0..1).")


# What the response examples of the memory routes show (OpenAPI): one English memory.
_MEMORY_EXAMPLE: dict[str, Any] = {
    "id": "mem_3f9a1c2b7d4e5f60", "namespace": "alice", "session_id": "2026-11-29-chat",
    "text": "user: We decided to use LanceDB for the memory store.\nassistant: Noted: "
    "LanceDB, embedded, no server.",
    "category": "decision", "categories": ["decision"], "category_confidence": 0.91,
    "importance": 7,
    "tags": ["architecture"], "entities": {"org": ["LanceDB"]}, "subtopics": ["memory store"],
    "msg_ids": ["3", "4"], "msg_count": 2, "start_msg": "3", "end_msg": "4",
    "speaker_pattern": "user,assistant", "time_start": "2026-11-29T09:12:00Z",
    "time_end": "2026-11-29T09:13:00Z", "source": "telegram", "branch": "main",
    "tier": "session", "state": "active", "protected": False, "hit_count": 2,
    "access_count": 0, "last_accessed": "2026-11-30T08:00:00Z",
    "created_at": "2026-11-29T09:13:05Z", "updated_at": "2026-11-29T09:13:05Z",
    "language": "en", "weight": {"novelty": 0.62, "entropy": 0.55, "task": 0.8,
                                 "emotion": 0.1, "total": 0.58},
    "summary_of": [], "pinned": False, "score": None,
}

class MemoryPublic(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_MEMORY_EXAMPLE]})

    id: str = Field(description="The memory's id (stable for the same chunk of the same session).")
    namespace: str = Field(description="The namespace (user or tenant) it belongs to.")
    session_id: str = Field(description="The session it was built from.")
    text: str = Field(
        description="The memory text: the chunk's lines, or its compressed or summary form.")
    category: str = Field(
        description="The main category (decision, preference, learning, task, progress, question,"
        " note, general).")
    categories: list[str] = Field(
        description="Every category the memory's lines have, `category` (the main one) "
        "first; `?category=` lists the memory under each.")
    category_confidence: float = Field(
        description="The classifier's confidence in `category` (0..1).")
    importance: int = Field(
        description="1 (trivial) .. 10 (critical), from the classifier or an edit.", ge=1, le=10)
    tags: list[str] = Field(description="Tags given at store time or by an edit.")
    entities: dict[str, list[str]] = Field(
        description="Named things found in the text, by kind (person, place, org, date, ...).")
    subtopics: list[str] = Field(description="Key phrases of the text.")
    msg_ids: list[str] = Field(description="Every message this memory covers, in order.")
    msg_count: int = Field(description="How many messages it covers.")
    start_msg: str = Field(description="The first covered message's id.")
    end_msg: str = Field(description="The last covered message's id.")
    speaker_pattern: str = Field(
        description="Who spoke, in order (e.g. `user,assistant`); `summary` for a summary.")
    time_start: datetime | None = Field(
        description="When its first message was said (conversation time, UTC).")
    time_end: datetime | None = Field(
        description="When its last message was said (conversation time, UTC).")
    source: str = Field(
        description="Where the messages came from (the store's `source`, or `compression`).")
    branch: str = Field(description="The conversation branch it belongs to.")
    tier: Tier = Field(description="session, daily or longterm: how durable it is.")
    state: MemoryState = Field(description="active, compressed or forgotten.")
    protected: bool = Field(description="Protected from forgetting and compression by an edit.")
    hit_count: int = Field(description="Times recall returned it.")
    access_count: int = Field(description="Explicit accesses (`POST .../access`).")
    last_accessed: datetime | None = Field(
        description="When it was last returned or accessed (UTC).")
    created_at: datetime | None = Field(
        description="When the server stored it (store time, UTC; see `time_start` for when it was"
        " said).")
    updated_at: datetime | None = Field(description="When the server last changed it (UTC).")
    language: str = Field(description="zh or en: the text's main language.")
    weight: WeightScores = Field(description="The compression scores of its last scoring pass.")
    summary_of: list[str] = Field(
        description="For a summary: the ids of the memories it summarises.")
    pinned: bool = Field(description="Pinned by the client: always in `POST /v1/context`, "
                         "never compressed or forgotten.")
    score: float | None = Field(
        default=None, description="Only when listed with `q=`: the match's relevance on "
        "recall's 0–1 scale (`relevance` in a recall's `explain`, as its first search for "
        "the same text scores it); results are ordered by it.")

    @classmethod
    def from_record(cls, m: MemoryRecord, *, score: float | None = None) -> MemoryPublic:
        return cls(
            id=m.id, namespace=m.namespace, session_id=m.session_id, text=m.text,
            category=m.category,
            categories=[m.category, *(c for c in m.categories if c != m.category)],
            category_confidence=round(m.category_confidence, 4),
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
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "memory_id": "mem_3f9a1c2b7d4e5f60", "count": 2, "missing": [], "items": [
            {"msg_id": "1", "role": "user", "content": "下周二上午我要去体检",
             "timestamp": "2026-11-29T09:12:00Z"},
            {"msg_id": "2", "role": "assistant", "content": "好的，我记下了。",
             "timestamp": "2026-11-29T09:13:00Z"}]}]})

    memory_id: str = Field(description="The memory asked about.")
    items: list[MessagePublic] = Field(description="The memory's messages, in order.")
    count: int = Field(description="Messages listed in `items`.")
    missing: list[str] = Field(
        description="Ids the memory covers that the raw log no longer holds (deleted since).")


class MemoryList(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"items": [{**_MEMORY_EXAMPLE, "score": 0.7605}], "count": 1, "offset": 0,
         "limit": 50, "min_score": 0.35}]})

    items: list[MemoryPublic] = Field(description="This page of memories.")
    count: int = Field(description="Memories matching the filters (all pages); with `q=`, "
                       "the matches reaching `min_score` among the 50 best of each search.")
    offset: int = Field(description="Memories skipped before this page.")
    limit: int = Field(description="The page size asked for.")
    min_score: float | None = Field(
        default=None, description="Only with `q=`: the relevance a match needed to be "
        "listed (the call's `min_score`, else the configured floor).")


_SESSION_EXAMPLE: dict[str, Any] = {
    "namespace": "alice", "session_id": "2026-11-29-chat", "source": "telegram",
    "branch": "main", "stored_at": "2026-11-29T09:13:05Z",
    "updated_at": "2026-11-29T09:13:05Z", "message_count": 4, "chunk_count": 1,
    "chunk_ids": ["mem_3f9a1c2b7d4e5f60"], "first_msg": "1", "last_msg": "4",
    "time_start": "2026-11-29T09:10:00Z", "time_end": "2026-11-29T09:13:00Z"}


class SessionPublic(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_SESSION_EXAMPLE]})

    namespace: str = Field(description="The namespace it belongs to.")
    session_id: str = Field(description="The session's id as the client sent it.")
    source: str = Field(description="The store's `source` (e.g. telegram, api).")
    branch: str = Field(description="The branch it was stored on.")
    stored_at: datetime | None = Field(description="When it was first stored (UTC).")
    updated_at: datetime | None = Field(description="When a store last changed it (UTC).")
    message_count: int = Field(description="Messages the raw log holds for it.")
    chunk_count: int = Field(description="Memories built from it.")
    chunk_ids: list[str] = Field(description="The ids of those memories.")
    first_msg: str | None = Field(description="Its first message's id.")
    last_msg: str | None = Field(description="Its last message's id.")
    time_start: datetime | None = Field(description="When its first message was said (UTC).")
    time_end: datetime | None = Field(description="When its last message was said (UTC).")

    @classmethod
    def from_record(cls, s: SessionRecord) -> SessionPublic:
        return cls.model_validate(s, from_attributes=True)


class SessionList(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "items": [_SESSION_EXAMPLE], "count": 1}]})

    items: list[SessionPublic] = Field(description="The namespace's sessions.")
    count: int = Field(description="How many are listed.")


class Deleted(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"deleted": True, "memories_deleted": 1, "memories_rebuilt": []}]})

    deleted: bool = Field(default=True, description="Always true: what was asked is gone.")
    memories_deleted: int = Field(default=0, description="Memories deleted with it.")
    memories_rebuilt: list[str] = Field(
        description="Ids of memories rebuilt without the deleted message.", default_factory=list)


class AccessRequest(BaseModel):
    note: str = Field(default="", max_length=1000, description="Why it was accessed.")


class MemoryUpdate(BaseModel):
    """Fields a client may edit; a new text is re-embedded and re-analysed."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(
        description="A new text: re-embedded and re-analysed.", default=None, min_length=1,
        max_length=20_000)
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = Field(
        description="The new tags (replace the old ones).", default=None, max_length=32)
    category: Category | None = Field(
        default=None, description="The new category (one of the valid categories).")
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
    id: str = Field(description="The event's id.")
    event: str = Field(
        description="What happened: created, accessed, edited, compressed, forgotten, restored, "
        "...")
    note: str = Field(description="A free note (an access note, an edit's summary).")
    timestamp: datetime | None = Field(description="When it happened (store time, UTC).")
    metadata: dict[str, Any] = Field(
        description="Details of the event (e.g. the fields an edit changed).")


class Evolution(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "memory_id": "mem_3f9a1c2b7d4e5f60", "summary": "created, then accessed once",
        "events": [{"id": "evt_1", "event": "created", "note": "",
                    "timestamp": "2026-11-29T09:13:05Z", "metadata": {}}]}]})

    memory_id: str = Field(description="The memory asked about.")
    events: list[EventPublic] = Field(description="Its events, oldest first.")
    summary: str = Field(description="One line per event, with icons: 🆕 ✏️ 📝 ⬆️ 🔀 🗜️ 🗑️ ♻️ "
                         "📌 (pinned) 📍 (unpinned)")


class ForgetResult(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "namespace": "alice", "forgotten": ["mem_0b1c2d3e4f5a6b7c"]}]})

    namespace: str = Field(description="The namespace swept.")
    forgotten: list[str] = Field(description="Ids of the memories forgotten.")


class NamespacePublic(BaseModel):
    namespace: str = Field(description="The namespace's name.")
    memories: int = Field(description="Memories of every state (active, compressed, "
                          "forgotten).")
    sessions: int = Field(description="Sessions in the ledger.")
    pinned: int = Field(description="Pinned memories.")
    last_stored_at: datetime | None = Field(description="When a store last changed the "
                                            "namespace's sessions.")


class NamespaceList(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"namespaces": [
        {"namespace": "alice", "memories": 42, "sessions": 7, "pinned": 1,
         "last_stored_at": "2026-11-29T09:13:05Z"}]}]})

    namespaces: list[NamespacePublic] = Field(
        description="Sorted by name: every namespace for an admin key (or without keys), "
        "the key's own namespaces that hold something for a scoped key.")
