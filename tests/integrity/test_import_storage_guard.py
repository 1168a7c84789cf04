"""The storage guard behind import: a write or lookup by id never reaches another namespace,
whatever id a caller passes (a second line of defence after ids derived per namespace)."""

from __future__ import annotations

import dataclasses
from typing import Any

from app.storage.records import ArchiveRecord, EventRecord
from tests.helpers import all_memories, store

CHAT = [
    {"msg_id": "1", "role": "user", "content": "我对花生过敏，点菜时要注意。"},
    {"msg_id": "2", "role": "assistant", "content": "Noted: peanut allergy, careful when "
     "ordering."},
]


async def test_upserts_and_lookups_by_id_stay_in_their_namespace(client: Any) -> None:
    await store(client, CHAT, namespace="bob")
    (bob,) = await all_memories(client, "bob")
    repo = client.app.state.engram.repo
    (record,) = await repo.get_memories([bob["id"]], with_vector=True)
    await repo.archive_memories([ArchiveRecord(memory_id=bob["id"], namespace="bob",
                                               session_id=bob["session_id"],
                                               text="bob's original")])
    history = (await client.get(f"/v1/memories/{bob['id']}/evolution")).json()

    # Rows claiming bob's ids for alice: neither overwrites bob's nor lands beside them.
    await repo.upsert_memories([dataclasses.replace(record, namespace="alice",
                                                    text="alice's text")])
    await repo.archive_memories([ArchiveRecord(memory_id=bob["id"], namespace="alice",
                                               session_id=bob["session_id"],
                                               text="alice's original")])
    await repo.append_events([EventRecord(id=f"{bob['id']}:planted", memory_id=bob["id"],
                                          namespace="alice", event="evolved")])
    await repo.update_memory(bob["id"], {"text": "changed"}, namespace="alice")

    assert await all_memories(client, "bob") == [bob]
    assert await all_memories(client, "alice") == []
    assert (await client.get(f"/v1/memories/{bob['id']}/evolution")).json() == history
    assert [a.text for a in await repo.get_archived("bob", [bob["id"]])] == ["bob's original"]
    assert await repo.get_archived("alice", [bob["id"]]) == []
    assert await repo.get_memory(bob["id"], namespaces={"alice"}) is None
    assert [e.event for e in await repo.events_for("alice", bob["id"])] == ["evolved"]
    assert "evolved" not in [e["event"] for e in history["events"]]
