"""The server's start-up heap, kept off Python's cycle collector (app/ops/heap.py)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


async def test_the_startup_heap_is_frozen_while_serving_and_thawed_after(
        open_client: Callable[..., Any]) -> None:
    """What start-up built is out of every collection's reach while the app serves, a full
    collection's pause shows in /metrics, and after shutdown nothing stays frozen: a
    process running apps one after another (these tests) collects the ones that ended."""
    gc.unfreeze()  # whatever an earlier test left: this one counts its own app's
    async with open_client() as client:
        frozen = gc.get_freeze_count()
        assert frozen > 100_000  # the modules, the dictionaries, the tokenizer's tables
        assert (await client.post("/v1/store", json={
            "namespace": "heap", "session_id": "s", "wait": True,
            "messages": [{"role": "user", "content": "我对海鲜过敏。"}]})).status_code == 200
        gc.collect()
        text = (await client.get("/metrics")).text
        full = [s.value for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == "engram_gc_pause_seconds_count"
                and s.labels == {"generation": "2"}]
        assert full and full[0] >= 1  # this collection, at least, was timed
        # Only what start-up built: what the store made stays collectable (a frozen
        # object freed by its count of references leaves; nothing is frozen later).
        assert gc.get_freeze_count() <= frozen
    assert gc.get_freeze_count() == 0
