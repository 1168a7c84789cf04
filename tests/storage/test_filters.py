"""A search filter keeps the same rows in LanceDB (its SQL) and in a namespace's in-process
copy (its numpy mask): both are rendered from the one list of clauses (filters.py).

Real LanceDB in a temporary directory; rows with the edge cases a predicate can get wrong:
missing message times (the creation time stands in), times exactly on a bound, quotes and
Chinese in values.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.storage.filters import MemoryFilter, SearchFilter
from app.storage.records import MemoryRecord
from app.storage.repository import Repository
from tests.conftest import make_settings

DIM = 8
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
NAMESPACES = ("o'brien", "张三")


def memory(i: int, namespace: str) -> MemoryRecord:
    when = T0 + timedelta(days=i)
    vector = np.zeros(DIM, dtype=np.float32)
    vector[i % DIM] = 1.0
    return MemoryRecord(
        id=f"{namespace}-{i}", namespace=namespace, session_id=("s'1", "会话", "s3")[i % 3],
        text=f"note {i}", vector=vector.tolist(), created_at=when, updated_at=when,
        time_start=None if i % 4 == 0 else when - timedelta(hours=i % 5),
        time_end=None if i % 5 == 0 else when + timedelta(hours=i % 3),
        branch=("main", "side", "草稿")[i % 3], category=("plan", "general", "偏好")[i % 3],
        tier=("session", "daily", "longterm")[i % 3],
        # The main category first, then the others its lines have; none for older rows.
        categories=([], ["plan", "偏好"], ["general", "o'k"], ["偏好"])[i % 4],
        state=("active", "archived", "forgotten", "active")[i % 4])


def filters(namespace: str) -> list[SearchFilter]:
    def at(days: int, hours: int = 0) -> datetime:
        return T0 + timedelta(days=days, hours=hours)

    base = SearchFilter(namespace=namespace)
    return [
        base,
        SearchFilter(namespace=namespace, states=()),
        SearchFilter(namespace=namespace, states=("active", "archived", "forgotten")),
        SearchFilter(namespace=namespace, branches=("side", "草稿")),
        SearchFilter(namespace=namespace, branches=()),
        SearchFilter(namespace=namespace, categories=("偏好",), tiers=("longterm", "daily")),
        # A memory's other categories count too (a decision beside a reminder is both).
        SearchFilter(namespace=namespace, categories=("o'k",)),
        SearchFilter(namespace=namespace, categories=("plan", "偏好")),
        SearchFilter(namespace=namespace, categories=()),
        SearchFilter(namespace=namespace, session_id="s'1"),
        SearchFilter(namespace=namespace, session_id="会话", states=("archived",)),
        SearchFilter(namespace=namespace, session_id="nobody"),
        # Bounds exactly on a row's time, on a creation time standing in, and between.
        SearchFilter(namespace=namespace, time_from=at(5)),
        SearchFilter(namespace=namespace, time_from=at(6, 1)),
        SearchFilter(namespace=namespace, time_to=at(4)),
        SearchFilter(namespace=namespace, time_to=at(7, -2)),
        SearchFilter(namespace=namespace, time_from=at(3), time_to=at(9)),
        SearchFilter(namespace=namespace, time_from=at(9), time_to=at(3)),  # empty range
        SearchFilter(namespace=namespace, time_from=datetime(2024, 3, 10, 12, 0)),  # naive: UTC
        SearchFilter(namespace=namespace,
                     time_to=datetime(2024, 3, 8, 20, 0, tzinfo=timezone(timedelta(hours=8)))),
        SearchFilter(namespace=namespace, branches=("main",), categories=("plan",),
                     tiers=("session",), session_id="s'1", time_from=at(0), time_to=at(30),
                     states=("active", "forgotten")),
        # A point in time (`existed_at`): on a start, on a creation time standing in,
        # between, and with the other time bounds.
        SearchFilter(namespace=namespace, as_of=at(4)),
        SearchFilter(namespace=namespace, as_of=at(7, -2)),
        SearchFilter(namespace=namespace, as_of=at(8, 5)),
        SearchFilter(namespace=namespace, as_of=datetime(2024, 3, 8, 20, 0)),  # naive: UTC
        SearchFilter(namespace=namespace, time_from=at(3), as_of=at(9)),
        SearchFilter(namespace="nobody"),
    ]


@pytest.fixture
async def repo(tmp_path: Path) -> Any:
    repo = await Repository.open(make_settings(tmp_path / "data"), embedding_dim=DIM)
    await repo.upsert_memories([memory(i, ns) for ns in NAMESPACES for i in range(40)])
    yield repo
    await repo.close()


@pytest.mark.parametrize("namespace", NAMESPACES)
async def test_sql_and_mask_keep_the_same_rows(repo: Repository, namespace: str) -> None:
    copy = await repo.namespace_cache.get(namespace, load=True)
    assert copy is not None and copy.table.num_rows == 40
    ids = np.array(copy.table.column("id").to_pylist(), dtype=object)
    table = repo._tables["memories"]
    kept_somewhere = 0
    for where in filters(namespace):
        found = await table.query().where(where.to_sql()).select(["id"]).to_arrow()
        in_lancedb = sorted(found.column("id").to_pylist())
        in_process = sorted(ids[copy.mask(where)].tolist())
        assert in_process == in_lancedb, where
        kept_somewhere += 0 < len(in_lancedb) < 40
    assert kept_somewhere >= 12  # the table tells rows apart, it is not all or nothing


def test_sql_is_rendered_from_the_clauses() -> None:
    where = SearchFilter(namespace="o'brien", branches=("main",), session_id="s1",
                         time_from=datetime(2024, 3, 1), time_to=T0)
    assert [c.column for c in where.clauses()] == [
        "namespace", "state", "branch", "session_id", "coalesce(time_end, created_at)",
        "coalesce(time_start, created_at)"]
    assert where.to_sql() == (
        "namespace = 'o''brien' AND state IN ('active') AND branch IN ('main') AND "
        "session_id = 's1' AND coalesce(time_end, created_at) >= "
        "TIMESTAMP '2024-03-01T00:00:00+00:00' AND coalesce(time_start, created_at) <= "
        "TIMESTAMP '2024-03-01T12:00:00+00:00'")


@pytest.mark.parametrize("namespace", NAMESPACES)
async def test_a_listing_and_a_search_as_of_keep_the_same_rows(repo: Repository,
                                                               namespace: str) -> None:
    # One predicate (`existed_at`) for both: a listing's SQL and a search's mask agree.
    copy = await repo.namespace_cache.get(namespace, load=True)
    assert copy is not None
    ids = np.array(copy.table.column("id").to_pylist(), dtype=object)
    states = ("active", "archived", "forgotten")
    sizes = set()
    for as_of in (T0 - timedelta(days=1), T0 + timedelta(days=4),
                  T0 + timedelta(days=7, hours=-2), T0 + timedelta(days=60)):
        listed, _ = await repo.list_memories(
            MemoryFilter(namespace=namespace, state=None, as_of=as_of), offset=0, limit=100)
        searched = copy.mask(SearchFilter(namespace=namespace, states=states, as_of=as_of))
        assert sorted(m.id for m in listed) == sorted(ids[searched].tolist()), as_of
        sizes.add(len(listed))
    assert sizes == {0, 5, 8, 40}, sizes
