"""The lookup's cursors: a search's place, a ranked search's place, a place in one record.

Every cursor is a JSON object in the package's one cursor codec (:mod:`ctx_langgraph.core.cursor`)
with ``"v": 1``; what it carries is checked when it comes back, so a forged, cut or edited
cursor is refused with a message, whatever it decodes to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.tools import ToolException

from ctx_langgraph.core.cursor import decode_cursor, encode_cursor
from ctx_langgraph.lookup._args import (
    MAX_HANDLE_CHARS,
    SEQ_MAX,
    UNSTORABLE,
    Filters,
    checked_int,
    checked_str,
    shown,
)

CURSOR_VERSION = 1


def _encode(payload: dict[str, Any]) -> str:
    return encode_cursor({"v": CURSOR_VERSION, **payload})


@dataclass(frozen=True)
class SearchCursor:
    """The next page of a search: the hits past ``after_seq`` in the lookup's order."""

    filters: Filters
    after_seq: int

    def encode(self) -> str:
        return _encode({"f": self.filters.to_json(), "after": self.after_seq})


@dataclass(frozen=True)
class RankedCursor:
    """The next page of a ranked search."""

    filters: Filters
    skip: int
    """Records of the ranking already served."""

    def encode(self) -> str:
        return _encode({"f": self.filters.to_json(), "skip": self.skip})


@dataclass(frozen=True)
class HandleCursor:
    """The rest of one record's text, from ``offset``, while its revision is ``revision``."""

    event_id: str
    offset: int
    revision: int

    def encode(self) -> str:
        return _encode({"h": self.event_id, "o": self.offset, "r": self.revision})


Cursor = SearchCursor | RankedCursor | HandleCursor


def _cursor_of(data: dict[str, Any]) -> Cursor:
    version = data.get("v")
    if type(version) is not int or version != CURSOR_VERSION:
        raise ValueError("not a cursor of this tool")
    if set(data) == {"v", "f", "after"}:
        after = checked_int(data["after"], 0, SEQ_MAX)
        return SearchCursor(Filters.from_json(data["f"]), after)
    if set(data) == {"v", "f", "skip"}:
        skip = checked_int(data["skip"], 0, SEQ_MAX)
        return RankedCursor(Filters.from_json(data["f"]), skip)
    if set(data) == {"v", "h", "o", "r"}:
        event_id = checked_str(data["h"])
        if not 0 < len(event_id) <= MAX_HANDLE_CHARS or UNSTORABLE.search(event_id):
            raise ValueError("not an event id")
        offset = checked_int(data["o"], 0, SEQ_MAX)
        return HandleCursor(event_id, offset, checked_int(data["r"], -SEQ_MAX, SEQ_MAX))
    raise ValueError("not a cursor of this tool")


def read_cursor(cursor: str) -> Cursor:
    """The cursor this tool wrote; anything else (forged, cut short, edited) is refused with a
    message, whatever it decodes to."""
    text = cursor.strip()
    try:
        return _cursor_of(decode_cursor(text))
    except (ValueError, TypeError, RecursionError, ToolException):
        raise ToolException(
            f"cursor {shown(text, 40)} is not a cursor this tool returned: pass a next_cursor "
            "(or a cut record's cursor) exactly as it was given, or leave cursor out to start "
            "from the first page."
        ) from None
