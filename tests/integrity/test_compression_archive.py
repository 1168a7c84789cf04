"""Compression never loses an original: every compressed memory restores byte for byte,
whatever passes ran before, whether they finished or were cut short between their writes."""

from __future__ import annotations

from typing import Any

import pytest

from app.storage.repository import Repository
from tests.compression.helpers import TASK_ONLY, everything, only, run, set_policy
from tests.helpers import AppClient, store

NAMESPACE = "alice"
# Chatter that a task-only policy compresses, in both languages, with bytes a careless
# round trip would change.
_TOPICS_EN = ["the weather on the walk in", "a cooking show about soup", "the neighbour's cat",
              "cold tea on the windowsill", "the queue at the bakery", "clouds before rain"]
_TOPICS_ZH = ["早上阴天，路上很安静。", "昨晚看了做汤的节目。", "邻居家的猫坐在围墙上。",
              "茶凉了，杯子忘在窗台上。", "面包店门口排了长队。", "云越来越黑，可能要下雨。"]


def chatter(count: int, *, version: str = "") -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        if i % 2:
            content = f"闲聊{version} {i}：{_TOPICS_ZH[i % len(_TOPICS_ZH)]} 🫖"
        else:
            content = (f"Chat{version} {i}: we chatted about {_TOPICS_EN[i % len(_TOPICS_EN)]},"
                       "\tnothing  special, café.")
        out.append({"msg_id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                    "content": content})
    return out


async def compress(client: AppClient) -> dict[str, Any]:
    return only(await run(client, NAMESPACE, force=True))


async def assert_all_restore(client: AppClient, originals: dict[str, str]) -> None:
    """Each memory compressed now restores to the text it held before its last compression."""
    memories = await everything(client, NAMESPACE)
    compressed = [i for i, m in memories.items() if m["state"] == "compressed"]
    assert compressed, "the scenario compressed nothing"
    for memory_id in compressed:
        response = await client.post(f"/v1/memories/{memory_id}/restore")
        assert response.status_code == 200, (memory_id, response.text)
        assert response.json()["text"] == originals[memory_id]
        assert response.json()["state"] == "active"


async def active_texts(client: AppClient) -> dict[str, str]:
    return {i: m["text"] for i, m in (await everything(client, NAMESPACE)).items()
            if m["state"] == "active" and not m.get("summary_of")}


async def remember(client: AppClient, originals: dict[str, str], before: dict[str, str]
                   ) -> None:
    """Memories active before a pass and compressed after it: their original is the text
    they held before (whether the pass reported success or died after compressing)."""
    for memory_id, memory in (await everything(client, NAMESPACE)).items():
        if memory["state"] == "compressed" and memory_id in before:
            originals[memory_id] = before[memory_id]


class TestArchiveSurvivesLaterPasses:
    async def test_recompressing_a_rebuilt_memory_keeps_its_new_archive_row(
            self, open_client: Any) -> None:
        """The issue's scenario: compress, re-store the first message of each compressed
        memory with changed content, compress again: every compressed memory restores."""
        async with open_client(compression_enabled=False) as client:
            # The archive is under test, not the quality gate (synthetic chatter's probes).
            await set_policy(client, NAMESPACE, overrides={**TASK_ONLY, "min_coverage": 0})
            await store(client, chatter(60), namespace=NAMESPACE)
            originals: dict[str, str] = {}
            before = await active_texts(client)
            first = await compress(client)
            assert first["compressed"], first
            await remember(client, originals, before)

            memories = await everything(client, NAMESPACE)
            edited = chatter(60, version=" (edited)")
            changed = [edited[int(memories[i]["start_msg"][1:])] for i in first["compressed"]]
            await store(client, changed, namespace=NAMESPACE)
            rebuilt = await everything(client, NAMESPACE)
            assert all(rebuilt[i]["state"] == "active" for i in first["compressed"])

            before = await active_texts(client)
            second = await compress(client)
            assert set(second["compressed"]) & set(first["compressed"]), second
            await remember(client, originals, before)
            for _ in range(2):  # later passes change nothing that is restorable
                await compress(client)
            await assert_all_restore(client, originals)


class _FailingWrite(Exception):
    pass


class TestPassCutShort:
    @pytest.mark.parametrize("fail_at", ["archive_memories", "upsert_memories",
                                         "set_memory_columns", "append_events"])
    async def test_any_number_of_passes_after_a_cut_short_one(
            self, open_client: Any, monkeypatch: pytest.MonkeyPatch, fail_at: str) -> None:
        """A pass that dies at any one of its writes, then
        passes that run to the end: every compressed memory restores byte for byte."""
        async with open_client(compression_enabled=False) as client:
            # The archive is under test, not the quality gate (synthetic chatter's probes).
            await set_policy(client, NAMESPACE, overrides={**TASK_ONLY, "min_coverage": 0})
            await store(client, chatter(40), namespace=NAMESPACE)
            originals: dict[str, str] = {}
            before = await active_texts(client)
            first = await compress(client)
            await remember(client, originals, before)
            memories = await everything(client, NAMESPACE)
            edited = chatter(40, version=" (v2)")
            await store(client, [edited[int(memories[i]["start_msg"][1:])]
                                 for i in first["compressed"]], namespace=NAMESPACE)

            real = getattr(Repository, fail_at)

            async def fail(self: Repository, *args: Any, **kwargs: Any) -> Any:
                raise _FailingWrite(fail_at)

            monkeypatch.setattr(Repository, fail_at, fail)
            before = await active_texts(client)
            cut = await run(client, NAMESPACE, force=True)
            (outcome,) = cut["namespaces"]
            assert not outcome["ok"]
            monkeypatch.setattr(Repository, fail_at, real)
            await remember(client, originals, before)

            for _ in range(2):
                before = await active_texts(client)
                await compress(client)
                await remember(client, originals, before)
            await assert_all_restore(client, originals)
