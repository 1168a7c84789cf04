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


    async def test_several_quotes_in_one_store_are_decided_with_one_search(
            self, client: Any, language: str) -> None:
        second = {"en": "My sister Ana is joining the offsite as well.",
                  "zh": "我妹妹安娜也会参加这次团建。"}[language]
        own = {"en": "I think Lisbon will be lovely in spring.",
               "zh": "我觉得春天的里斯本一定很美。"}[language]
        await store(client, [{"msg_id": "f1", "role": "user", "content": FACT[language]},
                             {"msg_id": "f2", "role": "user", "content": second}],
                    session_id="facts")
        repo = client.app.state.engram.repo
        searches: list[str] = []
        real_search = repo.memory_texts_like

        async def counted(namespace: str, text: str, *, limit: int) -> list[str]:
            searches.append(text)
            return list(await real_search(namespace, text, limit=limit))

        repo.memory_texts_like = counted
        result = await store(client, [
            {"msg_id": "q1", "role": "user", "content": QUERY[language]},
            {"msg_id": "a1", "role": "assistant", "content": f"user: {FACT[language]}"},
            {"msg_id": "a2", "role": "assistant", "content": f"- [2026-12-01] user: {second}"},
            {"msg_id": "a3", "role": "assistant", "content": f"user: {second}\n{own}"},
            {"msg_id": "t1", "role": "tool", "content": f"user: {FACT[language]}\nuser: {second}"},
        ], session_id="chat")
        assert sorted(result["firewalled"]) == ["a1", "a2", "t1"]
        assert len(searches) == 1  # one full-text search for the four candidates
        texts = [m["text"] for m in await all_memories(client)]
        assert any(own in t for t in texts)  # the quote with words of its own is stored
        assert not any("tool:" in t or f"assistant: user: {FACT[language]}" in t
                       or f"- [2026-12-01] user: {second}" in t for t in texts)


OWN = {"en": "By the way, we moved to Munich last month.",
       "zh": "对了，我们上个月搬到慕尼黑了。"}
SECOND = {"en": "My sister Ana is joining the offsite as well.",
          "zh": "我妹妹安娜也会参加这次团建。"}
# Look-alike letters: Cyrillic а, е, о in place of Latin a, e, o.
LOOK_ALIKE = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e"})


@pytest.mark.parametrize("language", ["en", "zh"])
class TestTheUsersOwnWords:
    async def test_a_new_fact_pasted_after_a_block_is_kept(self, client: Any,
                                                           language: str) -> None:
        await with_fact(client, language)
        content = await block_for(client, language) + "\n\n" + OWN[language]
        result = await store(client, [{"msg_id": "u1", "role": "user", "content": content}],
                             session_id="chat")
        assert result["firewalled"] == [] and len(result["memories_created"]) == 1
        (new_id,) = result["memories_created"]
        assert (await client.get(f"/v1/memories/{new_id}")).json()["text"] == \
            f"user: {OWN[language]}"
        assert await raw_messages(client, "chat") == {"u1": content}  # kept as sent
        query = {"en": "where did we move?", "zh": "我们搬到哪里了？"}[language]
        found = (await client.post("/v1/recall", json={
            "namespace": "alice", "query": query})).json()["memories"]
        assert found and found[0]["id"] == new_id

    async def test_a_grown_chunk_does_not_take_the_block_back(self, client: Any,
                                                             language: str) -> None:
        await with_fact(client, language)
        block = await block_for(client, language)
        await store(client, [{"msg_id": "u1", "role": "user",
                              "content": f"{OWN[language]}\n\n{block}"}], session_id="chat")
        await store(client, [{"msg_id": "u2", "role": "user", "content": SECOND[language]}],
                    session_id="chat")
        texts = [m["text"] for m in await all_memories(client) if m["session_id"] == "chat"]
        assert texts and all(FACT[language] not in t for t in texts)
        assert any(OWN[language] in t and SECOND[language] in t for t in texts)


@pytest.mark.parametrize("language", ["en", "zh"])
class TestEchoesInDisguise:
    async def test_a_recall_response_passed_on_as_escaped_json(self, client: Any,
                                                                language: str) -> None:
        await with_fact(client, language)
        response = (await client.post("/v1/recall", json={
            "namespace": "alice", "query": QUERY[language], "min_score": 0.0})).json()
        escaped = json.dumps(response)  # ASCII: "\\u4ee5\\u4e0b..." for Chinese
        result = await store(client, [
            {"msg_id": "t1", "role": "tool", "content": escaped},
            {"msg_id": "t2", "role": "tool", "content": f"recall returned: {escaped}"},
        ], session_id="chat")
        assert sorted(result["firewalled"]) == ["t1", "t2"]
        assert result["memories_created"] == []

    async def test_a_preface_with_a_word_changed(self, client: Any, language: str) -> None:
        await with_fact(client, language)
        block = await block_for(client, language)
        changed = block.replace("earlier", "previous") if language == "en" \
            else block.replace("以往", "之前")
        assert changed != block
        result = await store(client, [{"msg_id": "s1", "role": "system", "content": changed}],
                             session_id="chat")
        assert result["firewalled"] == ["s1"] and result["memories_created"] == []

    async def test_look_alike_letters(self, client: Any, language: str) -> None:
        await with_fact(client, language)
        block = (await block_for(client, language)).translate(LOOK_ALIKE)
        quote = f"user: {FACT[language]}".translate(LOOK_ALIKE)
        result = await store(client, [
            {"msg_id": "s1", "role": "system", "content": block},
            {"msg_id": "a1", "role": "assistant", "content": quote},
        ], session_id="chat")
        assert sorted(result["firewalled"]) == ["a1", "s1"]

    async def test_two_quoted_lines_joined_or_as_a_json_list(self, client: Any,
                                                             language: str) -> None:
        await store(client, [{"msg_id": "f1", "role": "user", "content": FACT[language]},
                             {"msg_id": "f2", "role": "user", "content": SECOND[language]}],
                    session_id="facts")
        lines = [f"user: {FACT[language]}", f"user: {SECOND[language]}"]
        result = await store(client, [
            {"msg_id": "a1", "role": "assistant", "content": " ".join(lines)},
            {"msg_id": "t1", "role": "tool", "content": json.dumps(lines, ensure_ascii=False)},
            {"msg_id": "a2", "role": "assistant",
             "content": " ".join(lines) + " " + OWN[language]},
        ], session_id="chat")
        assert sorted(result["firewalled"]) == ["a1", "t1"]  # a2 adds words of its own
        assert len(result["memories_created"]) == 1


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
