"""Add `pinned` to memories and messages.

- memories.pinned: the client pinned the memory (PATCH, or `pinned: true` at store time).
  A pinned memory is always in `POST /v1/context`, and never compressed or forgotten.
- messages.pinned: the message was stored with `pinned: true`; the build that turns it into
  memories pins every memory holding it (a `wait=false` store is built later, so the flag
  has to travel with the raw log).

Existing rows are filled with false (an expression, so no row is NULL and filters such as
`NOT pinned` need no coalesce).
"""

from __future__ import annotations

from app.storage.migrations import MigrationContext


async def upgrade(ctx: MigrationContext) -> None:
    for name in ("memories", "messages"):
        table = await ctx.db.open_table(name)
        if "pinned" not in (await table.schema()).names:
            await table.add_columns({"pinned": "false"})
