"""The namespaces' pending messages held for recall (pending_cache.py) against LanceDB.

Real LanceDB in a temporary directory. After each kind of raw-log write the held answer of
`pending_messages` must equal a fresh read (a second `Repository` on the same directory with
the cache off, standing in for another process), and the writes of this process must be
followed without reading the raw log again.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.storage.records import MemoryRecord, MessageRecord
from app.storage.repository import Repository, SearchFilter
from tests.conftest import make_settings

DIM = 16
T0 = datetime(2024, 3, 1, tzinfo=UTC)


def message(i: int, *, namespace: str = "alice", session_id: str = "s1",
            state: str = "pending") -> MessageRecord:
    return MessageRecord(namespace=namespace, session_id=session_id, msg_id=f"m{i}", seq=i,
                         content=f"note {i} about the garden", content_hash=f"h{i}",
                         received_at=T0, state=state)


def ids(rows: list[MessageRecord]) -> list[tuple[str, str, str]]:
    return [(m.session_id, m.msg_id, m.content) for m in rows]


@pytest.fixture
async def repos(tmp_path: Path) -> tuple[Repository, Repository]:
    settings = make_settings(tmp_path / "data")
    cached = await Repository.open(settings, embedding_dim=DIM)
    plain = await Repository.open(settings, embedding_dim=DIM)
    plain.pending_cache.max_rows = 0  # never held: LanceDB answers
    return cached, plain


async def same(cached: Repository, plain: Repository, namespace: str = "alice"
               ) -> list[tuple[str, str, str]]:
    held = ids(await cached.pending_messages(namespace))
    assert held == ids(await plain.pending_messages(namespace))
    return held


class TestFollowsTheWrites:
    async def test_stores_builds_and_deletes_are_followed_without_a_read(
            self, repos: tuple[Repository, Repository]) -> None:
        cached, plain = repos
        await cached.store_messages([message(1), message(2)], [])
        await cached.upsert_messages([message(9, namespace="bob")])
        assert len(await same(cached, plain)) == 2
        misses = cached.pending_cache.misses
        # A new message, an edit, a build marking one done, another namespace's write.
        await cached.store_messages([message(3)], [])
        edited = replace(message(2), content="note 2 about the piano", content_hash="h2b")
        await cached.store_messages([], [edited])
        await cached.mark_messages_done([message(1)])
        await cached.upsert_messages([message(10, namespace="bob")])
        held = await same(cached, plain)
        assert held == [("s1", "m2", "note 2 about the piano"),
                        ("s1", "m3", "note 3 about the garden")]
        # Done only if the content built is still the stored one: the edit stays pending.
        await cached.mark_messages_done([message(2)])
        assert [m for _, m, _ in await same(cached, plain)] == ["m2", "m3"]
        await cached.delete_messages("alice", "s1", ["m3"])
        assert [m for _, m, _ in await same(cached, plain)] == ["m2"]
        assert cached.pending_cache.misses == misses + 1  # only the delete: read again
        assert cached.pending_cache.hits == 2

    async def test_another_processes_write_is_seen(
            self, repos: tuple[Repository, Repository]) -> None:
        cached, plain = repos
        await cached.store_messages([message(1)], [])
        assert len(await same(cached, plain)) == 1
        await plain.store_messages([message(2)], [])  # not reported to `cached`
        assert len(await same(cached, plain)) == 2
        await plain.mark_messages_done([message(1), message(2)])
        assert await same(cached, plain) == []

    async def test_namespaces_stay_apart(self, repos: tuple[Repository, Repository]) -> None:
        cached, plain = repos
        await cached.store_messages([message(1), message(2, namespace="bob")], [])
        assert [m for _, m, _ in await same(cached, plain, "alice")] == ["m1"]
        assert [m for _, m, _ in await same(cached, plain, "bob")] == ["m2"]
        await cached.delete_namespace("bob")
        assert await same(cached, plain, "bob") == []
        assert [m for _, m, _ in await same(cached, plain, "alice")] == ["m1"]


class TestBuiltMessages:
    async def test_the_namespace_copy_and_lancedb_agree(
            self, repos: tuple[Repository, Repository]) -> None:
        """What recall leaves out of the pending messages: those a memory holds."""
        cached, plain = repos
        plain.namespace_cache.max_namespace_rows = 0  # never copied: LanceDB answers
        vector = [1.0] + [0.0] * (DIM - 1)
        await cached.upsert_memories([
            MemoryRecord(id=f"mem{i}", namespace="alice", session_id=f"s{i % 3}", text="x",
                         vector=vector, msg_ids=[f"m{i}", f"m{i + 1}"],
                         state="compressed" if i == 4 else "active") for i in range(8)])
        await cached.upsert_memories([MemoryRecord(id="bob1", namespace="bob", session_id="s1",
                                                   text="x", vector=vector, msg_ids=["b1"])])
        # A search loads alice's copy (an exact search of a small namespace).
        await cached.vector_search(vector, SearchFilter(namespace="alice"), limit=3, exact=True)
        assert await cached.namespace_cache.get("alice", load=False) is not None
        for sessions in ({"s1"}, {"s0", "s2"}, {"s9"}):
            held = await cached.built_msg_ids("alice", sessions)
            assert held == await plain.built_msg_ids("alice", sessions)
        assert ("s1", "m5") in await cached.built_msg_ids("alice", {"s1"})  # compressed too
        assert await cached.built_msg_ids("bob", {"s1"}) == {("s1", "b1")}
