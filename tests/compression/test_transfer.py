"""Moving a compressed namespace: the originals travel with it and still restore whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.compression.helpers import SMALL_CHUNKS, everything, only, run, set_policy


class TestMoveCompressed:
    async def test_compressed_originals_survive_export_and_import(
        self, open_client: Any, seeded: Any, tmp_path: Path
    ) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as old:
            await set_policy(old, "alice")
            before = await everything(old, "alice")
            compressed = only(await run(old, "alice"))["compressed"]
            assert compressed
            body = (await old.get("/v1/namespaces/alice/export")).content
        async with open_client(at=tmp_path / "elsewhere", **SMALL_CHUNKS) as new:
            result = await new.post("/v1/namespaces/alice/import", content=body,
                                    headers={"content-type": "application/x-ndjson"})
            assert result.status_code == 200, result.text
            assert result.json()["archived"] == len(compressed)
            for memory_id in compressed:
                restored = await new.post(f"/v1/memories/{memory_id}/restore")
                assert restored.status_code == 200, restored.text
                assert restored.json()["text"] == before[memory_id]["text"]
                assert restored.json()["state"] == "active"
