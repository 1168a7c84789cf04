"""Compaction by rows outside the indexes: a store that is read a lot (hit flushes rewrite
the rows they count) must not drift out of its full-text index between the version-count
compactions, and a restart must not forget what the indexes lack."""

from __future__ import annotations

import asyncio
from typing import Any

import lancedb

from app.scheduler import Maintenance
from tests.helpers import store, wait_idle

NOTES = ["下周二上午体检，记得空腹。", "The dentist appointment moved to Friday at 3 pm.",
         "周末和小王去爬香山。", "Renew the car insurance before the end of the month.",
         "女儿的钢琴课改到周四晚上。", "The team offsite is in Lisbon this spring."]
READ = NOTES[:3]  # recalled, so a hit flush rewrites their rows; the others stay as they are


async def store_and_read(client: Any) -> None:
    """Store the notes (one memory each), index them, then recall some of them (hits)."""
    for i, note in enumerate(NOTES):
        await store(client, [{"msg_id": f"n{i}", "role": "user", "content": note}],
                    session_id=f"s{i}")
    await wait_idle(client)
    state = client.app.state.engram
    await state.maintenance.run_once(force=True)
    for note in READ:
        response = await client.post("/v1/recall", json={"namespace": "alice", "query": note,
                                                         "top_k": 1})
        assert response.status_code == 200, response.text
        assert response.json()["memories"][0]["text"].endswith(note)
    assert await state.hits.flush() == len(READ)


def unindexed_text_rows(data_dir: Any) -> int:
    table = lancedb.connect(data_dir / "lancedb").open_table("memories")
    return int(table.index_stats("text_idx").num_unindexed_rows)


def maintenance(client: Any, every_rows: int) -> Maintenance:
    """The app's repository, compacted by rows only (the version count set out of reach)."""
    return Maintenance(client.app.state.engram.repo, every_versions=10**6,
                       every_rows=every_rows, idle_seconds=0)


class TestCompactionByRows:
    async def test_rows_rewritten_by_hits_are_compacted(self, open_client: Any,
                                                        data_dir: Any) -> None:
        async with open_client(hit_flush_seconds=3600) as client:
            await store_and_read(client)
            assert await maintenance(client, every_rows=len(READ) + 1).run_once() == []
            assert "memories" in await maintenance(client, every_rows=len(READ)).run_once()
            assert unindexed_text_rows(data_dir) == 0
            response = await client.post("/v1/recall", json={"namespace": "alice",
                                                             "query": "体检"})
            assert "体检" in response.json()["memories"][0]["text"]

    async def test_a_restart_remembers_the_rows_outside_the_index(
            self, open_client: Any, data_dir: Any) -> None:
        later = ["搬家公司约在下个月三号。", "Book the flight to Osaka for the wedding."]
        async with open_client(hit_flush_seconds=3600) as client:
            await store_and_read(client)
            for i, note in enumerate(later):  # written after the index: outside it
                await store(client, [{"msg_id": f"l{i}", "role": "user", "content": note}],
                            session_id=f"later{i}")
            await wait_idle(client)
        assert unindexed_text_rows(data_dir) >= len(later)
        async with open_client() as client:
            assert "memories" in await maintenance(client, every_rows=len(later)).run_once()
            assert unindexed_text_rows(data_dir) == 0
            response = await client.post("/v1/recall", json={"namespace": "alice",
                                                             "query": "搬家公司"})
            assert "搬家" in response.json()["memories"][0]["text"]


def fragments(data_dir: Any, table: str) -> int:
    stats = lancedb.connect(data_dir / "lancedb").open_table(table).stats()
    return int(stats["fragment_stats"]["num_fragments"])


TURNS = [("user", "我下周二上午去杭州出差，住在西湖边。"),
         ("assistant", "Noted: Hangzhou on Tuesday."),
         ("user", "The dentist moved my appointment to Friday 10am."),
         ("assistant", "好的，周五上午十点看牙医。")]


class TestBusyTablesAreCompacted:
    """The raw log (and jobs, ledger, events, memories) is compacted every few versions even
    when writes never pause: each version leaves a fragment that every store's reads open,
    and the idle-time compaction never comes while clients keep storing."""

    async def test_concurrent_stores_keep_the_raw_log_compact(self, open_client: Any,
                                                             data_dir: Any) -> None:
        every = 8
        async with open_client(compact_unindexed_every_versions=every) as client:
            async def append(namespace: str, round_: int) -> dict[str, Any]:
                role, content = TURNS[round_ % len(TURNS)]
                return await store(client, [{"msg_id": f"r{round_}", "role": role,
                                             "content": f"{content} ({namespace} #{round_})"}],
                                   namespace=namespace, wait=False, expect=202)

            # 4 namespaces at once, 16 rounds, each built before the next (every build
            # leaves a raw-log fragment: its rows marked done), no pause for the idle
            # compaction; compactions run while other stores append.
            rounds = 16
            for round_ in range(rounds):
                acks = await asyncio.gather(*(append(ns, round_) for ns in NAMESPACES))
                assert all(a["new"] == 1 for a in acks)
                await wait_idle(client)
            repo = client.app.state.engram.repo
            await repo.close()  # the compaction the last writes started, if any
            # Without it: a fragment per round at least (16 here), more with every version.
            assert fragments(data_dir, "messages") <= every
            assert fragments(data_dir, "jobs") <= every
            # A build reads its session's memories and searches the namespace's texts: 332
            # fragments after a 16-tenant ingest made each of those reads 10-25x slower.
            assert fragments(data_dir, "memories") <= every
            for namespace in NAMESPACES:  # every acknowledged message once, all built
                rows = await repo.session_messages(namespace, "s1")
                assert [r.msg_id for r in rows] == [f"r{i}" for i in range(rounds)]
                assert {r.state for r in rows} == {"done"}
            for query, expected in (("杭州出差", "杭州"), ("dentist appointment", "dentist")):
                response = await client.post("/v1/recall", json={
                    "namespace": NAMESPACES[0], "query": query, "top_k": 3})
                assert response.status_code == 200, response.text
                assert expected in response.json()["memories"][0]["text"]


NAMESPACES = ["alice", "bob", "carol", "dave"]
