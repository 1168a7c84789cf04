"""Crash points: named places where a test makes the server die as a crash would.

A multi-write operation (a delete: its intent, the memories rebuilt, the raw-log rows, the
intent cleared) must be repaired whichever commit a crash falls after. Killing a server from
outside cannot aim between two commits a few milliseconds apart, so each such gap carries a
`crash_point(settings, "name")`, and a test starts the server with `ENGRAM_CRASH_AT=name`:
when the operation reaches that point the process SIGKILLs itself (no shutdown, no flush;
what is committed stays, what is not is lost). Honoured only with `ENGRAM_ENVIRONMENT=testing`.
"""

from __future__ import annotations

import os
import signal

import structlog

from app.config import Settings

log = structlog.get_logger(__name__)


def crash_point(settings: Settings, name: str) -> None:
    """SIGKILL this process if the settings name this point (tests only)."""
    if settings.crash_at and settings.crash_at == name and settings.is_testing():
        log.warning("crash_point", point=name)
        os.kill(os.getpid(), signal.SIGKILL)
