"""Features whose local-directory tests read the table files directly, checked again on a
bucket through the API and the repository: migrations of an older store, compaction with
its indexes, compression and byte-for-byte restore."""

from __future__ import annotations

from typing import Any

import lancedb
import pyarrow as pa

from app.storage.migrations import migrate
from tests.compression.helpers import TASK_ONLY, everything, only, run, set_policy
from tests.helpers import all_memories, store, wait_idle
from tests.s3.moto_server import MotoS3

DIM = 384


async def test_version_1_store_in_a_bucket_is_upgraded_without_losing_rows(
        open_client: Any, s3_settings: dict[str, Any], tmp_path: Any) -> None:
    db = await lancedb.connect_async(s3_settings["lancedb_uri"],
                                     storage_options=s3_settings["storage_options"])
    assert await migrate(db, embedding_dim=DIM, lock_path=tmp_path / "m.lock", up_to=1) == [1]
    memories = await db.open_table("memories")
    schema = await memories.schema()
    rows = [{"id": f"mem_old{i}", "namespace": "alice", "session_id": "s1", "text": text,
             "vector": [0.05] * DIM, "msg_ids": [f"m{i}"], "msg_count": 1, "state": "active",
             "tier": "session", "importance": 5, "entities": "{}", "part": 0}
            for i, text in enumerate(["user: 下周二上午体检", "user: we moved to LanceDB"])]
    await memories.add(pa.Table.from_pylist(rows, schema=schema))
    async with open_client() as client:
        found = {m["id"]: m for m in await all_memories(client)}
        assert set(found) == {"mem_old0", "mem_old1"}
        assert (found["mem_old0"]["language"], found["mem_old1"]["language"]) == ("zh", "en")
        response = await client.post("/v1/recall", json={"namespace": "alice",
                                                         "query": "LanceDB"})
        assert response.json()["memories"][0]["id"] == "mem_old1"  # the FTS index of 0003


NOTES = ["下周二上午体检，记得空腹。", "The dentist appointment moved to Friday at 3 pm.",
         "周末和小王去爬香山。", "Renew the car insurance before the end of the month."]


async def test_compaction_folds_new_rows_into_the_indexes_in_a_bucket(
        open_client: Any, moto_s3: MotoS3, bucket: str) -> None:
    async with open_client() as client:
        for i, note in enumerate(NOTES):
            await store(client, [{"msg_id": f"n{i}", "role": "user", "content": note}],
                        session_id=f"s{i}")
        await wait_idle(client)
        state = client.app.state.engram
        memories = state.repo._tables["memories"]
        assert (await memories.index_stats("text_idx")).num_unindexed_rows == len(NOTES)
        compacted = await state.maintenance.run_once(force=True)
        assert "memories" in compacted
        assert (await memories.index_stats("text_idx")).num_unindexed_rows == 0
        for query, expected in (("体检", "体检"), ("dentist", "dentist")):
            response = await client.post("/v1/recall", json={"namespace": "alice",
                                                             "query": query})
            assert expected in response.json()["memories"][0]["text"]


async def test_compression_and_restore_byte_for_byte_in_a_bucket(open_client: Any) -> None:
    from tests.compression.helpers import store_chatter

    async with open_client(compression_enabled=False, chunk_max_turns=2,
                           chunk_overlap_ratio=0.0, compression_capacity_chars=1000) as client:
        await store_chatter(client, "alice")
        await set_policy(client, "alice", overrides=TASK_ONLY)
        before = await everything(client, "alice")
        result = only(await run(client, "alice"))
        assert result["compressed"] and result["summaries"]
        after = await everything(client, "alice")
        assert sum(len(m["text"]) for m in after.values()) < \
            sum(len(m["text"]) for m in before.values())
        for memory_id in result["compressed"]:
            response = await client.post(f"/v1/memories/{memory_id}/restore")
            assert response.status_code == 200, response.text
            assert response.json()["text"].encode() == before[memory_id]["text"].encode()
