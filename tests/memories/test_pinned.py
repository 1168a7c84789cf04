"""Pinned memories: at store time and by PATCH, the filter, the evolution events, and that
nothing forgets a pinned memory; export and import carry the pin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import all_memories, store, wait_idle

EN = [{"msg_id": "1", "role": "user", "content": "Always answer me in British English."}]
ZH = [{"msg_id": "1", "role": "user", "content": "以后回答我都用简体中文，谢谢。"}]
OTHER = [{"msg_id": "1", "role": "user", "content": "We talked about the garden today."}]


async def evolution_events(client: Any, memory_id: str) -> list[str]:
    response = await client.get(f"/v1/memories/{memory_id}/evolution")
    assert response.status_code == 200, response.text
    return [e["event"] for e in response.json()["events"]]


class TestPinAtStoreTime:
    async def test_store_with_pinned_pins_its_memories_en_and_zh(self, client: Any) -> None:
        for session, msgs in (("en", EN), ("zh", ZH)):
            result = await store(client, msgs, session_id=session, pinned=True)
            (memory_id,) = result["memories_created"]
            memory = (await client.get(f"/v1/memories/{memory_id}")).json()
            assert memory["pinned"] is True
            assert await evolution_events(client, memory_id) == ["created", "pinned"]
        await store(client, OTHER, session_id="other")
        pinned = await all_memories(client, pinned="true")
        assert sorted(m["session_id"] for m in pinned) == ["en", "zh"]
        unpinned = await all_memories(client, pinned="false")
        assert [m["session_id"] for m in unpinned] == ["other"]
        assert unpinned[0]["pinned"] is False

    async def test_pinned_must_be_a_json_boolean(self, client: Any) -> None:
        await store(client, EN, pinned="yes", expect=422)
        assert await all_memories(client) == []

    async def test_wait_false_pins_when_built(self, client: Any) -> None:
        result = await store(client, ZH, pinned=True, wait=False, expect=202)
        assert result["status"] == "queued"
        await wait_idle(client)
        (memory,) = await all_memories(client)
        assert memory["pinned"] is True

    async def test_resending_unchanged_messages_pinned_pins_them(self, client: Any) -> None:
        (memory_id,) = (await store(client, EN))["memories_created"]
        again = await store(client, EN, pinned=True)
        assert (again["new"], again["updated"], again["skipped"]) == (0, 0, 1)
        memory = (await client.get(f"/v1/memories/{memory_id}")).json()
        assert memory["pinned"] is True
        assert await evolution_events(client, memory_id) == ["created", "pinned"]
        # The same pinned request again changes nothing, and an unpin holds.
        assert (await client.patch(f"/v1/memories/{memory_id}",
                                   json={"pinned": False})).status_code == 200
        await store(client, EN, pinned=True)
        assert (await client.get(f"/v1/memories/{memory_id}")).json()["pinned"] is False

    async def test_a_later_store_keeps_the_pin(self, client: Any) -> None:
        (memory_id,) = (await store(client, EN, pinned=True))["memories_created"]
        # Appended messages grow the same memory; it stays pinned.
        await store(client, [{"msg_id": "2", "role": "assistant", "content": "Noted, I will."}])
        memory = (await client.get(f"/v1/memories/{memory_id}")).json()
        assert memory["msg_ids"] == ["1", "2"] and memory["pinned"] is True


class TestPinByPatch:
    async def test_pin_and_unpin_are_logged(self, client: Any) -> None:
        (memory_id,) = (await store(client, ZH))["memories_created"]
        response = await client.patch(f"/v1/memories/{memory_id}", json={"pinned": True})
        assert response.status_code == 200 and response.json()["pinned"] is True
        # Pinning again is no change and no event.
        assert (await client.patch(f"/v1/memories/{memory_id}",
                                   json={"pinned": True})).json()["pinned"] is True
        response = await client.patch(f"/v1/memories/{memory_id}",
                                      json={"pinned": False, "importance": 9})
        assert response.status_code == 200
        body = response.json()
        assert body["pinned"] is False and body["importance"] == 9
        assert await evolution_events(client, memory_id) == [
            "created", "pinned", "evolved", "unpinned"]
        summary = (await client.get(f"/v1/memories/{memory_id}/evolution")).json()["summary"]
        assert "📌 pinned" in summary and "📍 unpinned" in summary

    async def test_pinned_must_be_a_json_boolean(self, client: Any) -> None:
        (memory_id,) = (await store(client, EN))["memories_created"]
        response = await client.patch(f"/v1/memories/{memory_id}", json={"pinned": "true"})
        assert response.status_code == 422
        assert "pinned" in response.json()["error"]["message"]
        assert (await client.get(f"/v1/memories/{memory_id}")).json()["pinned"] is False

    async def test_filter_value_must_be_a_boolean(self, client: Any) -> None:
        response = await client.get("/v1/memories", params={"namespace": "alice",
                                                            "pinned": "maybe"})
        assert response.status_code == 422


class TestNeverForgotten:
    async def test_explicit_forget_of_a_pinned_memory_is_a_conflict(self, client: Any) -> None:
        (memory_id,) = (await store(client, EN, pinned=True))["memories_created"]
        response = await client.post(f"/v1/memories/{memory_id}/forget")
        assert response.status_code == 409
        assert "pinned" in response.json()["error"]["message"]
        assert (await client.get(f"/v1/memories/{memory_id}")).json()["state"] == "active"

    async def test_forgetting_stale_memories_skips_pinned_ones(self, open_client: Any
                                                               ) -> None:
        async with open_client(forget_after_days=1e-9, forget_max_importance=10) as client:
            (pinned,) = (await store(client, ZH, session_id="zh", pinned=True)
                         )["memories_created"]
            (plain,) = (await store(client, OTHER, session_id="en"))["memories_created"]
            result = (await client.post("/v1/namespaces/alice/forget")).json()
            assert result["forgotten"] == [plain]
            assert (await client.get(f"/v1/memories/{pinned}")).json()["state"] == "active"


class TestTransfer:
    async def test_export_and_import_carry_the_pin(self, open_client: Any, tmp_path: Path
                                                   ) -> None:
        async with open_client() as old:
            await store(old, EN, session_id="en", pinned=True)
            await store(old, OTHER, session_id="other")
            body = (await old.get("/v1/namespaces/alice/export")).content
        async with open_client(at=tmp_path / "new") as new:
            response = await new.post("/v1/namespaces/bob/import", content=body,
                                      headers={"content-type": "application/x-ndjson"})
            assert response.status_code == 200, response.text
            memories = {m["session_id"]: m for m in await all_memories(new, "bob")}
            assert memories["en"]["pinned"] is True and memories["other"]["pinned"] is False

    async def test_import_refuses_a_pin_that_is_not_a_boolean(self, open_client: Any,
                                                              tmp_path: Path) -> None:
        async with open_client() as client:
            await store(client, EN, pinned=True)
            body = (await client.get("/v1/namespaces/alice/export")).content
            broken = body.replace(b'"pinned": true', b'"pinned": [1]').replace(
                b'"pinned":true', b'"pinned":[1]')
            assert broken != body
            response = await client.post("/v1/namespaces/bob/import", content=broken,
                                         headers={"content-type": "application/x-ndjson"})
            assert response.status_code == 400
            assert "pinned" in response.json()["error"]["message"]
