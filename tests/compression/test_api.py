"""Compression over HTTP: shrink, restore byte for byte, protection, dry run, policies."""

from __future__ import annotations

from typing import Any

import httpx

from app.compression.summarize import AbstractiveSummarizer
from tests.compression.fixtures import FACTS, days_ago, messages
from tests.compression.helpers import (
    SMALL_CHUNKS,
    TASK_ONLY,
    dump,
    everything,
    only,
    run,
    set_policy,
)
from tests.helpers import store


async def evolution(client: Any, memory_id: str) -> list[str]:
    response = await client.get(f"/v1/memories/{memory_id}/evolution")
    assert response.status_code == 200, response.text
    return [e["event"] for e in response.json()["events"]]


class TestCompressAndRestore:
    async def test_text_shrinks_and_every_original_comes_back_byte_for_byte(
            self, open_client: Any, seeded: Any) -> None:
        seeded("default")  # chunks of the default size (six turns): what a real store holds
        async with open_client(compression_capacity_chars=1000) as client:
            await set_policy(client, "alice")
            before = await everything(client, "alice")
            result = only(await run(client, "alice"))

            assert result["pressure_alarm"] and not result["forced"]
            assert len(result["compressed"]) == len(before) - 1 and result["summaries"]
            after = await everything(client, "alice")
            size_before = sum(len(m["text"]) for m in before.values())
            size_after = sum(len(m["text"]) for m in after.values())
            assert size_after < 0.75 * size_before, (size_before, size_after)
            assert result["text_chars_after"] == size_after

            summaries = [m for m in after.values() if m["summary_of"]]
            assert {m["tier"] for m in summaries} == {"longterm"}
            assert sorted(i for m in summaries for i in m["summary_of"]) == sorted(
                result["compressed"])
            for memory_id in result["compressed"]:
                assert after[memory_id]["state"] == "compressed"
                assert len(after[memory_id]["text"]) < len(before[memory_id]["text"])
            assert "merged" in await evolution(client, summaries[0]["id"])

            for memory_id in result["compressed"]:
                response = await client.post(f"/v1/memories/{memory_id}/restore")
                assert response.status_code == 200, response.text
                restored = response.json()
                assert restored["state"] == "active"
                assert restored["text"].encode() == before[memory_id]["text"].encode()
                assert (await evolution(client, memory_id))[-2:] == ["compressed", "restored"]
            final = await everything(client, "alice")
            assert all(final[i]["text"] == before[i]["text"] for i in before)

            # A memory someone restored is never compressed again.
            again = only(await run(client, "alice"))
            assert again["compressed"] == []
            assert (await dump(client, "alice", 0))["items"][-1]["decision"] == "restored"

    async def test_protected_memories_are_untouched(self, open_client: Any, seeded: Any) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            await set_policy(client, "alice")
            before = await everything(client, "alice")
            chatter = sorted((m for m in before.values() if m["session_id"] == "en"),
                             key=lambda m: m["msg_ids"][0])
            pinned = chatter[2]["id"]
            assert (await client.patch(f"/v1/memories/{pinned}",
                                       json={"protected": True})).status_code == 200
            result = only(await run(client, "alice"))
            after = await everything(client, "alice")
            assert pinned not in result["compressed"] and result["compressed"]
            assert after[pinned]["text"] == before[pinned]["text"]
            assert after[pinned]["state"] == "active"
            # The facts scored above the emergency hold: protected for good, untouched.
            facts = [m for m in after.values() if m["session_id"] == "facts"
                     and not m["summary_of"]]
            assert facts and all(m["protected"] and m["state"] == "active" for m in facts)
            assert {m["id"] for m in facts} <= set(result["held"])

    async def test_dry_run_changes_nothing(self, open_client: Any, seeded: Any) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            await set_policy(client, "alice")
            before = await everything(client, "alice")
            events = {i: await evolution(client, i) for i in before}
            result = only(await run(client, "alice", dry_run=True))
            assert result["dry_run"] and result["decisions"].get("compress", 0) >= 8
            assert result["compressed"] == [] and result["summaries"] == []
            assert await everything(client, "alice") == before
            assert {i: await evolution(client, i) for i in before} == events
            status = (await client.get("/v1/compression/status")).json()
            assert "alice" not in status["namespaces"]  # dry runs are not results
            assert status["last_pass"]["dry_run"] is True


    async def test_a_changed_message_brings_its_compressed_memory_back(
            self, open_client: Any, seeded: Any) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            await set_policy(client, "alice")
            result = only(await run(client, "alice"))
            target = (await everything(client, "alice"))[result["compressed"][0]]
            changed = [{"msg_id": target["msg_ids"][0], "role": "user",
                        "content": "Edited: the cat now sleeps on the piano all day."}]
            await store(client, changed, session_id=target["session_id"])
            rebuilt = (await everything(client, "alice"))[target["id"]]
            assert rebuilt["state"] == "active" and rebuilt["text"].startswith(
                "user: Edited: the cat")
            only(await run(client, "alice"))
            # The stale archive row went; if the new text was compressed again, the archive
            # holds the new text.
            archived = await client.app.state.engram.repo.get_archived("alice", [target["id"]])
            assert all(a.text == rebuilt["text"] for a in archived)

    async def test_abstractive_summaries_when_configured(self, open_client: Any,
                                                         seeded: Any) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            service = client.app.state.engram.compression.service
            service._summarizer = AbstractiveSummarizer(
                "http://llm.test/v1", model="tiny", transport=httpx.MockTransport(
                    lambda _: httpx.Response(200, json={"choices": [{"message": {
                        "content": "Small talk about weather, cats and bread."}}]})))
            # The gate off: this summary loses facts (tests/compression/test_design.py).
            await set_policy(client, "alice", overrides={**TASK_ONLY, "min_coverage": 0})
            result = only(await run(client, "alice"))
            memories = await everything(client, "alice")
            texts = {memories[s]["text"] for s in result["summaries"]}
            assert texts == {"Small talk about weather, cats and bread."}


class TestRules:
    async def test_emergency_hold_freezes_the_candidates_before_it(
            self, open_client: Any, seeded: Any) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            # Facts again after the chatter: they score above the hold.
            await store(client, messages(FACTS, prefix="again"), session_id="again")
            await set_policy(client, "alice")
            result = only(await run(client, "alice"))
            assert result["compressed"] == [] and result["decisions"]["frozen"] >= 8
            items = (await dump(client, "alice", 0))["items"]
            decisions = [i["decision"] for i in items]
            assert decisions[:2] == ["hold", "hold"] and decisions[-2:] == ["hold", "hold"]
            assert set(decisions[2:-2]) <= {"frozen", "keep"}
            assert all(i["decided_at"] for i in items)

    async def test_no_trigger_below_the_pressure_alarm_unless_forced(
            self, open_client: Any, seeded: Any) -> None:
        seeded("small")
        async with open_client(**{**SMALL_CHUNKS, "compression_capacity_chars": 1_000_000}
                               ) as client:
            await set_policy(client, "alice")
            calm = only(await run(client, "alice"))
            assert not calm["pressure_alarm"] and calm["compressed"] == []
            assert calm["decisions"]["candidate"] >= 8
            forced = only(await run(client, "alice", force=True))
            assert forced["forced"] and len(forced["compressed"]) >= 8

    async def test_old_kept_memories_become_long_term_facts(self, open_client: Any) -> None:
        async with open_client(**{**SMALL_CHUNKS, "compression_capacity_chars": 1_000_000}
                               ) as client:
            await store(client, messages(FACTS[:2], prefix="old", when=days_ago(40)),
                        session_id="old")
            await store(client, messages(FACTS[2:], prefix="new", when=days_ago(2)),
                        session_id="new")
            await set_policy(client, "alice", overrides={})
            result = only(await run(client, "alice"))
            tiers = {m["session_id"]: m["tier"] for m in (await everything(client,
                                                                           "alice")).values()}
            assert tiers == {"old": "longterm", "new": "session"}
            assert len(result["promoted"]) == 1
            assert "promoted" in await evolution(client, result["promoted"][0])


class TestPolicies:
    async def test_presets_overrides_and_validation(self, client: Any) -> None:
        view = (await client.get("/v1/compression/policies/alice")).json()
        assert view["chosen"] is False and view["live"]["name"] == "default"
        assert view["live"]["weights"] == {"novelty": 0.1, "entropy": 0.3, "task": 0.5,
                                           "emotion": 0.1}
        chosen = await set_policy(client, "alice", preset="short_dialogue",
                                  overrides={"window_size": 8})
        assert chosen["live"]["base_threshold"] == 0.6 and chosen["live"]["window_size"] == 8
        assert chosen["live"]["clustering"] is False
        bad = await client.put("/v1/compression/policies/alice", json={
            "preset": "default", "overrides": {"base_threshold": 0.95}})
        assert bad.status_code == 400 and "emergency_hold" in bad.json()["error"]["message"]
        unknown = await client.put("/v1/compression/policies/alice", json={
            "preset": "default", "overrides": {"no_such_knob": 1}})
        assert unknown.status_code == 400
        kept = (await client.get("/v1/compression/policies/alice")).json()
        assert kept["live"]["name"] == "short_dialogue"

    async def test_shadow_policy_is_reported_not_applied(self, open_client: Any, seeded: Any
                                                         ) -> None:
        seeded("small")
        async with open_client(**SMALL_CHUNKS) as client:
            calm = {**TASK_ONLY, "base_threshold": 0.01}  # nothing is ever low
            await set_policy(client, "alice", overrides=calm,
                             shadow={"preset": "default", "overrides": TASK_ONLY})
            result = only(await run(client, "alice"))
            assert result["compressed"] == []
            shadow = result["shadow"]
            assert shadow["would_compress"] >= 8 and shadow["differing"] >= 8
            assert shadow["by_pair"].get("keep→compress", 0) >= 8
            assert all(m["state"] == "active" for m in (await everything(client,
                                                                         "alice")).values())


class TestMigration:
    async def test_a_store_from_before_compression_is_upgraded_and_compressible(
            self, open_client: Any, data_dir: Any) -> None:
        from tests.storage.test_migrations import write_version_1_store

        await write_version_1_store(data_dir)  # rows without the 0004 columns
        async with open_client() as client:
            items = (await dump(client, "alice"))["items"]
            assert {i["decision"] for i in items} == {None}
            assert not any(i["scored"] for i in items)
            result = only(await run(client, "alice"))
            assert result["scored"] == 2
            assert {i["decision"] for i in (await dump(client, "alice"))["items"]} == {"keep"}
