"""Request and response models of `POST /debug/memory_dump`."""

from __future__ import annotations

from datetime import datetime
from enum import IntEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.validation import Namespace, SessionId


class CompressLevel(IntEnum):
    originals = 0
    compressed = 1
    both = 2


class DumpRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"namespace": "alice", "compress_level": 2, "state": "any", "limit": 50}]})

    namespace: Namespace
    compress_level: CompressLevel = Field(
        default=CompressLevel.both,
        description="0: original texts only; 1: compressed forms only; 2: both.")
    state: Literal["active", "compressed", "forgotten", "any"] = "any"
    session_id: SessionId | None = None
    offset: int = Field(default=0, ge=0, strict=True)
    limit: int = Field(default=200, ge=1, le=2000, strict=True)


class DumpScores(BaseModel):
    novelty: float
    entropy: float
    task: float
    emotion: float
    feedback: float = Field(description="Boost from explicit references, added to the total.")
    total: float = Field(description="The weight score the last pass decided on.")


class DumpItem(BaseModel):
    id: str
    session_id: str
    kind: Literal["chunk", "summary"]
    state: str
    tier: str
    protected: bool
    category: str
    importance: int
    msg_ids: list[str]
    summary_of: list[str] = Field(description="For a summary: the memories it covers.")
    summarized_by: str | None = Field(description="For a compressed memory: its summary.")
    original: str | None = Field(description="The full text (from the archive when "
                                 "compressed); absent at compress_level 1.")
    compressed: str | None = Field(description="The compressed form (triples, or a summary's "
                                   "text); null when there is none or at compress_level 0.")
    original_chars: int
    compressed_chars: int | None
    scores: DumpScores
    scored: bool = Field(description="False: no pass has scored the current text yet.")
    decision: str | None = Field(description="keep, candidate, frozen, hold, protected, "
                                 "restored, compressed or summary; null before any pass.")
    decided_at: datetime | None
    created_at: datetime | None
    time_start: datetime | None
    time_end: datetime | None


class DumpMetrics(BaseModel):
    pressure_score: float = Field(description="memory.pressure_score: active text size / "
                                  "capacity.")
    alarm_level: float = Field(description="The policy's memory_limit.")
    candidate_ratio: float = Field(description="compress.candidate_ratio: candidates among "
                                   "active non-summary memories (last decisions).")
    context_hit_rate: float | None = Field(description="context.hit_rate (smoothed).")
    active_chars: int
    capacity_chars: int


class MemoryDump(BaseModel):
    namespace: str
    compress_level: CompressLevel
    generated_at: datetime
    policy: str
    count: int = Field(description="Memories matching the filters (all pages).")
    offset: int
    limit: int
    metrics: DumpMetrics
    items: list[DumpItem]
