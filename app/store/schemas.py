"""Request and response models of the store and jobs routes."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from app.time_range import AcceptedTime
from app.validation import MessageId, Namespace, SessionId

Tag = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Label = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:/-]{1,64}$")]


class Role(StrEnum):
    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    msg_id: MessageId | None = Field(
        default=None,
        description="Stable id of the message in its session. Omitted: derived from the "
        "message's role, content and timestamp, so re-sending it is still recognised.",
    )
    role: Role = Field(description="Who said it: user, assistant, system or tool.")
    content: str = Field(min_length=1, description="The message text (not blank).")
    timestamp: AcceptedTime | None = Field(
        default=None, description="When it was said (ISO 8601; naive times are UTC; "
        "1970-01-01..2200-01-01 UTC)."
    )

    @field_validator("content")
    @classmethod
    def _not_blank(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("content is blank")
        return content


class StoreMode(StrEnum):
    """What a store's answer promises (`StoreRequest.wait`)."""

    built = "built"  # wait="built": the memories are built; their ids are in the answer
    findable = "findable"  # wait=true: durable, found by keyword and each turn's own vector
    durable = "durable"  # wait=false: durable, and found by keyword


class StoreRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{
                "namespace": "alice",
                "session_id": "2026-11-29-chat",
                "messages": [
                    {"msg_id": "1", "role": "user", "content": "下周二上午我要去体检"},
                    {"msg_id": "2", "role": "assistant", "content": "好的，我记下了。"},
                    {"msg_id": "3", "role": "user",
                     "content": "We decided to use LanceDB for the memory store."},
                ],
                "source": "telegram",
            }]
        },
    )

    namespace: Namespace = Field(description="Whose memory: a user, team or agent.")
    session_id: SessionId = Field(
        description="The conversation's id; storing it again adds only new or changed messages.")
    messages: list[MessageIn] = Field(
        description="The session's messages in order (all of them, or only the new ones with "
        "incremental=true).", min_length=1)
    source: Label = Field(default="api", description="Where it came from: telegram, voice…")
    branch: Label = Field(default="main", description=(
        "The conversation branch every memory of this session records. A session lives on "
        "one branch: re-sending it with another branch is a 409; store a fork under a "
        "session_id of its own."))
    tags: list[Tag] = Field(
        description="Tags every memory of this session gets.", default_factory=list, max_length=32)
    incremental: bool = Field(
        default=True, strict=True,
        description="true: store new and changed messages only. false: a session that is "
        "already stored is skipped outright.",
    )
    pinned: bool = Field(
        default=False, strict=True,
        description="true: pin every memory that holds a message of this call (also one "
        "sent before unchanged): always in `POST /v1/context`, never compressed or "
        "forgotten. false leaves existing pins as they are (unpin with PATCH).",
    )
    wait: bool | Literal["built", "findable"] = Field(
        default=True,
        description="What the answer promises. true (the default): the messages are durable "
        "and a recall made after the answer finds them, by keyword and by each new turn's "
        "own vector (200 with job_id: the memories are built or merged in the background, "
        "returned as provisional until then; their ids are in the job's result; more than 8 "
        "new messages are built before the answer instead, as with \"built\"). "
        "\"built\": the memories are built before the answer (200, with their ids in "
        "memories_created); the slowest answer, for a caller that needs the ids. false: the "
        "messages are durable and a recall finds them by keyword (202 and a job; the "
        "fastest answer). \"findable\" is accepted as another name for true.",
    )

    @field_validator("wait", mode="before")
    @classmethod
    def _a_known_mode(cls, wait: object) -> object:
        if wait is True or wait is False or wait in ("built", "findable"):
            return wait
        raise ValueError('wait must be true, false or "built"')

    @property
    def mode(self) -> StoreMode:
        if self.wait == "built":
            return StoreMode.built
        return StoreMode.durable if self.wait is False else StoreMode.findable


class StoreStatus(StrEnum):
    stored = "stored"
    unchanged = "unchanged"
    skipped = "skipped"
    queued = "queued"


class StoreResult(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "namespace": "alice", "session_id": "2026-11-29-chat", "status": "stored", "total": 3,
        "new": 3, "updated": 0, "skipped": 0, "memories_created": ["mem_3f9a1c2b7d4e5f60"],
        "memories_updated": [], "firewalled": [], "job_id": None}]})

    namespace: str = Field(description="The namespace stored into.")
    session_id: str = Field(description="The session stored.")
    status: StoreStatus = Field(
        description="stored (also with wait=true while the build follows: see job_id), "
        "unchanged, skipped, or queued (wait=false).")
    total: int = Field(description="Messages in the request (after merging exact repeats).")
    new: int = Field(description="Messages not stored before.")
    updated: int = Field(description="Stored messages whose content changed.")
    skipped: int = Field(description="Messages already stored unchanged.")
    memories_created: list[str] = Field(
        description="Ids of the memories built anew (wait=\"built\", or wait=true with more "
        "than 8 new messages; otherwise in the job's result once built).", default_factory=list)
    memories_updated: list[str] = Field(
        description="Ids of existing memories rebuilt because their messages changed "
        "(wait=\"built\", or wait=true with more than 8 new messages; otherwise in the "
        "job's result).", default_factory=list)
    firewalled: list[str] = Field(
        default_factory=list,
        description="msg_ids kept in the raw log but made into no memory: Engram's own "
        "text sent back (an injection block, or an assistant or system message quoting "
        "stored memories; see docs/recall-firewall.md).")
    job_id: str | None = Field(default=None, description="The background build of a "
                               "wait=true or wait=false store: poll /v1/jobs/{id}.")


class JobState(StrEnum):
    queued = "queued"
    done = "done"
    failed = "failed"


class JobPublic(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "id": "job_5e6f7a8b9c0d1e2f", "namespace": "alice", "session_id": "2026-11-29-chat",
        "state": "queued", "created_at": "2026-11-29T09:13:05Z",
        "updated_at": "2026-11-29T09:13:05Z", "result": None, "error": None}]})

    id: str = Field(description="The job's id.")
    namespace: str = Field(description="The namespace stored into.")
    session_id: str = Field(description="The session stored.")
    state: JobState = Field(description="queued, done or failed.")
    created_at: datetime | None = Field(description="When the store was accepted (UTC).")
    updated_at: datetime | None = Field(description="When the job last changed state (UTC).")
    result: StoreResult | None = Field(default=None, description="The store's result, once done.")
    error: str | None = Field(default=None, description="Why it failed, if it did.")
