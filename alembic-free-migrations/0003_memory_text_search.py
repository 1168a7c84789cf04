"""Full-text index on memories.text for the keyword side of recall, plus filter indexes.

Tokenizer: `icu` (Unicode word breaks with a dictionary for CJK), lower-cased, English stemming,
stop words removed (the list also holds Chinese function words such as 的/是/我们). Measured on
this project's data (see docs/benchmarks.md, "Keyword tokenizer"): on single MemDaily messages
icu matched character-bigram BM25 (hit@1 0.88 vs 0.90, recall@5 0.75 vs 0.75) and beat a jieba
helper column (0.85 / 0.72), while needing no second column, no model files and answering in
~2 ms. The default `simple` tokenizer finds nothing in Chinese; `ngram` makes the index ~50x
larger (LANCEDB_NOTES.md #7).

Rows written after the index was built are searched without it (flat) until `optimize()` folds
them in, so recall stays correct in between; the maintenance loop compacts regularly.

`state` and `branch` get bitmap indexes: every recall filters on them next to the namespace.
"""

from __future__ import annotations

from lancedb.index import FTS, Bitmap

from app.storage.migrations import MigrationContext

TEXT_INDEX = FTS(base_tokenizer="icu", with_position=False, stem=True, remove_stop_words=True,
                 lower_case=True, ascii_folding=True)


async def upgrade(ctx: MigrationContext) -> None:
    memories = await ctx.db.open_table("memories")
    existing = {tuple(index.columns) for index in await memories.list_indices()}
    if ("text",) not in existing:
        await memories.create_index("text", config=TEXT_INDEX, replace=True)
    for column in ("state", "branch"):
        if (column,) not in existing:
            await memories.create_index(column, config=Bitmap(), replace=True)
