"""Which rows a query reads: SQL literals and the filters of listings and searches.

LanceDB filters are DataFusion SQL. A recall's `SearchFilter` is also evaluated in process,
over the namespace copies of namespace_cache.py: it is written once, as a list of clauses,
and each clause is rendered both to SQL and to a numpy mask, with the same meaning (a null
never matches), so the two cannot drift apart (tests/storage/test_filters.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np


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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_micros(value: datetime) -> int:
    """Microseconds since the epoch (naive datetimes are taken as UTC), as LanceDB stores
    a timestamp."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


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
    as_of: datetime | None = None  # only what existed then (`existed_at`)

    def to_sql(self) -> str:
        parts = [f"namespace = {sql_str(self.namespace)}"]
        if self.pinned is not None:
            parts.append("pinned" if self.pinned else "NOT pinned")
        for column in ("session_id", "tier", "branch", "state"):
            value = getattr(self, column)
            if value is not None:
                parts.append(f"{column} = {sql_str(value)}")
        if self.category is not None:
            # The main category, or any other its lines have.
            parts.append(f"(category = {sql_str(self.category)} OR "
                         f"array_has(categories, {sql_str(self.category)}))")
        if self.min_importance is not None:
            parts.append(f"importance >= {int(self.min_importance)}")
        if self.tag is not None:
            parts.append(f"array_has(tags, {sql_str(self.tag)})")
        if self.as_of is not None:
            parts.append(existed_at(self.as_of).sql())
        return " AND ".join(parts)


# A memory's time as a search filter reads it: its messages' time range, or its creation
# time when it has none. A namespace copy holds both precomputed (namespace_cache.py).
MEMORY_END = "coalesce(time_end, created_at)"
MEMORY_START = "coalesce(time_start, created_at)"
# A memory's categories as a search filter reads them: its main `category` and every other
# its lines have (`categories`, migration 0007). A namespace copy holds them as a frozenset.
MEMORY_CATEGORIES = "categories"

Mask = np.ndarray[Any, np.dtype[np.bool_]]


@dataclass(frozen=True)
class Clause:
    """One condition on one column (or on `MEMORY_END` / `MEMORY_START`).

    `=` and `in` compare strings, `>=` and `<=` a time, `any` keeps a row of
    `MEMORY_CATEGORIES` that has one of the values. A null value never matches, in SQL (a
    comparison with null is not true) and in `mask` alike.
    """

    column: str
    op: Literal["=", "in", ">=", "<=", "any"]
    value: str | tuple[str, ...] | datetime

    def sql(self) -> str:
        value = self.value
        if self.op == "any":
            assert self.column == MEMORY_CATEGORIES and isinstance(value, tuple)
            if not value:
                return "false"
            items = ", ".join(sql_str(v) for v in value)
            return (f"({sql_in('category', value)} OR "
                    f"array_has_any(categories, make_array({items})))")
        if isinstance(value, tuple):
            return sql_in(self.column, value)
        if isinstance(value, datetime):
            return f"{self.column} {self.op} {sql_time(value)}"
        return f"{self.column} = {sql_str(value)}"

    def mask(self, column: np.ndarray[Any, Any]) -> Mask:
        """Where the clause holds, over a column given as an object array of strings (None
        for null) or, for a time, float64 UTC microseconds (NaN for null: every comparison
        with NaN is false). Microseconds are exact in a float64 until the year 2255."""
        value = self.value
        if self.op == "any":  # a column of frozensets (the main category and the others)
            assert isinstance(value, tuple)
            wanted = frozenset(value)
            return np.fromiter((bool(row & wanted) for row in column), dtype=bool,
                               count=len(column))
        if isinstance(value, tuple):
            keep = np.zeros(len(column), dtype=bool)
            for item in value:  # not np.isin: it may sort, and None does not sort with str
                keep |= column == item
            return keep
        if isinstance(value, datetime):
            bound = float(utc_micros(value))
            return np.asarray(column >= bound if self.op == ">=" else column <= bound)
        return np.asarray(column == value, dtype=bool)


def existed_at(as_of: datetime) -> Clause:
    """The memories that existed at `as_of`, by conversation time: those whose messages
    begin at or before it (`MEMORY_START`; a memory without message times counts from its
    creation). A memory whose conversation goes on past `as_of` is kept, as it is today.

    The one predicate of a point-in-time view: a recall's `SearchFilter` (SQL and the
    namespace copy's mask) and a listing's `MemoryFilter` (SQL) both take it from here.
    """
    return Clause(MEMORY_START, "<=", as_of)


@dataclass(frozen=True)
class SearchFilter:
    """Which memories a recall may return. The namespace is always part of the filter.

    `time_from`/`time_to` keep memories whose message time range overlaps the interval
    (memories without message times fall back to their creation time); `as_of` keeps those
    that existed then (`existed_at`).
    """

    namespace: str
    branches: tuple[str, ...] | None = None
    categories: tuple[str, ...] | None = None
    tiers: tuple[str, ...] | None = None
    session_id: str | None = None
    time_from: datetime | None = None
    time_to: datetime | None = None
    states: tuple[str, ...] = ("active",)
    as_of: datetime | None = None

    def clauses(self) -> list[Clause]:
        """The filter as clauses; a row is kept when it meets every one."""
        found = [Clause("namespace", "=", self.namespace), Clause("state", "in", self.states)]
        for column, values in (("branch", self.branches), ("tier", self.tiers)):
            if values is not None:
                found.append(Clause(column, "in", values))
        if self.categories is not None:
            found.append(Clause(MEMORY_CATEGORIES, "any", self.categories))
        if self.session_id is not None:
            found.append(Clause("session_id", "=", self.session_id))
        if self.time_from is not None:
            found.append(Clause(MEMORY_END, ">=", self.time_from))
        if self.time_to is not None:
            found.append(Clause(MEMORY_START, "<=", self.time_to))
        if self.as_of is not None:
            found.append(existed_at(self.as_of))
        return found

    def to_sql(self) -> str:
        """The filter for LanceDB."""
        return " AND ".join(clause.sql() for clause in self.clauses())

    def mask(self, columns: Mapping[str, np.ndarray[Any, Any]]) -> Mask:
        """The rows the filter keeps, of rows given as one array per column a clause names
        (all of one length; see `Clause.mask` for their types)."""
        first, *rest = self.clauses()
        keep = first.mask(columns[first.column])
        for clause in rest:
            keep &= clause.mask(columns[clause.column])
        return keep


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
