"""Compression policies: the parameters of the decision rules, and scenario presets.

SPEC.md §8 defaults (the `default` preset): base_threshold 0.4, emergency_hold 0.9,
window_size 20, entropy weight 0.3, task weight 0.5, memory_limit 0.7. The two remaining
dimension weights (novelty, emotion) share the rest, 0.1 each.

    customer_service  task 0.6: tickets, orders and promises are what must survive
    counselling       emotion 0.4, emotion ≥ 0.8 always kept: feelings are the content
    short_dialogue    threshold 0.6, window 6, no clustering: few turns, compress runs as
                      they are
    long_technical    protect terms, keep entity relations: names of systems and how they
                      connect
    noisy_chitchat    threshold 0.5, junk filter, emotion ≥ 0.7 always kept: drop filler,
                      keep what moved someone

A namespace picks a preset and may override any parameter; the choice is stored per
namespace. A second (shadow) policy can be set beside it: it is evaluated on every pass and
its differing decisions are reported, never applied.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.compression.scoring import Weights


class DimensionWeights(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    novelty: float = Field(default=0.1, ge=0, le=1)
    entropy: float = Field(default=0.3, ge=0, le=1)
    task: float = Field(default=0.5, ge=0, le=1)
    emotion: float = Field(default=0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _not_all_zero(self) -> Self:
        if self.novelty + self.entropy + self.task + self.emotion <= 0:
            raise ValueError("at least one dimension weight must be positive")
        return self

    def to_weights(self) -> Weights:
        return Weights(self.novelty, self.entropy, self.task, self.emotion)


class Policy(BaseModel):
    """Every parameter of one compression policy (see docs/compression.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="default", description="The preset it started from.")
    base_threshold: float = Field(default=0.4, ge=0, le=1, description=(
        "Low threshold: a weight score below it counts towards a candidate run."))
    emergency_hold: float = Field(default=0.9, ge=0, le=1, description=(
        "High threshold: a score above it protects the memory and freezes the candidates "
        "in the window before it."))
    run_length: int = Field(default=3, ge=1, le=100, description=(
        "Consecutive low scores that make candidates."))
    window_size: int = Field(default=20, ge=2, le=10_000, description=(
        "Memories per sliding window."))
    candidate_ratio: float = Field(default=0.6, ge=0, lt=1, description=(
        "A window triggers when its share of candidates exceeds this."))
    memory_limit: float = Field(default=0.7, gt=0, le=10, description=(
        "Alarm level of the memory pressure (active text size / capacity)."))
    capacity_chars: int | None = Field(default=None, ge=1_000, description=(
        "Capacity of the namespace in characters; default from settings."))
    weights: DimensionWeights = Field(default_factory=DimensionWeights)
    clustering: bool = Field(default=True, description=(
        "Cluster candidates by embedding and TF-IDF; off: each run of consecutive "
        "candidates is one group."))
    cluster_distance: float = Field(default=0.7, gt=0, le=2, description=(
        "Average-linkage distance (1 - similarity) below which candidates share a cluster."))
    max_cluster_size: int = Field(default=3, ge=1, le=100, description=(
        "Memories per summary at most: a summary is no longer than a chunk, so a larger "
        "cluster would keep a smaller share of each source."))
    summary_ratio: float = Field(default=0.5, gt=0, le=1, description=(
        "A summary keeps about this share of its sources' distinct text."))
    junk_filter: bool = Field(default=False, description=(
        "Small talk and near-empty memories score 0 (always candidates unless held)."))
    emotion_keep: float | None = Field(default=None, ge=0, le=1, description=(
        "Memories whose emotion score reaches this are never candidates."))
    protect_terms: bool = Field(default=False, description=(
        "Summaries list every technology, hashtag and quoted term of their sources."))
    keep_entity_relations: bool = Field(default=False, description=(
        "Compressed forms keep every relation between two named entities."))
    min_coverage: float = Field(default=0.97, ge=0, le=1, description=(
        "Quality gate: a pass is committed only if its probe questions (the facts of the "
        "memories it compresses) keep at least this share of their answers findable; "
        "0 turns the gate off."))

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> Self:
        if self.emergency_hold <= self.base_threshold:
            raise ValueError("emergency_hold must be above base_threshold")
        return self


PRESETS: dict[str, Policy] = {
    "default": Policy(),
    "customer_service": Policy(
        name="customer_service",
        weights=DimensionWeights(novelty=0.1, entropy=0.2, task=0.6, emotion=0.1)),
    "counselling": Policy(
        name="counselling",
        weights=DimensionWeights(novelty=0.15, entropy=0.2, task=0.25, emotion=0.4),
        emotion_keep=0.8),
    "short_dialogue": Policy(
        name="short_dialogue", base_threshold=0.6, window_size=6, clustering=False),
    "long_technical": Policy(
        name="long_technical", protect_terms=True, keep_entity_relations=True,
        weights=DimensionWeights(novelty=0.2, entropy=0.35, task=0.4, emotion=0.05)),
    "noisy_chitchat": Policy(
        name="noisy_chitchat", junk_filter=True, emotion_keep=0.7, base_threshold=0.5,
        weights=DimensionWeights(novelty=0.2, entropy=0.25, task=0.3, emotion=0.25)),
}


def build_policy(preset: str, overrides: dict[str, Any] | None = None) -> Policy:
    """The preset with `overrides` applied, validated as a whole.

    Raises:
        KeyError: unknown preset.
        pydantic.ValidationError: an override is out of range or contradicts another.
    """
    base = PRESETS[preset].model_dump()
    merged = {**base, **(overrides or {})}
    if overrides and isinstance(overrides.get("weights"), dict):
        merged["weights"] = {**base["weights"], **overrides["weights"]}
    merged["name"] = preset
    return Policy.model_validate(merged)
