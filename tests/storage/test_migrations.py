"""Schema migrations: a store written with an older schema is upgraded with no row lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa

from app.storage.migrations import applied_versions, discover, migrate
from tests.conftest import make_settings
from tests.helpers import all_memories

DIM = 384


async def write_version_1_store(data_dir: Path) -> None:
    """A store as the first release wrote it: schema version 1, two memories, one message."""
    settings = make_settings(data_dir)
    db = await lancedb.connect_async(settings.resolved_lancedb_uri)
    assert await migrate(db, embedding_dim=DIM, lock_path=data_dir / "m.lock", up_to=1) == [1]
    memories = await db.open_table("memories")
    schema = await memories.schema()
    assert "language" not in schema.names
    rows = [
        {"id": f"mem_old{i}", "namespace": "alice", "session_id": "s1", "text": text,
         "vector": [0.05] * DIM, "msg_ids": [f"m{i}"], "msg_count": 1, "category": "note",
         "importance": 5, "tier": "session", "state": "active", "entities": "{}",
         "hit_count": 0, "access_count": 0, "protected": False, "start_msg": f"m{i}",
         "end_msg": f"m{i}", "start_seq": i, "end_seq": i, "part": 0}
        for i, text in enumerate(["user: 下周二上午体检", "user: we moved to LanceDB"])
    ]
    await memories.add(pa.Table.from_pylist(rows, schema=schema))


class TestUpgrade:
    async def test_version_1_store_is_upgraded_without_losing_rows(
        self, open_client: Any, data_dir: Path
    ) -> None:
        await write_version_1_store(data_dir)
        async with open_client() as client:
            memories = {m["id"]: m for m in await all_memories(client)}
        assert set(memories) == {"mem_old0", "mem_old1"}
        assert memories["mem_old0"]["text"] == "user: 下周二上午体检"
        assert memories["mem_old0"]["language"] == "zh"  # backfilled by 0002
        assert memories["mem_old1"]["language"] == "en"

    async def test_versions_are_recorded_and_applied_once(self, data_dir: Path) -> None:
        settings = make_settings(data_dir)
        db = await lancedb.connect_async(settings.resolved_lancedb_uri)
        everything = [m.version for m in discover()]
        assert everything == sorted(everything) and everything[:2] == [1, 2]
        assert await migrate(db, embedding_dim=DIM, lock_path=data_dir / "m.lock") == everything
        assert await applied_versions(db) == set(everything)
        assert await migrate(db, embedding_dim=DIM, lock_path=data_dir / "m.lock") == []
