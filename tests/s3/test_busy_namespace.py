"""A namespace kept busy by another server on the same bucket: what its clients are promised.

The other server is a second `NamespaceLocks` on its own lease store and lock directory (as
on another host), holding the namespace's write lease longer than this server's lock
timeout. A `wait=false` store is still acknowledged (it needs only the raw-log lease), and
its background build, which times out behind the other server, is queued again: the
acknowledged messages become memories once the namespace is free, without another store of
the session and without a restart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.locks import NamespaceLocks
from app.storage.leases import LeaseStore
from app.storage.object_store import ObjectStoreLocation
from tests.helpers import job_state, store
from tests.s3.moto_server import MotoS3

NOTES = [
    {"msg_id": "zh", "role": "user", "content": "下周二上午九点去医院做体检，记得前一天晚上空腹。"},
    {"msg_id": "en", "role": "user",
     "content": "The dentist appointment moved to Friday at 3 pm, bring the insurance card."},
]


async def test_a_background_build_blocked_by_another_server_is_built_once_it_is_free(
        open_client: Any, moto_s3: MotoS3, bucket: str, tmp_path: Path) -> None:
    location = ObjectStoreLocation.from_uri(f"s3://{bucket}/engram", moto_s3.storage_options())
    other_server = NamespaceLocks(tmp_path / "other-host", timeout=30,
                                  leases=LeaseStore(location.store, ttl=30))
    async with open_client(lock_timeout_seconds=1.0) as client:
        async with other_server.hold("alice"):
            queued = await store(client, NOTES, wait=False, expect=202)
            # Past this server's 1 s lock timeout: its background build gave up waiting.
            await asyncio.sleep(3.0)
            assert await job_state(client, queued["job_id"], seconds=0) == "queued"
        assert await job_state(client, queued["job_id"], seconds=60) == "done"
        for query, expected in (("体检", "体检"), ("dentist appointment", "dentist")):
            response = await client.post("/v1/recall", json={"namespace": "alice",
                                                             "query": query})
            assert response.status_code == 200, response.text
            assert expected in response.json()["memories"][0]["text"]
