"""The one range of times Engram accepts, at every entry point (store, recall, import).

Storage keeps microsecond UTC timestamps and round-trips years 1..9999, but an offset can push
a valid-looking time past either end (`9999-12-31T23:59:59-14:00` is year 10000 in UTC), and
the code that ages and windows memories adds days to stored times. A range well inside both
keeps every stored time convertible and every time computation on it in range. Naive times
are taken as UTC, as everywhere else in the API.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Final

from pydantic import AfterValidator, ValidationInfo

EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST: Final = datetime(2200, 1, 1, tzinfo=UTC)


def as_utc(value: datetime) -> datetime:
    """`value` in UTC (naive: taken as UTC). Only for times already `in_range`."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def in_range(value: datetime) -> bool:
    """Whether `value` (naive: UTC) lies within [EARLIEST, LATEST]."""
    try:
        utc = as_utc(value)
    except OverflowError:  # the offset moves it outside the years datetime can hold
        return False
    return EARLIEST <= utc <= LATEST


def range_error(field: str) -> str:
    return (f"{field} must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} UTC "
            "(after applying its UTC offset)")


def _check(value: datetime, info: ValidationInfo) -> datetime:
    if not in_range(value):
        raise ValueError(range_error(info.field_name or "the time"))
    return value


AcceptedTime = Annotated[datetime, AfterValidator(_check)]
"""A datetime inside the accepted range; outside it validation fails naming the field."""
