"""Rules of a memory's life: promotion through tiers, and soft forgetting.

Pure functions over records and settings; the service applies their verdicts under the
namespace lock and logs the events.

    session ──(hits ≥ promote_daily_hits or accesses ≥ promote_daily_accesses)──► daily
    daily ──(hits ≥ promote_longterm_hits or accesses ≥ promote_longterm_accesses)──► longterm

Each promotion raises importance by one (capped at 10): what is used often matters more.
A pinned memory (`pinned`, set by PATCH or at store time) is never forgotten or compressed;
pinning and unpinning are logged as `pinned` / `unpinned` events.
A memory is forgotten (state `forgotten`, restorable) when it is unprotected, of importance
≤ `forget_max_importance`, and nobody touched it for `forget_after_days`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.config import Settings
from app.storage.records import EventRecord, MemoryRecord, new_event

TIERS = ("session", "daily", "longterm")

# Event names and the icons of the readable evolution summary (SPEC.md §7).
EVENT_ICONS = {
    "created": "🆕",
    "accessed": "✏️",
    "evolved": "📝",
    "promoted": "⬆️",
    "merged": "🔀",
    "compressed": "🗜️",
    "forgotten": "🗑️",
    "restored": "♻️",
    "pinned": "📌",
    "unpinned": "📍",
}


@dataclass(frozen=True)
class Promotion:
    from_tier: str
    to_tier: str
    importance: int
    reason: str


def promotion_for(memory: MemoryRecord, settings: Settings) -> Promotion | None:
    """The next tier this memory has earned by its counts, or None."""
    thresholds = {
        "session": (settings.promote_daily_hits, settings.promote_daily_accesses),
        "daily": (settings.promote_longterm_hits, settings.promote_longterm_accesses),
    }
    if memory.tier not in thresholds:
        return None
    hits_needed, accesses_needed = thresholds[memory.tier]
    if memory.hit_count >= hits_needed:
        reason = f"{memory.hit_count} recall hits (threshold {hits_needed})"
    elif memory.access_count >= accesses_needed:
        reason = f"{memory.access_count} accesses (threshold {accesses_needed})"
    else:
        return None
    to_tier = TIERS[TIERS.index(memory.tier) + 1]
    importance = memory.importance if memory.importance_overridden else min(
        10, memory.importance + 1)
    return Promotion(memory.tier, to_tier, importance, reason)


def evolution_summary(events: list[tuple[str, str]]) -> str:
    """One readable line per event: icon, event name, note."""
    return "\n".join(
        f"{EVENT_ICONS.get(event, '•')} {event}" + (f": {note}" if note else "")
        for event, note in events
    )


def pin_event(memory: MemoryRecord, pinned: bool, note: str, when: datetime) -> EventRecord:
    """The evolution event of a pin (`pinned`) or an unpin (`unpinned`)."""
    return new_event(memory, "pinned" if pinned else "unpinned", note, when,
                     {"pinned": pinned})
