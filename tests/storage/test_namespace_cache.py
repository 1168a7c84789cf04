"""The in-process copies of small namespaces (namespace_cache.py) against LanceDB itself.

Real LanceDB in a temporary directory; a second `Repository` on the same directory with
caching switched off (`max_namespace_rows = 0`) answers every search from LanceDB, and
stands in for another process writing to the same store. The keyword search of a copied
namespace is BM25 over the namespace's own rows: checked against a plain-Python BM25 over
the rows LanceDB holds.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.storage.records import MemoryRecord
from app.storage.repository import Repository, SearchFilter, keyword_terms
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
        text=f"user: note {i} about {'garden' if i % 3 else 'piano'} lessons"
             + ("" if i % 4 else f" 第{i}条：{'花园' if i % 3 else '钢琴'}课"),
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


async def same_searches(cached: Repository, plain: Repository, *, seed: int = 0,
                        lancedb_keywords: bool = False) -> None:
    rng = np.random.default_rng(seed)
    for where in FILTERS:
        for _ in range(3):
            query = unit(rng)
            ours = await cached.vector_search(query, where, limit=15, exact=True)
            theirs = await plain.vector_search(query, where, limit=15, exact=True)
            assert [h.memory for h in ours] == [h.memory for h in theirs], where
            assert [h.cosine for h in ours] == pytest.approx([h.cosine for h in theirs],
                                                             abs=1e-6)
        for text in TEXT_QUERIES:
            ours_t, ours_v = await cached.text_search(text, where, limit=15)
            if lancedb_keywords:  # a namespace without a copy: LanceDB's full-text search
                theirs_t, theirs_v = await plain.text_search(text, where, limit=15)
                assert [(h.memory, h.bm25) for h in ours_t] == \
                    [(h.memory, h.bm25) for h in theirs_t]
                assert np.array_equal(ours_v, theirs_v)
                continue
            expected = await reference_bm25(plain, text, where, limit=15)
            assert [h.memory.id for h in ours_t] == [i for i, _ in expected], (where, text)
            assert [h.bm25 for h in ours_t] == pytest.approx([s for _, s in expected],
                                                             rel=1e-6)
            # Rows and vectors as LanceDB holds them.
            theirs = await plain.get_memories([h.memory.id for h in ours_t], with_vector=True)
            by_id = {m.id: m for m in theirs}
            for hit, vector in zip(ours_t, ours_v, strict=True):
                stored = by_id[hit.memory.id]
                assert hit.memory.text == stored.text and hit.memory.state == stored.state
                assert np.allclose(vector, stored.vector or [], atol=1e-7)


TEXT_QUERIES = ("garden lessons", "piano", "note 17", "钢琴课", "花园里的课")


async def reference_bm25(plain: Repository, text: str, where: SearchFilter, *, limit: int
                         ) -> list[tuple[str, float]]:
    """BM25 in plain Python over the rows LanceDB holds: IDF and the average length over all
    the namespace's rows (any state), English terms at word starts, Chinese ones anywhere,
    ties by id; only the rows `where` keeps, and only rows holding a term."""
    table = plain._tables["memories"]
    everything = (await table.query().where(f"namespace = '{where.namespace}'")
                  .select(["id", "text"]).to_arrow()).to_pylist()
    kept = {r["id"] for r in (await table.query().where(where.to_sql()).select(["id"])
                              .to_arrow()).to_pylist()}
    if not everything:
        return []
    texts = {r["id"]: r["text"].lower() for r in everything}
    n = len(texts)
    average = sum(len(t) for t in texts.values()) / n
    scores = dict.fromkeys(texts, 0.0)
    for term, latin in keyword_terms(text):
        pattern = re.compile(("(?<![a-z0-9])" if latin else "") + re.escape(term))
        counts = {i: len(pattern.findall(t)) for i, t in texts.items()}
        held = sum(1 for c in counts.values() if c)
        weight = math.log(1 + (n - held + 0.5) / (held + 0.5))
        for i, tf in counts.items():
            if tf:
                norm = 1.2 * (1 - 0.75 + 0.75 * len(texts[i]) / average)
                scores[i] += weight * tf * 2.2 / (tf + norm)
    ranked = sorted(((i, s) for i, s in scores.items() if s > 0 and i in kept),
                    key=lambda x: (-x[1], x[0]))
    return ranked[:limit]


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
    await same_searches(cached, plain, seed=5, lancedb_keywords=True)
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


async def keyword_ranking(repo: Repository, namespace: str, text: str
                          ) -> list[tuple[str, float | None]]:
    hits, _ = await repo.text_search(text, SearchFilter(namespace=namespace), limit=10)
    return [(h.memory.id, h.bm25) for h in hits]


@pytest.mark.parametrize(("query", "texts", "flood"), [
    ("alpha beta", ("user: the alpha plan", "user: the beta plans", "user: beta on friday"),
     "user: alpha {i} again"),
    ("火锅和咖啡", ("用户：周五去吃火锅", "用户：周五去喝咖啡", "用户：咖啡豆买好了"),
     "用户：第{i}次吃火锅"),
])
async def test_keyword_ranking_is_the_namespaces_own(
        repos: tuple[Repository, Repository], query: str, texts: tuple[str, ...], flood: str
) -> None:
    """Another namespace's memories never change this namespace's keyword ranking: IDF and
    the average length are the namespace's own. (LanceDB's index takes them over the whole
    table: 40 memories elsewhere holding the first word made it the common one.)"""
    cached, _ = repos
    rng = np.random.default_rng(21)
    await cached.upsert_memories([memory(3000 + k, rng, namespace="carol", text=t)
                                  for k, t in enumerate(texts)])
    await cached.compact("memories")  # all rows in LanceDB's full-text index
    before = await keyword_ranking(cached, "carol", query)
    await cached.upsert_memories([memory(4000 + k, rng, namespace="dave",
                                         text=flood.format(i=k)) for k in range(40)])
    await cached.compact("memories")
    assert await keyword_ranking(cached, "carol", query) == before
    # The word rarer in carol's memories decides: the first memory ranks first.
    assert [i for i, _ in before][:2] == ["m3000", "m3001"]


async def test_keyword_ranking_does_not_depend_on_how_the_copy_came_about(
        repos: tuple[Repository, Repository]) -> None:
    """The same question ranks the same on a copy brought up to date in place (its term
    counts carried over), on a freshly loaded copy, and on the first search of a namespace
    whose copy was not held (the search awaits the load)."""
    cached, _ = repos
    queries = ("garden lessons", "boiler", "钢琴课", "锅炉检修")
    first = [await keyword_ranking(cached, "alice", q) for q in queries]  # loads alice
    loads = cached.namespace_cache.loads
    rng = np.random.default_rng(13)
    await cached.upsert_memories([
        memory(800, rng, text="user: the boiler needs a garden hose 锅炉检修"),
        memory(12, rng, text="user: note 12 rewritten: piano lessons moved 钢琴课改期")])
    await cached.delete_memories(["m3"])
    await cached.update_memory("m6", {"state": "forgotten"})
    in_place = [await keyword_ranking(cached, "alice", q) for q in queries]
    assert cached.namespace_cache.loads == loads  # applied in place, counts carried
    assert in_place != first
    assert "m800" in {i for i, _ in in_place[1]} and "m800" in {i for i, _ in in_place[3]}
    assert not {"m3", "m6"} & {i for ranking in in_place for i, _ in ranking}
    cached.namespace_cache.clear()
    assert [await keyword_ranking(cached, "alice", q) for q in queries] == in_place
    assert cached.namespace_cache.loads == loads + 1


@pytest.mark.parametrize(("query", "found"), [
    ("我的猫叫什么", "用户：我家的猫叫小白"),  # 猫: a one-character word
    ("what is my cat called", "user: our cat is called Miso"),
])
async def test_one_character_words_are_searched(
        repos: tuple[Repository, Repository], query: str, found: str) -> None:
    cached, _ = repos
    rng = np.random.default_rng(17)
    texts = (found, "用户：周末去爬山", "user: the garden hose is broken", "用户：熊猫基地门票")
    await cached.upsert_memories([memory(5000 + k, rng, namespace="erin", text=t)
                                  for k, t in enumerate(texts)])
    hits, _ = await cached.text_search(query, SearchFilter(namespace="erin"), limit=10)
    assert hits and hits[0].memory.text == found


@pytest.mark.parametrize("text", [
    '"garden" lessons', "garden AND (piano OR NOT lessons)*", "note:17 ~2 ^3 [a-z]+ \\",
    "c++ & c#?", "“钢琴”课", "「花园」的课！？", "的了吗", "the of and", "？？？", "", "   ",
])
async def test_odd_queries_do_not_fail(repos: tuple[Repository, Repository], text: str) -> None:
    cached, _ = repos
    hits, vectors = await cached.text_search(text, SearchFilter(namespace="alice"), limit=10)
    assert len(hits) == len(vectors) <= 10
    if text in ('"garden" lessons', "“钢琴”课"):
        assert hits
