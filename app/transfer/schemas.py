"""The export file format (NDJSON) and the import result.

An export is UTF-8 JSON lines. The first line is the header; every other line is one record
`{"type": "message" | "memory" | "event" | "session", "data": {...}}` whose `data` has the
columns of that table (timestamps as ISO 8601 strings; `vector` only when exported with
`vectors=true`). See docs/export-format.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, Field

EXPORT_FORMAT: Final = "engram-export"
EXPORT_VERSION: Final = 1


class ExportHeader(BaseModel):
    format: Literal["engram-export"] = EXPORT_FORMAT
    version: Literal[1] = EXPORT_VERSION
    namespace: str
    exported_at: datetime
    embedding_model: str
    embedding_dim: int
    vectors: bool
    counts: dict[str, int]


class ImportResult(BaseModel):
    namespace: str = Field(description="The namespace the records were imported into.")
    source_namespace: str
    messages: int
    memories: int
    events: int
    sessions: int
    archived: int = Field(description="Original texts of compressed memories.")
    reembedded: int = Field(description="Memories embedded again: no vectors in the file, or "
                            "a different embedding model.")
