"""Bringing a compressed memory back whole from the archive.

Compression never re-embeds an original: its vector, entities and content hash stay on the
row while its text is the triple form. Restoring therefore only puts the archived text back,
byte for byte, marks the memory active with the sticky decision `restored` (a memory a user
wanted back is never a candidate again), logs `restored`, and then drops the archive row.
A crash between the two writes leaves an archive row beside an active memory, which the
next compression pass clears.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from app.errors import Conflict
from app.storage.records import MemoryRecord, new_event
from app.storage.repository import Repository


async def restore_compressed(repo: Repository, memory: MemoryRecord, *, when: datetime
                             ) -> MemoryRecord:
    """Restore `memory` (state `compressed`) from the archive. Caller holds the namespace lock.

    Raises:
        Conflict: the archive holds no text for this memory.
    """
    found = await repo.get_archived(memory.namespace, [memory.id])
    if not found:
        raise Conflict(f"memory {memory.id!r} is compressed but its archived text is missing")
    archived = found[0]
    restored = replace(memory, text=archived.text, state="active", decision="restored",
                       decided_at=when, updated_at=when)
    await repo.set_memory_columns([{"id": memory.id, "text": archived.text, "state": "active",
                                    "decision": "restored", "decided_at": when,
                                    "updated_at": when}])
    await repo.append_events([new_event(
        restored, "restored", "original text restored from the archive", when,
        {"from": "compressed", "to": "active", "summary_id": archived.summary_id,
         "chars": len(archived.text)})])
    await repo.delete_archived([memory.id])
    return restored
