"""Which rows a query reads: SQL literals and the filters of listings and searches.

LanceDB filters are DataFusion SQL. `SearchFilter` is also evaluated in process, over the
namespace copies of namespace_cache.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def sql_str(value: str) -> str:
    """A SQL string literal (LanceDB filters are DataFusion SQL)."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    items = ", ".join(sql_str(v) for v in values)
    return f"{column} IN ({items})" if items else "false"


def sql_time(value: datetime) -> str:
    """A UTC timestamp literal (naive datetimes are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return f"TIMESTAMP '{value.astimezone(UTC).isoformat()}'"


@dataclass(frozen=True)
class MemoryFilter:
    namespace: str
    session_id: str | None = None
    category: str | None = None
    tier: str | None = None
    branch: str | None = None
    state: str | None = "active"
    min_importance: int | None = None
    tag: str | None = None
    pinned: bool | None = None

    def to_sql(self) -> str:
        parts = [f"namespace = {sql_str(self.namespace)}"]
        if self.pinned is not None:
            parts.append("pinned" if self.pinned else "NOT pinned")
        for column in ("session_id", "category", "tier", "branch", "state"):
            value = getattr(self, column)
            if value is not None:
                parts.append(f"{column} = {sql_str(value)}")
        if self.min_importance is not None:
            parts.append(f"importance >= {int(self.min_importance)}")
        if self.tag is not None:
            parts.append(f"array_has(tags, {sql_str(self.tag)})")
        return " AND ".join(parts)


@dataclass(frozen=True)
class SearchFilter:
    """Which memories a recall may return. The namespace is always part of the filter.

    `time_from`/`time_to` keep memories whose message time range overlaps the interval
    (memories without message times fall back to their creation time).
    """

    namespace: str
    branches: tuple[str, ...] | None = None
    categories: tuple[str, ...] | None = None
    tiers: tuple[str, ...] | None = None
    session_id: str | None = None
    time_from: datetime | None = None
    time_to: datetime | None = None
    states: tuple[str, ...] = ("active",)

    def to_sql(self) -> str:
        parts = [f"namespace = {sql_str(self.namespace)}", sql_in("state", self.states)]
        for column, values in (("branch", self.branches), ("category", self.categories),
                               ("tier", self.tiers)):
            if values is not None:
                parts.append(sql_in(column, values))
        if self.session_id is not None:
            parts.append(f"session_id = {sql_str(self.session_id)}")
        if self.time_from is not None:
            parts.append(f"coalesce(time_end, created_at) >= {sql_time(self.time_from)}")
        if self.time_to is not None:
            parts.append(f"coalesce(time_start, created_at) <= {sql_time(self.time_to)}")
        return " AND ".join(parts)


# Quote marks, straight and typographic, Western and CJK: in a full-text query string they
# open a phrase query, which an index without positions refuses (and they carry no words).
_QUOTES = re.compile("[\"\u201c\u201d\u201e\u201f\u00ab\u00bb\u300c\u300d\u300e\u300f"
                     "\uff02\u301d\u301e]")


def full_text_query(text: str, column: str) -> Any:
    """Any user text as a full-text query of plain words: never query syntax.

    A `MatchQuery` is not parsed (no phrases, no AND/OR/NOT, no field:term, no wildcards):
    its text is only tokenized, like the indexed text. Quote marks are dropped as well.
    """
    from lancedb.query import FullTextOperator, MatchQuery

    # Every field spelled out: the pydantic dataclass hides its defaults from mypy. These are
    # LanceDB's defaults, i.e. what a plain string without syntax was searched with before.
    return MatchQuery(_QUOTES.sub(" ", text), column, boost=1.0, fuzziness=0,
                      max_expansions=50, operator=FullTextOperator.OR, prefix_length=0,
                      document_granularity=None)
