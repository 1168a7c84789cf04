"""Export a namespace and import it elsewhere: the same memories, history and raw log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.helpers import all_memories, store

SESSION_1 = [
    {"msg_id": "1", "role": "user", "content": "下周二上午我要去医院体检，记得提醒我空腹。",
     "timestamp": "2026-11-20T08:00:00Z"},
    {"msg_id": "2", "role": "assistant", "content": "好的，下周二上午体检，需要空腹。",
     "timestamp": "2026-11-20T08:01:00Z"},
]
SESSION_2 = [
    {"msg_id": "1", "role": "user", "content": "We decided to use LanceDB for the memory store."},
    {"msg_id": "2", "role": "assistant", "content": "Noted: LanceDB, embedded, no server."},
]

COMPARED = ("text", "msg_ids", "category", "importance", "access_count", "tier", "entities",
            "session_id", "time_start", "created_at")


async def fill(client: Any) -> None:
    await store(client, SESSION_1, session_id="health")
    await store(client, SESSION_2, session_id="arch")
    first = (await all_memories(client))[0]
    await client.post(f"/v1/memories/{first['id']}/access", json={"note": "checked"})


async def export(client: Any, namespace: str = "alice", **params: Any) -> bytes:
    response = await client.get(f"/v1/namespaces/{namespace}/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    body: bytes = response.content
    return body


async def import_(client: Any, body: bytes, namespace: str = "alice") -> Any:
    return await client.post(f"/v1/namespaces/{namespace}/import", content=body,
                             headers={"content-type": "application/x-ndjson"})


def view(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(({k: m[k] for k in COMPARED} for m in memories), key=lambda m: m["text"])


class TestMoveToAnotherMachine:
    async def test_import_restores_memories_history_and_raw_log(
        self, open_client: Any, tmp_path: Path
    ) -> None:
        async with open_client() as old:
            await fill(old)
            body = await export(old)
            before = await all_memories(old)
            histories = {m["id"]: (await old.get(f"/v1/memories/{m['id']}/evolution")).json()
                         for m in before}
        header = json.loads(body.splitlines()[0])
        assert header["format"] == "engram-export" and header["counts"]["memories"] == 2
        async with open_client(at=tmp_path / "new-machine") as new:
            result = await import_(new, body)
            assert result.status_code == 200, result.text
            assert result.json()["reembedded"] == 2  # exported without vectors
            after = await all_memories(new)
            assert view(after) == view(before)
            assert {m["id"] for m in after} == {m["id"] for m in before}
            for memory_id, history in histories.items():
                assert (await new.get(f"/v1/memories/{memory_id}/evolution")).json() == history
            again = await store(new, SESSION_1, session_id="health")
            assert again["status"] == "unchanged", "the raw log came along"
            sessions = (await new.get("/v1/namespaces/alice/sessions")).json()
            assert sessions["count"] == 2

    async def test_import_is_idempotent_and_keeps_vectors_of_the_same_model(
        self, client: Any
    ) -> None:
        await fill(client)
        body = await export(client, vectors="true")
        before = await all_memories(client)
        for _ in range(2):
            result = (await import_(client, body)).json()
            assert result["reembedded"] == 0 and result["memories"] == 2
        assert view(await all_memories(client)) == view(before)
        tables = (await client.get("/readyz")).json()["tables"]
        assert tables["memories"]["rows"] == 2 and tables["messages"]["rows"] == 4

    async def test_import_into_another_namespace(self, client: Any) -> None:
        await fill(client)
        result = await import_(client, await export(client), namespace="alice-copy")
        assert result.json()["source_namespace"] == "alice"
        original, copy = await all_memories(client), await all_memories(client, "alice-copy")
        assert view(copy) == view(original)
        assert not {m["id"] for m in copy} & {m["id"] for m in original}
        assert {m["namespace"] for m in copy} == {"alice-copy"}


class TestBadFiles:
    async def test_malformed_files_write_nothing(self, client: Any) -> None:
        await fill(client)
        good = await export(client)
        bad_files = {
            b"": "empty",
            b'{"format": "something-else"}\n': "line 1",
            good + b'{"type": "memory", "data": {"id": 5}}\n': "line",
            good + b"not json\n": "line",
        }
        for body, phrase in bad_files.items():
            response = await import_(client, body, namespace="target")
            assert response.status_code == 400, body[:80]
            assert phrase in response.json()["error"]["message"]
        assert await all_memories(client, "target") == []


class TestImportProgress:
    """`GET .../import/progress` answers while the import request embeds again."""

    async def test_progress_moves_while_the_import_embeds_again(self, open_client: Any
                                                                ) -> None:
        said = [{"msg_id": f"m{i}", "role": "user", "content":
                 f"第{i}条提醒：周{i % 7 + 1}下午三点讨论项目{i}的预算。" if i % 2 else
                 f"Reminder {i}: the review of project {i} is on day {i} at 3pm."}
                for i in range(140)]
        async with open_client(chunk_max_turns=1, chunk_overlap_ratio=0) as client:
            await store(client, said, session_id="many")
            body = await export(client)  # without vectors: the import embeds every memory
            url = "/v1/namespaces/copy/import/progress"
            idle = (await client.get(url)).json()
            assert (idle["phase"], idle["running"]) == ("idle", False)
            running = asyncio.create_task(import_(client, body, "copy"))
            seen = []
            while not running.done():
                seen.append((await client.get(url)).json())
                await asyncio.sleep(0.01)
            response = await running
            assert response.status_code == 200, response.text
            embedded = response.json()["reembedded"]
            assert embedded == len(said)
            embedding = [p for p in seen if p["phase"] == "embedding"]
            assert embedding and all(p["running"] and p["total"] == embedded
                                     for p in embedding)
            assert any(0 < p["done"] < embedded for p in embedding), "it moves slice by slice"
            done = (await client.get(url)).json()
            assert (done["phase"], done["running"], done["done"]) == ("done", False, embedded)

            broken = await import_(client, body[: len(body) // 2] + b"{not json\n", "copy")
            assert broken.status_code == 400
            failed = (await client.get(url)).json()
            assert (failed["phase"], failed["running"]) == ("failed", False)
