"""Per-namespace write locks, in-process and across processes.

An `asyncio.Lock` orders the writers of one process; across processes either a file lock
(`filelock`, flock on POSIX) orders the processes sharing a lock directory, or, for servers
on several hosts sharing only an object store, a lease object in the bucket
(app/storage/leases.py, docs/scaling.md). The file lock is polled without blocking, so a
cancelled request never leaves a thread holding it. A lease also fences the writes made
while it is held: each one first checks that the lease is still this server's (a server
paused past the lease's TTL loses it to another, and must not commit what it planned).

Two locks per namespace:
- the write lock (`hold`): one builder of the namespace's memories at a time; held for a
  whole build (embedding included) by stores with `wait=true`, background builds,
  compression, edits and deletes;
- the raw-log lock (`hold_log`): held only while a store reads a session's stored messages
  and writes its raw-log rows, so the new/changed/unchanged count stays exact, also across
  processes. A `wait=false` store takes only this one, so its acknowledgement never waits
  behind a build. Order: a holder of the write lock may take the raw-log lock, never the
  other way round.

Memory: a lock's objects (~2.3 KB with its file lock) are kept while it is held or awaited,
and afterwards among the `max_idle` most recently used; older idle ones are dropped, so a
server that has seen a million namespaces does not keep two locks for each. Dropping an
idle lock is safe: with no holder and no waiter nothing refers to it, and the next `hold`
makes a fresh one (on the same lock file or lease, which is what orders processes).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import structlog
from filelock import FileLock, Timeout

from app.errors import LockTimeout, Unavailable
from app.storage.leases import LeaseStore, fenced

log = structlog.get_logger(__name__)

_POLL_SECONDS = (0.002, 0.005, 0.01, 0.02, 0.05)
# A hold longer than this is logged (`lock_held`): what the others waited behind.
_LONG_HOLD_SECONDS = 2.0


class NamespaceLocks:
    """Args:
        lock_dir: the directory of the lock files (unused with `leases`).
        timeout: default seconds to wait for a lock.
        leases: the cross-process half is a lease in the object store instead of a file.
        max_idle: locks kept when neither held nor awaited (the most recently used).
    """

    def __init__(self, lock_dir: Path, *, timeout: float,
                 leases: LeaseStore | None = None, max_idle: int = 1_000) -> None:
        if leases is None:
            lock_dir.mkdir(parents=True, exist_ok=True)
        self._dir = lock_dir
        self._timeout = timeout
        self._leases = leases
        self._max_idle = max_idle
        # Least recently released first; `_users` counts each lock's holder and waiters.
        self._local: OrderedDict[str, asyncio.Lock] = OrderedDict()
        self._files: dict[str, FileLock] = {}
        self._users: dict[str, int] = {}
        self.wait_seconds_total = 0.0
        self.on_wait: Callable[[float], None] | None = None  # metrics hook

    @property
    def known(self) -> int:
        """Locks this process keeps: those held or awaited, and at most `max_idle` others
        (two per namespace written to; see the module docstring)."""
        return len(self._local)

    def is_held(self, namespace: str) -> bool:
        lock = self._local.get(namespace)
        return lock is not None and lock.locked()

    async def held_elsewhere(self, namespace: str) -> bool:
        """Whether another process holds the namespace's write lock now (its lock file, or a
        live holder's lease): a sweep leaves such a namespace to its holder. Not a lock:
        the answer may be stale at once."""
        if self._leases is not None:
            return await self._leases.held_by_another(namespace)
        if self.is_held(namespace):
            return False  # this process: the caller asks `is_held` for that
        probe = FileLock(str(self._dir / f"{namespace}.lock"), thread_local=False)
        try:
            probe.acquire(blocking=False)
        except Timeout:
            return True
        probe.release()
        return False

    def hold(self, namespace: str, *, max_wait: float | None = None
             ) -> AbstractAsyncContextManager[None]:
        """Hold the write lock of `namespace` for the duration of the block.

        Args:
            namespace: a validated namespace name (it becomes a file name).
            max_wait: seconds to wait for the lock; default from settings.

        Raises:
            LockTimeout: the lock was not free within the timeout (HTTP 503).
        """
        return self._hold(namespace, namespace, max_wait=max_wait)

    def hold_log(self, namespace: str, *, max_wait: float | None = None
                 ) -> AbstractAsyncContextManager[None]:
        """Hold the raw-log lock of `namespace` (see the module docstring); as `hold`."""
        # "+" is not allowed in a namespace: no namespace's write lock has this file name.
        return self._hold(namespace, f"{namespace}+log", max_wait=max_wait)

    @asynccontextmanager
    async def _hold(self, namespace: str, name: str, *, max_wait: float | None
                    ) -> AsyncIterator[None]:
        # Counted from before the wait until after the release: only a lock nobody holds or
        # waits for may be dropped (`_idle`).
        self._users[name] = self._users.get(name, 0) + 1
        try:
            async with self._hold_counted(namespace, name, max_wait=max_wait):
                yield
        finally:
            self._users[name] -= 1
            if not self._users[name]:
                del self._users[name]
                self._idle(name)

    def _idle(self, name: str) -> None:
        """`name` is neither held nor awaited now: it becomes the most recently used, and
        the oldest idle locks beyond `max_idle` are dropped."""
        if name in self._local:
            self._local.move_to_end(name)
        excess = len(self._local) - len(self._users) - self._max_idle
        if excess > 0:
            idle = (n for n in self._local if n not in self._users)
            for old in list(itertools.islice(idle, excess)):
                del self._local[old]
                self._files.pop(old, None)

    @asynccontextmanager
    async def _hold_counted(self, namespace: str, name: str, *, max_wait: float | None
                            ) -> AsyncIterator[None]:
        limit = self._timeout if max_wait is None else max_wait
        started = time.monotonic()
        local = self._local.setdefault(name, asyncio.Lock())
        try:
            async with asyncio.timeout(limit):
                await local.acquire()
        except TimeoutError:
            raise self._timeout_error(namespace, limit) from None
        try:
            if self._leases is not None:
                try:
                    lease = await self._leases.acquire(
                        name, max_wait=max(0.0, limit - (time.monotonic() - started)))
                except TimeoutError:
                    raise self._timeout_error(namespace, limit) from None
                except Exception as error:  # the object store did not answer
                    log.warning("lease_unavailable", namespace=namespace, error=str(error)[:300])
                    raise Unavailable(
                        f"namespace {namespace!r}: its write lease in the object store could "
                        "not be taken (the store did not answer); retry later") from None
                self._waited(namespace, started)
                taken = time.monotonic()
                try:
                    with fenced(self._leases, lease):  # every write in the block checks it
                        yield
                finally:
                    await asyncio.shield(self._leases.release(lease))
                    self._held(namespace, name, taken)
                return
            file_lock = self._files.get(name)
            if file_lock is None:
                file_lock = FileLock(str(self._dir / f"{name}.lock"), thread_local=False)
                self._files[name] = file_lock
            attempt = 0
            while True:
                try:
                    file_lock.acquire(blocking=False)
                    break
                except Timeout:
                    if time.monotonic() - started > limit:
                        raise self._timeout_error(namespace, limit) from None
                    await asyncio.sleep(_POLL_SECONDS[min(attempt, len(_POLL_SECONDS) - 1)])
                    attempt += 1
            self._waited(namespace, started)
            taken = time.monotonic()
            try:
                yield
            finally:
                file_lock.release()
                self._held(namespace, name, taken)
        finally:
            local.release()

    def _waited(self, namespace: str, started: float) -> None:
        waited = time.monotonic() - started
        self.wait_seconds_total += waited
        if self.on_wait is not None:
            self.on_wait(waited)
        if waited > 1:
            log.info("lock_waited", namespace=namespace, seconds=round(waited, 3))

    @staticmethod
    def _held(namespace: str, name: str, taken: float) -> None:
        # Who keeps a namespace busy: the request (request_id) or background job holding it.
        held = time.monotonic() - taken
        if held > _LONG_HOLD_SECONDS:
            log.info("lock_held", namespace=namespace, log_lock=name != namespace,
                     seconds=round(held, 3))

    @staticmethod
    def _timeout_error(namespace: str, limit: float) -> LockTimeout:
        log.warning("lock_timeout", namespace=namespace, seconds=limit)
        return LockTimeout(
            f"namespace {namespace!r} is busy: its write lock was not free within {limit:g} s; "
            "retry later"
        )
