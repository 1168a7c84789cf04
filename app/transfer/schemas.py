"""The export file format (NDJSON), the rules an imported record must meet, and the result.

An export is UTF-8 JSON lines. The first line is the header; every other line is one record
`{"type": "message" | "memory" | "event" | "session" | "archive", "data": {...}}` whose `data`
has the columns of that table (timestamps as ISO 8601 strings; `vector` only when exported
with `vectors=true`). See docs/export-format.md.

An import file is untrusted client input, like a store request: the `Imported*` models below
apply the API's rules (id patterns, roles, non-empty content, sizes, the accepted time range)
and bound every enum and count. Namespaces, keys and ids in the file are never used as they
are: unknown columns (those included) are ignored, and the service derives every id again in
the target namespace.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from app.classify.categories import Category
from app.compression.rules import Decision
from app.memories.schemas import MemoryState, Tier
from app.store.schemas import Label, Role, Tag
from app.time_range import AcceptedTime
from app.validation import MessageId, Namespace, SessionId

EXPORT_FORMAT: Final = "engram-export"
EXPORT_VERSION: Final = 1

# Memory text limit: the one `PATCH /v1/memories/{id}` applies.
MAX_MEMORY_CHARS: Final = 20_000
MAX_NOTE_CHARS: Final = 5_000
MAX_JSON_CHARS: Final = 100_000


class ExportHeader(BaseModel):
    format: Literal["engram-export"] = EXPORT_FORMAT
    version: Literal[1] = EXPORT_VERSION
    namespace: Namespace
    exported_at: datetime
    embedding_model: Annotated[str, StringConstraints(max_length=200)]
    embedding_dim: int = Field(ge=1, le=65_536)
    vectors: bool
    counts: dict[str, int]


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("is blank")
    return text


def _json_object(text: str) -> str:
    """Columns stored as JSON text are parsed when read: they must hold a JSON object."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("is not JSON text") from None
    if not isinstance(value, dict):
        raise ValueError("is not a JSON object")
    return text


Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_MEMORY_CHARS),
                 AfterValidator(_not_blank)]
JsonObject = Annotated[str, StringConstraints(max_length=MAX_JSON_CHARS),
                       AfterValidator(_json_object)]
Short = Annotated[str, StringConstraints(max_length=200)]
# A memory's id inside the file: only a reference between the file's records.
FileId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_:.-]{1,128}$")]
Unit = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=1_000_000_000)]


class _Imported(BaseModel):
    # Unknown columns (an older or newer schema, and `namespace` / `key`) are ignored.
    model_config = ConfigDict(extra="ignore")


class ImportedSession(_Imported):
    session_id: SessionId
    source: Label = "api"
    branch: Label = "main"
    stored_at: AcceptedTime | None = None
    updated_at: AcceptedTime | None = None
    message_count: Count = 0
    chunk_count: Count = 0
    chunk_ids: list[FileId] = Field(default_factory=list, max_length=100_000)
    first_msg: MessageId | None = None
    last_msg: MessageId | None = None
    time_start: AcceptedTime | None = None
    time_end: AcceptedTime | None = None


class ImportedMessage(_Imported):
    session_id: SessionId
    msg_id: MessageId
    seq: Count
    role: Role
    # Its length is checked against `max_message_chars` (a setting) by the service.
    content: Annotated[str, StringConstraints(min_length=1), AfterValidator(_not_blank)]
    timestamp: AcceptedTime | None = None
    received_at: AcceptedTime | None = None
    source: Label = "api"
    branch: Label = "main"
    tags: list[Tag] = Field(default_factory=list, max_length=32)
    state: Literal["pending", "done"] = "pending"


class ImportedMemory(_Imported):
    id: FileId
    session_id: SessionId
    text: Text
    vector: list[Annotated[float, Field(allow_inf_nan=False)]] | None = Field(
        default=None, max_length=65_536)
    content_hash: Short = ""
    created_at: AcceptedTime
    updated_at: AcceptedTime | None = None
    time_start: AcceptedTime | None = None
    time_end: AcceptedTime | None = None
    source: Label = "api"
    branch: Label = "main"
    tags: list[Tag] = Field(default_factory=list, max_length=32)
    subtopics: list[Short] = Field(default_factory=list, max_length=64)
    entities: JsonObject = "{}"
    speaker_pattern: Short = ""
    start_msg: MessageId | Literal[""] = ""
    end_msg: MessageId | Literal[""] = ""
    start_seq: int = Field(default=0, ge=-1, le=1_000_000_000)
    end_seq: int = Field(default=0, ge=-1, le=1_000_000_000)
    part: int = Field(default=0, ge=0, le=1_000_000)
    msg_ids: list[MessageId] = Field(default_factory=list, max_length=10_000)
    msg_count: Count = 0
    category: Category = Category.GENERAL
    category_confidence: Unit = 0.0
    importance: int = Field(default=5, ge=1, le=10)
    importance_overridden: bool = False
    hit_count: Count = 0
    access_count: Count = 0
    last_accessed: AcceptedTime | None = None
    tier: Tier = Tier.session
    state: MemoryState = MemoryState.active
    protected: bool = False
    pinned: bool = False
    score_novelty: Unit = 0.0
    score_entropy: Unit = 0.0
    score_task: Unit = 0.0
    score_emotion: Unit = 0.0
    weight_score: Unit = 0.0
    summary_of: list[FileId] = Field(default_factory=list, max_length=10_000)
    embedding_model: Short = ""
    language: Annotated[str, StringConstraints(max_length=16)] = "en"
    score_feedback: Unit = 0.0
    score_hash: Short = ""
    decision: Decision | Literal[""] = ""
    decided_at: AcceptedTime | None = None


class ImportedEvent(_Imported):
    id: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    memory_id: FileId
    event: Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,32}$")]
    note: Annotated[str, StringConstraints(max_length=MAX_NOTE_CHARS)] = ""
    timestamp: AcceptedTime | None = None
    metadata: JsonObject = "{}"


class ImportedArchive(_Imported):
    memory_id: FileId
    text: Text
    content_hash: Short = ""
    compressed_text: Annotated[str, StringConstraints(max_length=MAX_MEMORY_CHARS)] = ""
    summary_id: FileId | Literal[""] = ""
    archived_at: AcceptedTime | None = None
    metadata: JsonObject = "{}"


class ImportResult(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "namespace": "alice-laptop", "source_namespace": "alice", "messages": 120,
        "memories": 24, "events": 61, "sessions": 5, "archived": 2, "reembedded": 24}]})

    namespace: str = Field(description="The namespace the records were imported into.")
    source_namespace: str = Field(description="The namespace the file was exported from.")
    messages: int = Field(description="Raw-log messages imported.")
    memories: int = Field(description="Memories imported.")
    events: int = Field(description="History events imported.")
    sessions: int = Field(description="Sessions imported.")
    archived: int = Field(description="Original texts of compressed memories.")
    reembedded: int = Field(description="Memories embedded again: no vectors in the file, or "
                            "a different embedding model.")


class ImportPhase(StrEnum):
    idle = "idle"  # no import into this namespace since the server started
    waiting = "waiting"  # for the namespace's lock (a store or another import holds it)
    checking = "checking"  # parsing and checking the file; nothing written yet
    embedding = "embedding"  # embedding memories again (`done` of `total` memories)
    writing = "writing"  # upserting the checked records
    building = "building"  # memories of imported pending messages (`done` of `total` sessions)
    done = "done"
    failed = "failed"


class ImportProgress(BaseModel):
    """Where the current (or latest) import into a namespace is, as this server process
    sees it."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "namespace": "alice-laptop", "running": True, "phase": "embedding", "done": 128,
        "total": 300, "started_at": "2026-11-29T09:20:00Z",
        "updated_at": "2026-11-29T09:20:41Z"}]})

    namespace: str = Field(description="The namespace being imported into.",
                           examples=["alice"])
    running: bool = Field(description="An import into this namespace is under way.")
    phase: ImportPhase = Field(description="The step it is at; `done` or `failed` once the "
                               "latest import ended, `idle` when there was none.")
    done: int = Field(description="Items of the phase finished so far (memories while "
                      "embedding, sessions while building).", examples=[128])
    total: int = Field(description="Items the phase has in all (0 when it does not count).",
                       examples=[300])
    started_at: datetime | None = Field(description="When the import was received (UTC).")
    updated_at: datetime | None = Field(description="When this progress last moved (UTC).")
