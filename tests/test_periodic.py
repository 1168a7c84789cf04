"""The background loop helper (app/periodic.py): a failing step never stops the loop,
`wake` runs the next step at once, `stop` ends a step under way, the heartbeat moves."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from structlog.testing import capture_logs

from app.periodic import Periodic
from tests.helpers import sleep_until_cancelled_then_return


async def until(check: Callable[[], bool], *, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.005)):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


class TestPeriodic:
    async def test_a_failing_step_is_logged_and_the_loop_goes_on(self) -> None:
        calls: list[int] = []

        async def step() -> None:
            calls.append(len(calls))
            if len(calls) <= 2:
                raise RuntimeError(f"bad iteration {len(calls)}")

        loop = Periodic("pending-sweep", step, interval=0.01)
        with capture_logs() as logs:
            loop.start()
            await until(lambda: len(calls) >= 4)
            await loop.stop()
        failed = [e for e in logs if e["event"] == "pending_sweep_failed"]
        assert [e["error"] for e in failed] == ["bad iteration 1", "bad iteration 2"]
        assert loop.heartbeat is not None

    async def test_wake_runs_the_next_step_before_the_interval(self) -> None:
        wake = asyncio.Event()
        calls: list[float] = []

        async def step() -> None:
            calls.append(asyncio.get_running_loop().time())

        loop = Periodic("hit-flusher", step, interval=60.0, wake=wake)
        loop.start()
        await asyncio.sleep(0.05)
        assert calls == []
        wake.set()
        await until(lambda: len(calls) == 1)
        assert not wake.is_set()  # cleared: the next step waits for the interval again
        await asyncio.sleep(0.05)
        assert len(calls) == 1
        await loop.stop()

    async def test_a_cancellation_it_was_not_sent_is_a_failed_step(self) -> None:
        """A step can end with another task's CancelledError (a wait it shared with a
        caller that was cancelled); the loop goes on, as after any failed step."""
        calls: list[int] = []
        shared: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        shared.cancel()  # as another caller's cancellation ended the shared wait

        async def step() -> None:
            calls.append(len(calls))
            if len(calls) == 1:
                await shared

        loop = Periodic("maintenance", step, interval=0.01)
        with capture_logs() as logs:
            loop.start()
            await until(lambda: len(calls) >= 3)
            await loop.stop()
        assert [e["error"] for e in logs if e["event"] == "maintenance_failed"] == [
            "cancelled (not by stop)"]

    async def test_stop_cancels_the_step_under_way(self) -> None:
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def step() -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        loop = Periodic("maintenance", step, interval=0.0)
        loop.start()
        await asyncio.wait_for(started.wait(), 5)
        async with asyncio.timeout(5):
            await loop.stop()
        assert cancelled.is_set()
        await loop.stop()  # twice is harmless

    async def test_a_stop_a_step_swallowed_still_ends_the_loop(self) -> None:
        """On Python 3.11 `asyncio.wait_for` returns a result that was ready as the cancel
        came instead of raising it: the step ends normally and the loop must still stop."""
        started = asyncio.Event()

        async def step() -> None:
            started.set()
            await sleep_until_cancelled_then_return()

        loop = Periodic("maintenance", step, interval=0.0)
        loop.start()
        await asyncio.wait_for(started.wait(), 5)
        async with asyncio.timeout(5):
            await loop.stop()
