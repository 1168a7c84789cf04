"""The server process's malloc arenas (app/ops/malloc.py)."""

from __future__ import annotations

import ctypes

import pytest

from app.ops.malloc import limit_arenas

glibc = pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallopt"), reason="not glibc")


@glibc
def test_the_limit_is_set_unless_the_operator_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_arenas(2)
    assert not limit_arenas(0)  # 0: glibc's default stays
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert not limit_arenas(2)  # the operator's setting, read by glibc at start, wins
