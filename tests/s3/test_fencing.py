"""Fencing: a server paused past its namespace lease's TTL commits nothing after another
server took the lease over (app/storage/leases.py, `check_fences`).

Two real server processes on one bucket, each with its own local disk. Server A
acknowledges a `wait=false` store of a long bilingual session and starts building it; the
test freezes A (SIGSTOP) at its build's first embedding pass: it holds the namespace's
lease, has read the raw log, and has made none of its commits. Server B stores the same
session again with two messages edited (one Chinese, one English), waits out the lease's
TTL, takes the lease over and builds everything. Then A carries on (SIGCONT) from the
middle of its build, holding chunks planned from the old texts. Without fencing A now
writes them over B's memories; with it A's first write is refused (`write_fenced` in its
log), its build is abandoned and retried later through the normal lease, and the retry
finds nothing left to build.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import job_state
from tests.procs import ServerProcess, chat_messages, servers
from tests.s3.moto_server import MotoS3
from tests.store.test_processes import (
    assert_memory_complete,
    client_for,
    post_store,
    session_memories,
    storage_rows,
)

pytestmark = pytest.mark.slow

Json = dict[str, Any]
NAMESPACE, SESSION = "fence", "long-session"
TTL_SECONDS = 3.0
# Enough turns that A's build (~40 chunks, embedded 4 at a time on one thread) takes seconds
# between its first forward pass and its first commit: the window the test freezes it in.
MESSAGES = 200
READY_SECONDS = 600.0


@pytest.fixture
def two_hosts(tmp_path: Path, moto_s3: MotoS3, bucket: str
              ) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    hosts = []
    for host in ("host-a", "host-b"):
        local = tmp_path / host
        env = {**moto_s3.env(bucket), "ENGRAM_COMPRESSION_ENABLED": "false",
               "ENGRAM_EMBEDDING_BATCH_SIZE": "4",  # many passes: a build to freeze A in
               "ENGRAM_LEASE_TTL_SECONDS": str(TTL_SECONDS), "ENGRAM_LOG_LEVEL": "INFO",
               "ENGRAM_LOCK_DIR": str(local / "locks")}
        hosts.append(ServerProcess(local / "data", name=f"fence-{host}", env=env))
    with servers(*hosts, ready_timeout=READY_SECONDS, log_lines=40):
        yield hosts[0], hosts[1]


async def _forward_passes(client: Any) -> float:
    """Embedding forward passes the server has run (its /metrics)."""
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("engram_embedding_batch_size_count"):
            return float(line.split()[-1])
    return 0.0


async def _freeze_once_it_embeds(server: ServerProcess, client: Any, *, before: float,
                                 seconds: float) -> None:
    """SIGSTOP `server` after the first forward pass of its build: it has read the raw log
    and the memories and holds the lease (the reads come first, builder.py), and has most of
    its passes (4 texts each) and every commit still ahead."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await _forward_passes(client) > before:
            server.pause()
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{server.name} never started embedding its build")


def _memory_rows(server: ServerProcess) -> list[Json]:
    rows = storage_rows(server, "memories", f"namespace = '{NAMESPACE}'",
                        ["id", "text", "msg_ids", "updated_at"])
    return sorted(rows, key=lambda r: str(r["id"]))


async def test_a_server_paused_past_its_lease_commits_nothing_after_the_takeover(
        two_hosts: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = two_hosts
    msgs = chat_messages(random.Random(18), MESSAGES, zh_share=0.4)
    edited = [dict(m) for m in msgs]
    edited[10]["content"] = "改了：体检改到下周四上午八点，前一天晚上十点以后不要吃东西。"
    edited[11]["content"] = "Changed: the dentist moved the appointment to Thursday at 8 am."
    async with client_for(a) as ca, client_for(b) as cb:
        before = await _forward_passes(ca)
        queued = await post_store(ca, NAMESPACE, SESSION, msgs, wait=False)
        assert queued.status_code == 202, queued.text
        await _freeze_once_it_embeds(a, ca, before=before, seconds=120)
        try:
            assert _memory_rows(b) == [], "A's build landed before it was frozen: no test"
            started = time.monotonic()
            # B waits for the lease until it has stood still for a TTL, takes it, builds.
            response = await post_store(cb, NAMESPACE, SESSION, edited, wait="built")
            assert response.status_code == 200, response.text
            assert response.json()["updated"] == 2
            assert time.monotonic() - started >= TTL_SECONDS
            after_takeover = _memory_rows(b)
            assert after_takeover
        finally:
            a.resume()
        # A wakes mid-build with chunks planned from the old texts. Fenced, its first write
        # is refused and its retry (through the lease, which B released) finds nothing to
        # build; unfenced, its build lands (`session_built` either way).
        assert await job_state(ca, queued.json()["job_id"], seconds=120) == "done"
        assert await asyncio.to_thread(a.wait_for_log, "session_built", timeout=120), \
            a.log_tail(40)
        await asyncio.sleep(2 * TTL_SECONDS)  # anything A still had would have landed

        # Not one memory row was written after B's build: same ids, texts, times.
        assert _memory_rows(b) == after_takeover
        # Every message once in the raw log, the edited texts, all built.
        rows = storage_rows(b, "messages", f"namespace = '{NAMESPACE}'",
                            ["msg_id", "content", "state"])
        assert Counter(r["msg_id"] for r in rows) == Counter(m["msg_id"] for m in msgs)
        assert {r["state"] for r in rows} == {"done"}
        by_id = {m["msg_id"]: m for m in edited}
        assert {r["msg_id"]: r["content"] for r in rows} == {
            i: m["content"] for i, m in by_id.items()}
        # Both servers show memories made of the current texts, each message covered.
        for client in (ca, cb):
            memories = await session_memories(client, NAMESPACE, SESSION)
            for memory in memories:
                assert_memory_complete(memory, by_id)
            covered = {i for memory in memories for i in memory["msg_ids"]}
            assert {"m10", "m11"} <= covered
            texts = "\n".join(m["text"] for m in memories)
            assert msgs[10]["content"] not in texts and msgs[11]["content"] not in texts
        recalled = await cb.post("/v1/recall", json={"namespace": NAMESPACE,
                                                      "query": "体检改到下周四"})
        assert recalled.status_code == 200, recalled.text
        assert any("改了" in m["text"] for m in recalled.json()["memories"])
        # And A said why it stopped.
        log = a.log_path.read_text(errors="replace")
        assert "write_fenced" in log and "store_build_deferred" in log
