"""Shared fixtures: the real model (loaded once), a fresh LanceDB directory per test, and an
httpx client over the app's real lifespan."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from app.config import Settings
from app.embedding.names import DEFAULT_MODEL, E5_NAME, MINILM_NAME
from app.embedding.pool import EmbeddingPool, load_model
from app.main import create_app

AppClient = httpx.AsyncClient


@pytest.fixture(scope="session")
def model() -> Any:
    """The default model (multilingual-e5-small on Linux x86_64), loaded once for the whole run."""
    return load_model("", threads=2)


@pytest.fixture(scope="session")
def minilm(model: Any) -> Any:
    """all-MiniLM-L6-v2, for tests about that model (stores built before e5)."""
    return model if DEFAULT_MODEL == MINILM_NAME else load_model(MINILM_NAME, threads=2)


@pytest.fixture(scope="session")
def e5(model: Any) -> Any:
    """multilingual-e5-small, loaded once (the default's copy if it is e5)."""
    return model if DEFAULT_MODEL == E5_NAME else load_model(E5_NAME, threads=2)


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    # No default recall deadline in the suite's apps: its tests assert complete answers (the
    # vector search, the second hop), and on a shared machine whose other runs load both
    # cores a question's vector can miss the server's real deadline (100 ms) by luck. The
    # deadline's own tests set theirs (tests/recall/test_deadline.py).
    overrides.setdefault("recall_deadline_ms", 0)
    return Settings(data_dir=data_dir, environment="testing", _env_file=None,  # type: ignore[call-arg]
                    **overrides)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def open_client(model: Any, data_dir: Path) -> Callable[..., Any]:
    """`async with open_client(**settings) as client:` — an app on `data_dir`, lifespan running.

    Opening it twice on the same directory is a restart; `at=` opens another directory.
    """

    @asynccontextmanager
    async def _open(token: str | None = None, at: Path | None = None,
                    with_model: Any = None, **overrides: Any) -> AsyncIterator[AppClient]:
        settings = make_settings(at or data_dir, **overrides)
        pool = EmbeddingPool.from_model(with_model or model, settings)
        app = create_app(settings, pool=pool)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engram.test",
                                         headers=headers, timeout=120) as client:
                client.app = app  # type: ignore[attr-defined]
                yield client
        await pool.close()

    return _open


@pytest.fixture
async def client(open_client: Callable[..., Any]) -> AsyncIterator[AppClient]:
    async with open_client() as c:
        yield c
