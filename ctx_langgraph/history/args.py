"""Checks of the history store's arguments: each raises TypeError or ValueError naming the
argument, before any statement runs."""

from __future__ import annotations

import operator
from collections.abc import Iterable

__all__ = [
    "MAX_QUERY_WORDS",
    "MAX_ROLES",
    "SEQ_MAX",
    "SEQ_MIN",
    "id_list",
    "integer_arg",
    "limit_arg",
    "seq_bound",
    "shown",
    "text_arg",
]


SEQ_MIN = -(2**63)
SEQ_MAX = 2**63 - 1
"""The range of a seq (and of every integer column): 64-bit signed on both backends."""
LIMIT_MAX = 2**62
MAX_ROLES = 100
MAX_QUERY_WORDS = 1000
"""Most distinct words (CJK character pairs count one each) a search query may have."""


def shown(value: object, limit: int = 80) -> str:
    """``value`` as a message shows it: its ``repr`` (escaped: no NUL, no lone surrogate),
    cut when longer than ``limit``.

    Examples:
        >>> shown("a" * 100, 10)
        "'aaaaaa..."
    """
    try:
        text = repr(value)
    except RecursionError:
        return f"a deeply nested {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def integer_arg(name: str, value: object) -> int:
    """``value`` as an int (bools and floats are refused: TypeError naming ``name``)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got a bool ({value!r})")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__}: {shown(value)}"
        ) from None


def seq_bound(name: str, value: object) -> int:
    """A seq bound clamped into the 64-bit range: a bound past every seq keeps its meaning
    (``min_seq=2**70`` finds nothing, ``max_seq=-10**30`` finds nothing) without overflowing
    the database driver.

    Examples:
        >>> seq_bound("min_seq", 2**70) == SEQ_MAX, seq_bound("max_seq", -10**30) == SEQ_MIN
        (True, True)
    """
    return min(max(integer_arg(name, value), SEQ_MIN), SEQ_MAX)


def limit_arg(name: str, value: object) -> int:
    """A page size: at least 1 (ValueError), capped where the driver's integers end."""
    limit = integer_arg(name, value)
    if limit < 1:
        raise ValueError(f"{name} must be at least 1, got {limit}")
    return min(limit, LIMIT_MAX)


def text_arg(name: str, value: object) -> str:
    """``value``, which must be a string (TypeError naming ``name`` otherwise)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}: {shown(value)}")
    return value


def id_list(name: str, value: Iterable[str] | str) -> list[str]:
    """Event ids: one string, or an iterable of strings."""
    if isinstance(value, str):
        return [value]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(
            f"{name} must be a string or an iterable of strings, got {type(value).__name__}"
        ) from None
    return [text_arg(f"{name}[{index}]", item) for index, item in enumerate(items)]
