"""Free space on the disk holding the data directory, as readiness sees it.

A full disk turns every write into an error while reads still work, so a load balancer
should send writes elsewhere: `/readyz` answers 503 while the free space is below
`min_free_disk_mb`, and for `DISK_FULL_MEMORY_SECONDS` after a write failed for want of
space (the free-space figure can look fine again a moment after a failed write released
its partial files, while the next write fails the same way).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

DISK_FULL_MEMORY_SECONDS = 60.0


class DiskSpace:
    """Args:
        path: a directory on the disk to watch (created paths' nearest existing parent is
            used, so a data directory not made yet is still measured).
        min_free_mb: below this many free MiB the service is not ready; 0 turns the
            free-space check off (the memory of a failed write still applies).
    """

    def __init__(self, path: Path, *, min_free_mb: int) -> None:
        self.path = path
        self.min_free_bytes = min_free_mb * 1024 * 1024
        self.last_full: float | None = None  # time.monotonic() of the last ENOSPC

    def record_full(self) -> None:
        """A write just failed because the disk is full."""
        self.last_full = time.monotonic()

    def free_bytes(self) -> int:
        path = self.path
        while not path.exists() and path != path.parent:
            path = path.parent
        return shutil.disk_usage(path).free

    def problem(self) -> str | None:
        """Why the disk cannot take writes now, or None when it can."""
        free = self.free_bytes()
        if free < self.min_free_bytes:
            return (f"the disk holding {self.path} has {free // (1024 * 1024)} MiB free, less "
                    f"than ENGRAM_MIN_FREE_DISK_MB={self.min_free_bytes // (1024 * 1024)}")
        if self.last_full is not None:
            ago = time.monotonic() - self.last_full
            if ago < DISK_FULL_MEMORY_SECONDS:
                return (f"a write failed {ago:.0f} s ago because the disk holding {self.path} "
                        "was full")
        return None
