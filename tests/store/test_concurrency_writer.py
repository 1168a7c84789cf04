"""Group commit (app/storage/writer.py) on a real LanceDB table of the real app.

No HTTP input can make a storage write invalid (the API refuses bad input first), so the
invalid member is made here, below the API, with a row LanceDB itself rejects at commit time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa

from app.storage.records import MessageRecord
from app.storage.writer import Upsert
from tests.helpers import metric_by_label, metrics_after_bilingual_use


def message_rows(repo: Any, namespace: str, count: int = 2) -> pa.Table:
    records = [MessageRecord(namespace=namespace, session_id="s1", msg_id=f"m{i}", seq=i,
                             role="user", content=f"{namespace}: note {i} / 第{i}条笔记")
               for i in range(count)]
    table: pa.Table = repo._arrow("messages", records)
    return table


class TestGroupCommit:
    async def test_one_namespaces_invalid_rows_fail_only_its_own_write(self, client: Any
                                                                        ) -> None:
        repo = client.app.state.engram.repo
        writer = repo.writers["messages"]
        good = [message_rows(repo, f"tenant-{i}") for i in range(6)]
        # A null in the NOT NULL primary key: LanceDB refuses the whole merge it is in.
        bad = message_rows(repo, "tenant-bad")
        keys = bad.column("key").to_pylist()
        bad = bad.set_column(bad.schema.get_field_index("key"), bad.schema.field("key"),
                             pa.array([None, *keys[1:]], pa.string()))
        batch = [*good[:3], bad, *good[3:]]
        commits = writer.commits
        results = await asyncio.gather(*(writer.write(Upsert("key", t)) for t in batch),
                                       return_exceptions=True)
        failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        assert failed == [3]
        assert "null" in str(results[3]).lower()
        for i in range(6):
            assert await repo.count_messages(f"tenant-{i}") == 2
        assert await repo.count_messages("tenant-bad") == 0
        # The batch was tried once together, then member by member.
        assert writer.commits - commits == 6

    async def test_concurrent_stores_into_many_namespaces_share_commits(self, client: Any
                                                                       ) -> None:
        repo = client.app.state.engram.repo
        before = await repo._tables["messages"].version()
        responses = await asyncio.gather(*(
            client.post("/v1/store", json={
                "namespace": f"tenant-{i}", "session_id": "s1", "wait": False,
                "messages": [{"msg_id": "a", "role": "user", "content": f"Tenant {i} likes tea"},
                             {"msg_id": "b", "role": "user", "content": f"租户{i}喜欢喝茶"}]})
            for i in range(16)))
        assert [r.status_code for r in responses] == [202] * 16
        versions = await repo._tables["messages"].version() - before
        # 16 acknowledgements, far fewer raw-log commits (builds may add theirs meanwhile).
        assert versions <= 8, versions
        assert sum(r.json()["new"] for r in responses) == 32


class TestMemoryGauges:
    async def test_metrics_report_what_the_server_holds_without_namespace_labels(
        self, client: Any
    ) -> None:
        text = await metrics_after_bilingual_use(client)
        held = metric_by_label(text, "engram_memory_held", "what")
        assert held["namespace_cache_rows"] == 2  # the recalled namespace's copy, 2 memories
        assert held["namespace_cache_bytes"] > 2 * 384 * 4
        assert held["hit_buffer_ids"] >= 1
        assert held["resident_bytes"] > 100e6  # the model alone is more
        # Its parts: the heaps (the model's weights and the tokenizer's table, > 50 MB) and
        # mapped files (the libraries' code); shared memory makes up any rest.
        anonymous, files = held["resident_anonymous_bytes"], held["resident_file_bytes"]
        assert anonymous > 50e6 and files > 10e6
        assert anonymous + files <= held["resident_bytes"] * 1.05  # read at two moments
        assert held["write_queue_writes"] == 0 and held["store_queue_sessions"] == 0
        assert "alice" not in "".join(x for x in text.splitlines() if "memory_held" in x)
