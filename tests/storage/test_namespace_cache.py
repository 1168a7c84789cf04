"""The in-process copies of small namespaces (namespace_cache.py) against LanceDB itself.

Real LanceDB in a temporary directory; a second `Repository` on the same directory with
caching switched off (`max_namespace_rows = 0`) answers every search from LanceDB, and
stands in for another process writing to the same store.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.storage.records import MemoryRecord
from app.storage.repository import Repository, SearchFilter
from tests.conftest import make_settings

DIM = 16
T0 = datetime(2024, 3, 1, tzinfo=UTC)


def unit(rng: np.random.Generator) -> list[float]:
    v = rng.standard_normal(DIM).astype(np.float32)
    return list((v / np.linalg.norm(v)).tolist())


def memory(i: int, rng: np.random.Generator, *, namespace: str = "alice", **fields: Any
           ) -> MemoryRecord:
    when = T0 + timedelta(days=i)
    values: dict[str, Any] = dict(
        id=f"m{i}", namespace=namespace, session_id=f"s{i % 4}",
        text=f"user: note {i} about {'garden' if i % 3 else 'piano'} lessons",
        vector=unit(rng), created_at=when, updated_at=when,
        time_start=None if i % 5 == 0 else when, time_end=None if i % 7 == 0 else when,
        branch="main" if i % 6 else "side", category="plan" if i % 2 else "general",
        tier="daily" if i % 3 == 0 else "session", state="archived" if i % 9 == 0 else "active",
        msg_ids=[f"x{i}"], msg_count=1, importance=1 + i % 10)
    values.update(fields)
    return MemoryRecord(**values)


async def search_alice(repo: Repository) -> None:
    """An exact vector search of alice: loads her copy, or uses the one held."""
    await repo.vector_search(unit(np.random.default_rng(1)), SearchFilter(namespace="alice"),
                             limit=5, exact=True)


@pytest.fixture
async def repos(tmp_path: Path) -> tuple[Repository, Repository]:
    settings = make_settings(tmp_path / "data")
    cached = await Repository.open(settings, embedding_dim=DIM)
    plain = await Repository.open(settings, embedding_dim=DIM)
    plain.namespace_cache.max_namespace_rows = 0  # never cached: LanceDB answers
    rng = np.random.default_rng(5)
    await cached.upsert_memories([memory(i, rng) for i in range(120)])
    await cached.upsert_memories([memory(1000 + i, rng, namespace="bob") for i in range(30)])
    return cached, plain


FILTERS = [
    SearchFilter(namespace="alice"),
    SearchFilter(namespace="alice", states=("active", "archived")),
    SearchFilter(namespace="alice", branches=("side",)),
    SearchFilter(namespace="alice", categories=("plan",), tiers=("daily",)),
    SearchFilter(namespace="alice", session_id="s2"),
    SearchFilter(namespace="alice", time_from=T0 + timedelta(days=20),
                 time_to=T0 + timedelta(days=70)),
    SearchFilter(namespace="alice", time_from=datetime(2024, 4, 1)),  # naive: UTC
    SearchFilter(namespace="alice", time_to=T0 + timedelta(days=3, hours=1)),
    SearchFilter(namespace="nobody"),
]


async def same_searches(cached: Repository, plain: Repository, *, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for where in FILTERS:
        for _ in range(3):
            query = unit(rng)
            ours = await cached.vector_search(query, where, limit=15, exact=True)
            theirs = await plain.vector_search(query, where, limit=15, exact=True)
            assert [h.memory for h in ours] == [h.memory for h in theirs], where
            assert [h.cosine for h in ours] == pytest.approx([h.cosine for h in theirs],
                                                             abs=1e-6)
        for text in ("garden lessons", "piano", "note 17"):
            ours_t, ours_v = await cached.text_search(text, where, limit=15)
            theirs_t, theirs_v = await plain.text_search(text, where, limit=15)
            assert [(h.memory, h.bm25) for h in ours_t] == [(h.memory, h.bm25) for h in theirs_t]
            assert np.array_equal(ours_v, theirs_v)


async def test_copy_answers_like_lancedb(repos: tuple[Repository, Repository]) -> None:
    cached, plain = repos
    await same_searches(cached, plain)
    assert cached.namespace_cache.size("alice") == 120
    assert plain.namespace_cache.size("alice") is None


async def test_stored_after_a_search_is_found_without_reloading(
        repos: tuple[Repository, Repository]) -> None:
    cached, plain = repos
    where = SearchFilter(namespace="alice")
    await search_alice(cached)
    loads = cached.namespace_cache.loads
    rng = np.random.default_rng(9)
    new = memory(500, rng, text="user: the boiler service is booked")
    edited = memory(3, rng, text="user: note 3 was rewritten about a boiler")
    await cached.upsert_memories([new, edited])
    hits = await cached.vector_search(new.vector or [], where, limit=1, exact=True)
    assert hits[0].memory.id == "m500" and hits[0].cosine == pytest.approx(1.0, abs=1e-6)
    found, _ = await cached.text_search("boiler", where, limit=5)
    assert {h.memory.id for h in found} == {"m500", "m3"}
    assert "rewritten" in next(h.memory.text for h in found if h.memory.id == "m3")
    assert cached.namespace_cache.loads == loads  # applied in place
    await same_searches(cached, plain, seed=1)


async def test_deleted_and_forgotten_are_gone(repos: tuple[Repository, Repository]) -> None:
    cached, plain = repos
    where = SearchFilter(namespace="alice")
    target = (await cached.vector_search(unit(np.random.default_rng(2)), where, limit=1,
                                         exact=True))[0].memory
    await cached.delete_memories([target.id])
    hits = await cached.vector_search(target.vector or unit(np.random.default_rng(2)), where,
                                      limit=120, exact=True)
    assert target.id not in {h.memory.id for h in hits}
    await cached.update_memory("m4", {"state": "forgotten"})
    hits = await cached.vector_search(unit(np.random.default_rng(3)), where, limit=120,
                                      exact=True)
    assert "m4" not in {h.memory.id for h in hits}
    await same_searches(cached, plain, seed=2)
    await cached.delete_session("alice", "s1")
    await same_searches(cached, plain, seed=3)
    await cached.delete_namespace("alice")
    assert await cached.vector_search(unit(np.random.default_rng(4)), where, limit=5,
                                      exact=True) == []


async def test_column_updates_are_applied_in_place(
        repos: tuple[Repository, Repository]) -> None:
    cached, plain = repos
    await same_searches(cached, plain, seed=5)  # every namespace searched is loaded
    loads = cached.namespace_cache.loads
    await cached.update_memory("m7", {"tier": "longterm", "importance": 10})  # a promotion
    await cached.update_memory("m8", {"state": "forgotten", "updated_at": T0})
    await same_searches(cached, plain, seed=6)
    assert cached.namespace_cache.loads == loads
    hits = await cached.vector_search(unit(np.random.default_rng(1)),
                                      SearchFilter(namespace="alice"), limit=120, exact=True)
    m7 = next(h.memory for h in hits if h.memory.id == "m7")
    assert (m7.tier, m7.importance) == ("longterm", 10)
    assert "m8" not in {h.memory.id for h in hits}
    await cached.update_memory("m10", {"time_start": T0})  # not a plain value: reloaded
    await same_searches(cached, plain, seed=7)
    assert cached.namespace_cache.loads == loads + 1


async def test_every_write_makes_a_version(repos: tuple[Repository, Repository]) -> None:
    """What the cache relies on (Repository._write_memories): a write that changes nothing
    still commits a version of its own and reports it."""
    cached, _ = repos
    table = cached._tables["memories"]
    for write in (lambda: table.update(updates={"tier": "daily"}, where="id = 'none'"),
                  lambda: table.delete("id = 'none'")):
        before = await table.version()
        result = await write()
        assert result.version == before + 1 == await table.version()


async def test_another_process_writes_are_seen(repos: tuple[Repository, Repository]) -> None:
    cached, plain = repos
    where = SearchFilter(namespace="alice")
    await search_alice(cached)
    new = memory(700, np.random.default_rng(11))
    await plain.upsert_memories([new])  # the other "process"
    hits = await cached.vector_search(new.vector or [], where, limit=1, exact=True)
    assert hits[0].memory.id == "m700"
    await plain.delete_memories(["m700"])
    hits = await cached.vector_search(new.vector or [], where, limit=1, exact=True)
    assert hits[0].memory.id != "m700"
    await same_searches(cached, plain, seed=4)


async def test_hit_counts_and_other_namespaces_keep_the_copy(
        repos: tuple[Repository, Repository]) -> None:
    cached, _ = repos
    await search_alice(cached)
    loads = cached.namespace_cache.loads
    await cached.add_hits({"m1": 2, "m2": 1}, namespaces=["alice"], when=T0)
    await cached.upsert_memories([memory(2000, np.random.default_rng(3), namespace="bob")])
    await cached.set_memory_columns([{"id": "m5", "hit_count": 4}])
    await search_alice(cached)
    assert cached.namespace_cache.loads == loads


async def test_large_namespaces_are_not_copied(repos: tuple[Repository, Repository]) -> None:
    cached, plain = repos
    cached.namespace_cache.max_namespace_rows = 100  # alice holds 120
    where = SearchFilter(namespace="alice")
    await same_searches(cached, plain, seed=5)
    assert cached.namespace_cache.size("alice") is None
    await cached.vector_search(unit(np.random.default_rng(1)), replace(where, namespace="bob"),
                               limit=5, exact=True)
    assert cached.namespace_cache.size("bob") == 30


async def test_unindexed_table_answers_every_search_from_the_copy(
        repos: tuple[Repository, Repository]) -> None:
    """Without a vector index LanceDB compares every row anyway: a search not asked to be
    exact (a build's superseded search) is one, on the copy, with LanceDB's exact answer;
    memories appended as new (`absent=True`) reach the copy without a reload."""
    cached, plain = repos
    assert not await cached.has_vector_index()
    rng = np.random.default_rng(3)
    for where in FILTERS:
        query = unit(rng)
        ours = await cached.vector_search(query, where, limit=15)
        theirs = await plain.vector_search(query, where, limit=15, exact=True)
        assert [h.memory for h in ours] == [h.memory for h in theirs], where
        assert [h.cosine for h in ours] == pytest.approx([h.cosine for h in theirs], abs=1e-6)
    loads = cached.namespace_cache.loads
    assert cached.namespace_cache.size("alice") == 120
    new = memory(700, rng, text="user: 锅炉下周一检修 the boiler is serviced on Monday")
    await cached.upsert_memories([new], absent=True)
    hits = await cached.vector_search(new.vector or [], SearchFilter(namespace="alice"), limit=1)
    assert [h.memory.id for h in hits] == ["m700"]
    assert cached.namespace_cache.loads == loads  # brought up to date, not reloaded
    assert cached.namespace_cache.size("alice") == 121
    theirs = await plain.vector_search(new.vector or [], SearchFilter(namespace="alice"),
                                       limit=1, exact=True)
    assert [h.memory.id for h in theirs] == ["m700"]


async def test_a_cancelled_search_does_not_fail_the_others_waiting_for_its_load(
        repos: tuple[Repository, Repository]) -> None:
    """A recall past its deadline is cancelled (app/recall/deadline.py). When it was the
    search that started loading a namespace's copy, the build waiting for the same copy
    must still get it: it once got the recall's CancelledError, a 500 for a `wait=true`
    store, and the end of the store worker for a background build."""
    cached, _ = repos
    cache = cached.namespace_cache
    cache._copies.clear()
    # The load waits at a gate, so the first search is surely cancelled while it loads.
    started, gate = asyncio.Event(), asyncio.Event()
    load = cache._load

    async def gated_load(namespace: str, version: int) -> Any:
        started.set()
        await gate.wait()
        return await load(namespace, version)

    cache._load = gated_load  # type: ignore[method-assign]
    first = asyncio.create_task(search_alice(cached))
    await started.wait()
    second = asyncio.create_task(search_alice(cached))
    await asyncio.sleep(0.01)
    first.cancel()
    await asyncio.sleep(0.01)
    gate.set()
    await second  # the copy, not the first search's CancelledError
    assert first.cancelled()
    assert cache.size("alice") == 120
