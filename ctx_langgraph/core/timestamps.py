"""When a message was said: the conversation's own time, read from the message (docs/design.md §4).

A message may carry its time under ``created_at`` or ``timestamp``, in ``additional_kwargs`` or
``response_metadata`` (OpenAI's Responses API puts the reply's epoch seconds in
``response_metadata["created_at"]``). A value is an ISO-8601 string (a date alone or a date and
time; no offset means UTC), a ``datetime`` (naive means UTC), a ``date``, or epoch seconds.
:func:`batch_times` gives each message of a batch to record its time: its own, else the time of
the message before it in the batch (a tool result inherits its call's), else None (the store's
clock: now). A value that cannot be read never stops a turn: it is reported as a problem and
the message falls back the same way.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = ["TIME_KEYS", "BatchTimes", "TimestampSource", "batch_times", "own_time", "parse_time"]

TIME_KEYS = ("created_at", "timestamp")
"""The keys a message's time is read from, first in ``additional_kwargs``, then in
``response_metadata``."""

TimestampSource = Callable[[BaseMessage], "dt.datetime | None"]
"""A user's reader of a message's time (``ContextConfig(timestamp=...)``); None: not known."""

_MAX_TEXT = 64
"""Longer strings are not times (refused before they are parsed)."""


def parse_time(value: object) -> dt.datetime:
    """``value`` as an aware UTC datetime.

    Raises:
        TypeError: not a string, date, datetime or number (a bool is not a number here).
        ValueError: a string that is not ISO 8601, a number that is not finite, or a time
            outside the years 1 to 9999 in UTC.

    Examples:
        >>> parse_time("2023-05-08T13:56:00+02:00")
        datetime.datetime(2023, 5, 8, 11, 56, tzinfo=datetime.timezone.utc)
        >>> parse_time("2023-05-08") == parse_time(dt.date(2023, 5, 8)) == parse_time(1683504000)
        True
        >>> parse_time("last tuesday")
        Traceback (most recent call last):
        ...
        ValueError: 'last tuesday' is not an ISO-8601 date or time (e.g. 2023-05-08 or 2023-05-08T13:56:00Z)
    """
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


def _from_text(value: str) -> dt.datetime:
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        if len(text) > _MAX_TEXT:
            raise ValueError("too long")
        return dt.datetime.fromisoformat(text)
    except ValueError:
        shown = value if len(value) <= _MAX_TEXT else value[:_MAX_TEXT] + "..."
        raise ValueError(
            f"{shown!r} is not an ISO-8601 date or time (e.g. 2023-05-08 or 2023-05-08T13:56:00Z)"
        ) from None


def own_time(message: BaseMessage) -> object | None:
    """The time the message carries (not parsed), or None.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> own_time(HumanMessage("hi", additional_kwargs={"created_at": "2023-05-08"}))
        '2023-05-08'
        >>> own_time(HumanMessage("hi")) is None
        True
    """
    for place in (message.additional_kwargs, message.response_metadata):
        if place:
            for key in TIME_KEYS:
                value: object = place.get(key)
                if value is not None:
                    return value
    return None


@dataclass(frozen=True)
class BatchTimes:
    """The times of a batch of messages to record."""

    times: list[dt.datetime | None]
    """One per message; None: the store's clock (now)."""
    problems: list[str]
    """Why a message's own time was not used (one line each, with the message id)."""

    @property
    def any_known(self) -> bool:
        """Some message has a time (else the store's clock stamps them all)."""
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
    """The time of each message of a batch: its own, else the time of the message before it.

    ``previous`` is the message before the batch (already recorded): a batch that continues its
    turn (it starts with a tool result or an assistant message) inherits its time; a batch
    starting with a user message starts a new turn and does not. ``source`` replaces reading
    the message's own keys (a user's callable; what it returns is read as above). A callable
    that raises is a programming error and is not caught.

    Examples:
        >>> from langchain_core.messages import HumanMessage, AIMessage, ToolMessage
        >>> call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a1",
        ...                  additional_kwargs={"created_at": "2023-05-08T13:56Z"})
        >>> got = batch_times([ToolMessage("42", tool_call_id="c1", id="t1"),
        ...                    HumanMessage("thanks", id="h2", additional_kwargs={"timestamp": True})],
        ...                   previous=call)
        >>> [when.isoformat() if when else None for when in got.times]
        ['2023-05-08T13:56:00+00:00', '2023-05-08T13:56:00+00:00']
        >>> got.problems
        ['message h2: a time must be an ISO-8601 string, a datetime or epoch seconds, got bool']
        >>> batch_times([HumanMessage("hi", id="h3")], previous=call).times  # a new turn: now
        [None]
    """
    problems: list[str] = []
    last: dt.datetime | None = None
    if previous is not None and messages and isinstance(messages[0], ToolMessage | AIMessage):
        last = _read(previous, source, None)  # (its problem was reported when it was recorded)
    times: list[dt.datetime | None] = []
    for message in messages:
        when = _read(message, source, problems)
        last = when if when is not None else last
        times.append(last)
    return BatchTimes(times, problems)
