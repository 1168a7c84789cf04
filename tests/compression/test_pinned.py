"""Compression never touches a pinned memory."""

from __future__ import annotations

from typing import Any

from tests.compression.helpers import SMALL_CHUNKS, everything, only, run, set_policy


class TestPinnedIsNeverCompressed:
    async def test_pinned_chatter_stays_whole_en_and_zh(self, open_client: Any, seeded: Any
                                                        ) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            await set_policy(client, "alice")
            before = await everything(client, "alice")
            pinned = []
            for session, index in (("en", 2), ("zh", 0)):
                chatter = sorted((m for m in before.values() if m["session_id"] == session),
                                 key=lambda m: m["msg_ids"][0])
                pinned.append(chatter[index]["id"])
            for memory_id in pinned:
                response = await client.patch(f"/v1/memories/{memory_id}",
                                              json={"pinned": True})
                assert response.status_code == 200
            result = only(await run(client, "alice"))
            after = await everything(client, "alice")
            assert result["compressed"], "the pass compressed the other chatter"
            for memory_id in pinned:
                assert memory_id not in result["compressed"]
                assert after[memory_id]["text"] == before[memory_id]["text"]
                assert after[memory_id]["state"] == "active" and after[memory_id]["pinned"]
                assert not any(memory_id in m["summary_of"] for m in after.values())
