"""Per-namespace write locks, in-process and across processes.

An `asyncio.Lock` orders the writers of one process; a file lock (`filelock`, flock on POSIX)
orders the processes sharing a data directory. The file lock is polled without blocking, so
a cancelled request never leaves a thread holding it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import structlog
from filelock import FileLock, Timeout

from app.errors import LockTimeout

log = structlog.get_logger(__name__)

_POLL_SECONDS = (0.002, 0.005, 0.01, 0.02, 0.05)


class NamespaceLocks:
    def __init__(self, lock_dir: Path, *, timeout: float) -> None:
        lock_dir.mkdir(parents=True, exist_ok=True)
        self._dir = lock_dir
        self._timeout = timeout
        self._local: dict[str, asyncio.Lock] = {}
        self._files: dict[str, FileLock] = {}
        self.wait_seconds_total = 0.0
        self.on_wait: Callable[[float], None] | None = None  # metrics hook

    def is_held(self, namespace: str) -> bool:
        lock = self._local.get(namespace)
        return lock is not None and lock.locked()

    @asynccontextmanager
    async def hold(self, namespace: str, *, max_wait: float | None = None) -> AsyncIterator[None]:
        """Hold the write lock of `namespace` for the duration of the block.

        Args:
            namespace: a validated namespace name (it becomes a file name).
            max_wait: seconds to wait for the lock; default from settings.

        Raises:
            LockTimeout: the lock was not free within the timeout (HTTP 503).
        """
        limit = self._timeout if max_wait is None else max_wait
        started = time.monotonic()
        local = self._local.setdefault(namespace, asyncio.Lock())
        try:
            await asyncio.wait_for(local.acquire(), timeout=limit)
        except TimeoutError:
            raise self._timeout_error(namespace, limit) from None
        try:
            file_lock = self._files.get(namespace)
            if file_lock is None:
                file_lock = FileLock(str(self._dir / f"{namespace}.lock"), thread_local=False)
                self._files[namespace] = file_lock
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
            waited = time.monotonic() - started
            self.wait_seconds_total += waited
            if self.on_wait is not None:
                self.on_wait(waited)
            if waited > 1:
                log.info("lock_waited", namespace=namespace, seconds=round(waited, 3))
            try:
                yield
            finally:
                file_lock.release()
        finally:
            local.release()

    @staticmethod
    def _timeout_error(namespace: str, limit: float) -> LockTimeout:
        log.warning("lock_timeout", namespace=namespace, seconds=limit)
        return LockTimeout(
            f"namespace {namespace!r} is busy: its write lock was not free within {limit:g} s; "
            "retry later"
        )
