"""B-tree index on memories.id.

Point lookups by id (reading, editing, deleting one memory) and the merges keyed on id (the
recall hit flush, rebuilds) scanned the whole table without it. Measured on 10k memories:
a hit flush (partial-column merge of 10 rows) 60 ms -> 10 ms, `get_memories` of 10 ids
12 ms -> 7 ms. Rows written later join the index at the next compaction; until then they
are scanned, as for every LanceDB index.
"""

from __future__ import annotations

from lancedb.index import BTree

from app.storage.migrations import MigrationContext


async def upgrade(ctx: MigrationContext) -> None:
    memories = await ctx.db.open_table("memories")
    if ("id",) not in {tuple(index.columns) for index in await memories.list_indices()}:
        await memories.create_index("id", config=BTree(), replace=True)
