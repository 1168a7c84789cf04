"""Namespace leases on a real S3 API (moto server mode): what servers on several hosts rely
on when they share only a bucket (app/storage/leases.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import obstore
import pytest

from app.errors import LeaseLost, LockTimeout
from app.locks import NamespaceLocks
from app.storage.leases import LeaseStore, check_fences
from app.storage.object_store import ObjectStoreLocation
from tests.s3.moto_server import MotoS3


def bucket_store(moto_s3: MotoS3, bucket: str) -> Any:
    return ObjectStoreLocation.from_uri(f"s3://{bucket}/engram",
                                        moto_s3.storage_options()).store


@pytest.fixture
def store(moto_s3: MotoS3, bucket: str) -> Any:
    return bucket_store(moto_s3, bucket)


async def read_lease(store: Any, name: str) -> dict[str, Any]:
    result = await obstore.get_async(store, f"_engram/leases/{name}.lease")
    body: dict[str, Any] = json.loads(bytes(await result.bytes_async()))
    return body


async def test_a_held_lease_is_refused_to_another_server_until_released(store: Any) -> None:
    one, other = LeaseStore(store, ttl=30), LeaseStore(store, ttl=30)
    lease = await one.try_acquire("alice")
    assert lease is not None
    assert await other.try_acquire("alice") is None
    assert (await read_lease(store, "alice"))["state"] == "held"
    await one.release(lease)
    assert (await read_lease(store, "alice"))["state"] == "free"
    taken = await other.try_acquire("alice")
    assert taken is not None and taken.token != lease.token
    await other.release(taken)


async def test_leases_make_a_read_modify_write_exclusive_across_servers(
        store: Any) -> None:
    """Four "servers" (lease stores) increment one counter object without any other
    coordination: no increment is lost only if the lease excludes every other holder."""
    servers = [LeaseStore(store, ttl=30) for _ in range(4)]
    await obstore.put_async(store, "counter", b"0")
    rounds = 8

    async def worker(leases: LeaseStore) -> None:
        for _ in range(rounds):
            async with leases.held("counter", max_wait=60):
                value = int(bytes(await (await obstore.get_async(store, "counter"))
                                  .bytes_async()))
                await asyncio.sleep(0.005)  # widen the window a lost update needs
                await obstore.put_async(store, "counter", str(value + 1).encode())

    await asyncio.gather(*(worker(s) for s in servers))
    final = int(bytes(await (await obstore.get_async(store, "counter")).bytes_async()))
    assert final == len(servers) * rounds


async def test_a_live_holder_keeps_its_lease_past_the_ttl_by_renewing(store: Any) -> None:
    holder, waiter = LeaseStore(store, ttl=1.0), LeaseStore(store, ttl=1.0)
    lease = await holder.try_acquire("busy")
    assert lease is not None
    deadline = time.monotonic() + 3.0  # three TTLs
    while time.monotonic() < deadline:
        assert await waiter.try_acquire("busy") is None
        await asyncio.sleep(0.1)
    assert lease.renewals >= 4 and not lease.lost
    await holder.release(lease)


async def test_a_holder_that_stopped_renewing_loses_the_lease_after_the_ttl(
        store: Any) -> None:
    """A server frozen or cut off: once its lease went unrenewed for a TTL, another server
    takes it; the old holder finds out and never overwrites the new holder's lease."""
    frozen, waiter = LeaseStore(store, ttl=1.0), LeaseStore(store, ttl=1.0)
    lease = await frozen.try_acquire("stuck")
    assert lease is not None and lease.renewer is not None
    lease.renewer.cancel()  # it stops renewing, as a paused process would
    started = time.monotonic()
    taken = await waiter.acquire("stuck", max_wait=10)
    assert 1.0 <= time.monotonic() - started < 5
    assert waiter.takeovers == 1
    await frozen.release(lease)  # too late: must not free the new holder's lease
    body = await read_lease(store, "stuck")
    assert (body["state"], body["owner"]) == ("held", taken.token)
    await waiter.release(taken)


async def test_a_lease_of_a_dead_process_on_this_host_is_taken_at_once(store: Any) -> None:
    """A server restarted after a crash (SIGKILL) gets its namespaces back without
    waiting out the TTL: the holder's pid no longer exists on this host."""
    crashed = LeaseStore(store, ttl=600)
    lease = await crashed.try_acquire("crashed")
    assert lease is not None and lease.renewer is not None
    lease.renewer.cancel()
    dead = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True, text=True, check=True)
    body = await read_lease(store, "crashed")
    body["pid"] = int(dead.stdout)  # as if the crashed process had written it
    current = await obstore.head_async(store, "_engram/leases/crashed.lease")
    await obstore.put_async(store, "_engram/leases/crashed.lease", json.dumps(body).encode(),
                            mode={"e_tag": current["e_tag"]})
    restarted = LeaseStore(store, ttl=600)
    started = time.monotonic()
    taken = await restarted.acquire("crashed", max_wait=5)
    assert time.monotonic() - started < 2
    await restarted.release(taken)


async def test_namespace_locks_on_leases_time_out_with_503_error(store: Any,
                                                                 tmp_path: Any) -> None:
    here = NamespaceLocks(tmp_path / "a", timeout=5, leases=LeaseStore(store, ttl=30))
    there = NamespaceLocks(tmp_path / "b", timeout=5, leases=LeaseStore(store, ttl=30))
    async with here.hold("bob"):
        with pytest.raises(LockTimeout, match="namespace 'bob' is busy"):
            async with there.hold("bob", max_wait=0.5):
                pass
        async with there.hold_log("bob", max_wait=2):  # another lease: free
            pass
    async with there.hold("bob", max_wait=2):
        pass
    # Separate lock directories, and no lock file in either: the bucket orders them.
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


async def test_a_waiting_server_gets_the_lease_next_while_the_holder_has_more_work(
        store: Any, tmp_path: Any) -> None:
    """A server with a queue of its own writes must not keep the lease for all of them: a
    release with no queue of waiters across hosts let the holder's next local write re-take
    it before the other server's poll came round (the two-server race on a bucket saw
    98 s lock waits). Once the other server waits, the holder gets at most one more turn."""
    busy = NamespaceLocks(tmp_path / "a", timeout=60, leases=LeaseStore(store, ttl=30))
    other = NamespaceLocks(tmp_path / "b", timeout=60, leases=LeaseStore(store, ttl=30))
    stop = asyncio.Event()
    busy_turns = 0

    async def busy_writer() -> None:
        nonlocal busy_turns
        while not stop.is_set():
            async with busy.hold("shared"):
                busy_turns += 1
                await asyncio.sleep(0.15)

    writers = [asyncio.create_task(busy_writer()) for _ in range(3)]  # never an empty queue
    await asyncio.sleep(0.5)
    turns_while_waiting = []
    for _ in range(6):
        before = busy_turns
        async with other.hold("shared", max_wait=60):
            turns_while_waiting.append(busy_turns - before)
    stop.set()
    await asyncio.gather(*writers)
    # The holder's current turn, and one more if it released before the waiter's
    # registration landed (its If-Match then failed and it registers on the next turn).
    assert max(turns_while_waiting) <= 2, turns_while_waiting


async def test_a_write_under_a_lease_taken_over_during_a_pause_is_refused(store: Any) -> None:
    """Fencing: a holder that froze (here: its renewals stop and its clock runs on) past the
    TTL while another server took the lease must not write when it wakes. A frozen holder
    whose lease nobody took renews it at its next write and carries on."""
    frozen, other = LeaseStore(store, ttl=1.0), LeaseStore(store, ttl=1.0)
    async with frozen.held("paused", max_wait=5) as lease:
        await check_fences()  # fresh: passes without a request
        assert lease.renewer is not None
        lease.renewer.cancel()  # frozen: no renewal from here on
        await asyncio.sleep(1.2)  # older than ttl - margin, nobody waiting
        renewals = lease.renewals
        await check_fences()  # still ours: renewed on the spot
        assert lease.renewals == renewals + 1 and not lease.lost
        taken = await other.acquire("paused", max_wait=10)  # waits out the TTL
        with pytest.raises(LeaseLost, match="'paused' is no longer this server's"):
            await check_fences()
        assert lease.lost
        with pytest.raises(LeaseLost):  # a task started inside the block is fenced too
            await asyncio.create_task(check_fences())
    body = await read_lease(store, "paused")
    assert (body["state"], body["owner"], body["epoch"]) == ("held", taken.token, 2)
    await other.release(taken)


async def test_writes_outside_any_lease_are_not_fenced(store: Any, tmp_path: Any) -> None:
    """Lock files (one host) and writes made without a namespace lock have nothing to
    check; a nested lock's lease is checked with the outer one."""
    await check_fences()
    files = NamespaceLocks(tmp_path / "locks", timeout=5)
    async with files.hold("local"), files.hold_log("local"):
        await check_fences()
    leased = NamespaceLocks(tmp_path / "a", timeout=5, leases=LeaseStore(store, ttl=30))
    async with leased.hold("nested"), leased.hold_log("nested"):
        await asyncio.gather(check_fences(), check_fences())  # tasks inherit the fence
