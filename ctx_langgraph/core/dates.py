"""How the package shows a moment of the conversation to a model: a short, unambiguous day.

Events carry the conversation's own time (``created_at``); summaries and lookup records show it
as a day a model reads without date arithmetic (``Mon 8 May 2023``), beside the ISO time
(``2023-05-08T13:56Z``). A record whose text speaks of time relative to when it was said
("yesterday", "last week", "two days ago") gets those expressions resolved against its day
(:func:`resolve_relative`), so a question asked months later is answered with dates, not with
the day the question was asked.

Days are UTC days: a message said late in the evening west of Greenwich falls on the next day.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

__all__ = ["MAX_RESOLVED", "day_label", "resolve_relative", "time_label"]

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTH_NAMES = (
    *("January", "February", "March", "April", "May", "June"),
    *("July", "August", "September", "October", "November", "December"),
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SHORT_WEEKDAYS = {
    short: next(day for day in _WEEKDAYS if day.startswith(short))
    for short in ("mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri")
}
"""Short names people write ("last fri"); not "sat" and "sun", which are words of their own."""

MAX_RESOLVED = 8
"""At most this many expressions are resolved per text (the first ones found): a record's
resolutions stay a few tokens long."""


def day_label(when: dt.datetime | dt.date) -> str:
    """The day of ``when`` as ``Mon 8 May 2023`` (weekday, day, the month's full name, year;
    no zero padding): as people write a date, so a question's words find it.

    Examples:
        >>> day_label(dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc))
        'Mon 8 May 2023'
        >>> day_label(dt.date(2024, 12, 25))
        'Wed 25 December 2024'
    """
    return f"{_DAYS[when.weekday()]} {when.day} {_MONTH_NAMES[when.month - 1]} {when.year}"


def time_label(when: dt.datetime) -> str:
    """``when`` in UTC to the minute, as a day and a time (``Mon 8 May 2023 13:56``); naive
    means UTC. What a lookup record shows: a model reads the day without date arithmetic and
    writes it back as ISO 8601 (``2023-05-08T13:56``) for ``since``/``until``.

    Examples:
        >>> time_label(dt.datetime(2023, 5, 8, 15, 56, tzinfo=dt.timezone(dt.timedelta(hours=2))))
        'Mon 8 May 2023 13:56'
    """
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc)
    return f"{day_label(when)} {when.hour:02d}:{when.minute:02d}"


# --------------------------------------------------------------------------- relative expressions


def _short_day(day: dt.date, last: dt.date) -> str:
    """``day`` as the start of a range ending on ``last``: its year left out when the same, its
    month too when that is the same."""
    if day.year != last.year:
        return day_label(day)
    if day.month != last.month:
        return f"{_DAYS[day.weekday()]} {day.day} {_MONTH_NAMES[day.month - 1]}"
    return f"{_DAYS[day.weekday()]} {day.day}"


def _span(first: dt.date, last: dt.date) -> str:
    return f"{_short_day(first, last)} - {day_label(last)}"


def _anchored(unit: str, count: int, anchor: dt.date, shown: str) -> str:
    """``shown`` (the resolved date) said as people date events, relative to the day it was
    said: ``the week before Fri 9 June 2023 (...)``, ``two weekends before ...``."""
    if count == 0:
        return shown
    side = "before" if count < 0 else "after"
    size = abs(count)
    if size == 1:
        head = f"the {unit} {side}"
    else:
        head = f"{_COUNT_NAMES.get(size, str(size))} {unit}s {side}"
    return f"{head} {day_label(anchor)} ({shown})"


def _shift(day: dt.date, unit: str, count: int) -> str:
    """The ``unit`` (day, week, weekend, month, year) ``count`` of them from ``day``'s: a day,
    a week or weekend also said relative to ``day`` (``the week before Mon 8 May 2023``)."""
    if unit == "day":
        return day_label(day + dt.timedelta(days=count))
    monday = day - dt.timedelta(days=day.weekday())
    if unit == "week":
        start = monday + dt.timedelta(weeks=count)
        shown = _span(start, start + dt.timedelta(days=6))
        return (
            _anchored("week", count, day, shown)
            if count
            else f"the week of {day_label(day)} ({shown})"
        )
    if unit == "weekend":
        saturday = monday + dt.timedelta(days=5, weeks=count)
        return _anchored("weekend", count, day, _span(saturday, saturday + dt.timedelta(days=1)))
    if unit == "month":
        months = day.year * 12 + day.month - 1 + count
        year, month = divmod(months, 12)
        dt.date(year, month + 1, 1)  # (raises past the calendar's ends, like the other units)
        return f"{_MONTH_NAMES[month]} {year}"
    year = day.year + count
    dt.date(year, 1, 1)
    return str(year)


def _weekday(day: dt.date, which: str, name: str) -> str:
    """``last``/``this``/``next`` ``name``: the nearest one before, the one of the same
    (Monday-first) week, the nearest one after; the first two also said relative to ``day``
    (``Fri 14 July 2023, the Friday before Sat 15 July 2023``)."""
    target = _WEEKDAYS.index(name)
    if which == "this":
        return day_label(day + dt.timedelta(days=target - day.weekday()))
    if which == "last":
        found, side = day - dt.timedelta(days=(day.weekday() - target - 1) % 7 + 1), "before"
    else:
        found, side = day + dt.timedelta(days=(target - day.weekday() - 1) % 7 + 1), "after"
    return f"{day_label(found)}, the {name.capitalize()} {side} {day_label(day)}"


_FIXED = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "last night": -1,
    "today": 0,
    "tonight": 0,
    "tomorrow": 1,
}
_NUMBER_WORDS = (
    *("one", "two", "three", "four", "five", "six"),
    *("seven", "eight", "nine", "ten", "eleven", "twelve"),
)
_WORD_COUNTS = {"an": 1, "a": 1} | {word: n for n, word in enumerate(_NUMBER_WORDS, start=1)}
_COUNT_NAMES = {count: word for word, count in _WORD_COUNTS.items() if count > 1}
"""How a count above one is said (``two weeks before``); larger ones as digits."""
_VAGUE_COUNTS = {"a couple of": 2, "a couple": 2, "a few": 3, "several": 4}
"""Counts people say loosely: resolved with ``around``."""

_SPACE = r"\s+"
_QUANTITY = "|".join(
    [r"\d{1,4}", r"a\s+couple(?:\s+of)?", r"a\s+few", "several"]
    + [word for word in _WORD_COUNTS if word not in ("a", "an")]
    + ["an", "a"]
)
_UNIT = r"(?:day|weekend|week|month|year)s?"
_PATTERN = re.compile(
    r"\b(?:"
    rf"(?P<fixed>{'|'.join(k.replace(' ', _SPACE) for k in _FIXED)})"
    rf"|(?P<which>last|this|next){_SPACE}"
    rf"(?P<what>weekend|week|month|year|{'|'.join([*_WEEKDAYS, *_SHORT_WEEKDAYS])})"
    rf"|the{_SPACE}(?P<before_last>week|month|year){_SPACE}before{_SPACE}last"
    rf"|(?P<ago>{_QUANTITY}){_SPACE}(?P<ago_unit>{_UNIT}){_SPACE}ago"
    rf"|in{_SPACE}(?P<ahead>{_QUANTITY}){_SPACE}(?P<ahead_unit>{_UNIT})"
    rf"|(?P<from_now>{_QUANTITY}){_SPACE}(?P<from_now_unit>{_UNIT}){_SPACE}from{_SPACE}now"
    r")\b",
    re.IGNORECASE,
)


def _count(quantity: str) -> tuple[int, bool]:
    """The number a quantity says, and whether it is a loose one (``a few``)."""
    words = " ".join(quantity.lower().split())
    if words in _VAGUE_COUNTS:
        return _VAGUE_COUNTS[words], True
    return (int(words) if words.isdigit() else _WORD_COUNTS[words]), False


def _counted(day: dt.date, quantity: str, unit: str, sign: int) -> str:
    count, vague = _count(quantity)
    shown = _shift(day, unit.lower().rstrip("s"), sign * count)
    return f"around {shown}" if vague else shown


_Resolver = Callable[[dt.date, "re.Match[str]"], str]
_RESOLVERS: dict[str, _Resolver] = {
    "fixed": lambda day, m: _shift(day, "day", _FIXED[" ".join(m["fixed"].lower().split())]),
    "which": lambda day, m: _relative(day, m["which"].lower(), m["what"].lower()),
    "before_last": lambda day, m: _shift(day, m["before_last"].lower(), -2),
    "ago": lambda day, m: _counted(day, m["ago"], m["ago_unit"], -1),
    "ahead": lambda day, m: _counted(day, m["ahead"], m["ahead_unit"], 1),
    "from_now": lambda day, m: _counted(day, m["from_now"], m["from_now_unit"], 1),
}
"""The first group of a match names how it is resolved."""


def _relative(day: dt.date, which: str, what: str) -> str:
    what = _SHORT_WEEKDAYS.get(what, what)
    if what in _WEEKDAYS:
        return _weekday(day, which, what)
    return _shift(day, what, {"last": -1, "this": 0, "next": 1}[which])


def resolve_relative(text: str, when: dt.datetime | dt.date) -> dict[str, str]:
    """The relative time expressions of ``text``, each resolved against the day of ``when``.

    Keys are the expressions as found (lower case, single spaces), in order of first
    appearance, at most :data:`MAX_RESOLVED`; an expression whose answer falls outside the
    calendar (years 1 to 9999) is left out. Weeks start on Monday: ``last week`` is the week
    before the one ``when`` falls in, ``this weekend`` the Saturday and Sunday of that week,
    ``last Friday`` the nearest Friday before, ``next Friday`` the nearest one after. Loose
    counts (``a few``, ``a couple of``, ``several``) read as 3, 2 and 4, said ``around``.
    Never raises on any text.

    | said on Mon 8 May 2023          | resolved                                        |
    |---------------------------------|-------------------------------------------------|
    | yesterday, last night           | Sun 7 May 2023                                  |
    | today, tonight / tomorrow       | Mon 8 May 2023 / Tue 9 May 2023                 |
    | the day before yesterday        | Sat 6 May 2023                                  |
    | last week                       | the week before Mon 8 May 2023 (Mon 1 - Sun 7 May 2023) |
    | this week                       | the week of Mon 8 May 2023 (Mon 8 - Sun 14 May 2023) |
    | the week before last            | two weeks before Mon 8 May 2023 (Mon 24 - Sun 30 April 2023) |
    | last weekend, two weekends ago  | the weekend before Mon 8 May 2023 (Sat 6 - Sun 7 May 2023), ... |
    | this weekend                    | Sat 13 - Sun 14 May 2023                        |
    | last / this / next month        | April / May / June 2023                         |
    | last / this / next year         | 2022 / 2023 / 2024                              |
    | last Sunday                     | Sun 7 May 2023, the Sunday before Mon 8 May 2023 |
    | this / next Friday              | Fri 12 May 2023 / Fri 12 May 2023, the Friday after Mon 8 May 2023 |
    | last Fri (Mon to Fri shortened) | Fri 5 May 2023, the Friday before Mon 8 May 2023 |
    | two days ago, 2 days ago        | Sat 6 May 2023                                  |
    | a few weeks ago                 | around three weeks before Mon 8 May 2023 (...)  |
    | in three months, 3 months from now | August 2023                                  |

    A week or weekend (and a weekday before or after) is said both ways: relative to the day
    it was said, as people date events ("the week before Fri 9 June 2023"), and as the days it
    spans.

    Examples:
        >>> monday = dt.date(2023, 5, 8)
        >>> resolve_relative("Yesterday I told you; last year, too.", monday)
        {'yesterday': 'Sun 7 May 2023', 'last year': '2022'}
        >>> resolve_relative("We met last week, last Sunday and two days ago.", monday)["last week"]
        'the week before Mon 8 May 2023 (Mon 1 - Sun 7 May 2023)'
        >>> resolve_relative("We met last Sunday, two days ago.", monday)
        {'last sunday': 'Sun 7 May 2023, the Sunday before Mon 8 May 2023', 'two days ago': 'Sat 6 May 2023'}
        >>> resolve_relative("two weekends ago", dt.date(2023, 7, 17))
        {'two weekends ago': 'two weekends before Mon 17 July 2023 (Sat 8 - Sun 9 July 2023)'}
        >>> resolve_relative("In  three months, or next month?", monday)
        {'in three months': 'August 2023', 'next month': 'June 2023'}
        >>> resolve_relative("The report on the yesterdays of May", monday)
        {}
        >>> resolve_relative("tomorrow", dt.date(9999, 12, 31))  # past the calendar: left out
        {}
    """
    day = when.date() if isinstance(when, dt.datetime) else when
    resolved: dict[str, str] = {}
    for match in _PATTERN.finditer(text):
        expression = " ".join(match[0].lower().split())
        if expression in resolved:
            continue
        kind = next(name for name in _RESOLVERS if match[name] is not None)
        try:
            resolved[expression] = _RESOLVERS[kind](day, match)
        except (OverflowError, ValueError):  # beyond year 1 or 9999
            continue
        if len(resolved) >= MAX_RESOLVED:
            break
    return resolved
