"""The live sweep on a local data directory (app/store/sweep.py): lock files, one host.

Pending raw-log rows written the way a `wait=false` acknowledgement writes them, by a
process that died before building them (no build of them is queued in this one). The
running server builds them without a restart or another store, but not while another
process holds the namespace's lock file, and not while they are younger than the minimum
age. tests/s3/test_sweep.py shows the same across two real servers on a bucket.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.locks import NamespaceLocks
from app.storage.records import MessageRecord
from app.store.service import content_hash

NOTES = {
    "zh": ("user", "下周二上午九点去医院做体检，记得前一天晚上空腹。"),
    "en": ("user", "The dentist appointment moved to Friday at 3 pm, bring the insurance card."),
}


def _orphans(namespace: str, *, age: float) -> list[MessageRecord]:
    received = datetime.now(UTC) - timedelta(seconds=age)
    return [MessageRecord(namespace=namespace, session_id=f"s-{lang}", msg_id=lang, seq=0,
                          role=role, content=text, content_hash=content_hash(role, text),
                          received_at=received, state="pending")
            for lang, (role, text) in NOTES.items()]


async def _states(repo: Any, namespace: str) -> list[str]:
    rows = [m for lang in NOTES for m in await repo.session_messages(namespace, f"s-{lang}")]
    return sorted(m.state for m in rows)


async def test_the_sweep_builds_abandoned_pending_messages_once_their_namespace_is_free(
        open_client: Any, data_dir: Path) -> None:
    async with open_client(pending_sweep_seconds=0.2,
                           pending_sweep_min_age_seconds=30.0) as client:
        repo = client.app.state.engram.repo
        await repo.upsert_messages(_orphans("fresh", age=0))  # its own server's: too young
        await repo.upsert_messages(_orphans("orphans", age=60))
        other_process = NamespaceLocks(data_dir / "locks", timeout=5)
        async with other_process.hold("orphans"):  # a live lock file elsewhere
            await asyncio.sleep(1.0)
            assert await _states(repo, "orphans") == ["pending", "pending"]
        deadline = time.monotonic() + 60
        while await _states(repo, "orphans") != ["done", "done"]:
            assert time.monotonic() < deadline, "the sweep never built the orphans"
            await asyncio.sleep(0.2)
        for query, expected in (("体检", "体检"), ("dentist appointment", "dentist")):
            response = await client.post("/v1/recall", json={"namespace": "orphans",
                                                             "query": query})
            assert response.status_code == 200, response.text
            assert expected in response.json()["memories"][0]["text"]
        assert await _states(repo, "fresh") == ["pending", "pending"]
