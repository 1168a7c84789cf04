"""A background worker that stops reporting is logged once per stall, with the await it is
stuck in (app/ops/stalls.py), and `/readyz` names it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from structlog.testing import capture_logs

from app.ops.stalls import STALE_AFTER_SECONDS, StallWatch, stale_workers

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
STALE = NOW - timedelta(seconds=STALE_AFTER_SECONDS + 5)


def test_only_a_heartbeat_older_than_the_limit_is_stale() -> None:
    beats = {"store worker": lambda: STALE, "maintenance": lambda: NOW,
             "compression scheduler": lambda: None}  # not started yet
    assert list(stale_workers(beats, NOW)) == ["store worker"]
    assert stale_workers(beats, NOW)["store worker"] > STALE_AFTER_SECONDS


async def test_a_stall_is_logged_once_with_the_await_it_is_stuck_in() -> None:
    beat = {"store worker": NOW}
    watch = StallWatch({"store worker": lambda: beat["store worker"]}, clock=lambda: NOW)

    async def build_that_never_ends(never: asyncio.Future[None]) -> None:
        await never

    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stuck = asyncio.create_task(build_that_never_ends(never), name="store-builds")
    await asyncio.sleep(0)
    try:
        with capture_logs() as logs:
            assert await watch.check() == []
            beat["store worker"] = STALE
            assert await watch.check() == ["store worker"]
            assert await watch.check() == []  # the same stall: not logged again
            beat["store worker"] = NOW  # reports again: the stall is over
            assert await watch.check() == []
            beat["store worker"] = STALE
            assert await watch.check() == ["store worker"]  # a new stall
        stalled = [e for e in logs if e["event"] == "worker_stalled"]
        assert [e["worker"] for e in stalled] == ["store worker", "store worker"]
        stacks = [e for e in logs if e["event"] == "task_stacks"]
        assert len(stacks) == 2
        worker = stacks[0]["stacks"].split("--- store-builds", 1)[1].split("---", 1)[0]
        assert "in build_that_never_ends" in worker and "waits on" in worker, worker
    finally:
        stuck.cancel()


async def test_readyz_names_a_worker_that_stopped_reporting(client: Any) -> None:
    assert (await client.get("/readyz")).status_code == 200
    state = client.app.state.engram
    state.store.heartbeat = datetime.now(UTC) - timedelta(seconds=STALE_AFTER_SECONDS + 30)
    response = await client.get("/readyz")
    assert response.status_code == 503
    assert "the store worker has not reported for" in response.text, response.text
