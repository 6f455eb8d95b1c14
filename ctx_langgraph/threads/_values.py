"""The value checks a thread export's checker is built on: one JSON value at a path in the
document, its type, its range, and that the databases can store it (a failure raises
:class:`~ctx_langgraph.errors.DocumentError` naming the path, ``events[3].seq``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from langchain_core.messages import messages_from_dict

from ctx_langgraph.errors import DocumentError, ScopeError
from ctx_langgraph.history.args import shown
from ctx_langgraph.history.rows import message_to_row
from ctx_langgraph.history.types import DEFAULT_TENANT, Scope

__all__ = [
    "BIGINT",
    "INTEGER",
    "MISSING",
    "Record",
    "ValueChecks",
    "at",
    "encodes",
    "fail",
    "shown",
]

BIGINT = 2**63 - 1
"""The largest value of a 64-bit column (every seq, generation and counter)."""
INTEGER = 2**31 - 1
"""The largest value of a PostgreSQL ``INTEGER`` column (revisions, format version, tokens)."""
MISSING = object()


def at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def fail(path: str, reason: str) -> NoReturn:
    raise DocumentError(path or "document", reason)


class ValueChecks:
    """Checks one value of a document at a time; a failed check raises at its path."""

    def __init__(self, *, nul_free: bool) -> None:
        # PostgreSQL text cannot hold NUL; SQLite can, so an SQLite export may carry some
        self.nul_free = nul_free

    def field(self, record: Mapping[str, Any], path: str, key: str, default: Any = MISSING) -> Any:
        if key in record:
            return record[key]
        if default is MISSING:
            fail(at(path, key), "missing")
        return default

    def record(self, path: str, value: object) -> Record:
        return Record(self, path, self.mapping(path, value))

    def mapping(self, path: str, value: object) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            fail(path, f"expected an object, got {type(value).__name__} {shown(value)}")
        for key in value:
            if not isinstance(key, str):
                fail(path, f"expected an object with string keys, got the key {shown(key)}")
        return value

    def items(self, path: str, value: object) -> Sequence[Any]:
        if not isinstance(value, (list, tuple)):
            fail(path, f"expected a list, got {type(value).__name__} {shown(value)}")
        return value

    def integer(self, path: str, value: object, low: int, high: int = BIGINT) -> int:
        wanted = {1: "a positive int", 0: "a non-negative int"}.get(low, "an int")
        if isinstance(value, bool) or not isinstance(value, int):
            fail(path, f"expected {wanted}, got {shown(value)}")
        if not low <= value <= high:
            if high == BIGINT:
                fail(path, f"expected {wanted}, got {value}")
            fail(path, f"expected an int from {low} to {high}, got {value}")
        return value

    def text(self, path: str, value: object, *, empty: bool = True, column: bool = True) -> str:
        """A string; ``column``: one written as is into a text column (not inside JSON)."""
        if not isinstance(value, str):
            fail(path, f"expected a string, got {type(value).__name__} {shown(value)}")
        if not empty and not value:
            fail(path, "expected a non-empty string, got ''")
        if column and self.nul_free and "\x00" in value:
            fail(path, "PostgreSQL text cannot hold the NUL character (\\x00)")
        return value

    def optional_text(
        self, path: str, value: object, *, empty: bool = True, column: bool = True
    ) -> str | None:
        return None if value is None else self.text(path, value, empty=empty, column=column)

    def choice(self, path: str, value: object, allowed: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in allowed:
            fail(path, f"expected one of {', '.join(map(repr, allowed))}, got {shown(value)}")
        return value

    def flag(self, path: str, value: object) -> bool:
        if not isinstance(value, bool):
            fail(path, f"expected true or false, got {shown(value)}")
        return value

    def time(self, path: str, value: object) -> dt.datetime:
        if not isinstance(value, str):
            fail(path, f"expected an ISO-8601 time string, got {shown(value)}")
        try:
            parsed = dt.datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            parsed.astimezone(dt.timezone.utc).timestamp()  # what the backends store
        except (ValueError, OverflowError):
            fail(path, f"expected an ISO-8601 time, got {shown(value)}")
        return parsed

    def name(self, path: str, value: object, part: str = "branch") -> str:
        """A tenant, thread id or branch name, valid the way :class:`Scope` checks them."""
        text = self.text(path, value)
        try:
            Scope(**{"thread_id": "t", "tenant": DEFAULT_TENANT, part: text})
        except ScopeError as exc:
            fail(path, str(exc))
        return text

    def json_value(self, path: str, value: object) -> None:
        try:
            json.dumps(value)
        except (TypeError, ValueError, RecursionError) as exc:
            fail(path, f"expected plain JSON, got {type(value).__name__} ({exc})")

    def message(self, path: str, record: object, event_id: str) -> None:
        """A ``message_to_dict`` record the store decodes, carrying ``event_id`` as its id."""
        record = self.mapping(path, record)
        try:
            [message] = messages_from_dict([dict(record)])
            carried = message.id
            message_to_row(message)  # (its text is stored escaped: any text round-trips)
        except Exception as exc:  # the decoder fails as many ways as a record can be wrong
            detail = (str(exc).strip().splitlines() or [""])[0]
            fail(
                path,
                f"not a message record the store can decode ({type(exc).__name__}: "
                f"{shown(detail, 200)})",
            )
        if carried != event_id:
            fail(
                at(at(path, "data"), "id"),
                f"the message carries id {shown(carried)}, but the event is {event_id!r}",
            )


@dataclass(frozen=True)
class Record:
    """One object of the document at ``path``: each method checks one of its fields (a missing
    key fails unless a ``default`` is given)."""

    checks: ValueChecks
    path: str
    row: Mapping[str, Any]

    def at(self, key: str) -> str:
        return at(self.path, key)

    def get(self, key: str, default: Any = MISSING) -> Any:
        return self.checks.field(self.row, self.path, key, default)

    def integer(self, key: str, low: int, high: int = BIGINT) -> int:
        return self.checks.integer(self.at(key), self.get(key), low, high)

    def optional_integer(
        self, key: str, low: int, high: int = BIGINT, default: Any = MISSING
    ) -> int | None:
        value = self.get(key, default)
        return None if value is None else self.checks.integer(self.at(key), value, low, high)

    def text(self, key: str, *, empty: bool = True, column: bool = True) -> str:
        return self.checks.text(self.at(key), self.get(key), empty=empty, column=column)

    def optional_text(
        self, key: str, *, empty: bool = True, column: bool = True, default: Any = MISSING
    ) -> str | None:
        value = self.get(key, default)
        return self.checks.optional_text(self.at(key), value, empty=empty, column=column)

    def time(self, key: str) -> dt.datetime:
        return self.checks.time(self.at(key), self.get(key))

    def choice(self, key: str, allowed: Sequence[str]) -> str:
        return self.checks.choice(self.at(key), self.get(key), allowed)

    def name(self, key: str, part: str = "branch") -> str:
        return self.checks.name(self.at(key), self.get(key), part)
