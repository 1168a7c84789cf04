"""Initial tables: messages (raw log), memories, sessions (ledger), events, jobs, meta.

Frozen: this file describes the schema as it was at version 1. Later changes are new files.
Every table has an unenforced primary key so concurrent `merge_insert` calls of the same key
update one row instead of inserting two (LanceDB only de-duplicates on a declared key).
"""

from __future__ import annotations

import pyarrow as pa
from lancedb.index import BTree, Bitmap

from app.storage.migrations import MigrationContext

UTC_TS = pa.timestamp("us", tz="UTC")


def _key(name: str = "key") -> pa.Field:
    return pa.field(name, pa.string(), nullable=False)


def _tables(dim: int) -> dict[str, tuple[pa.Schema, str]]:
    messages = pa.schema([
        _key(),  # namespace \x1f session_id \x1f msg_id
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("msg_id", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("role", pa.string()),
        pa.field("content", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("timestamp", UTC_TS),
        pa.field("received_at", UTC_TS),
        pa.field("source", pa.string()),
        pa.field("branch", pa.string()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("state", pa.string()),  # pending | done
        pa.field("job_id", pa.string()),
    ])
    memories = pa.schema([
        _key("id"),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("vector", pa.list_(pa.float32(), dim)),
        pa.field("content_hash", pa.string()),
        pa.field("created_at", UTC_TS),
        pa.field("updated_at", UTC_TS),
        pa.field("time_start", UTC_TS),
        pa.field("time_end", UTC_TS),
        pa.field("source", pa.string()),
        pa.field("branch", pa.string()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("subtopics", pa.list_(pa.string())),
        pa.field("entities", pa.string()),  # JSON object: kind -> list of names
        pa.field("speaker_pattern", pa.string()),
        pa.field("start_msg", pa.string()),
        pa.field("end_msg", pa.string()),
        pa.field("start_seq", pa.int64()),
        pa.field("end_seq", pa.int64()),
        pa.field("part", pa.int32()),  # >0 only for the 2nd.. piece of one long message
        pa.field("msg_ids", pa.list_(pa.string())),
        pa.field("msg_count", pa.int32()),
        pa.field("category", pa.string()),
        pa.field("category_confidence", pa.float32()),
        pa.field("importance", pa.int32()),
        pa.field("importance_overridden", pa.bool_()),
        pa.field("hit_count", pa.int64()),
        pa.field("access_count", pa.int64()),
        pa.field("last_accessed", UTC_TS),
        pa.field("tier", pa.string()),  # session | daily | longterm
        pa.field("state", pa.string()),  # active | compressed | forgotten
        pa.field("protected", pa.bool_()),
        pa.field("score_novelty", pa.float32()),
        pa.field("score_entropy", pa.float32()),
        pa.field("score_task", pa.float32()),
        pa.field("score_emotion", pa.float32()),
        pa.field("weight_score", pa.float32()),
        pa.field("summary_of", pa.list_(pa.string())),
        pa.field("embedding_model", pa.string()),
    ])
    sessions = pa.schema([
        _key(),  # namespace \x1f session_id
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("branch", pa.string()),
        pa.field("stored_at", UTC_TS),
        pa.field("updated_at", UTC_TS),
        pa.field("message_count", pa.int64()),
        pa.field("chunk_count", pa.int64()),
        pa.field("chunk_ids", pa.list_(pa.string())),
        pa.field("first_msg", pa.string()),
        pa.field("last_msg", pa.string()),
        pa.field("time_start", UTC_TS),
        pa.field("time_end", UTC_TS),
    ])
    events = pa.schema([
        _key("id"),
        pa.field("memory_id", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("event", pa.string()),
        pa.field("note", pa.string()),
        pa.field("timestamp", UTC_TS),
        pa.field("metadata", pa.string()),  # JSON object
    ])
    jobs = pa.schema([
        _key("id"),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("state", pa.string()),  # queued | done | failed
        pa.field("created_at", UTC_TS),
        pa.field("updated_at", UTC_TS),
        pa.field("result", pa.string()),  # JSON: the store statistics
        pa.field("error", pa.string()),
    ])
    meta = pa.schema([_key(), pa.field("value", pa.string())])
    return {
        "messages": (messages, "key"),
        "memories": (memories, "id"),
        "sessions": (sessions, "key"),
        "events": (events, "id"),
        "jobs": (jobs, "id"),
        "meta": (meta, "key"),
    }


# Scalar indexes: namespace filters run on every query (bitmap: few distinct values), the
# session and memory lookups are point queries (btree).
_INDEXES = {
    "messages": {"namespace": Bitmap(), "session_id": BTree(), "state": Bitmap()},
    "memories": {"namespace": Bitmap(), "session_id": BTree()},
    "sessions": {"namespace": Bitmap()},
    "events": {"memory_id": BTree(), "namespace": Bitmap()},
    "jobs": {"state": Bitmap()},
}


async def upgrade(ctx: MigrationContext) -> None:
    existing = set(await ctx.table_names())
    for name, (schema, key) in _tables(ctx.embedding_dim).items():
        if name in existing:
            continue
        table = await ctx.db.create_table(name, schema=schema)
        await table.set_unenforced_primary_key(key)
        for column, config in _INDEXES.get(name, {}).items():
            await table.create_index(column, config=config, replace=True)
