"""The API's JSON shapes as typed dicts (what the client returns), and the message input.

They follow the server's OpenAPI document (`/openapi.json`); keys a newer server adds are
simply present at run time. Shapes that only operators read (compression, debug dump) are
`JSONObject`.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

JSONObject = dict[str, Any]
Role = Literal["user", "assistant", "system", "tool"]
Language = Literal["auto", "zh", "en"]


class Message(TypedDict):
    """One chat message to store. `msg_id` omitted: derived from role, content and time."""

    role: Role
    content: str
    msg_id: NotRequired[str]
    timestamp: NotRequired[str]


class StoreResult(TypedDict):
    namespace: str
    session_id: str
    status: Literal["stored", "unchanged", "skipped", "queued"]
    total: int
    new: int
    updated: int
    skipped: int
    memories_created: list[str]
    memories_updated: list[str]
    firewalled: list[str]  # msg_ids of Engram's own text sent back: logged, no memory
    job_id: str | None


class Job(TypedDict):
    id: str
    namespace: str
    session_id: str
    state: Literal["queued", "done", "failed"]
    created_at: str | None
    updated_at: str | None
    result: StoreResult | None
    error: str | None


class RecalledMemory(TypedDict):
    id: str
    text: str
    msg_ids: list[str]
    session_id: str
    time_start: str | None
    time_end: str | None
    category: str
    tier: str
    importance: int
    branch: str
    tokens: int
    score: float
    reason: NotRequired[str]  # /v1/context: pinned | durable | latest_session
    layer: NotRequired[str]
    explain: NotRequired[JSONObject]
    trimmed: NotRequired[bool]
    # /v1/recall: stored with wait=false and not built yet (id "pending:<session>:<msg_id>")
    provisional: NotRequired[bool]


class RecallResult(TypedDict):
    namespace: str
    memories: list[RecalledMemory]
    count: int
    tokens: int
    max_tokens: int
    language: str
    block: str
    block_tokens: int
    query: NotRequired[str]
    search_text: NotRequired[str]
    min_score: NotRequired[float]
    reference: NotRequired[JSONObject | None]
    time_window: NotRequired[JSONObject | None]
    candidates: NotRequired[int]
    degraded: NotRequired[bool]  # the deadline skipped a stage (`skipped`: vector, keyword, …)
    skipped: NotRequired[list[str]]
    took_ms: NotRequired[float]


class WhyNotItem(TypedDict):
    """What kept one memory out of a recall (`verdict`: recalled, not_found, state, filter,
    not_candidate, below_threshold, duplicate, top_k, budget) in one readable `reason`."""

    memory_id: str
    verdict: str
    reason: str
    min_score: float
    filter: NotRequired[str | None]
    state: NotRequired[str | None]
    relevance: NotRequired[float | None]
    rank: NotRequired[int | None]
    tokens: NotRequired[int | None]
    tokens_left: NotRequired[int | None]
    covered_by: NotRequired[list[str]]
    cosine: NotRequired[float | None]
    explain: NotRequired[JSONObject | None]


class WhyNotResult(TypedDict):
    """`POST /v1/recall/why_not`: the recall's outcome and one item per asked memory."""

    namespace: str
    query: str
    min_score: float
    top_k: int
    max_tokens: int
    tokens: int
    recalled: list[str]
    candidates: int
    items: list[WhyNotItem]


class ContextResult(TypedDict):
    """`POST /v1/context`: each memory's `reason` says its section."""

    namespace: str
    memories: list[RecalledMemory]
    count: int
    tokens: int
    max_tokens: int
    language: str
    block: str
    block_tokens: int
    session_id: str | None
    left_out: int
    took_ms: float


class Memory(TypedDict):
    id: str
    namespace: str
    session_id: str
    text: str
    category: str
    category_confidence: float
    importance: int
    tags: list[str]
    entities: dict[str, list[str]]
    subtopics: list[str]
    msg_ids: list[str]
    msg_count: int
    start_msg: str
    end_msg: str
    speaker_pattern: str
    time_start: str | None
    time_end: str | None
    source: str
    branch: str
    tier: Literal["session", "daily", "longterm"]
    state: Literal["active", "compressed", "forgotten"]
    protected: bool
    hit_count: int
    access_count: int
    last_accessed: str | None
    created_at: str | None
    updated_at: str | None
    language: str
    weight: dict[str, float]
    summary_of: list[str]
    pinned: bool
    score: float | None  # with a text search (`query=`)


class MemoryList(TypedDict):
    items: list[Memory]
    count: int
    offset: int
    limit: int
    min_score: float | None  # with a text search: the relevance a match needed


class Event(TypedDict):
    id: str
    event: str
    note: str
    timestamp: str | None
    metadata: JSONObject


class Evolution(TypedDict):
    memory_id: str
    events: list[Event]
    summary: str


class Session(TypedDict):
    namespace: str
    session_id: str
    source: str
    branch: str
    stored_at: str | None
    updated_at: str | None
    message_count: int
    chunk_count: int
    chunk_ids: list[str]
    first_msg: str | None
    last_msg: str | None
    time_start: str | None
    time_end: str | None


class SessionList(TypedDict):
    items: list[Session]
    count: int


class Deleted(TypedDict):
    deleted: bool
    memories_deleted: int
    memories_rebuilt: list[str]


class ForgetResult(TypedDict):
    namespace: str
    forgotten: list[str]


class NamespaceInfo(TypedDict):
    namespace: str
    memories: int
    sessions: int
    pinned: int
    last_stored_at: str | None


class NamespaceList(TypedDict):
    namespaces: list[NamespaceInfo]


class ImportResult(TypedDict):
    namespace: str
    source_namespace: str
    messages: int
    memories: int
    events: int
    sessions: int
    archived: int
    reembedded: int


class ImportProgress(TypedDict):
    """The running (or latest) import into a namespace; see `Client.import_progress`."""

    namespace: str
    running: bool
    phase: Literal["idle", "waiting", "checking", "embedding", "writing", "building", "done",
                   "failed"]
    done: int
    total: int
    started_at: str | None
    updated_at: str | None


class ExportHeader(TypedDict):
    format: str
    version: int
    namespace: str
    exported_at: str
    embedding_model: str
    embedding_dim: int
    vectors: bool
    counts: dict[str, int]
