"""How a moment of the conversation is shown to a model: a day (``Mon 8 May 2023``), and the
relative time expressions of a text ("yesterday", "last week") resolved against it. UTC days.
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

MAX_RESOLVED = 8
"""At most this many expressions are resolved per text (the first ones found)."""


def day_label(when: dt.datetime | dt.date) -> str:
    """The day of ``when`` as ``Mon 8 May 2023``."""
    return f"{_DAYS[when.weekday()]} {when.day} {_MONTH_NAMES[when.month - 1]} {when.year}"


def time_label(when: dt.datetime) -> str:
    """``when`` in UTC (naive means UTC) as ``Mon 8 May 2023 13:56``."""
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc)
    return f"{day_label(when)} {when.hour:02d}:{when.minute:02d}"


def _short_day(day: dt.date, last: dt.date) -> str:
    """``day`` as the start of a range ending on ``last``: the year and month it shares left out."""
    if day.year != last.year:
        return day_label(day)
    if day.month != last.month:
        return f"{_DAYS[day.weekday()]} {day.day} {_MONTH_NAMES[day.month - 1]}"
    return f"{_DAYS[day.weekday()]} {day.day}"


def _span(first: dt.date, last: dt.date) -> str:
    return f"{_short_day(first, last)} - {day_label(last)}"


def _anchored(unit: str, count: int, anchor: dt.date, shown: str) -> str:
    """``shown`` also said relative to ``anchor``: ``the week before Fri 9 June 2023 (...)``."""
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
    """The ``unit`` (day, week, weekend, month, year) ``count`` of them from ``day``'s."""
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
        dt.date(year, month + 1, 1)  # raises past the calendar's ends
        return f"{_MONTH_NAMES[month]} {year}"
    year = day.year + count
    dt.date(year, 1, 1)
    return str(year)


def _weekday(day: dt.date, which: str, name: str) -> str:
    """``last``/``this``/``next`` ``name``: the nearest before, the one of ``day``'s week, the
    nearest after."""
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
_VAGUE_COUNTS = {"a couple of": 2, "a couple": 2, "a few": 3, "several": 4}

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
    """The number a quantity says, and whether it is loose (``a few``)."""
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


def _relative(day: dt.date, which: str, what: str) -> str:
    what = _SHORT_WEEKDAYS.get(what, what)
    if what in _WEEKDAYS:
        return _weekday(day, which, what)
    return _shift(day, what, {"last": -1, "this": 0, "next": 1}[which])


def resolve_relative(text: str, when: dt.datetime | dt.date) -> dict[str, str]:
    """The relative time expressions of ``text`` (lower case, single spaces; at most
    :data:`MAX_RESOLVED`), each resolved against the day of ``when``; never raises."""
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
