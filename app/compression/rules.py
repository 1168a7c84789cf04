"""The compression decision rules of SPEC.md §8, as pure functions over score sequences.

The input is a namespace's stream: its active, non-summary memories in time order, each
with its weight score. Rules, with `low` = base_threshold and `high` = emergency_hold:

1. **Runs.** `run_length` (3) or more consecutive scores strictly below `low` make every
   memory of the run a *candidate*. A shorter run is kept. A memory that may not be
   compressed (protected by the client, restored by a user, or carrying the policy's keep
   signal such as strong emotion) ends a run like a high score does.
2. **Emergency hold.** A score strictly above `high` *holds* that memory — it becomes
   protected for good (never compressed, like `chattr +i`) — and *freezes* every candidate
   among the `window_size` memories before it: they stay as they are, because what led up
   to an important moment is context for it. Frozen is re-derived on every pass from the
   same scores, so it lasts as long as the held memory does (always).
3. **Window trigger.** A window of `window_size` memories slides over the stream (one
   window of the whole stream when it is shorter). A window *triggers* when its share of
   candidates exceeds `candidate_ratio` (60 %) **and** the namespace's memory pressure
   (active text size / capacity) has reached the alarm level `memory_limit` (0.7). Every
   candidate inside a triggered window is compressed. `force` skips the pressure check
   only (the ratio still applies); reports say when it was used.
4. **Age.** Independently (no run, window or pressure needed), a memory older than
   `age_days` (30, by message time) whose score is low — strictly below `low`, eligible, not
   frozen, without the keep signal — is compressed like a candidate of a triggered window:
   its long-term summary replaces it in recall and its original goes to the archive. An
   old memory that is not low (kept, held) becomes a long-term fact as it is: tier
   `longterm`.

Thresholds are strict: a score equal to `low` is not low, equal to `high` is not a hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum


class Decision(StrEnum):
    keep = "keep"  # stays as it is
    candidate = "candidate"  # in a low run; compressed once its window triggers
    frozen = "frozen"  # a candidate frozen by a later emergency hold
    hold = "hold"  # above the emergency hold: protected from now on
    protected = "protected"  # protected by the client: never a candidate
    restored = "restored"  # restored by a user: never a candidate again
    compress = "compress"  # candidate in a triggered window: compressed by this pass
    # Outside the stream:
    compressed = "compressed"  # reduced to triples, original text in the archive
    summary = "summary"  # a summary written by compression


@dataclass(frozen=True, slots=True)
class StreamItem:
    score: float
    eligible: bool = True  # False: protected / restored, never a candidate
    keep: bool = False  # the policy's keep signal (emotion_keep): never low
    ineligible_as: Decision = Decision.protected
    old: bool = False  # older than the age limit (rule 4)


@dataclass(frozen=True)
class RuleParams:
    low: float = 0.4
    high: float = 0.9
    run_length: int = 3
    window_size: int = 20
    candidate_ratio: float = 0.6
    memory_limit: float = 0.7


@dataclass
class Plan:
    decisions: list[Decision]
    windows: list[tuple[int, int]] = field(default_factory=list)  # triggered [start, end)
    candidate_ratio: float = 0.0  # (candidates + compress) / stream length
    max_window_ratio: float = 0.0
    pressure: float = 0.0
    pressure_alarm: bool = False
    forced: bool = False
    aged: list[int] = field(default_factory=list)  # compressed by the age rule alone

    @property
    def to_compress(self) -> list[int]:
        return [i for i, d in enumerate(self.decisions) if d == Decision.compress]


def _is_low(item: StreamItem, low: float) -> bool:
    return item.eligible and not item.keep and item.score < low


def mark_runs(items: Sequence[StreamItem], *, low: float, high: float, run_length: int
              ) -> list[Decision]:
    """Rule 1 (runs of low scores → candidates) and the hold itself (rule 2, first half)."""
    decisions: list[Decision] = []
    run: list[int] = []

    def close_run() -> None:
        if len(run) >= run_length:
            for j in run:
                decisions[j] = Decision.candidate
        run.clear()

    for i, item in enumerate(items):
        if not item.eligible:
            decisions.append(item.ineligible_as)
            close_run()
        elif item.score > high:
            decisions.append(Decision.hold)
            close_run()
        elif _is_low(item, low):
            decisions.append(Decision.keep)
            run.append(i)
        else:
            decisions.append(Decision.keep)
            close_run()
    close_run()
    return decisions


def freeze_before_holds(items: Sequence[StreamItem], decisions: list[Decision], *,
                        high: float, window_size: int) -> list[Decision]:
    """Rule 2, second half: candidates in the window before any score above `high` freeze.

    A client-protected memory with such a score freezes too: its score says the moment
    mattered, whoever protected it.
    """
    result = list(decisions)
    for h, item in enumerate(items):
        if item.score > high:
            for j in range(max(0, h - window_size), h):
                if result[j] == Decision.candidate:
                    result[j] = Decision.frozen
    return result


def window_ratios(decisions: Sequence[Decision], window_size: int) -> list[tuple[int, int, float]]:
    """Every window position as (start, end, candidate share); one window if the stream is
    shorter than a window."""
    n = len(decisions)
    if n == 0:
        return []
    size = min(window_size, n)
    is_candidate = [d == Decision.candidate for d in decisions]
    count = sum(is_candidate[:size])
    ratios = [(0, size, count / size)]
    for start in range(1, n - size + 1):
        count += is_candidate[start + size - 1] - is_candidate[start - 1]
        ratios.append((start, start + size, count / size))
    return ratios


def decide(items: Sequence[StreamItem], params: RuleParams, *, pressure: float,
           force: bool = False) -> Plan:
    """Apply rules 1–4 to a stream; `pressure` is the namespace's size / capacity."""
    decisions = mark_runs(items, low=params.low, high=params.high,
                          run_length=params.run_length)
    decisions = freeze_before_holds(items, decisions, high=params.high,
                                    window_size=params.window_size)
    ratios = window_ratios(decisions, params.window_size)
    alarm = pressure >= params.memory_limit
    triggered = [(s, e) for s, e, r in ratios if r > params.candidate_ratio]
    applied = triggered if (alarm or force) else []
    for start, end in applied:
        for j in range(start, end):
            if decisions[j] == Decision.candidate:
                decisions[j] = Decision.compress
    aged = []
    for i, item in enumerate(items):
        if (item.old and _is_low(item, params.low)
                and decisions[i] in (Decision.keep, Decision.candidate)):
            decisions[i] = Decision.compress
            aged.append(i)
    waiting = sum(d in (Decision.candidate, Decision.compress) for d in decisions)
    return Plan(
        decisions=decisions,
        windows=applied,
        candidate_ratio=waiting / len(items) if items else 0.0,
        max_window_ratio=max((r for _, _, r in ratios), default=0.0),
        pressure=pressure,
        pressure_alarm=alarm,
        forced=force and not alarm and bool(applied),
        aged=aged,
    )


def long_term_due(moment: datetime | None, now: datetime, *, age_days: float) -> bool:
    """Rule 4: older than `age_days` (a memory without a time is never due)."""
    return moment is not None and now - moment > timedelta(days=age_days)
