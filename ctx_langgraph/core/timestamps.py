"""When a message was said: the conversation's own time, read from the message (``created_at``
or ``timestamp`` in ``additional_kwargs`` or ``response_metadata``; docs/design.md §4).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = [
    "MAX_TIME_TEXT",
    "TIME_KEYS",
    "BatchTimes",
    "TimestampSource",
    "batch_times",
    "iso_time",
    "own_time",
    "parse_time",
]

TIME_KEYS = ("created_at", "timestamp")
"""The keys a message's time is read from, in ``additional_kwargs`` then ``response_metadata``."""

TimestampSource = Callable[[BaseMessage], "dt.datetime | None"]
"""A user's reader of a message's time (``ContextConfig(timestamp=...)``)."""

MAX_TIME_TEXT = 64
"""Longer text is not a time (refused before it is parsed)."""


def parse_time(value: object) -> dt.datetime:
    """``value`` (ISO-8601 text, date, datetime or epoch seconds) as an aware UTC datetime;
    TypeError for another type, ValueError for a value that is not a time."""
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):
        when = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        when = _from_text(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number of epoch seconds")
        try:
            return dt.datetime.fromtimestamp(value, dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(
                f"{value!r} epoch seconds is outside the years 1 to 9999 (milliseconds?)"
            ) from None
    else:
        raise TypeError(
            f"a time must be an ISO-8601 string, a datetime or epoch seconds, "
            f"got {type(value).__name__}"
        )
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.timezone.utc)
    try:
        return when.astimezone(dt.timezone.utc)
    except OverflowError:
        raise ValueError(f"{when.isoformat()} is outside the years 1 to 9999 in UTC") from None


def iso_time(value: str) -> dt.datetime:
    """``value`` read as ISO 8601 (``Z`` too); ValueError when it is not one, or too long."""
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    if len(text) > MAX_TIME_TEXT:
        raise ValueError("too long")
    return dt.datetime.fromisoformat(text)


def _from_text(value: str) -> dt.datetime:
    try:
        return iso_time(value)
    except ValueError:
        shown = value if len(value) <= MAX_TIME_TEXT else value[:MAX_TIME_TEXT] + "..."
        raise ValueError(
            f"{shown!r} is not an ISO-8601 date or time (e.g. 2023-05-08 or 2023-05-08T13:56:00Z)"
        ) from None


def own_time(message: BaseMessage) -> object | None:
    """The time the message carries (not parsed), or None."""
    for place in (message.additional_kwargs, message.response_metadata):
        if place:
            for key in TIME_KEYS:
                value: object = place.get(key)
                if value is not None:
                    return value
    return None


@dataclass(frozen=True)
class BatchTimes:
    """The times of a batch of messages (None: the store's clock), and why a message's own
    time was not used (one line each)."""

    times: list[dt.datetime | None]
    problems: list[str]

    @property
    def any_known(self) -> bool:
        return any(when is not None for when in self.times)


def _read(
    message: BaseMessage, source: TimestampSource | None, problems: list[str] | None
) -> dt.datetime | None:
    value = own_time(message) if source is None else source(message)
    if value is None:
        return None
    try:
        return parse_time(value)
    except (TypeError, ValueError) as exc:
        if problems is not None:
            problems.append(f"message {message.id}: {exc}"[:300])
        return None


def batch_times(
    messages: Sequence[BaseMessage],
    *,
    previous: BaseMessage | None = None,
    source: TimestampSource | None = None,
) -> BatchTimes:
    """The time of each message: its own, else the one before it's (``previous`` too when the
    batch continues its turn), else None. ``source`` replaces reading the message's keys."""
    problems: list[str] = []
    last: dt.datetime | None = None
    if previous is not None and messages and isinstance(messages[0], ToolMessage | AIMessage):
        last = _read(previous, source, None)
    times: list[dt.datetime | None] = []
    for message in messages:
        when = _read(message, source, problems)
        last = when if when is not None else last
        times.append(last)
    return BatchTimes(times, problems)
