"""The crash test and the two-server race, run again unchanged on one bucket.

- `test_sigkill_mid_ingest_loses_no_acknowledged_message` (tests/store/test_processes.py):
  a server SIGKILLed in the middle of a `wait=false` ingest, restarted on the same bucket:
  every acknowledged message is there exactly once, every memory complete. Its leases are
  left held by the dead process; the restarted one takes them back at once (same host, pid
  gone) instead of waiting out the TTL.
- (not yet: see below) `test_two_servers_racing_store_delete_compress_lose_nothing`
  (tests/integrity/test_two_servers.py): two servers, each with its own local data directory
  and lock directory (no shared file system, as on two hosts), race stores, deletes and
  compression on one namespace of one bucket. Only the leases order them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import ServerProcess
from tests.s3.moto_server import MotoS3
from tests.store.test_processes import (  # noqa: F401
    test_sigkill_mid_ingest_loses_no_acknowledged_message,
)

pytestmark = pytest.mark.slow

# The two-server race is not re-run on the bucket yet: it passed 1 run in 3 at load 12-18
# (messages of the last batch left pending, the two servers' memories apart), and a flaky test
# in CI proves nothing (its bucket fixture, with a dump of both servers' rows, is in git history:
# commit 4c2ed5a). Issue 18 stays open on it.


@pytest.fixture
def crash_server(tmp_path: Path, moto_s3: MotoS3, bucket: str) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", name="crash-server-s3", env=moto_s3.env(bucket))
    try:
        yield server
    finally:
        server.stop()
        print(f"--- {server.log_path} ---\n{server.log_tail(40)}")
