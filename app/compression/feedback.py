"""Feedback that tunes compression per namespace, from what happens after a recall.

**Explicit**: a new message with a reference phrase ("as I said before", "记得刚才说的",
"和之前那个问题一样" — the recall module's parser) points at an earlier memory: the most
similar earlier memory of the namespace (cosine ≥ the model profile's `related_cosine`) gets
`REFERENCE_BOOST` added to its feedback score, capped at `MAX_BOOST`. The feedback score
is added to the weight score, so a memory users keep coming back to stops being a candidate.

**Implicit — context hit rate**: of the memories recalled (hit) since the last check, the
share that a later message actually used — it names at least `MIN_SHARED_TERMS` of the
memory's terms (entities and top concepts). The rate is smoothed (`HIT_RATE_SMOOTHING`)
and exported as `engram_context_hit_rate{namespace}`.

The same evidence moves the dimension weights online: for each dimension, the mean score
of referenced memories minus that of ignored ones is the direction ("what gets used is
task-heavy: weigh task more"). A step of `LEARNING_RATE` times that difference, each weight
kept within ±`WEIGHT_BOUND` of the preset's value and above `MIN_WEIGHT`, then renormalised.
Nothing moves until a check has `MIN_SAMPLES` recalled memories with both outcomes present.

Pure functions and a serialisable state; the service persists the state per namespace.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final

from app.compression.scoring import DIMENSIONS, Dimensions, Weights

REFERENCE_BOOST: Final = 0.1
MAX_BOOST: Final = 0.3
MIN_SHARED_TERMS: Final = 2
HIT_RATE_SMOOTHING: Final = 0.3  # weight of the newest check in the moving average
LEARNING_RATE: Final = 0.2
WEIGHT_BOUND: Final = 0.15
MIN_WEIGHT: Final = 0.02
MIN_SAMPLES: Final = 5


@dataclass
class FeedbackState:
    """What a namespace has learned; stored as JSON in the meta table."""

    preset: str = ""
    weights: dict[str, float] | None = None  # learned weights; None: the preset's
    hit_rate: float | None = None
    recalled_total: int = 0
    referenced_total: int = 0
    references_total: int = 0  # explicit reference phrases seen
    checked_at: datetime | None = None
    history: list[dict[str, Any]] = field(default_factory=list)  # last few checks
    # Recalled memories awaiting a follow-up message: [{"id": ..., "at": iso time}].
    pending: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> str:
        data = asdict(self)
        data["checked_at"] = self.checked_at.isoformat() if self.checked_at else None
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str | None) -> FeedbackState:
        if not raw:
            return cls()
        data = json.loads(raw)
        checked = data.pop("checked_at", None)
        state = cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
        state.checked_at = datetime.fromisoformat(checked) if checked else None
        return state


def memory_terms(entities_json: str, *, concepts: int = 6) -> list[str]:
    """The terms that show a memory was used: named entities and its top concepts."""
    try:
        data = json.loads(entities_json or "{}")
    except ValueError:
        return []
    named = [*data.get("technologies", []), *data.get("proper_nouns", []),
             *data.get("hashtags", []), *data.get("quotes", []), *data.get("bigrams", [])]
    return list(dict.fromkeys([*named, *data.get("concepts", [])[:concepts]]))


def is_referenced(terms: Sequence[str], text: str, *, min_shared: int = MIN_SHARED_TERMS
                  ) -> bool:
    """Whether `text` names at least `min_shared` of `terms` (or all, when fewer)."""
    if not terms:
        return False
    lowered = text.casefold()
    shared = sum(1 for t in terms if t.casefold() in lowered)
    return shared >= min(min_shared, len(terms))


def add_boost(current: float) -> float:
    return min(MAX_BOOST, current + REFERENCE_BOOST)


def smoothed_rate(previous: float | None, rate: float) -> float:
    if previous is None:
        return rate
    return (1 - HIT_RATE_SMOOTHING) * previous + HIT_RATE_SMOOTHING * rate


def adjust_weights(base: Weights, current: Weights, used: Sequence[Dimensions],
                   ignored: Sequence[Dimensions]) -> Weights:
    """One bounded online step of the dimension weights (see the module docstring).

    Args:
        base: the preset's weights (the bounds are around these).
        current: the weights learned so far.
        used: dimension scores of recalled memories that were referenced later.
        ignored: those of recalled memories nobody referenced.
    """
    if len(used) + len(ignored) < MIN_SAMPLES or not used or not ignored:
        return current
    b, c = base.normalised().as_dict(), current.normalised().as_dict()
    stepped: dict[str, float] = {}
    for name in DIMENSIONS:
        mean_used = sum(getattr(d, name) for d in used) / len(used)
        mean_ignored = sum(getattr(d, name) for d in ignored) / len(ignored)
        stepped[name] = c[name] + LEARNING_RATE * (mean_used - mean_ignored)
    # Clip to the bounds and renormalise, a few rounds: renormalising can push a weight
    # back over its bound, clipping again brings it home (converges in 2–3 rounds).
    for _ in range(5):
        for name in DIMENSIONS:
            low, high = max(MIN_WEIGHT, b[name] - WEIGHT_BOUND), b[name] + WEIGHT_BOUND
            stepped[name] = min(high, max(low, stepped[name]))
        total = sum(stepped.values())
        stepped = {name: value / total for name, value in stepped.items()}
    return Weights.from_dict(stepped)
