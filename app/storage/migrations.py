"""Versioned schema migrations without Alembic.

Scripts live in `alembic-free-migrations/NNNN_name.py`; each defines
`async def upgrade(ctx: MigrationContext) -> None` using LanceDB's create / add / alter / drop
column operations. Applied versions are recorded in the `schema_migrations` table. The runner
holds a cross-process file lock, so two servers starting on one data directory apply each
script once; servers on several hosts sharing a bucket hold a lease object there instead
(leases.py). Run at start-up, or by hand: `engram migrate`.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog
from filelock import FileLock

log = structlog.get_logger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "alembic-free-migrations"
_SCRIPT_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.py$")
_LEDGER = "schema_migrations"
_LEDGER_SCHEMA = pa.schema([
    pa.field("version", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("applied_at", pa.timestamp("us", tz="UTC")),
])


@dataclass(frozen=True)
class MigrationContext:
    """What a migration script gets: the connection and facts about this deployment."""

    db: Any  # lancedb AsyncConnection
    embedding_dim: int

    async def table_names(self) -> list[str]:
        return list((await self.db.list_tables()).tables)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    upgrade: Callable[[MigrationContext], Awaitable[None]]


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Load every migration script in version order."""
    found: list[Migration] = []
    for path in sorted(directory.glob("*.py")):
        match = _SCRIPT_NAME.match(path.name)
        if not match:
            continue
        spec = importlib.util.spec_from_file_location(f"engram_migration_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.append(Migration(int(match.group(1)), match.group(2), module.upgrade))
    versions = [m.version for m in found]
    if len(versions) != len(set(versions)):
        raise RuntimeError(f"duplicate migration versions in {directory}")
    return found


async def applied_versions(db: Any) -> set[int]:
    names = (await db.list_tables()).tables
    if _LEDGER not in names:
        return set()
    table = await db.open_table(_LEDGER)
    rows = await table.query().select(["version"]).to_arrow()
    return set(rows.column("version").to_pylist())


async def migrate(
    db: Any,
    *,
    embedding_dim: int,
    lock_path: Path,
    up_to: int | None = None,
    directory: Path = MIGRATIONS_DIR,
    lease: AbstractAsyncContextManager[Any] | None = None,
) -> list[int]:
    """Apply pending migrations (up to `up_to`, default all); return the versions applied.

    `lease`, when given, is held instead of the lock file at `lock_path` (several hosts).
    """
    if lease is None:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    ctx = MigrationContext(db=db, embedding_dim=embedding_dim)
    # Start-up is the only caller on the hot path and it is rare: a blocking lock is fine.
    file_lock = FileLock(str(lock_path), timeout=120) if lease is None else nullcontext()
    async with lease or nullcontext():
        with file_lock:
            return await _apply(db, ctx, up_to=up_to, directory=directory)


async def _apply(db: Any, ctx: MigrationContext, *, up_to: int | None, directory: Path
                 ) -> list[int]:
    applied_now: list[int] = []
    done = await applied_versions(db)
    names = (await db.list_tables()).tables
    ledger = (
        await db.open_table(_LEDGER)
        if _LEDGER in names
        else await db.create_table(_LEDGER, schema=_LEDGER_SCHEMA)
    )
    for migration in discover(directory):
        if migration.version in done or (up_to is not None and migration.version > up_to):
            continue
        log.info("migration_apply", version=migration.version, name=migration.name)
        await migration.upgrade(ctx)
        row = {"version": migration.version, "name": migration.name,
               "applied_at": datetime.now(UTC)}
        await ledger.add(pa.Table.from_pylist([row], schema=_LEDGER_SCHEMA))
        applied_now.append(migration.version)
    return applied_now
