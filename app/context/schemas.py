"""Request and response models of `POST /v1/context`."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from app.recall.schemas import BlockLanguage, RecalledMemory
from app.validation import Namespace, SessionId


class ContextReason(StrEnum):
    pinned = "pinned"  # pinned by the client
    durable = "durable"  # long-term fact, summary, or an important decision / preference
    latest_session = "latest_session"  # part of the latest session's gist


class ContextRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"namespace": "alice", "max_tokens": 800}]},
    )

    namespace: Namespace = Field(description="Whose memories; no other namespace is read.")
    max_tokens: int | None = Field(
        default=None, ge=1, le=32_000, strict=True,
        description="Token budget of the returned memory texts (default 1,500, "
        "`ENGRAM_CONTEXT_MAX_TOKENS`), counted as recall counts them. The injection block "
        "adds a preface and a date per memory on top (`block_tokens`).")
    language: BlockLanguage = Field(
        default=BlockLanguage.auto,
        description="Language of the injection block's template; auto follows the "
        "memories returned (Chinese when most of them are).")
    session_id: SessionId | None = Field(
        default=None,
        description="The session whose gist comes last (default: the session stored most "
        "recently). A session the namespace does not hold adds no gist.")


class ContextMemory(RecalledMemory):
    """A memory as recall returns it, with why the context holds it. There is no query:
    `score` is the memory's importance / 10 and `explain` holds no query match."""

    reason: ContextReason = Field(description="pinned, durable or latest_session: the "
                                  "section it belongs to (the order of `memories`).")


class ContextResponse(BaseModel):
    namespace: str = Field(description="The namespace asked about.")
    memories: list[ContextMemory] = Field(
        description="Pinned memories first, then durable facts, then the latest session's "
        "gist (in the session's order).")
    count: int = Field(description="Memories in the block.")
    tokens: int = Field(description="Sum of the memories' tokens; never above max_tokens.")
    max_tokens: int = Field(description="The token budget used.")
    language: str = Field(description="Language of the block: zh or en.")
    block: str = Field(description="Ready to append to the system prompt, in recall's "
                       "format. Empty when the namespace holds nothing to give.")
    block_tokens: int = Field(description="Tokens of `block` under the same tokenizer.")
    session_id: str | None = Field(description="The session the gist was taken from.")
    left_out: int = Field(description="Memories of the three sections that did not fit the "
                          "budget.")
    took_ms: float = Field(description="Server time spent, in milliseconds.")
