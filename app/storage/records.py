"""Rows of the LanceDB tables as typed records (storage-level; the API has its own schemas)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Self

KEY_SEPARATOR = "\x1f"  # unit separator: cannot occur in validated names or ids


def message_key(namespace: str, session_id: str, msg_id: str) -> str:
    return KEY_SEPARATOR.join((namespace, session_id, msg_id))


def session_key(namespace: str, session_id: str) -> str:
    return KEY_SEPARATOR.join((namespace, session_id))


class _Record:
    """Conversion between dataclass records and Arrow rows."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Self:
        names = _field_names(cls)
        # A null column (a row written before that column existed) takes the field default.
        return cls(**{k: v for k, v in row.items() if k in names and v is not None})

    def to_row(self) -> dict[str, Any]:
        # Shallow: Arrow copies every value when it builds its table, so the deep copy of
        # `dataclasses.asdict` (a 384-float vector copied float by float: ~1 ms a memory,
        # most of a small append's row conversion) buys nothing. Fields hold only scalars,
        # datetimes and lists of scalars.
        return {name: getattr(self, name) for name in _field_names(type(self))}


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    """The field names of a record class, computed once (per row it cost a `fields()`)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(
            f.name for f in dataclasses.fields(cls))
    return names


@dataclass
class MessageRecord(_Record):
    namespace: str
    session_id: str
    msg_id: str
    seq: int
    role: str = "user"
    content: str = ""
    content_hash: str = ""
    timestamp: datetime | None = None
    received_at: datetime | None = None
    source: str = "api"
    branch: str = "main"
    tags: list[str] = field(default_factory=list)
    state: str = "pending"  # pending: in the raw log, memories not yet built; done
    job_id: str | None = None
    pinned: bool = False  # stored with `pinned: true`: its build pins its memories (0006)
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = message_key(self.namespace, self.session_id, self.msg_id)

    @property
    def time(self) -> datetime | None:
        return self.timestamp or self.received_at


@dataclass
class MemoryRecord(_Record):
    id: str
    namespace: str
    session_id: str
    text: str = ""
    vector: list[float] | None = None
    content_hash: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    time_start: datetime | None = None
    time_end: datetime | None = None
    source: str = "api"
    branch: str = "main"
    tags: list[str] = field(default_factory=list)
    subtopics: list[str] = field(default_factory=list)
    entities: str = "{}"
    speaker_pattern: str = ""
    start_msg: str = ""
    end_msg: str = ""
    start_seq: int = 0
    end_seq: int = 0
    part: int = 0
    msg_ids: list[str] = field(default_factory=list)
    msg_count: int = 0
    category: str = "general"
    category_confidence: float = 0.0
    importance: int = 5
    importance_overridden: bool = False
    hit_count: int = 0
    access_count: int = 0
    last_accessed: datetime | None = None
    tier: str = "session"
    state: str = "active"
    protected: bool = False
    score_novelty: float = 0.0
    score_entropy: float = 0.0
    score_task: float = 0.0
    score_emotion: float = 0.0
    weight_score: float = 0.0
    summary_of: list[str] = field(default_factory=list)
    embedding_model: str = ""
    language: str = "en"
    # Compression (migration 0004): boost from explicit references, the content hash the
    # dimension scores belong to, and the last compression decision with its time.
    score_feedback: float = 0.0
    score_hash: str = ""
    decision: str = ""
    decided_at: datetime | None = None
    # Pinned by the client (migration 0006): always in the context, never compressed or
    # forgotten.
    pinned: bool = False
    # Every category the memory's lines have, `category` first (migration 0007); empty for
    # memories written before it or by a path that gives only `category`.
    categories: list[str] = field(default_factory=list)


@dataclass
class SessionRecord(_Record):
    namespace: str
    session_id: str
    source: str = "api"
    branch: str = "main"
    stored_at: datetime | None = None
    updated_at: datetime | None = None
    message_count: int = 0
    chunk_count: int = 0
    chunk_ids: list[str] = field(default_factory=list)
    first_msg: str | None = None
    last_msg: str | None = None
    time_start: datetime | None = None
    time_end: datetime | None = None
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = session_key(self.namespace, self.session_id)


@dataclass
class EventRecord(_Record):
    id: str
    memory_id: str
    namespace: str
    event: str
    note: str = ""
    timestamp: datetime | None = None
    metadata: str = "{}"


@dataclass
class ArchiveRecord(_Record):
    """The full original text of a compressed memory (restorable byte for byte)."""

    memory_id: str
    namespace: str
    session_id: str
    text: str = ""
    content_hash: str = ""
    compressed_text: str = ""
    summary_id: str = ""
    archived_at: datetime | None = None
    metadata: str = "{}"


@dataclass
class JobRecord(_Record):
    id: str
    namespace: str
    session_id: str
    state: str = "queued"  # queued | done | failed
    created_at: datetime | None = None
    updated_at: datetime | None = None
    result: str = "{}"
    error: str | None = None


def new_event(
    memory: MemoryRecord, event: str, note: str, when: datetime, metadata: dict[str, Any],
    *, event_id: str | None = None,
) -> EventRecord:
    """An event of `memory`. Pass a deterministic `event_id` where a replay must not log twice."""
    return EventRecord(
        id=event_id or f"{memory.id}:{event}:{uuid.uuid4().hex[:16]}",
        memory_id=memory.id, namespace=memory.namespace, event=event, note=note,
        timestamp=when, metadata=json.dumps(metadata, ensure_ascii=False, default=str),
    )
