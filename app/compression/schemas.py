"""Request and response models of the compression routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.compression.policy import Policy
from app.validation import Namespace

PresetName = Literal["default", "customer_service", "counselling", "short_dialogue",
                     "long_technical", "noisy_chitchat"]


class PolicyChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    preset: PresetName = "default"
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Any `Policy` field to change, e.g. {\"base_threshold\": 0.35, "
        "\"weights\": {\"task\": 0.6}}.")


class PolicyConfig(BaseModel):
    """What a namespace chose: a preset with overrides, and optionally a shadow policy."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"preset": "customer_service", "overrides": {"base_threshold": 0.35},
         "shadow": {"preset": "noisy_chitchat"}},
    ]})

    preset: PresetName = "default"
    overrides: dict[str, Any] = Field(default_factory=dict)
    shadow: PolicyChoice | None = Field(
        default=None, description="Evaluated beside the live policy on every pass; its "
        "differing decisions are reported, never applied.")


class FeedbackView(BaseModel):
    hit_rate: float | None = Field(description="Smoothed context hit rate (None: no recall "
                                   "checked yet).")
    recalled_total: int
    referenced_total: int
    references_total: int = Field(description="Explicit reference phrases seen.")
    checked_at: datetime | None
    learned_weights: dict[str, float] | None = Field(
        description="Dimension weights moved by feedback (None: the preset's).")


class PolicyView(BaseModel):
    namespace: str
    config: PolicyConfig
    chosen: bool = Field(description="False: the namespace chose nothing; settings decide.")
    live: Policy = Field(description="The effective live policy, learned weights included.")
    shadow: Policy | None
    feedback: FeedbackView


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: Namespace | None = Field(
        default=None, description="One namespace; default: every namespace the key may use.")
    dry_run: bool = Field(default=False, strict=True,
                          description="Decide and report, change nothing.")
    force: bool = Field(default=False, strict=True, description=(
        "Trigger even when the memory pressure is below the alarm level (the candidate "
        "ratio still applies). Results say `forced`."))


class ShadowDiff(BaseModel):
    memory_id: str
    live: str
    shadow: str
    live_score: float
    shadow_score: float


class ShadowReport(BaseModel):
    policy: str
    differing: int = Field(description="Memories whose decisions differ.")
    by_pair: dict[str, int] = Field(description="Counts by `live→shadow` decision pair.")
    would_compress: int = Field(description="Memories the shadow policy would compress now.")
    examples: list[ShadowDiff] = Field(description="The first differing memories.")


class FailedProbe(BaseModel):
    memory_id: str = Field(description="The memory the probe was derived from.")
    question: str = Field(description="The sentence with its facts masked.")
    missing: list[str] = Field(description="Answer words found before the pass, not after.")


class GateReport(BaseModel):
    """The quality gate of one pass (docs/compression.md, "Quality gate")."""

    probes: int = Field(description="Probe questions derived from the memories to compress.")
    evaluated: int = Field(description="Probes whose answer recall found before the pass.")
    coverage: float = Field(description="Share of those answers still found after it.")
    bound: float = Field(description="The policy's min_coverage.")
    passed: bool = Field(description="False: the pass's compression was not committed.")
    failed_probes: int
    failed: list[FailedProbe] = Field(description="The first probes that lost answers.")
    reason: str | None = Field(default=None, description="Why nothing was compressed.")


class NamespaceResult(BaseModel):
    namespace: str
    ok: bool = True
    error: str | None = None
    dry_run: bool = False
    forced: bool = Field(default=False, description=(
        "Compression ran only because `force` skipped the pressure check."))
    policy: str = "default"
    started_at: datetime | None = None
    seconds: float = 0.0
    lock_seconds: float = Field(default=0.0, description="Time the namespace's write lock "
                                "was held (store calls of the namespace wait this long).")
    phases: dict[str, float] = Field(default_factory=dict, description=(
        "Seconds per phase: read, score, feedback, decide, prepare, write."))
    memories: int = 0
    stream: int = Field(default=0, description="Active, non-summary memories considered.")
    scored: int = Field(default=0, description="Memories (re)scored by this pass.")
    decisions: dict[str, int] = Field(default_factory=dict)
    candidate_ratio: float = 0.0
    max_window_ratio: float = 0.0
    windows_triggered: int = 0
    pressure: float = Field(default=0.0, description="Before the pass.")
    pressure_after: float = 0.0
    pressure_alarm: bool = False
    compressed: list[str] = Field(default_factory=list)
    summaries: list[str] = Field(default_factory=list)
    held: list[str] = Field(default_factory=list, description="Newly protected by the "
                            "emergency hold.")
    promoted: list[str] = Field(default_factory=list, description="Made long-term facts "
                                "by the age pass.")
    aged: list[str] = Field(default_factory=list, description=(
        "Old, low-value memories the age rule chose to compress into long-term summaries "
        "(in `compressed` once written), whatever the pressure."))
    skipped_groups: int = Field(default=0, description="Groups left alone because a source "
                                "changed while the pass ran.")
    text_chars_before: int = 0
    text_chars_after: int = 0
    archived_chars: int = 0
    references: int = Field(default=0, description="Explicit references boosted.")
    hit_rate: float | None = None
    weights: dict[str, float] = Field(default_factory=dict)
    shadow: ShadowReport | None = None
    gate: GateReport | None = Field(default=None, description=(
        "The quality gate, when the pass had something to compress."))


class PassResult(BaseModel):
    trigger: Literal["scheduled", "manual"]
    dry_run: bool
    force: bool
    started_at: datetime
    finished_at: datetime
    namespaces: list[NamespaceResult]
    failed: int = Field(description="Namespaces whose pass failed (the others ran).")
    compacted: list[str] = Field(default_factory=list, description="Tables compacted after "
                                 "the pass (when writes were idle).")


class CompressionStatus(BaseModel):
    enabled: bool
    interval_seconds: float
    running: bool
    heartbeat: datetime | None
    next_run_at: datetime | None
    passes: int = Field(description="Passes since start-up (scheduled and manual).")
    last_pass: PassResult | None = Field(description="The last pass, namespaces limited to "
                                         "those the key may see.")
    namespaces: dict[str, NamespaceResult] = Field(
        description="The last result of each namespace (not dry runs), since start-up.")
