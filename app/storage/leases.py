"""Leases: the cross-host half of a namespace write lock, as objects in the bucket.

Servers that share no file system cannot share a file lock. They share the bucket, and S3
conditional writes make an object a lock (docs/scaling.md says why this and not another
scheme):

- `<prefix>/_engram/leases/<name>.lease` holds JSON: the owner's token, host and pid, the
  state (`held` or `free`) and a renewal counter;
- acquire: create it with `If-None-Match: *`, or replace a `free` one with `If-Match:
  <its etag>`. Whoever loses the race gets 412 and waits;
- while held, the owner rewrites it every `ttl / 3` (`If-Match`: still its own), so its
  etag changes; release writes `free` the same way. Nothing is ever deleted;
- a holder that stops renewing is dead: a waiter that has seen one etag for longer than the
  TTL (measured on its own monotonic clock, so clocks of different hosts never matter)
  takes the lease over with `If-Match` on that etag. On the holder's own host a waiter need
  not wait that long: an owner process that no longer exists there is dead at once (a server
  restarted after a crash gets its namespaces back without waiting out the TTL);
- turns are fair between servers: a server that finds the lease held writes itself into
  the lease as its `waiter` (`If-Match`, one slot, first come), and the holder's release
  hands the lease to that server (`next`). Any other server, the releasing one included,
  leaves a handed-over lease alone for `handoff_grace` seconds (its own clock again), so a
  server with a queue of its own writes cannot re-take the lease between its release and
  the waiting server's next poll. Without this, one busy server kept a namespace for
  minutes while the other's requests timed out (the two-server race on a bucket: lock waits
  of 98 s and more);
- every acquisition increments the lease's `epoch`;
- fencing: a holder paused for longer than the TTL (a stalled process, a frozen VM) may find
  on waking that another server took its lease. Every write to the tables made while a
  lease is held (`fenced`, a context variable the namespace locks set) first calls
  `check_fences()`: a lease renewed less than `ttl - margin` ago is still ours for at least
  `margin` seconds (no waiter can take it sooner, whatever happened since), known without
  a request; an older one is renewed right there (one conditional PUT); a lease found lost
  refuses the write with `LeaseLost`, so the paused server's build stops before its next
  commit and leaves its messages pending for the new holder (docs/scaling.md says what
  window remains).

Every step is one conditional request, so two servers can never both believe they hold one
lease for longer than a write that had already passed its check takes to land.

One file (past 400 lines) because the protocol above is one piece: acquiring, renewing,
handing over and fencing all read and write the same lease object under the same rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from app.errors import LeaseLost

log = structlog.get_logger(__name__)

LEASE_PREFIX = "_engram/leases"
# Pauses between attempts while another server holds the lease: each attempt is a GET. As
# short as the lock files' polling, or a server releasing and re-taking a lease at once
# would starve a waiting server for longer (there is no queue of waiters).
_POLL_SECONDS = (0.01, 0.02, 0.05, 0.1)


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)  # Linux


def _holder_clock() -> float:
    """Seconds on the clock a holder ages its lease by: it counts time the machine was
    suspended too (CLOCK_BOOTTIME; a frozen VM's monotonic clock may not), so a holder that
    wakes up never takes its lease for fresher than it is. Waiters time holders with
    `time.monotonic`, which can only undercount: both sides err towards safety."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


def _host_identity() -> str:
    """Equal for two processes exactly when one can tell by pid whether the other lives:
    same kernel boot and same pid namespace (two containers on one host differ)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return f"{socket.gethostname()}:{uuid.uuid4().hex}"  # never equal: no shortcut
    return f"{socket.gethostname()}:{boot}:{pid_ns}"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Lease:
    name: str
    token: str
    etag: str
    renewals: int = 0
    lost: bool = False
    epoch: int = 1  # acquisitions of this lease so far, this one included (fencing token)
    waiter: str | None = None  # the server waiting for it, as last read or written
    renewer: asyncio.Task[None] | None = field(default=None, repr=False)
    # When the last write of ours that holds it (acquire or renewal) was sent, on
    # `_holder_clock`: no other server can take it over before this + TTL (`confirm`).
    written_at: float = field(default_factory=_holder_clock)
    # One rewrite at a time: the renewal loop and a write's fence check may both renew.
    rewriting: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


class LeaseStore:
    """Acquire and release named leases in one bucket prefix.

    Args:
        store: an obstore store (S3), rooted at the LanceDB URI's prefix.
        ttl: seconds without a renewal after which a lease is taken from its holder.
    """

    def __init__(self, store: Any, *, ttl: float) -> None:
        self._store = store
        self.ttl = ttl
        self._host = _host_identity()
        self._pid = os.getpid()
        # This server as a waiter: a lease released while it waits is handed to it.
        self.identity = f"{self._host}:{self._pid}:{uuid.uuid4().hex[:12]}"
        # How long a lease handed to a waiting server is left to it: it polls every 0.1 s at
        # most; a waiter that gave up costs the others this long once.
        self.handoff_grace = min(max(1.0, ttl / 10), 5.0)
        # name -> (etag, monotonic time first seen) of leases other processes hold.
        self._seen: dict[str, tuple[str, float]] = {}
        self.takeovers = 0
        # A write checked with a lease this fresh has at least `fence_margin` seconds to land
        # before any other server may take the lease (renewals come every ttl / 3, so a
        # healthy holder always passes without a request).
        self.fence_margin = ttl / 3

    def _path(self, name: str) -> str:
        return f"{LEASE_PREFIX}/{name}.lease"

    def _body(self, lease_token: str, state: str, renewals: int, *, epoch: int,
              waiter: str | None = None, handed_to: str | None = None) -> bytes:
        return json.dumps({"owner": lease_token, "host": self._host, "pid": self._pid,
                           "state": state, "renewals": renewals, "ttl": self.ttl,
                           "epoch": epoch, "waiter": waiter, "next": handed_to,
                           "written_at": time.time()}).encode()

    async def _read(self, name: str) -> tuple[dict[str, Any], str] | None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            result = await obstore.get_async(self._store, self._path(name))
            data = bytes(await result.bytes_async())
        except (NotFoundError, FileNotFoundError):
            return None
        try:
            body = json.loads(data)
        except ValueError:
            body = {"state": "free"}  # unreadable: treat as free, the If-Match still guards
        return body, str(result.meta["e_tag"])

    async def _put(self, name: str, body: bytes, *, etag: str | None) -> str | None:
        """Conditional write: create (etag None) or replace the object with `etag`.

        Returns the new etag, or None when the condition failed (someone else wrote).
        """
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        mode: Any = "create" if etag is None else {"e_tag": etag}
        try:
            result = await obstore.put_async(self._store, self._path(name), body, mode=mode)
        except (AlreadyExistsError, PreconditionError, FileExistsError):
            return None
        return str(result["e_tag"])

    def _holder_is_dead(self, name: str, body: dict[str, Any], etag: str) -> bool:
        if body.get("host") == self._host and isinstance(body.get("pid"), int) \
                and body["pid"] != self._pid and not _process_exists(body["pid"]):
            return True
        unchanged = self._seconds_unchanged(name, etag)
        ttl = float(body.get("ttl") or self.ttl)
        return unchanged is not None and unchanged > max(ttl, self.ttl)

    def _handed_elsewhere(self, name: str, body: dict[str, Any], etag: str) -> bool:
        """Whether a free lease was handed to another waiting server that may still take it."""
        handed_to = body.get("next")
        if not handed_to or handed_to == self.identity:
            return False
        unchanged = self._seconds_unchanged(name, etag)
        return unchanged is None or unchanged <= self.handoff_grace

    def _seconds_unchanged(self, name: str, etag: str) -> float | None:
        """How long this server has seen the lease object at `etag`; None when the etag is
        new to it (its clock starts now). Liveness is read off the bucket's etags, never off
        the writers' clocks."""
        seen = self._seen.get(name)
        now = time.monotonic()
        if seen is None or seen[0] != etag:
            self._seen[name] = (etag, now)
            return None
        return now - seen[1]

    async def held_by_another(self, name: str) -> bool:
        """Whether a live holder other than this process holds lease `name` (one GET). A
        holder is live until this server has seen its lease unchanged for a TTL, or its pid
        is gone on this host: a periodic caller finds a dead one within one TTL."""
        current = await self._read(name)
        if current is None or current[0].get("state") != "held":
            return False
        body, etag = current
        if body.get("host") == self._host and body.get("pid") == self._pid:
            return False  # this process: its own locks say whether it holds it
        return not self._holder_is_dead(name, body, etag)

    async def _wait_in_line(self, name: str, body: dict[str, Any], etag: str) -> None:
        """Write this server into a held lease as its waiter, if the slot is free."""
        if body.get("waiter") is not None:
            return  # someone is first in line (perhaps this server already)
        etag_now = await self._put(name, json.dumps({**body, "waiter": self.identity}).encode(),
                                   etag=etag)
        seen = self._seen.get(name)
        if etag_now is not None and seen is not None and seen[0] == etag:
            # Our own write is no sign of life of the holder: its TTL clock runs on.
            self._seen[name] = (etag_now, seen[1])

    async def try_acquire(self, name: str) -> Lease | None:
        """One attempt: the lease if it was free (or its holder dead), else None."""
        token = uuid.uuid4().hex
        sent = _holder_clock()
        current = await self._read(name)
        waiter: str | None = None
        epoch = 1
        if current is None:
            etag = await self._put(name, self._body(token, "held", 0, epoch=epoch), etag=None)
        else:
            body, old = current
            if body.get("state") == "held":
                if not self._holder_is_dead(name, body, old):
                    await self._wait_in_line(name, body, old)
                    return None
                log.warning("lease_taken_over", lease=name, owner=body.get("owner"),
                            host=body.get("host"), pid=body.get("pid"))
                self.takeovers += 1
            elif self._handed_elsewhere(name, body, old):
                return None
            waiter = body.get("waiter")
            if waiter == self.identity:
                waiter = None  # served
            epoch = int(body.get("epoch") or 0) + 1
            etag = await self._put(name, self._body(token, "held", 0, epoch=epoch,
                                                    waiter=waiter), etag=old)
        if etag is None:
            return None
        self._seen.pop(name, None)
        lease = Lease(name, token, etag, epoch=epoch, waiter=waiter, written_at=sent)
        lease.renewer = asyncio.create_task(self._renew(lease), name=f"lease-{name}")
        return lease

    async def acquire(self, name: str, *, max_wait: float) -> Lease:
        """Wait for the lease up to `max_wait` seconds.

        Raises:
            TimeoutError: another process held it all that time.
        """
        deadline = time.monotonic() + max_wait
        attempt = 0
        while True:
            lease = await self.try_acquire(name)
            if lease is not None:
                return lease
            if time.monotonic() > deadline:
                await self._leave_line(name)
                raise TimeoutError(name)
            await asyncio.sleep(_POLL_SECONDS[min(attempt, len(_POLL_SECONDS) - 1)])
            attempt += 1

    async def _leave_line(self, name: str) -> None:
        """A waiter that gives up takes its name out of the lease (best effort: a stale
        entry costs the next release `handoff_grace` seconds)."""
        with contextlib.suppress(Exception):
            current = await self._read(name)
            if current is not None and current[0].get("waiter") == self.identity:
                await self._put(name, json.dumps({**current[0], "waiter": None}).encode(),
                                etag=current[1])

    async def _rewrite(self, lease: Lease, state: str) -> bool:
        """Write our lease again (renewed, or free and handed to its waiter); False when it
        is no longer ours."""
        async with lease.rewriting:
            return await self._rewrite_now(lease, state)

    async def _rewrite_now(self, lease: Lease, state: str) -> bool:
        renewals = lease.renewals + 1
        etag_seen = lease.etag
        for _ in range(3):
            waiter = lease.waiter
            body = self._body(lease.token, state, renewals, epoch=lease.epoch,
                              waiter=waiter if state == "held" else None,
                              handed_to=None if state == "held" else waiter)
            sent = _holder_clock()
            etag = await self._put(lease.name, body, etag=etag_seen)
            if etag is not None:
                lease.etag, lease.renewals, lease.written_at = etag, renewals, sent
                return True
            # A waiter wrote itself in, or a write of ours landed unanswered (a cancelled
            # renewal): still ours?
            current = await self._read(lease.name)
            if current is None or current[0].get("owner") != lease.token:
                return False
            lease.waiter, etag_seen = current[0].get("waiter"), current[1]
        return False

    async def _renew(self, lease: Lease) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            if lease.lost:
                return
            try:
                if not await self._rewrite(lease, "held"):
                    self._lost(lease)
                    return
            except Exception as error:  # a network blip: the next renewal tries again
                log.warning("lease_renewal_failed", lease=lease.name, error=str(error)[:200])

    def _lost(self, lease: Lease) -> None:
        if not lease.lost:
            lease.lost = True
            log.error("lease_lost", lease=lease.name, epoch=lease.epoch,
                      detail="another server took the lease over: this server did not renew "
                      "it within the TTL; its writes under this lease are refused")

    async def confirm(self, lease: Lease) -> None:
        """Make sure `lease` is still ours for at least `fence_margin` seconds (a write is
        about to be sent under it).

        Raises:
            LeaseLost: another server holds it now, or the bucket did not answer while the
                lease was too old to be sure (the write is refused either way).
        """
        if not lease.lost and _holder_clock() - lease.written_at < self.ttl - self.fence_margin:
            return  # the common case: no request
        if not lease.lost:
            try:
                renewed = await self._rewrite(lease, "held")
            except Exception as error:
                log.warning("lease_renewal_failed", lease=lease.name, error=str(error)[:200])
                raise self._refused(lease, "its renewal did not reach the bucket") from None
            if renewed and _holder_clock() - lease.written_at < self.ttl - self.fence_margin:
                return
            if not renewed:
                self._lost(lease)
        raise self._refused(lease, "another server holds it now")

    @staticmethod
    def _refused(lease: Lease, why: str) -> LeaseLost:
        log.error("write_fenced", lease=lease.name, epoch=lease.epoch, reason=why,
                  detail="a write under a lease this server may no longer hold was refused; "
                  "what it was building stays pending for the lease's holder")
        return LeaseLost(f"the write lease {lease.name!r} is no longer this server's ({why}); "
                         "retry later")

    async def release(self, lease: Lease) -> None:
        if lease.renewer is not None:
            lease.renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lease.renewer
        if lease.lost:
            return
        try:
            if not await self._rewrite(lease, "free"):
                log.error("lease_lost", lease=lease.name, detail="taken over before release")
        except Exception as error:
            # It stays held until its TTL runs out; other servers then take it over.
            log.warning("lease_release_failed", lease=lease.name, error=str(error)[:200])

    @asynccontextmanager
    async def held(self, name: str, *, max_wait: float) -> AsyncIterator[Lease]:
        lease = await self.acquire(name, max_wait=max_wait)
        try:
            with fenced(self, lease):
                yield lease
        finally:
            await asyncio.shield(self.release(lease))


# The leases the current task holds (and tasks it started inside the holding block inherit):
# every table write checks them first (`check_fences`, called by the repository).
_held_leases: ContextVar[tuple[tuple[LeaseStore, Lease], ...]] = ContextVar(
    "engram_held_leases", default=())


@contextmanager
def fenced(leases: LeaseStore, lease: Lease) -> Iterator[None]:
    """Within the block, every table write first checks that `lease` is still ours."""
    token = _held_leases.set((*_held_leases.get(), (leases, lease)))
    try:
        yield
    finally:
        _held_leases.reset(token)


async def check_fences() -> None:
    """Refuse a write if a lease it is made under is no longer this server's.

    Raises:
        LeaseLost: see `LeaseStore.confirm`. Free of requests while the leases are fresh,
            and a no-op without leases (lock files: one host, no pause can cost a lock).
    """
    for leases, lease in _held_leases.get():
        await leases.confirm(lease)
