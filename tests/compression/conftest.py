"""Seed stores built once per run and copied into each test's data directory: storing (and
embedding) the fixture conversations is most of a test's time, compressing it is not."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.embedding.pool import EmbeddingPool
from app.main import create_app
from tests.compression.helpers import SMALL_CHUNKS, store_chatter
from tests.conftest import make_settings

SEEDS: dict[str, tuple[dict[str, Any], bool]] = {
    "small": (SMALL_CHUNKS, True),  # 2-turn chunks, facts first
    "default": ({}, True),  # chunks of the default size, facts first
}


@pytest.fixture(scope="session")
async def seed_dirs(model: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compression-seeds")
    dirs = {}
    for name, (overrides, facts_first) in SEEDS.items():
        settings = make_settings(root / name, compression_enabled=False, **overrides)
        pool = EmbeddingPool.from_model(model, settings)
        app = create_app(settings, pool=pool)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://seed") as client:
                await store_chatter(client, "alice", facts_first=facts_first)
        await pool.close()
        dirs[name] = root / name
    return dirs


@pytest.fixture
def seeded(seed_dirs: dict[str, Path], data_dir: Path) -> Callable[[str], None]:
    """`seeded("small")` fills this test's data directory with a copy of that seed store."""

    def _copy(name: str) -> None:
        shutil.copytree(seed_dirs[name], data_dir)

    return _copy
