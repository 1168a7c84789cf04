"""Namespace locks do not pile up with the namespaces a server has seen (issue 37): idle
ones beyond `namespace_locks_max_idle` are dropped, held and awaited ones never."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.errors import LockTimeout
from app.locks import NamespaceLocks
from tests.helpers import messages, metric_by_label, store


async def test_idle_locks_beyond_the_cap_are_dropped(tmp_path: Path) -> None:
    locks = NamespaceLocks(tmp_path / "locks", timeout=5, max_idle=3)
    for i in range(20):
        async with locks.hold(f"ns-{i}"), locks.hold_log(f"ns-{i}"):
            pass
    assert locks.known == 3
    # The most recently used are kept: the last namespace's two locks and one before.
    assert {"ns-19", "ns-19+log"} <= set(locks._local)


async def test_a_held_or_awaited_lock_is_never_dropped(tmp_path: Path) -> None:
    locks = NamespaceLocks(tmp_path / "locks", timeout=5, max_idle=0)
    order: list[str] = []
    async with locks.hold("busy"):
        async def waiter() -> None:
            async with locks.hold("busy"):
                order.append("waiter")

        waiting = asyncio.create_task(waiter())
        await asyncio.sleep(0.05)  # it waits for "busy" now
        for i in range(10):  # other namespaces come and go: every idle lock is dropped
            async with locks.hold(f"ns-{i}"):
                pass
        assert locks.known == 1  # "busy" only, held and awaited
        # Still the same lock: a third caller cannot take it while it is held.
        with pytest.raises(LockTimeout):
            async with locks.hold("busy", max_wait=0.05):
                pass
        order.append("holder")
    await waiting
    assert order == ["holder", "waiter"]
    assert locks.known == 0


async def test_a_server_keeps_at_most_the_cap(open_client: Callable[..., Any],
                                               data_dir: Path) -> None:
    """Stores into eight namespaces (real LanceDB in a temp dir): /metrics reports the
    locks kept, at most the cap, and every namespace's memories are there."""
    async with open_client(namespace_locks_max_idle=4) as client:
        for i in range(8):
            await store(client, messages(0, 4), namespace=f"user-{i}")
        held = metric_by_label((await client.get("/metrics")).text,
                               "engram_memory_held", "what")
        assert 0 < held["namespace_locks"] <= 4, held
        for i in range(8):
            page = (await client.get("/v1/memories", params={"namespace": f"user-{i}"})).json()
            assert page["items"], i
