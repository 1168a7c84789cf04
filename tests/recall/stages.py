"""Hand-made memories and candidates for the stage tests: no server, no model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.config import Settings
from app.recall.candidates import Candidate
from app.recall.query import Query
from app.recall.references import parse_query
from app.recall.schemas import RecallRequest
from app.recall.when import TimeHint
from app.storage.records import MemoryRecord

DAY = datetime(2024, 5, 8, 12, tzinfo=UTC)


def memory(memory_id: str, *lines: str, session: str = "s1", ids: list[str] | None = None,
           **fields: Any) -> MemoryRecord:
    """A memory of `lines` (one message each, numbered from 1 unless `ids` are given)."""
    msg_ids = ids if ids is not None else [str(n) for n in range(1, len(lines) + 1)]
    fields.setdefault("time_start", DAY)
    fields.setdefault("time_end", DAY)
    return MemoryRecord(id=memory_id, namespace="n", session_id=session,
                        text="\n".join(lines), msg_ids=msg_ids, **fields)


def candidate(m: MemoryRecord, **scores: Any) -> Candidate:
    return Candidate(m, **scores)


def words(text: str) -> int:
    """A token counter for tests: whitespace-separated words (joins add nothing)."""
    return len(text.split())


def settings(tmp: Path, **overrides: Any) -> Settings:
    """Settings as the app reads them (no model is loaded: the profile is a table)."""
    return Settings(data_dir=tmp, environment="testing", _env_file=None,  # type: ignore[call-arg]
                    **overrides)


def query(text: str, *, min_score: float = 0.35, default_min_score: float | None = None,
          favoured: frozenset[str] = frozenset(), hint: TimeHint | None = None,
          max_tokens: int = 1500, **request: Any) -> Query:
    """A read question, its thresholds given rather than taken from a profile."""
    parsed = parse_query(text)
    return Query(request=RecallRequest(namespace="n", query=text, **request), parsed=parsed,
                 hint=hint, search_text=parsed.text, min_score=min_score,
                 default_min_score=min_score if default_min_score is None
                 else default_min_score, max_tokens=max_tokens, favoured=favoured)
