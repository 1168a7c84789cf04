"""The crash test and the two-server race, run again unchanged on one bucket.

- `test_sigkill_mid_ingest_loses_no_acknowledged_message` (tests/store/test_processes.py):
  a server SIGKILLed in the middle of a `wait=false` ingest, restarted on the same bucket:
  every acknowledged message is there exactly once, every memory complete. Its leases are
  left held by the dead process; the restarted one takes them back at once (same host, pid
  gone) instead of waiting out the TTL.
- `test_two_servers_racing_store_delete_compress_lose_nothing`
  (tests/integrity/test_two_servers.py): two servers, each with its own local data directory
  and lock directory (no shared file system, as on two hosts), race stores, deletes and
  compression on one namespace of one bucket. Only the leases order them. It became
  reliable with fair lease turns (a waiting server is handed the lease at the holder's next
  release, app/storage/leases.py) and background builds queued again when their namespace
  stayed busy past the lock timeout (app/store/service.py); before, one server kept the
  namespace for up to two minutes and a build that timed out left its messages pending.
  After each run the raced namespace's rows in the bucket are written to `dump.json` in
  the test's directory, for the post-mortem of a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integrity.test_two_servers import (  # noqa: F401
    READY_SECONDS,
    test_two_servers_racing_store_delete_compress_lose_nothing,
)
from tests.procs import ServerProcess, servers
from tests.s3.moto_server import MotoS3
from tests.store.test_processes import (  # noqa: F401
    storage_rows,
    test_sigkill_mid_ingest_loses_no_acknowledged_message,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def crash_server(tmp_path: Path, moto_s3: MotoS3, bucket: str) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", name="crash-server-s3", env=moto_s3.env(bucket))
    try:
        yield server
    finally:
        server.stop()
        print(f"--- {server.log_path} ---\n{server.log_tail(40)}")


@pytest.fixture
def two_servers(tmp_path: Path, moto_s3: MotoS3, bucket: str
                ) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    hosts = []
    for host in ("host-a", "host-b"):
        local = tmp_path / host  # each "host" has its own disk: data and lock directories
        env = {**moto_s3.env(bucket), "ENGRAM_COMPRESSION_ENABLED": "false",
               "ENGRAM_LOCK_DIR": str(local / "locks"), "ENGRAM_LOG_LEVEL": "INFO"}
        hosts.append(ServerProcess(local / "data", name=f"race-{host}", env=env))
    a, b = hosts
    try:
        with servers(a, b, ready_timeout=READY_SECONDS, log_lines=60):
            yield a, b
    finally:
        dump = {t: storage_rows(a, t, "namespace = 'race'", cols) for t, cols in (
            ("memories", ["id", "session_id", "msg_ids", "state", "updated_at"]),
            ("messages", ["session_id", "msg_id", "state", "content_hash"]))}
        (tmp_path / "dump.json").write_text(json.dumps(dump, default=str, indent=1))
        print("bucket rows of the raced namespace:", tmp_path / "dump.json")
        # Nothing was shared through the local disks: no table, no lock file on either.
        for server in (a, b):
            assert not (server.data_dir / "lancedb").exists()
            assert not (server.data_dir.parent / "locks").exists()
