"""Issue 13, item 8: a full disk is a 507 that says so, and /readyz says not ready.

The data directory lives on a real 3 MiB tmpfs (mounting needs root; skipped otherwise), so
LanceDB and the OS fail with a real ENOSPC, not a simulated one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

Json = dict[str, Any]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs",
                              str(mount_point)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _messages(tag: str) -> list[Json]:
    return [{"msg_id": f"{tag}-1", "role": "user",
             "content": f"{tag}: I moved to Berlin last spring and work at the Lisbon office."},
            {"msg_id": f"{tag}-2", "role": "user",
             "content": f"{tag}：我下周二要去北京出差，住在王府井附近。"}]


def _fill_up(disk: Path) -> Path:
    """A file taking every free byte of `disk` (the OS says ENOSPC at the end)."""
    filler = disk / "filler.bin"
    with filler.open("wb", buffering=0) as out:
        for size in (1 << 16, 1 << 12, 1 << 9):  # unbuffered: nothing left to flush at close
            try:
                while out.write(b"\0" * size):
                    pass
            except OSError:
                pass
    return filler


async def _store(client: Any, session_id: str) -> Any:
    return await client.post("/v1/store", json={
        "namespace": "alice", "session_id": session_id, "messages": _messages(session_id),
        "wait": "built"})


class TestDiskFull:
    async def test_writes_answer_507_and_readiness_says_why(
            self, open_client: Callable[..., Any], small_disk: Path) -> None:
        async with open_client(at=small_disk / "data", min_free_disk_mb=0,
                               compression_enabled=False) as client:
            assert (await client.get("/readyz")).status_code == 200
            assert (await _store(client, "before")).status_code == 200
            filler = _fill_up(small_disk)

            refused = await _store(client, "during")
            assert refused.status_code == 507, refused.text
            error = refused.json()["error"]
            assert error["code"] == "insufficient_storage"
            assert "disk" in error["message"] and "full" in error["message"]
            assert error["details"]["request_id"] == refused.headers["x-request-id"]
            ready = await client.get("/readyz")
            assert ready.status_code == 503
            assert "full" in ready.json()["error"]["message"]
            # reads still answer, and what was acknowledged is there
            listed = await client.get("/v1/memories", params={"namespace": "alice"})
            assert listed.status_code == 200
            assert {"before-1", "before-2"} <= {m for item in listed.json()["items"]
                                                for m in item["msg_ids"]}
            recalled = await client.post("/v1/recall", json={"namespace": "alice",
                                                              "query": "北京出差"})
            assert recalled.status_code == 200
            # writes keep answering 507, never 500
            assert (await _store(client, "during")).status_code == 507

            filler.unlink()  # space again: the same write now succeeds
            stored = await _store(client, "during")
            assert stored.status_code == 200, stored.text
            assert stored.json()["new"] == 2

    async def test_readiness_checks_free_space_against_the_setting(
            self, open_client: Callable[..., Any], small_disk: Path) -> None:
        # A 3 MiB disk is below a 4 MiB minimum from the start: ready for reads, not writes.
        async with open_client(at=small_disk / "data", min_free_disk_mb=4) as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 503
            message = ready.json()["error"]["message"]
            assert "ENGRAM_MIN_FREE_DISK_MB=4" in message and "MiB free" in message
        async with open_client(at=small_disk / "data", min_free_disk_mb=1) as client:
            assert (await client.get("/readyz")).status_code == 200
