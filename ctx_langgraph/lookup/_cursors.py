"""The lookup's cursors: a place in the records in seq order (v1), in a ranking (v2), or in one
record (v1); each is checked when it comes back, so a forged or edited one is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.tools import ToolException

from ctx_langgraph.core.cursor import decode_cursor, encode_cursor
from ctx_langgraph.history.args import SEQ_MAX, shown
from ctx_langgraph.lookup._args import (
    MAX_HANDLE_CHARS,
    UNSTORABLE,
    Filters,
    checked_int,
    checked_str,
)

CURSOR_VERSION = 1
RANKED_VERSION = 2


def _encode(payload: dict[str, Any], version: int = CURSOR_VERSION) -> str:
    return encode_cursor({"v": version, **payload})


@dataclass(frozen=True)
class SearchCursor:
    """The records past ``after_seq`` of a lookup without query."""

    filters: Filters
    after_seq: int

    def encode(self) -> str:
        return _encode({"f": self.filters.to_json(), "after": self.after_seq})


@dataclass(frozen=True)
class RankedCursor:
    """The hits of a ranking past its first ``skip``."""

    filters: Filters
    skip: int

    def encode(self) -> str:
        return _encode({"f": self.filters.to_json(), "skip": self.skip}, RANKED_VERSION)


@dataclass(frozen=True)
class HandleCursor:
    """The rest of one record's text, from ``offset``, while its revision is ``revision``."""

    event_id: str
    offset: int
    revision: int

    def encode(self) -> str:
        return _encode({"h": self.event_id, "o": self.offset, "r": self.revision})


Cursor = SearchCursor | RankedCursor | HandleCursor


def _earlier(data: dict[str, Any]) -> bool:
    """A version-1 cursor of a query: its place was in an order this tool no longer serves."""
    filters = data.get("f")
    return data.get("v") == CURSOR_VERSION and (
        "skip" in data or (isinstance(filters, dict) and "query" in filters)
    )


def _cursor_of(data: dict[str, Any]) -> Cursor:
    version = data.get("v")
    if type(version) is not int or version not in (CURSOR_VERSION, RANKED_VERSION):
        raise ValueError("not a cursor of this tool")
    keys = set(data)
    if version == RANKED_VERSION:
        if keys != {"v", "f", "skip"}:
            raise ValueError("not a cursor of this tool")
        filters = Filters.from_json(data["f"])
        if not filters.query:
            raise ValueError("a ranking without query")
        return RankedCursor(filters, checked_int(data["skip"], 0, SEQ_MAX))
    if keys == {"v", "f", "after"}:
        after = checked_int(data["after"], 0, SEQ_MAX)
        return SearchCursor(Filters.from_json(data["f"]), after)
    if keys == {"v", "h", "o", "r"}:
        event_id = checked_str(data["h"])
        if not 0 < len(event_id) <= MAX_HANDLE_CHARS or UNSTORABLE.search(event_id):
            raise ValueError("not an event id")
        offset = checked_int(data["o"], 0, SEQ_MAX)
        return HandleCursor(event_id, offset, checked_int(data["r"], -SEQ_MAX, SEQ_MAX))
    raise ValueError("not a cursor of this tool")


def _not_ours(text: str) -> ToolException:
    return ToolException(
        f"cursor {shown(text, 40)} is not a cursor this tool returned: pass a next_cursor "
        "(or a cut record's cursor) exactly as it was given, or leave cursor out to start "
        "from the first page."
    )


def read_cursor(cursor: str) -> Cursor:
    """The cursor this tool wrote; anything else (forged, cut short, edited) is refused with a
    message, whatever it decodes to."""
    text = cursor.strip()
    try:
        data = decode_cursor(text)
    except (ValueError, TypeError, RecursionError):
        raise _not_ours(text) from None
    if _earlier(data):
        raise ToolException(
            "this cursor continues a search made by an earlier version of this tool, which "
            "ordered results differently: search again without the cursor (best matches now "
            "come first)."
        )
    try:
        return _cursor_of(data)
    except (ValueError, TypeError, RecursionError, ToolException):
        raise _not_ours(text) from None
