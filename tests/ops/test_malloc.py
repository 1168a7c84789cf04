"""The server process's malloc arenas (app/ops/malloc.py)."""

from __future__ import annotations

import ctypes

import pytest

from app.ops.malloc import limit_arenas, release_free_memory
from app.ops.metrics import resident_bytes

glibc = pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallopt"), reason="not glibc")


@glibc
def test_the_limit_is_set_unless_the_operator_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_arenas(2)
    assert not limit_arenas(0)  # 0: glibc's default stays
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert not limit_arenas(2)  # the operator's setting, read by glibc at start, wins


@glibc
def test_free_pages_are_handed_back() -> None:
    """Blocks freed below a live one stay in the heap (glibc trims only its top) until
    `release_free_memory`: the server calls it once start-up's temporaries are freed."""
    blocks = [bytes(bytearray(64 << 10)) for _ in range(640)]  # 40 MB of heap, written
    pinned = bytes(bytearray(64 << 10))  # above them: the heap's top stays in use
    del blocks
    before = resident_bytes()
    assert release_free_memory()
    assert before - resident_bytes() > 20 << 20
    assert len(pinned) == 64 << 10
