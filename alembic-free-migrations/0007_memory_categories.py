"""Add `categories` to memories: every category the memory's lines have, the main first.

A memory holds several messages, and the whole text gets one category (`category`, kept as
it is: recall and the context read it); a decision beside a reminder is a decision too, so
`GET /v1/memories?category=decision` also lists memories whose `categories` hold it.

Existing rows get NULL, read as an empty list: they are found by their main category, as
before, until they are rebuilt.
"""

from __future__ import annotations

import pyarrow as pa

from app.storage.migrations import MigrationContext


async def upgrade(ctx: MigrationContext) -> None:
    memories = await ctx.db.open_table("memories")
    if "categories" not in (await memories.schema()).names:
        await memories.add_columns([pa.field("categories", pa.list_(pa.string()))])
