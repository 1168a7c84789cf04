"""A store's acknowledgement is committed before the queued writes that are not one
(app/storage/writer.py, `first`): it waits for the commit under way, never behind a build's
or a compaction's write queued before it.

The slow writes are made here, below the API, on the real tables of the real app: a write
held open by the test stands for a compaction or a build's commit that takes long.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.storage.writer import Alone
from tests.helpers import wait_idle

TURNS = {
    "en": [{"msg_id": "a1", "role": "user", "content": "My sister's wedding is on June 14."},
           {"msg_id": "a2", "role": "assistant", "content": "Noted: the wedding is June 14."}],
    "zh": [{"msg_id": "a1", "role": "user", "content": "我妹妹的婚礼定在六月十四号。"},
           {"msg_id": "a2", "role": "assistant", "content": "记下了：婚礼在六月十四号。"}],
}


async def until(condition: Any, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


class TestAcknowledgementFirst:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_ack_does_not_wait_behind_a_slow_queued_write(self, client: Any,
                                                                language: str) -> None:
        repo = client.app.state.engram.repo
        tables = ("messages", "jobs")
        running = {t: asyncio.Event() for t in tables}
        queued = {t: asyncio.Event() for t in tables}

        started = {t: asyncio.Event() for t in tables}

        def slow(table: str, gate: asyncio.Event) -> Alone:
            async def run() -> None:
                started[table].set()
                await gate.wait()
            return Alone(run)

        # On both tables the ack writes to: one slow write under way, one queued behind it.
        holders = [asyncio.create_task(repo.writers[t].write(slow(t, gate)))
                   for t in tables for gate in (running[t], queued[t])]
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started.values())), 10)
            assert all(repo.writers[t].pending_writes == 1 for t in tables)
            ack = asyncio.create_task(client.post("/v1/store", json={
                "namespace": "alice", "session_id": "s1", "wait": False,
                "messages": TURNS[language]}))
            await until(lambda: all(repo.writers[t].pending_writes == 2 for t in tables))
            for t in tables:
                running[t].set()  # the commit under way ends; the queued slow one stays open
            response = await asyncio.wait_for(ack, timeout=10)
            assert response.status_code == 202
            assert response.json()["new"] == 2
            # Acknowledged while the older write is still waiting: the ack went first.
            assert all(repo.writers[t].pending_writes == 0 for t in tables)
            assert not any(h.done() for h in holders[1::2])
        finally:
            for gate in (*running.values(), *queued.values()):
                gate.set()
        await asyncio.gather(*holders)
        await wait_idle(client)
        job = (await client.get(f"/v1/jobs/{response.json()['job_id']}")).json()
        assert job["state"] == "done"
        assert await repo.count_messages("alice", "s1") == 2

    async def test_an_older_write_is_passed_over_a_bounded_number_of_times(
        self, client: Any
    ) -> None:
        """A stream of acknowledgements does not hold a build's write back for ever."""
        repo = client.app.state.engram.repo
        writer = repo.writers["jobs"]
        gate = asyncio.Event()
        order: list[str] = []

        started = asyncio.Event()

        def marked(name: str, wait: asyncio.Event | None = None) -> Alone:
            async def run() -> None:
                if wait is not None:
                    started.set()
                    await wait.wait()
                order.append(name)
            return Alone(run)

        blocker = asyncio.create_task(writer.write(marked("under way", gate)))
        await asyncio.wait_for(started.wait(), timeout=10)
        older = asyncio.create_task(writer.write(marked("build")))
        acks = [asyncio.create_task(writer.write(marked(f"ack {i}"), first=True))
                for i in range(8)]  # Alone writes never combine: one commit each
        await until(lambda: writer.pending_writes == 9)
        gate.set()
        await asyncio.gather(blocker, older, *acks)
        assert order == ["under way", "ack 0", "ack 1", "ack 2", "ack 3", "build",
                         "ack 4", "ack 5", "ack 6", "ack 7"]
