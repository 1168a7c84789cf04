"""Reading, listing and deleting: what a user removes is gone, with everything derived from it."""

from __future__ import annotations

from typing import Any

from tests.helpers import all_memories, messages, store


class TestRead:
    async def test_get_memory_by_id(self, client: Any) -> None:
        result = await store(client, messages(0, 4))
        memory_id = result["memories_created"][0]
        body = (await client.get(f"/v1/memories/{memory_id}")).json()
        assert body["id"] == memory_id and body["msg_ids"] == ["m0", "m1", "m2", "m3"]
        assert (await client.get("/v1/memories/mem_missing")).status_code == 404

    async def test_list_filters_and_pages(self, client: Any) -> None:
        await store(client, messages(0, 30), session_id="s1", branch="main")
        await store(client, messages(0, 6), session_id="s2", branch="exp")
        everything = await all_memories(client)
        assert len(everything) == 7
        assert {m["session_id"] for m in await all_memories(client, session_id="s2")} == {"s2"}
        assert {m["branch"] for m in await all_memories(client, branch="exp")} == {"exp"}
        assert await all_memories(client, tier="longterm") == []
        page = (await client.get("/v1/memories", params={
            "namespace": "alice", "offset": 2, "limit": 3})).json()
        assert page["count"] == 7 and [m["id"] for m in page["items"]] == [
            m["id"] for m in everything[2:5]]
        created = [m["created_at"] for m in everything]
        assert created == sorted(created, reverse=True), "newest first"

    async def test_list_by_minimum_importance_and_category(self, client: Any) -> None:
        await store(client, [{"msg_id": "d", "role": "user",
                              "content": "We decided to migrate the billing service to Rust."}],
                    session_id="a")
        await store(client, [{"msg_id": "q", "role": "user",
                              "content": "今天天气怎么样？"}], session_id="b")
        decisions = await all_memories(client, category="decision")
        assert [m["msg_ids"] for m in decisions] == [["d"]]
        important = await all_memories(client, min_importance=decisions[0]["importance"])
        assert all(m["importance"] >= decisions[0]["importance"] for m in important)


class TestDelete:
    async def test_deleting_a_message_rebuilds_its_memories(self, client: Any) -> None:
        await store(client, messages(0, 10))
        victim = messages(3, 4)[0]["content"]
        response = await client.delete("/v1/namespaces/alice/sessions/s1/messages/m3")
        assert response.status_code == 200, response.text
        assert response.json()["memories_rebuilt"]
        memories = await all_memories(client)
        assert all("m3" not in m["msg_ids"] and victim not in m["text"] for m in memories)
        covered = {i for m in memories for i in m["msg_ids"]}
        assert covered == {f"m{i}" for i in range(10)} - {"m3"}
        ledger = (await client.get("/v1/namespaces/alice/sessions/s1")).json()
        assert ledger["message_count"] == 9
        again = await store(client, messages(0, 10))
        assert again["new"] == 1, "a deleted message sent again is new"

    async def test_deleting_the_only_message_removes_the_memory(self, client: Any) -> None:
        await store(client, messages(0, 1))
        response = await client.delete("/v1/namespaces/alice/sessions/s1/messages/m0")
        assert response.json()["memories_deleted"] == 1
        assert await all_memories(client) == []

    async def test_delete_session(self, client: Any) -> None:
        await store(client, messages(0, 10), session_id="s1")
        await store(client, messages(0, 10), session_id="s2")
        response = await client.delete("/v1/namespaces/alice/sessions/s1")
        assert response.status_code == 200 and response.json()["memories_deleted"] == 2
        assert {m["session_id"] for m in await all_memories(client)} == {"s2"}
        assert (await client.get("/v1/namespaces/alice/sessions/s1")).status_code == 404
        assert (await client.delete("/v1/namespaces/alice/sessions/s1")).status_code == 404
        again = await store(client, messages(0, 10), session_id="s1")
        assert again["new"] == 10

    async def test_delete_namespace_leaves_others(self, client: Any) -> None:
        await store(client, messages(0, 10), namespace="alice")
        await store(client, messages(0, 10), namespace="bob")
        response = await client.delete("/v1/namespaces/alice")
        assert response.status_code == 200
        assert await all_memories(client, namespace="alice") == []
        assert (await client.get("/v1/namespaces/alice/sessions")).json()["count"] == 0
        assert len(await all_memories(client, namespace="bob")) == 2

    async def test_delete_one_memory(self, client: Any) -> None:
        result = await store(client, messages(0, 4))
        memory_id = result["memories_created"][0]
        assert (await client.delete(f"/v1/memories/{memory_id}")).status_code == 200
        assert (await client.get(f"/v1/memories/{memory_id}")).status_code == 404
        assert (await client.delete(f"/v1/memories/{memory_id}")).status_code == 404


    async def test_a_session_deleted_right_after_a_wait_false_store_stays_deleted(
            self, client: Any) -> None:
        """The store's queued build runs after the delete (or before it): either way the
        session is gone, with its job, and no empty ledger row comes back."""
        await store(client, messages(0, 4), session_id="kept")
        for lang, content in (("en", "Book the dentist for Friday at 3 pm."),
                              ("zh", "周五下午三点去看牙医，别忘了带医保卡。")):
            queued = await store(client, [{"msg_id": "x", "role": "user", "content": content}],
                                 session_id=f"gone-{lang}", wait=False, expect=202)
            response = await client.delete(f"/v1/namespaces/alice/sessions/gone-{lang}")
            assert response.status_code == 200, response.text
            await client.app.state.engram.store.idle()
            assert (await client.get(f"/v1/jobs/{queued['job_id']}")).status_code == 404
            assert (await client.get(
                f"/v1/namespaces/alice/sessions/gone-{lang}")).status_code == 404
            assert not [m for m in await all_memories(client) if m["session_id"] != "kept"]
        sessions = (await client.get("/v1/namespaces/alice/sessions")).json()["items"]
        assert [s["session_id"] for s in sessions] == ["kept"]


class TestIdsWithSlashes:
    """Clients name sessions and messages after paths and URLs ("chats/2024/0412", "D3/7");
    such an id, percent-encoded in the URL, reaches the same routes as any other id."""

    async def test_a_session_and_a_message_with_slashes_can_be_read_and_deleted(
            self, client: Any) -> None:
        from urllib.parse import quote
        session_id, msg_ids = "chats/2024/0412", ["D1/1", "D1/2", "D1/3"]
        texts = ["我们决定下周去杭州出差。", "Book the hotel near West Lake.", "好的，我来订酒店。"]
        await store(client, [{"msg_id": m, "role": "user", "content": t}
                             for m, t in zip(msg_ids, texts, strict=True)],
                    session_id=session_id)
        session_url = f"/v1/namespaces/alice/sessions/{quote(session_id, safe='')}"
        ledger = await client.get(session_url)
        assert ledger.status_code == 200, ledger.text
        assert ledger.json()["session_id"] == session_id
        deleted = await client.delete(f"{session_url}/messages/{quote('D1/2', safe='')}")
        assert deleted.status_code == 200, deleted.text
        remaining = {m for memory in await all_memories(client) for m in memory["msg_ids"]}
        assert remaining == {"D1/1", "D1/3"}
        assert (await client.delete(session_url)).status_code == 200
        assert await all_memories(client) == []
        assert (await client.get(session_url)).status_code == 404

    async def test_a_slash_where_no_id_may_hold_one_is_a_422(self, client: Any) -> None:
        assert (await client.get("/v1/namespaces/al%2Fice/sessions")).status_code == 422
        unit_separator = await client.get("/v1/namespaces/alice/sessions/a%1Fb")
        assert unit_separator.status_code == 422, "a control character is never an id"


async def test_a_stored_chat_does_not_list_its_role_labels_as_concepts(client: Any) -> None:
    """Memories are rendered "role: content"; the labels are Engram's, not what was said,
    while a user who talks about users keeps that concept."""
    chat = [("user", "We chose LanceDB for the memory store."),
            ("assistant", "Good, the memory store needs vectors."),
            ("user", "我们决定用 LanceDB 做记忆存储。"),
            ("assistant", "好的，记忆存储需要向量。")]
    await store(client, [{"msg_id": f"m{i}", "role": role, "content": text}
                         for i, (role, text) in enumerate(chat)])
    [memory] = await all_memories(client)
    concepts = memory["entities"]["concepts"]
    assert {"memory", "记忆", "向量"} <= set(concepts)
    assert not {"user", "assistant"} & set(concepts)
    await store(client, [{"msg_id": "t", "role": "user",
                          "content": "The user table needs an index on user_id for every user."}],
                session_id="s2")
    [about_users] = await all_memories(client, session_id="s2")
    assert "user" in about_users["entities"]["concepts"]


class TestMessagesOfAMemory:
    """A memory's messages as text with their conversation time, not bare ids."""

    async def test_role_text_and_conversation_time_in_both_languages(self, client: Any
                                                                     ) -> None:
        said = [
            {"msg_id": "z0", "role": "user", "content": "下周二上午体检，前一晚十点后不要吃东西。",
             "timestamp": "2025-03-03T09:00:00Z"},
            {"msg_id": "e1", "role": "assistant",
             "content": "Noted: the checkup is next Tuesday morning, fast after 10pm.",
             "timestamp": "2025-03-03T09:01:00Z"},
        ]
        memory_id = (await store(client, said))["memories_created"][0]
        response = await client.get(f"/v1/memories/{memory_id}/messages")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["memory_id"] == memory_id and body["missing"] == []
        assert [(m["msg_id"], m["role"], m["content"]) for m in body["items"]] == [
            (m["msg_id"], m["role"], m["content"]) for m in said]
        assert [m["timestamp"][:19] for m in body["items"]] == [
            "2025-03-03T09:00:00", "2025-03-03T09:01:00"]
        memory = (await client.get(f"/v1/memories/{memory_id}")).json()
        assert memory["time_start"][:10] == "2025-03-03", "conversation time, not store time"

    async def test_an_unknown_memory_is_a_404_and_a_rebuilt_one_drops_the_message(
            self, client: Any) -> None:
        assert (await client.get("/v1/memories/mem_missing/messages")).status_code == 404
        await store(client, messages(0, 4))
        assert (await client.delete(
            "/v1/namespaces/alice/sessions/s1/messages/m1")).status_code == 200
        (memory,) = await all_memories(client)
        body = (await client.get(f"/v1/memories/{memory['id']}/messages")).json()
        kept = [m for m in messages(0, 4) if m["msg_id"] != "m1"]
        assert [m["content"] for m in body["items"]] == [m["content"] for m in kept]
        assert body["count"] == 3 and body["missing"] == []
