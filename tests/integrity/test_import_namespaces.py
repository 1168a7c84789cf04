"""A key limited to one namespace cannot reach another one: not by id, not through import.

Memory ids are predictable (a hash of namespace, session, first message and part), so the
attacker here knows bob's ids; every test checks bob's data through an admin key afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from app.store.chunker import memory_id
from tests.compression.helpers import SMALL_CHUNKS, everything, only, run, set_policy, store_chatter
from tests.helpers import all_memories, store

ADMIN = "admin-key-0123456789abcdef"
ALICE = "alice-key-0123456789abcdef"
KEYS: dict[str, Any] = {"admin_keys": [ADMIN], "namespace_keys": {ALICE: ["alice"]}}
AS_ALICE = {"Authorization": f"Bearer {ALICE}"}
NDJSON = {"content-type": "application/x-ndjson"}

BOB_CHAT = [
    {"msg_id": "1", "role": "user", "content": "我的银行卡密码提示是小时候住的街道名。"},
    {"msg_id": "2", "role": "assistant", "content": "Noted: the hint is the street you grew "
     "up on."},
]


def header(namespace: str) -> dict[str, Any]:
    return {"format": "engram-export", "version": 1, "namespace": namespace,
            "exported_at": "2026-11-30T10:00:00Z", "embedding_model": "other-model",
            "embedding_dim": 384, "vectors": False, "counts": {}}


def ndjson(*lines: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)


async def import_as_alice(client: httpx.AsyncClient, body: bytes) -> httpx.Response:
    return await client.post("/v1/namespaces/alice/import", content=body,
                             headers={**NDJSON, **AS_ALICE})


async def bob_state(client: httpx.AsyncClient) -> dict[str, Any]:
    """Everything a user of bob depends on: memories (any state), their history, ledger."""
    memories = await everything(client, "bob")
    histories = {}
    for mid in memories:
        response = await client.get(f"/v1/memories/{mid}/evolution")
        assert response.status_code == 200, response.text
        histories[mid] = response.json()
    sessions = (await client.get("/v1/namespaces/bob/sessions")).json()
    return {"memories": memories, "histories": histories, "sessions": sessions}


class TestByIdRoutes:
    async def test_another_namespaces_memory_is_as_unknown_as_no_memory(
        self, open_client: Any
    ) -> None:
        async with open_client(token=ADMIN, **KEYS) as client:
            await store(client, BOB_CHAT, namespace="bob", session_id="secrets")
            (bob_memory,) = await all_memories(client, "bob")
            before = await bob_state(client)
            unknown = memory_id("bob", "secrets", "no-such-message", 0)
            calls = [
                ("GET", "{}", None), ("DELETE", "{}", None),
                ("PATCH", "{}", {"text": "overwritten by alice"}),
                ("GET", "{}/evolution", None), ("POST", "{}/access", {"note": "peek"}),
                ("POST", "{}/forget", None), ("POST", "{}/restore", None),
            ]
            for method, path, body in calls:
                answers = []
                for target in (bob_memory["id"], unknown):
                    response = await client.request(
                        method, "/v1/memories/" + path.format(target), json=body,
                        headers=AS_ALICE)
                    answers.append((response.status_code, response.json()["error"]["code"],
                                    response.json()["error"]["message"].replace(target, "ID")))
                assert answers[0] == answers[1], (method, path, answers)
                assert answers[0][0] == 404, (method, path, answers)
            assert await bob_state(client) == before


class TestImportCannotCrossNamespaces:
    async def test_a_crafted_file_neither_moves_reads_nor_replaces_bobs_memories(
        self, open_client: Any
    ) -> None:
        async with open_client(token=ADMIN, **KEYS, **SMALL_CHUNKS) as client:
            await store_chatter(client, "bob")
            originals = await everything(client, "bob")
            await set_policy(client, "bob")
            compressed = only(await run(client, "bob", force=True))["compressed"]
            assert compressed
            before = await bob_state(client)
            summaries = {mid for mid, m in before["memories"].items() if m["summary_of"]}
            assert summaries
            victim = before["memories"][compressed[0]]
            summary = next(m for m in before["memories"].values()
                           if compressed[0] in m["summary_of"])

            # Bob's real ids (they are predictable), claimed by alice's file: a compressed
            # chunk with an archived "original", a summary of it, its events, its ledger.
            chunk = {key: victim[key] for key in ("session_id", "msg_ids", "created_at")}
            body = ndjson(
                header("bob"),
                {"type": "session", "data": {"session_id": victim["session_id"],
                                             "namespace": "bob", "chunk_ids": [victim["id"]]}},
                {"type": "memory", "data": {**chunk, "id": victim["id"], "namespace": "bob",
                                            "text": "alice's planted text",
                                            "start_msg": victim["msg_ids"][0], "part": 0,
                                            "state": "compressed"}},
                {"type": "memory", "data": {**chunk, "id": summary["id"], "namespace": "bob",
                                            "text": "alice's planted summary",
                                            "summary_of": [victim["id"]],
                                            "tier": "longterm", "start_seq": -1}},
                {"type": "event", "data": {"id": f"{victim['id']}:created",
                                           "memory_id": victim["id"], "namespace": "bob",
                                           "event": "created", "note": "planted",
                                           "timestamp": "2026-11-30T10:00:00Z"}},
                {"type": "archive", "data": {"memory_id": victim["id"], "namespace": "bob",
                                             "session_id": victim["session_id"],
                                             "text": "alice's planted original",
                                             "summary_id": summary["id"]}},
            )
            response = await import_as_alice(client, body)
            assert response.status_code == 200, response.text
            assert response.json()["memories"] == 2

            # Nothing of bob's moved, changed or gained a row.
            assert await bob_state(client) == before
            mine = await everything(client, "alice")
            assert len(mine) == 2 and not set(mine) & set(before["memories"])
            assert {m["namespace"] for m in mine.values()} == {"alice"}
            # Alice's own copy restores her own text; bob's restores bob's original.
            planted = next(m for m in mine.values() if not m["summary_of"])
            restored = await client.post(f"/v1/memories/{planted['id']}/restore",
                                         headers=AS_ALICE)
            assert restored.status_code == 200, restored.text
            assert restored.json()["text"] == "alice's planted original"
            for mid in compressed:
                assert (await client.post(f"/v1/memories/{mid}/restore",
                                          headers=AS_ALICE)).status_code == 404
                response = await client.post(f"/v1/memories/{mid}/restore")
                assert response.status_code == 200, response.text
                assert response.json()["text"] == originals[mid]["text"]

    async def test_importing_a_namespace_into_another_leaves_the_source_as_it_was(
        self, open_client: Any
    ) -> None:
        async with open_client(**SMALL_CHUNKS) as client:
            await store_chatter(client, "bob")
            originals = await everything(client, "bob")
            await set_policy(client, "bob")
            compressed = only(await run(client, "bob", force=True))["compressed"]
            before = await bob_state(client)
            export = (await client.get("/v1/namespaces/bob/export")).content
            for _ in range(2):  # idempotent
                response = await client.post("/v1/namespaces/carol/import", content=export,
                                             headers=NDJSON)
                assert response.status_code == 200, response.text
            assert await bob_state(client) == before
            copy = await everything(client, "carol")
            assert len(copy) == len(before["memories"])
            assert not set(copy) & set(before["memories"])
            assert sum(bool(m["summary_of"]) for m in copy.values()) == sum(
                bool(m["summary_of"]) for m in before["memories"].values())
            for m in copy.values():  # carol's summaries cover carol's memories
                assert set(m["summary_of"]) <= set(copy)
            for mid in compressed:
                response = await client.post(f"/v1/memories/{mid}/restore")
                assert response.json()["text"] == originals[mid]["text"]
            carol_compressed = [mid for mid, m in copy.items() if m["state"] == "compressed"]
            assert len(carol_compressed) == len(compressed)
            texts = {m["text"] for m in originals.values()}
            for mid in carol_compressed:
                response = await client.post(f"/v1/memories/{mid}/restore")
                assert response.status_code == 200, response.text
                assert response.json()["text"] in texts
