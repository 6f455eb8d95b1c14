"""Text as both backends store it: escaping what a column cannot hold, tool names, compact JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["dumps", "json_text", "load_names", "load_text", "store_names", "store_text"]

_ESCAPE = "\ufdd0"
"""Starts a stored text that holds escapes (a noncharacter); each unstorable character and the
marker itself is written as the marker and four hex digits."""
_UNSTORABLE = re.compile("[\x00\ud800-\udfff\ufdd0]")
_UNSTORABLE_NAME = re.compile("[\x00\ud800-\udfff\ufdd0|]")  # '|' separates stored names
_ESCAPED = re.compile("\ufdd0([0-9a-f]{4})")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(value: str, unstorable: re.Pattern[str]) -> str:
    if unstorable.search(value) is None:
        return value
    return _ESCAPE + unstorable.sub(lambda m: f"{_ESCAPE}{ord(m.group()):04x}", value)


def store_text(value: str) -> str:
    """A text as both backends' columns hold it (NUL and lone surrogates escaped).

    Examples:
        >>> store_text("plain") == "plain", load_text(store_text("a\\x00b\\ud800")) == "a\\x00b\\ud800"
        (True, True)
    """
    return _escape(value, _UNSTORABLE)


def load_text(stored: str) -> str:
    """The text :func:`store_text` stored."""
    if not stored.startswith(_ESCAPE):
        return stored
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), stored[1:])


def store_names(names: Sequence[str]) -> str:
    """Tool names as one column, ``|a|b|`` (a ``|`` inside a name is escaped)."""
    if not names:
        return ""
    return "|" + "|".join(_escape(name, _UNSTORABLE_NAME) for name in names) + "|"


def load_names(stored: str) -> tuple[str, ...]:
    """The names :func:`store_names` stored."""
    return tuple(load_text(name) for name in stored.split("|") if name)


def json_text(value: Any) -> str:
    """Compact JSON both backends store (ASCII when it holds a lone surrogate)."""
    text = dumps(value)
    if _SURROGATE.search(text) is not None:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept as it is (values JSON cannot encode become ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
