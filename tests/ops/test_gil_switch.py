"""The server hands the GIL to its event loop sooner than Python's default 5 ms
(`gil_switch_interval_ms`, app/ops/priority.py): a recall's wake-ups waited that long
behind a build's analysis thread. Measured by bench/gil_switch.py, not here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import make_settings


@pytest.fixture
def python_default() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("python_default")
async def test_a_running_server_uses_the_configured_switch_interval(open_client: Any) -> None:
    async with open_client() as client:
        assert sys.getswitchinterval() == pytest.approx(0.001)  # the default
        assert (await client.get("/healthz")).status_code == 200
    async with open_client(gil_switch_interval_ms=2.5):
        assert sys.getswitchinterval() == pytest.approx(0.0025)


def test_a_switch_interval_of_zero_is_refused(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="gil_switch_interval_ms"):
        make_settings(tmp_path, gil_switch_interval_ms=0)
