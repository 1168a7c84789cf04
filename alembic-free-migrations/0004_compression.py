"""Compression: the `archive` table and the decision columns of memories.

- `archive` holds the full original text of every compressed memory (one row per memory,
  keyed by memory id), so compression never loses data and a restore is byte for byte.
- memories gain `score_feedback` (the boost earned by explicit references, added to the
  weight score), `score_hash` (the content hash the four dimension scores were computed
  for: a rebuilt or edited memory is scored again), `decision` and `decided_at` (the last
  compression decision and when it was taken, shown by /debug/memory_dump).

Existing rows get NULL, read as: no boost, never scored, no decision yet.
"""

from __future__ import annotations

import pyarrow as pa
from lancedb.index import Bitmap

from app.storage.migrations import MigrationContext

UTC_TS = pa.timestamp("us", tz="UTC")

ARCHIVE = pa.schema([
    pa.field("memory_id", pa.string(), nullable=False),
    pa.field("namespace", pa.string(), nullable=False),
    pa.field("session_id", pa.string(), nullable=False),
    pa.field("text", pa.string()),  # the original text, exactly as it was
    pa.field("content_hash", pa.string()),  # the memory's content hash when archived
    pa.field("compressed_text", pa.string()),  # what replaced it (triples)
    pa.field("summary_id", pa.string()),  # the summary memory that covers it
    pa.field("archived_at", UTC_TS),
    pa.field("metadata", pa.string()),  # JSON: scores and decision at archive time
])

MEMORY_COLUMNS = [
    pa.field("score_feedback", pa.float32()),
    pa.field("score_hash", pa.string()),
    pa.field("decision", pa.string()),
    pa.field("decided_at", UTC_TS),
]


async def upgrade(ctx: MigrationContext) -> None:
    if "archive" not in await ctx.table_names():
        archive = await ctx.db.create_table("archive", schema=ARCHIVE)
        await archive.set_unenforced_primary_key("memory_id")
        await archive.create_index("namespace", config=Bitmap(), replace=True)
    memories = await ctx.db.open_table("memories")
    names = set((await memories.schema()).names)
    # Nullable columns filled with NULL: a null reads as the record's default (no boost,
    # never scored, no decision), and writers that predate these fields stay valid.
    missing = [field for field in MEMORY_COLUMNS if field.name not in names]
    if missing:
        await memories.add_columns(missing)
