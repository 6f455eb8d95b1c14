"""What the model may ask the history lookup for, checked and bounded before a store is asked;
what does not fit raises a ``ToolException`` saying how to call the tool.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, fields
from typing import Annotated, Any

from langchain_core.tools import ToolException
from pydantic import BaseModel, Field, WithJsonSchema

from ctx_langgraph.core.text import query_terms, rank_terms
from ctx_langgraph.core.timestamps import MAX_TIME_TEXT, iso_time
from ctx_langgraph.history.args import SEQ_MAX, seq_bound, shown

MAX_QUERY_CHARS = 200
"""Longer queries are refused."""
MAX_QUERIES = 5
"""Searches one call may make (``query`` as a list)."""
MAX_NAME_CHARS = 200
"""Longer tool names are refused."""
MAX_HANDLE_CHARS = 1000
"""Longer handles are refused."""
MAX_TIME_CHARS = MAX_TIME_TEXT
"""Longer ``since``/``until`` values are refused before they are parsed."""
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""Characters no database text can hold: NUL and lone surrogates."""
HANDLE_PREFIX = "history:"
"""The prefix of a capped tool result's handle (``history:<seq>``), which the lookup fetches."""
FETCH = 20
"""Records asked of the store at a time."""

ROLES = {
    "user": "human",
    "human": "human",
    "assistant": "ai",
    "ai": "ai",
    "tool": "tool",
    "system": "system",
}


def _optional(description: str | None = None) -> Any:
    """An optional argument, None when left out, with no ``default`` in the schema (shorter)."""
    return Field(default_factory=_none, description=description)


def _none() -> None:
    return None


_TEXT = WithJsonSchema({"type": "string"})
_WHOLE = WithJsonSchema({"type": "integer"})
_QUERIES = WithJsonSchema(
    {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
)


class LookupArgs(BaseModel):
    """What the model may ask for. The scope is not here: it comes from the run."""

    query: Annotated[str | list[str] | None, _QUERIES] = _optional(
        "Words to find, or a list of searches."
    )
    min_seq: Annotated[int | None, _WHOLE] = _optional()
    max_seq: Annotated[int | None, _WHOLE] = _optional()
    since: Annotated[str | None, _TEXT] = _optional("ISO-8601 time (UTC if no offset).")
    until: Annotated[str | None, _TEXT] = _optional("ISO-8601 time, excluded.")
    role: Annotated[str | None, _TEXT] = _optional("user, assistant, tool or system.")
    tool_name: Annotated[str | None, _TEXT] = _optional("Its calls and results.")
    handle: Annotated[str | None, _TEXT] = _optional("history:<event_id>: one record whole.")
    cursor: Annotated[str | None, _TEXT] = _optional("A next_cursor, alone.")
    newest_first: bool = Field(default_factory=bool, description="Without query: newest first.")


def plain_text(text: str, limit: int = 200) -> str:
    """``text`` fit for a message to the model: no NUL or lone surrogate, at most ``limit``."""
    text = UNSTORABLE.sub("?", text)
    return text if len(text) <= limit else text[:limit] + "..."


def _shown_value(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(shown(query, 40) for query in value) + "]"
    if isinstance(value, dt.datetime):
        value = value.isoformat()
    return shown(value) if isinstance(value, str) else repr(value)


def handle_of(event_id: str) -> str:
    """An event's handle as a message names it (cut when long)."""
    return plain_text(HANDLE_PREFIX + event_id, 100)


def checked_int(value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError("expected an integer in range")
    return value


def checked_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _too_long(name: str, value: str, limit: int, hint: str) -> ToolException:
    return ToolException(f"{name} is {len(value)} characters long; the limit is {limit}: {hint}.")


def _exact_name(name: str, value: str, limit: int, hint: str) -> str:
    """A name matched exactly (a tool name, an event id), bounded and storable."""
    if len(value) > limit:
        raise _too_long(name, value, limit, hint)
    if UNSTORABLE.search(value):
        raise ToolException(
            f"{name}={shown(value)} contains a NUL or an unpaired surrogate character, which "
            f"no recorded name has: {hint}."
        )
    return value


def _query(value: str) -> str | None:
    query = value.strip()
    if not query:
        return None
    if len(query) > MAX_QUERY_CHARS:
        raise _too_long("query", query, MAX_QUERY_CHARS, "search for a few distinctive words")
    searched = UNSTORABLE.sub(" ", query)
    if not query_terms(searched):
        raise ToolException(
            f"query={shown(query)} has no searchable words: search for words or numbers (an "
            "id, a name, a path), or leave query out."
        )
    if not rank_terms(searched):
        raise ToolException(
            f"query={shown(query)} has only glue words (the, of, what, ...), which select "
            "nothing: search for a content word (a name, a number, a thing)."
        )
    return searched


def _tool_name(value: str) -> str | None:
    name = value.strip()
    hint = "pass the tool's name as its calls give it, or leave tool_name out"
    return _exact_name("tool_name", name, MAX_NAME_CHARS, hint) or None


def _parse_time(name: str, value: str) -> dt.datetime:
    """An ISO-8601 time in UTC (no offset means UTC); past the calendar's ends, that end."""
    try:
        moment = iso_time(value)
    except (ValueError, TypeError, OverflowError):
        raise ToolException(
            f"{name}={shown(value)} is not an ISO-8601 time: use e.g. 2024-05-01 or "
            "2024-05-01T14:30:00Z."
        ) from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=dt.timezone.utc)
    offset = moment.utcoffset() or dt.timedelta()
    try:
        return moment.astimezone(dt.timezone.utc)
    except OverflowError:
        end = dt.datetime.min if offset > dt.timedelta() else dt.datetime.max
        return end.replace(tzinfo=dt.timezone.utc)


def event_id_of(handle: str) -> str:
    """The event id a ``history:<event_id>`` handle names, checked."""
    event_id = handle.strip()
    if event_id.startswith(HANDLE_PREFIX):
        event_id = event_id[len(HANDLE_PREFIX) :].strip()
    hint = 'pass "history:<event_id>" as a record gave it'
    if not event_id:
        raise ToolException(f"handle {shown(handle)} names no record: {hint}.")
    return _exact_name("handle", event_id, MAX_HANDLE_CHARS, hint)


def _bounds(min_seq: int | None, max_seq: int | None) -> dict[str, int | None]:
    """The seq bounds, clamped to what a store holds."""
    return {
        "min_seq": None if min_seq is None else seq_bound("min_seq", min_seq),
        "max_seq": None if max_seq is None else seq_bound("max_seq", max_seq),
    }


def _given(value: object) -> bool:
    """Whether a filter was set (False, None and no query mean it was left out)."""
    return value is not None and value is not False and value != ()


@dataclass(frozen=True)
class Filters:
    """A lookup's filters, checked and normalized; a cursor carries them."""

    query: tuple[str, ...] = ()
    min_seq: int | None = None
    max_seq: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    role: str | None = None
    tool_name: str | None = None
    newest_first: bool = False

    def rank_options(self) -> dict[str, Any]:
        """The filters of a store ranking (``HistoryStore.rank``): all but the query."""
        return {
            **_bounds(self.min_seq, self.max_seq),
            "since": self.since,
            "until": self.until,
            "roles": self.role,
            "tool_name": self.tool_name,
        }

    def search_options(self, after_seq: int | None) -> dict[str, Any]:
        """The store search for the records past ``after_seq`` (in this lookup's seq order)."""
        min_seq, max_seq = self.min_seq, self.max_seq
        if after_seq is not None and self.newest_first:
            max_seq = after_seq - 1 if max_seq is None else min(max_seq, after_seq - 1)
        elif after_seq is not None:
            min_seq = after_seq + 1 if min_seq is None else max(min_seq, after_seq + 1)
        return {
            **self.rank_options(),
            **_bounds(min_seq, max_seq),
            "newest_first": self.newest_first,
            "limit": FETCH,
        }

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, dt.datetime):
                value = value.isoformat()
            if _given(value):
                data[item.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_json(cls, data: object) -> Filters:
        """The filters a cursor carries, checked as the arguments are."""
        if not isinstance(data, dict) or not set(data) <= {item.name for item in fields(cls)}:
            raise ValueError("unexpected filters")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name in ("min_seq", "max_seq"):
                values[name] = checked_int(value, 0, SEQ_MAX)
            elif name in ("since", "until"):
                values[name] = _parse_time(name, checked_str(value))
            elif name == "newest_first":
                if not isinstance(value, bool):
                    raise ValueError("newest_first is not a boolean")
                values[name] = value
            elif name == "role":
                if value not in ROLES.values():
                    raise ValueError("unknown role")
                values[name] = value
            elif name == "query":
                if not isinstance(value, list) or not value:
                    raise ValueError("query is not a list of searches")
                values[name] = _queries(value)
            else:
                values[name] = _tool_name(checked_str(value))
        return cls(**values)


def _queries(value: str | list[Any]) -> tuple[str, ...]:
    """The searches of ``query``, each checked; blank ones left out, repeats kept once."""
    queries = [value] if isinstance(value, str) else value
    if len(queries) > MAX_QUERIES:
        raise ToolException(
            f"query lists {len(queries)} searches; the limit is {MAX_QUERIES}: keep the most "
            "distinctive ones, or search again with the others."
        )
    checked = (_query(checked_str(query)) for query in queries)
    return tuple(dict.fromkeys(query for query in checked if query))


def filters_of(args: LookupArgs) -> Filters:
    """The model's filters, checked and normalized."""
    role = None
    if args.role is not None and args.role.strip():
        role = ROLES.get(args.role.strip().lower())
        if role is None:
            raise ToolException(
                f"role={shown(args.role)} is unknown: use user, assistant, tool or system (or "
                "leave role out)."
            )
    return Filters(
        query=() if args.query is None else _queries(args.query),
        **_bounds(args.min_seq, args.max_seq),
        since=None if args.since is None else _parse_time("since", args.since),
        until=None if args.until is None else _parse_time("until", args.until),
        role=role,
        tool_name=None if args.tool_name is None else _tool_name(args.tool_name),
        newest_first=args.newest_first,
    )


def resumed(saved: Filters, given: Filters) -> Filters:
    """The cursor's filters; a filter also given must say the same."""
    for item in fields(Filters):
        value = getattr(given, item.name)
        if _given(value) and value != getattr(saved, item.name):
            raise ToolException(
                f"the cursor continues a lookup with {item.name}="
                f"{_shown_value(getattr(saved, item.name))}, not {_shown_value(value)}: pass the "
                "cursor alone to get its next page, or leave the cursor out to start a new lookup."
            )
    return saved
