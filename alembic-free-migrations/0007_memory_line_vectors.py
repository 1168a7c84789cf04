"""Add `line_vectors` to memories: one vector per line of the memory's text, flattened.

Recall compares a trimmed memory's lines with the question by them (a line that answers the
question without sharing its words). Nullable: existing rows, and rows of models that give
no line vectors, keep recall's keyword choice of lines. They are written with the memory's
vector on the next build, edit, compression, import or re-embedding of that memory.
"""

from __future__ import annotations

import pyarrow as pa

from app.storage.migrations import MigrationContext


async def upgrade(ctx: MigrationContext) -> None:
    memories = await ctx.db.open_table("memories")
    if "line_vectors" not in (await memories.schema()).names:
        await memories.add_columns(pa.field("line_vectors", pa.list_(pa.float32()),
                                            nullable=True))
