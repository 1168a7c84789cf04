"""Fixtures for tests on an object store: one moto S3 server per test run, a fresh bucket
per test, and `open_client` overridden so the imported API tests run on that bucket."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.s3.moto_server import MotoS3


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    """A real S3 API over HTTP on a free loopback port, for the whole run (~0.1 s to start)."""
    server = MotoS3().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(moto_s3: MotoS3) -> str:
    return moto_s3.create_bucket()


@pytest.fixture
def s3_settings(moto_s3: MotoS3, bucket: str) -> dict[str, Any]:
    """Settings overrides that put the tables in this test's bucket."""
    return moto_s3.settings(bucket)


@pytest.fixture
def open_client(open_client: Callable[..., Any], s3_settings: dict[str, Any]
                ) -> Callable[..., Any]:
    """The root `open_client` (it asks for the fixture it overrides), with the tables in
    this test's bucket; the local data directory keeps nothing but lock files, if any."""
    local = open_client

    @asynccontextmanager
    async def _open(*args: Any, **overrides: Any) -> AsyncIterator[Any]:
        async with local(*args, **{**s3_settings, **overrides}) as client:
            yield client

    return _open
