"""Add `language` to memories (zh | en), so recall can pick the injection template.

Existing rows are backfilled from their text: any CJK ideograph makes a memory `zh`.
(LanceDB's add_columns takes only simple expressions, so the backfill is an update.)
"""

from __future__ import annotations

from app.storage.migrations import MigrationContext


async def upgrade(ctx: MigrationContext) -> None:
    memories = await ctx.db.open_table("memories")
    if "language" in (await memories.schema()).names:
        return
    await memories.add_columns({"language": "'en'"})
    await memories.update(
        updates={"language": "zh"}, where="regexp_like(text, '[\u4e00-\u9fff]')"
    )
