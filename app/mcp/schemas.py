"""What the MCP tools return: the REST shapes, cut down to what an assistant reads.

An LLM pays for every token of a tool result, so the score breakdowns and bookkeeping columns
of the REST responses are left out; the ids stay, so a memory can be forgotten or looked up.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from app.context.schemas import ContextResponse
from app.memories.schemas import MemoryPublic
from app.recall.schemas import RecalledMemory, RecallResponse


class MemoryBrief(BaseModel):
    id: str = Field(description="Pass it to `forget`.")
    text: str
    category: str
    importance: int
    tier: str
    state: str
    session_id: str
    time_start: datetime | None
    time_end: datetime | None
    tags: list[str]
    pinned: bool
    score: float | None = Field(default=None, description="search_memories only: the "
                                "match's relevance, 0–1 (recall's scale), higher is better.")

    @classmethod
    def from_public(cls, memory: MemoryPublic) -> MemoryBrief:
        return cls(id=memory.id, text=memory.text, category=memory.category,
                   importance=memory.importance, tier=memory.tier.value,
                   state=memory.state.value, session_id=memory.session_id,
                   time_start=memory.time_start, time_end=memory.time_end, tags=memory.tags,
                   pinned=memory.pinned, score=memory.score)


class RecalledBrief(BaseModel):
    id: str
    text: str
    category: str
    tier: str
    session_id: str
    time_start: datetime | None
    score: float
    provisional: bool = Field(default=False, description="Stored with wait=false and not "
                              "built into a memory yet (its messages as sent).")

    @classmethod
    def from_recalled(cls, memory: RecalledMemory) -> RecalledBrief:
        return cls(id=memory.id, text=memory.text, category=memory.category,
                   tier=memory.tier.value, session_id=memory.session_id,
                   time_start=memory.time_start, score=round(memory.score, 4),
                   provisional=memory.provisional)


class RecallToolResult(BaseModel):
    block: str = Field(description="Ready to add to the system prompt; empty when nothing "
                       "relevant is stored.")
    count: int
    tokens: int
    memories: list[RecalledBrief]

    @classmethod
    def from_response(cls, response: RecallResponse) -> RecallToolResult:
        return cls(block=response.block, count=response.count, tokens=response.tokens,
                   memories=[RecalledBrief.from_recalled(m) for m in response.memories])


class ContextBrief(BaseModel):
    id: str
    text: str
    reason: str = Field(description="pinned, durable or latest_session.")
    category: str
    session_id: str
    time_start: datetime | None


class ContextToolResult(BaseModel):
    block: str = Field(description="Put it into the system prompt; empty when nothing is "
                       "stored yet.")
    count: int
    tokens: int
    left_out: int = Field(description="Memories that did not fit the budget.")
    memories: list[ContextBrief]

    @classmethod
    def from_response(cls, response: ContextResponse) -> ContextToolResult:
        return cls(block=response.block, count=response.count, tokens=response.tokens,
                   left_out=response.left_out, memories=[
                       ContextBrief(id=m.id, text=m.text, reason=m.reason.value,
                                    category=m.category, session_id=m.session_id,
                                    time_start=m.time_start) for m in response.memories])


class MemoryListResult(BaseModel):
    count: int = Field(description="Memories matching the filters, all pages.")
    offset: int
    items: list[MemoryBrief]
