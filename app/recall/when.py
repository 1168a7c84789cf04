"""Dates in a recall query: "what did I say on 3 June, 2023", "2023年6月", "上周".

A memory's text rarely holds its own date (the date is metadata: when the messages were
sent), so neither the embedding nor the keyword index can match "on 3 June". Recall finds
the date here, searches that time window as well, and boosts memories whose messages fall
in it. It is a boost, not a filter: people misremember dates. The phrase is cut from the
search text so that "June" does not match every memory that mentions June.

Absolute dates (English and Chinese, with or without a year, "11 月 27 号" spaced, months
also in Chinese numerals: "2025年十一月"), a month of a year relative to now ("March last
year", "去年三月"; a bare month or "last year" alone is not read: "born in May", "his trip
last year" say when something happened, not when it was said) and a few relative periods
(yesterday / 昨天, last week / 上周, …), relative to the request's `as_of` or the clock.
A day gets a window of a day either side (time zones, late-night sessions); a question about
the period alone ("what did we talk about on June 1?") takes only hours around it. A bare
month counts only in such a question ("九月份我们聊了什么？"). "before X" / "之前" looks back two
weeks from X. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.scripts import has_han

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MONTH = r"(?P<mon>" + "|".join(m for m in _MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sept?|" \
    r"oct|nov|dec)\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_LEAD = r"(?:(?:on|in|during|at|from|around|of)\s+(?:the\s+)?)?"
_BEFORE = r"(?P<before>(?:(?:a|one|two|the)\s+(?:week|weeks|days?)\s+)?before\s+)?"

_EN_PATTERNS = (
    # 3 June, 2023 / 3rd of June 2023 / June 3, 2023 / 2023-06-03
    rf"{_BEFORE}{_LEAD}{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}",
    rf"{_BEFORE}{_LEAD}{_MONTH}\s+{_DAY},?\s+{_YEAR}",
    rf"{_BEFORE}{_LEAD}{_YEAR}[-/.](?P<mnum>[01]?\d)[-/.](?P<day>[0-3]?\d)",
    # June 2023 (month)
    rf"{_BEFORE}{_LEAD}{_MONTH},?\s+{_YEAR}",
    # 3 June / June 3 (year from the reference time)
    rf"{_BEFORE}{_LEAD}{_DAY}\s+(?:of\s+)?{_MONTH}(?![a-z])",
    rf"{_BEFORE}{_LEAD}{_MONTH}\s+{_DAY}(?!\d)",
    # in 2023 (a bare number is too often not a year)
    r"(?:in|during)\s+(?P<year>(?:19|20)\d\d)(?!\d)",
    # March last year (relative to the reference time). Neither "last year" alone nor a
    # bare month: "his camping trip last year", "born in May" name when something
    # happened, not when it was said.
    rf"{_LEAD}{_MONTH}\s+(?:of\s+)?(?P<rel>last|this)\s+year",
)
# A month by its number, in digits or Chinese numerals ("11", "十一").
_ZH_MONTH = r"(?P<mnum>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])"
_ZH_YEAR = r"(?:(?P<year>(?:19|20)\d\d)\s*年\s*|(?P<rel>今年|去年|前年))"
_ZH_PATTERNS = (
    rf"{_ZH_YEAR}?{_ZH_MONTH}\s*月\s*(?P<day>[0-3]?\d)\s*[日号](?P<before>之前|以前|前)?",
    rf"{_ZH_YEAR}{_ZH_MONTH}\s*月(?:份)?",
    r"(?P<year>(?:19|20)\d\d)\s*年(?!\d)",
)
# Years back from the reference time's year.
_YEARS_BACK = {"this": 0, "last": 1, "今年": 0, "去年": 1, "前年": 2}
_ZH_NUMERALS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
                "九": 9, "十": 10, "十一": 11, "十二": 12}


def _relative(english: str, chinese: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z])(?:{english})(?![A-Za-z])|{chinese}", re.I)


def _days(back: int, length: int) -> Callable[[datetime], tuple[datetime, datetime]]:
    """A period of `length` days starting `back` days before today (`_hint` adds the slack
    of a day)."""
    def period(today: datetime) -> tuple[datetime, datetime]:
        start = today - timedelta(days=back)
        return start, start + timedelta(days=length)
    return period


def _last_week(today: datetime) -> tuple[datetime, datetime]:
    """The calendar week before this one, Monday to Sunday."""
    monday = today - timedelta(days=today.weekday())
    return monday - timedelta(days=7), monday


def _last_month(today: datetime) -> tuple[datetime, datetime]:
    """The calendar month before this one."""
    first = today.replace(day=1)
    return (first - timedelta(days=1)).replace(day=1), first


# (pattern, the period it names from today). "The day before yesterday" before "yesterday";
# "last week" / "上周" is the calendar week before this one (what people mean by it),
# "the past week" the seven days before today.
_RELATIVE: tuple[tuple[re.Pattern[str], Callable[[datetime], tuple[datetime, datetime]]],
                 ...] = (
    (_relative("the day before yesterday", "前天"), _days(2, 1)),
    (_relative("yesterday", "昨天|昨日"), _days(1, 1)),
    (_relative("today|this morning|tonight", "今天|今日"), _days(0, 1)),
    (_relative("last week", "上周|上个?星期|上礼拜"), _last_week),
    (_relative("(?:the )?past week", "过去一周|最近一周"), _days(7, 7)),
    (_relative("last month", "上个?月"), _last_month),
    (_relative("(?:the )?past month", "过去一个月|最近一个月"), _days(31, 31)),
)
_DAYS_BACK = frozenset(period for _, period in _RELATIVE
                       if period not in (_last_week, _last_month))
_COMPILED = tuple(re.compile(p, re.I) for p in _EN_PATTERNS + _ZH_PATTERNS)


# The slack a named day gets: time zones and late-night sessions (a chat at 1 am is
# "yesterday's"). A question about the period as a whole takes only the hours around it
# (`PERIOD_SLACK`): "what did we talk about on June 1?" is not answered by May 31.
DAY_SLACK = timedelta(days=1)
PERIOD_SLACK = timedelta(hours=6)


@dataclass(frozen=True)
class TimeHint:
    start: datetime  # inclusive: the searched window, with slack around a day
    end: datetime  # exclusive
    phrase: str
    # The period itself (a day without its slack); None: the window is the period.
    period: tuple[datetime, datetime] | None = None

    def only_the_period(self) -> TimeHint:
        """The named period and `PERIOD_SLACK` around it, for a question about it alone."""
        start, end = self.period or (self.start, self.end)
        return TimeHint(start - PERIOD_SLACK, end + PERIOD_SLACK, self.phrase)


def _month_number(match: re.Match[str]) -> int | None:
    groups = match.groupdict()
    if groups.get("mnum"):
        number = groups["mnum"]
        return _ZH_NUMERALS[number] if number in _ZH_NUMERALS else int(number)
    name = (groups.get("mon") or "").lower().rstrip(".")
    for i, month in enumerate(_MONTHS, start=1):
        if name and month.startswith(name[:3]):
            return i
    return None


def _window(match: re.Match[str], reference: datetime) -> tuple[datetime, datetime] | None:
    groups = match.groupdict()
    month = _month_number(match)
    year = int(groups["year"]) if groups.get("year") else None
    if year is None and groups.get("rel"):
        year = reference.year - _YEARS_BACK[groups["rel"].lower()]
    day = int(groups["day"]) if groups.get("day") else None
    before = bool(groups.get("before"))
    try:
        if month is None:  # a year
            if year is None:
                return None
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        if year is None:
            # No year: the latest such date not after the reference time.
            year = reference.year
            if (month, day or 1) > (reference.month, reference.day):
                year -= 1
        if day is None:
            start = datetime(year, month, 1, tzinfo=UTC)
            end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
            return start, end
        date = datetime(year, month, day, tzinfo=UTC)
        if before:
            return date - timedelta(days=15), date + timedelta(days=1)
        return date, date + timedelta(days=1)
    except (ValueError, OverflowError):  # 31 February; a year beyond the calendar
        return None


def _hint(start: datetime, end: datetime, phrase: str) -> TimeHint:
    """A named day gets `DAY_SLACK` either side to search and boost; a longer period none.
    `period` keeps the named span."""
    if end - start <= timedelta(days=1):
        return TimeHint(start - DAY_SLACK, end + DAY_SLACK, phrase, period=(start, end))
    return TimeHint(start, end, phrase)


def find_time_hint(text: str, *, reference: datetime) -> TimeHint | None:
    """The first date or period named in `text`, as a time window.

    >>> find_time_hint("What did Maria do on 3 June, 2023?", reference=datetime.now(UTC)).phrase
    'on 3 June, 2023'
    """
    dated = _first_window(_COMPILED, text, reference)
    if dated is not None:
        return dated
    today = reference.replace(hour=0, minute=0, second=0, microsecond=0)
    for pattern, period in _RELATIVE:
        match = pattern.search(text)
        if match:
            try:
                start, end = period(today)
            except (OverflowError, ValueError):  # an `as_of` at the edge of the calendar
                return None
            if period in _DAYS_BACK:
                # "yesterday", "the past week": a day of slack after (a late night).
                return TimeHint(start, end + DAY_SLACK, match.group(0), period=(start, end))
            return TimeHint(start, end, match.group(0))
    return None


_BARE_MONTHS = (re.compile(rf"(?:in|during)\s+(?:the\s+month\s+of\s+)?{_MONTH}(?![a-z]|\s*\d)",
                           re.I),
                re.compile(rf"{_ZH_MONTH}\s*月(?:份)?(?!\s*\d|\s*[日号])"))


def find_bare_month(text: str, *, reference: datetime) -> TimeHint | None:
    """A month named without a year ("in September", "九月份"): the latest such month not
    after the reference time. Not read in every question ("born in May" says when
    something happened): only where the month is all a question asks about (`query.py`)."""
    return _first_window(_BARE_MONTHS, text, reference)


def _first_window(patterns: tuple[re.Pattern[str], ...], text: str,
                  reference: datetime) -> TimeHint | None:
    """The window of the first of `patterns` that names a real date in `text`."""
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            window = _window(match, reference)
            if window:
                return _hint(window[0], window[1], match.group(0).strip())
    return None


def strip_phrase(text: str, phrase: str) -> str:
    """`text` without `phrase` (the search should not look for the date's words)."""
    # Chinese needs no spaces between words: the phrase goes without a trace there.
    stripped = text.replace(phrase, "" if has_han(phrase) else " ")
    stripped = re.sub(r"\s+([?？,，.。!！])", r"\1", re.sub(r"\s{2,}", " ", stripped)).strip()
    return stripped or text
