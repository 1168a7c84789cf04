"""The live sweep (app/store/sweep.py): a running server builds what a dead one acknowledged.

Two real server processes on one bucket, each with its own local disk, and a third party
(this test, as another server would) holding the namespace's write lease. Server A
acknowledges `wait=false` stores of a Chinese and an English session; its background builds
wait behind the held lease, and A is SIGKILLed before it could build anything: the messages
are pending in the raw log and their jobs queued. Server B runs all along and is never
restarted. While the lease is held by a live holder, B's sweep leaves the namespace to it;
once it is free, B's sweep builds both sessions: recall on B finds them, both jobs are
`done`, every message is in the raw log once, built, and in a memory.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.locks import NamespaceLocks
from app.storage.leases import LeaseStore
from app.storage.object_store import ObjectStoreLocation
from tests.helpers import job_state
from tests.procs import ServerProcess, servers
from tests.s3.moto_server import MotoS3
from tests.store.test_processes import client_for, post_store, session_memories, storage_rows

pytestmark = pytest.mark.slow

Json = dict[str, Any]
NAMESPACE = "sweep"
SWEEP_SECONDS, MIN_AGE_SECONDS = 1.0, 2.0
READY_SECONDS = 600.0
SESSIONS = {
    "zh": [
        {"msg_id": "zh1", "role": "user",
         "content": "下周二上午九点去医院做体检，记得前一天晚上空腹。"},
        {"msg_id": "zh2", "role": "assistant",
         "content": "好的，我会在周一晚上提醒你十点以后不要吃东西。"},
    ],
    "en": [
        {"msg_id": "en1", "role": "user",
         "content": "The dentist appointment moved to Friday at 3 pm, bring the insurance card."},
        {"msg_id": "en2", "role": "assistant",
         "content": "Noted: dentist on Friday at 3 pm, and I will remind you about the card."},
    ],
}


@pytest.fixture
def two_hosts(tmp_path: Path, moto_s3: MotoS3, bucket: str
              ) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    hosts = []
    for host in ("host-a", "host-b"):
        local = tmp_path / host
        env = {**moto_s3.env(bucket), "ENGRAM_COMPRESSION_ENABLED": "false",
               "ENGRAM_PENDING_SWEEP_SECONDS": str(SWEEP_SECONDS),
               "ENGRAM_PENDING_SWEEP_MIN_AGE_SECONDS": str(MIN_AGE_SECONDS),
               "ENGRAM_LOG_LEVEL": "INFO", "ENGRAM_LOCK_DIR": str(local / "locks")}
        hosts.append(ServerProcess(local / "data", name=f"sweep-{host}", env=env))
    with servers(*hosts, ready_timeout=READY_SECONDS, log_lines=40):
        yield hosts[0], hosts[1]


def _plain_log(server: ServerProcess) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", server.log_path.read_text(errors="replace"))


async def test_a_live_server_builds_what_a_dead_server_acknowledged(
        two_hosts: tuple[ServerProcess, ServerProcess], moto_s3: MotoS3, bucket: str,
        tmp_path: Path) -> None:
    a, b = two_hosts
    location = ObjectStoreLocation.from_uri(f"s3://{bucket}/engram", moto_s3.storage_options())
    third_server = NamespaceLocks(tmp_path / "third", timeout=60,
                                  leases=LeaseStore(location.store, ttl=30))
    where = f"namespace = '{NAMESPACE}'"
    async with client_for(a) as ca, client_for(b) as cb:
        async with third_server.hold(NAMESPACE):
            jobs = []
            for session_id, msgs in SESSIONS.items():
                response = await post_store(ca, NAMESPACE, session_id, msgs, wait=False)
                assert response.status_code == 202, response.text
                jobs.append(response.json()["job_id"])
            a.kill()  # before its builds could take the namespace: nobody will build them
            rows = storage_rows(b, "messages", where, ["msg_id", "state"])
            assert sorted(r["state"] for r in rows) == ["pending"] * 4
            # B's sweeps see them, and leave them to the namespace's live holder.
            await asyncio.sleep(MIN_AGE_SECONDS + 4 * SWEEP_SECONDS)
            assert storage_rows(b, "memories", where, ["id"]) == []
            assert [r["state"] for r in storage_rows(b, "messages", where, ["state"])] \
                == ["pending"] * 4
        # Free now: B (running all along, never restarted) builds both sessions.
        for job_id in jobs:
            assert await job_state(cb, job_id, seconds=120) == "done", b.log_tail(30)
        for query, expected in (("体检", "体检"), ("dentist appointment", "dentist")):
            response = await cb.post("/v1/recall", json={"namespace": NAMESPACE,
                                                          "query": query})
            assert response.status_code == 200, response.text
            assert expected in response.json()["memories"][0]["text"]
    rows = storage_rows(b, "messages", where, ["msg_id", "state"])
    assert Counter(r["msg_id"] for r in rows) == Counter(
        m["msg_id"] for msgs in SESSIONS.values() for m in msgs)
    assert {r["state"] for r in rows} == {"done"}
    async with client_for(b) as cb:
        for session_id, msgs in SESSIONS.items():
            memories = await session_memories(cb, NAMESPACE, session_id)
            assert sorted(i for m in memories for i in m["msg_ids"]) == sorted(
                m["msg_id"] for m in msgs)
    # B's log says what it did: left the namespace to its holder, then queued both.
    log = _plain_log(b)
    assert "left_to_holder=2" in log and "queued=2" in log
