"""The recall firewall: Engram's injection block, or a memory quoted back by the assistant,
becomes no new memory; the raw log keeps the message as sent; a user repeating a memory is
stored as usual. Chinese and English."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers import all_memories, store

FACT_EN = "We decided to host the team offsite in Lisbon in March."
FACT_ZH = "我们决定三月份去里斯本举办团队团建活动。"
QUERY = {"en": "where is the team offsite?", "zh": "团建活动在哪里举办？"}
FACT = {"en": FACT_EN, "zh": FACT_ZH}


async def with_fact(client: Any, language: str) -> str:
    result = await store(client, [{"msg_id": "f1", "role": "user", "content": FACT[language]}],
                         session_id="facts")
    (memory_id,) = result["memories_created"]
    return memory_id


async def block_for(client: Any, language: str) -> str:
    response = await client.post("/v1/recall", json={
        "namespace": "alice", "query": QUERY[language], "min_score": 0.0})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["language"] == language and FACT[language] in body["block"]
    block: str = body["block"]
    return block


async def raw_messages(client: Any, session_id: str) -> dict[str, str]:
    export = (await client.get("/v1/namespaces/alice/export")).text.splitlines()
    records = [json.loads(line) for line in export[1:]]
    return {r["data"]["msg_id"]: r["data"]["content"] for r in records
            if r["type"] == "message" and r["data"]["session_id"] == session_id}


@pytest.mark.parametrize("language", ["en", "zh"])
class TestEngramsOwnText:
    async def test_a_system_prompt_carrying_the_block_makes_no_memory(
            self, client: Any, language: str) -> None:
        fact_id = await with_fact(client, language)
        prompt = "You are a helpful travel assistant.\n\n" + await block_for(client, language)
        result = await store(client, [
            {"msg_id": "s1", "role": "system", "content": prompt},
        ], session_id="chat")
        assert result["new"] == 1 and result["firewalled"] == ["s1"]
        assert result["memories_created"] == [] and result["memories_updated"] == []
        assert [m["id"] for m in await all_memories(client)] == [fact_id]
        assert await raw_messages(client, "chat") == {"s1": prompt}  # kept as sent

    async def test_the_block_re_wrapped_is_still_recognised(self, client: Any,
                                                            language: str) -> None:
        await with_fact(client, language)
        block = await block_for(client, language)
        rewrapped = "  " + block.replace("\n", "\n\n    ").replace("，", ", ").upper()
        result = await store(client, [{"msg_id": "s1", "role": "user",
                                       "content": rewrapped}], session_id="chat")
        assert result["firewalled"] == ["s1"] and result["memories_created"] == []

    async def test_an_assistant_quoting_a_memory_makes_no_memory(self, client: Any,
                                                                 language: str) -> None:
        fact_id = await with_fact(client, language)
        quoted = f"- [2026-12-01] user: {FACT[language]}" if language == "en" \
            else f"user：{FACT[language].rstrip('。')}"
        result = await store(client, [
            {"msg_id": "q1", "role": "user", "content": QUERY[language]},
            {"msg_id": "a1", "role": "assistant", "content": quoted},
        ], session_id="chat")
        assert result["firewalled"] == ["a1"]
        texts = {m["id"]: m["text"] for m in await all_memories(client)}
        assert texts[fact_id] == f"user: {FACT[language]}"
        assert all(quoted not in t and "assistant" not in t for t in texts.values())
        assert set(await raw_messages(client, "chat")) == {"q1", "a1"}

    async def test_a_user_repeating_a_memory_is_stored(self, client: Any,
                                                       language: str) -> None:
        fact_id = await with_fact(client, language)
        result = await store(client, [{"msg_id": "u1", "role": "user",
                                       "content": FACT[language]}], session_id="chat")
        assert result["firewalled"] == []
        (new_id,) = result["memories_created"]
        assert new_id != fact_id
        assert (await client.get(f"/v1/memories/{new_id}")).json()["text"] == \
            f"user: {FACT[language]}"

    async def test_an_assistant_saying_the_same_words_is_stored(self, client: Any,
                                                                language: str) -> None:
        # The same sentence without Engram's `user:` attribution is the assistant speaking
        # (it often repeats facts in its own answers), not a quote of a memory's text.
        await with_fact(client, language)
        result = await store(client, [{"msg_id": "a1", "role": "assistant",
                                       "content": FACT[language]}], session_id="chat")
        assert result["firewalled"] == [] and len(result["memories_created"]) == 1

    async def test_an_assistant_adding_its_own_words_is_stored(self, client: Any,
                                                               language: str) -> None:
        await with_fact(client, language)
        own = {"en": "I booked flights for all eight of you on 3 March.",
               "zh": "我已经为你们八个人订好了三月三日的机票。"}[language]
        result = await store(client, [{"msg_id": "a1", "role": "assistant",
                                       "content": f"{FACT[language]}\n{own}"}],
                             session_id="chat")
        assert result["firewalled"] == [] and len(result["memories_created"]) == 1


class TestSwitch:
    async def test_the_firewall_can_be_switched_off(self, open_client: Any) -> None:
        async with open_client(store_firewall=False) as client:
            await with_fact(client, "en")
            block = await block_for(client, "en")
            result = await store(client, [{"msg_id": "s1", "role": "system",
                                           "content": block}], session_id="chat")
            assert result["firewalled"] == [] and len(result["memories_created"]) == 1

    async def test_wait_false_is_firewalled_too(self, client: Any) -> None:
        await with_fact(client, "zh")
        block = await block_for(client, "zh")
        queued = await store(client, [{"msg_id": "s1", "role": "system", "content": block}],
                             session_id="chat", wait=False, expect=202)
        await client.app.state.engram.store.idle()
        job = (await client.get(f"/v1/jobs/{queued['job_id']}")).json()
        assert job["state"] == "done" and job["result"]["firewalled"] == ["s1"]
        assert len(await all_memories(client)) == 1
