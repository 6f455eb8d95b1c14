"""The check a thread export passes, whole, before :func:`~ctx_langgraph.threads.ops.import_thread` writes any of it.

An export is plain JSON that may have been edited, cut short or forged on its way here. Every
field the import reads is checked: its type and range; what it refers to (an event's branch, a
branch's parent and fork point, a summary's covered range, an active summary pointer); that
what the database keys by is unique; and that every message decodes the way the store reads it
back. The first problem raises :class:`~ctx_langgraph.errors.DocumentError` naming its path in
the document (``events[3].seq``), so a tampered export fails before the first row is written
instead of half-importing or leaving a thread that later appends or reads trip over.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, get_args

from langchain_core.messages import messages_from_dict

from ctx_langgraph.errors import DocumentError, ScopeError
from ctx_langgraph.history._serde import message_to_row
from ctx_langgraph.history._sql import Dialect
from ctx_langgraph.history.types import DEFAULT_TENANT, CheckpointStatus, Scope

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "check_document", "export_scope"]

EXPORT_FORMAT = "ctx-langgraph/thread"
EXPORT_VERSION = 1
_LEDGER_CALL_COLS = (
    "call_key, branch, purpose, provider, model, status, version, response_id, input_total, "
    "input_uncached, cache_read, cache_write, output, reasoning, cost_nano_usd, raw, created_at, "
    "updated_at"
)
_LEDGER_TOTAL_COLS = (
    "branch, purpose, provider, model, calls, unknown_calls, input_total, input_uncached, "
    "cache_read, cache_write, output, reasoning, cost_nano_usd, cost_unknown_calls"
)

_BIGINT = 2**63 - 1
"""The largest value of a 64-bit column (every seq, generation and counter)."""
_INTEGER = 2**31 - 1
"""The largest value of a PostgreSQL ``INTEGER`` column (revisions, format version, tokens)."""
_SUMMARY_STATUSES: tuple[str, ...] = get_args(CheckpointStatus)
_POINTED_STATUSES = ("active", "superseded")
"""What a branch's active pointer can name: its own active summary, or the one it inherited."""
_CALL_STATUSES = ("complete", "partial", "unknown")
_COUNT_COLUMNS = (
    "input_total",
    "input_uncached",
    "cache_read",
    "cache_write",
    "output",
    "reasoning",
)
_MEMORY_FORMAT = "ctx_memory/v1"
_MEMORY_SCOPES = ("user", "project", "thread")
_MEMORY_STATUSES = ("active", "superseded", "invalid")
_MISSING = object()


def check_document(document: object, dialect: Dialect) -> None:
    """Check an export before importing it into a ``dialect`` database.

    Raises:
        DocumentError: the first problem found, with its path in the document.

    Example:
        >>> from ctx_langgraph.history._sql import SQLITE
        >>> check_document({"format": "ctx-langgraph/thread", "version": 1, "tenant": "default",
        ...                 "thread_id": "t", "thread": {}}, SQLITE)
        Traceback (most recent call last):
        ...
        ctx_langgraph.errors.DocumentError: not a thread export this version can import: thread.edit_version: missing. Nothing was written; import the document export_thread made, unchanged
    """
    _Checker(nul_free=dialect.name == "postgres").document(document)


def export_scope(document: object) -> Scope:
    """The thread an export names (its tenant and thread id, on the default branch).

    Raises:
        DocumentError: it is not an export this version reads, or names no valid thread.

    Example:
        >>> export_scope({"format": "ctx-langgraph/thread", "version": 1, "tenant": "acme",
        ...               "thread_id": "t-1"})
        Scope(thread_id='t-1', tenant='acme', branch='main')
    """
    return _Checker(nul_free=False).header(document)[1]


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _shown(value: object, limit: int = 60) -> str:
    try:
        text = repr(value)
    except RecursionError:
        return f"a deeply nested {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _fail(path: str, reason: str) -> NoReturn:
    raise DocumentError(path or "document", reason)


@dataclass(frozen=True)
class _Branch:
    """What the checks of the other parts need to know of one branch."""

    path: str
    parent: str | None
    fork_seq: int | None
    head_seq: int
    active_id: str | None
    active_generation: int


@dataclass(frozen=True)
class _Summary:
    branch: str
    generation: int
    covered_through_seq: int
    status: str


_ANY_TEXT = frozenset({"events", "revisions", "summaries"})
"""The parts of a document whose text columns are stored escaped (NUL, lone surrogates)."""


class _Checker:
    """Walks one document; each method checks one part and returns what later parts refer to."""

    def __init__(self, *, nul_free: bool) -> None:
        # PostgreSQL text cannot hold NUL; SQLite can, so an SQLite export may carry some
        self.nul_free = nul_free

    # ------------------------------------------------------------------ values

    def field(self, record: Mapping[str, Any], path: str, key: str, default: Any = _MISSING) -> Any:
        if key in record:
            return record[key]
        if default is _MISSING:
            _fail(_at(path, key), "missing")
        return default

    def mapping(self, path: str, value: object) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            _fail(path, f"expected an object, got {type(value).__name__} {_shown(value)}")
        for key in value:
            if not isinstance(key, str):
                _fail(path, f"expected an object with string keys, got the key {_shown(key)}")
        return value

    def items(self, path: str, value: object) -> Sequence[Any]:
        if not isinstance(value, (list, tuple)):
            _fail(path, f"expected a list, got {type(value).__name__} {_shown(value)}")
        return value

    def integer(self, path: str, value: object, low: int, high: int = _BIGINT) -> int:
        wanted = {1: "a positive int", 0: "a non-negative int"}.get(low, "an int")
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(path, f"expected {wanted}, got {_shown(value)}")
        if not low <= value <= high:
            if high == _BIGINT:
                _fail(path, f"expected {wanted}, got {value}")
            _fail(path, f"expected an int from {low} to {high}, got {value}")
        return value

    def optional_integer(
        self, path: str, value: object, low: int, high: int = _BIGINT
    ) -> int | None:
        return None if value is None else self.integer(path, value, low, high)

    def text(self, path: str, value: object, *, empty: bool = True, column: bool = True) -> str:
        """A string; ``column``: one written as is into a text column (not inside JSON)."""
        if not isinstance(value, str):
            _fail(path, f"expected a string, got {type(value).__name__} {_shown(value)}")
        if not empty and not value:
            _fail(path, "expected a non-empty string, got ''")
        if column and self.nul_free and "\x00" in value:
            _fail(path, "PostgreSQL text cannot hold the NUL character (\\x00)")
        return value

    def optional_text(
        self, path: str, value: object, *, empty: bool = True, column: bool = True
    ) -> str | None:
        return None if value is None else self.text(path, value, empty=empty, column=column)

    def choice(self, path: str, value: object, allowed: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in allowed:
            _fail(path, f"expected one of {', '.join(map(repr, allowed))}, got {_shown(value)}")
        return value

    def flag(self, path: str, value: object) -> bool:
        if not isinstance(value, bool):
            _fail(path, f"expected true or false, got {_shown(value)}")
        return value

    def time(self, path: str, value: object) -> dt.datetime:
        if not isinstance(value, str):
            _fail(path, f"expected an ISO-8601 time string, got {_shown(value)}")
        try:
            parsed = dt.datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            parsed.astimezone(dt.timezone.utc).timestamp()  # what the backends store
        except (ValueError, OverflowError):
            _fail(path, f"expected an ISO-8601 time, got {_shown(value)}")
        return parsed

    def optional_time(self, path: str, value: object) -> dt.datetime | None:
        return None if value is None else self.time(path, value)

    def name(self, path: str, value: object, part: str = "branch") -> str:
        """A tenant, thread id or branch name, valid the way :class:`Scope` checks them."""
        text = self.text(path, value)
        try:
            Scope(**{"thread_id": "t", "tenant": DEFAULT_TENANT, part: text})
        except ScopeError as exc:
            _fail(path, str(exc))
        return text

    def json_value(self, path: str, value: object) -> None:
        try:
            json.dumps(value)
        except (TypeError, ValueError, RecursionError) as exc:
            _fail(path, f"expected plain JSON, got {type(value).__name__} ({exc})")

    def message(self, path: str, record: object, event_id: str) -> None:
        """A ``message_to_dict`` record the store decodes, carrying ``event_id`` as its id."""
        record = self.mapping(path, record)
        try:
            [message] = messages_from_dict([dict(record)])
            carried = message.id
            message_to_row(message)  # (its text is stored escaped: any text round-trips)
        except Exception as exc:  # the decoder fails as many ways as a record can be wrong
            detail = (str(exc).strip().splitlines() or [""])[0]
            _fail(
                path,
                f"not a message record the store can decode ({type(exc).__name__}: "
                f"{_shown(detail, 200)})",
            )
        if carried != event_id:
            _fail(
                _at(_at(path, "data"), "id"),
                f"the message carries id {_shown(carried)}, but the event is {event_id!r}",
            )

    # ------------------------------------------------------------------ parts

    def header(self, value: object) -> tuple[Mapping[str, Any], Scope]:
        """The document as a mapping, once its format and version are the ones this version
        reads, with the scope it names (tenant, thread id, default branch)."""
        document = self.mapping("", value)
        format_name = self.field(document, "", "format", None)
        if not isinstance(format_name, str) or format_name != EXPORT_FORMAT:
            _fail("format", f"expected {EXPORT_FORMAT!r}, got {_shown(format_name)}")
        version = self.field(document, "", "version", None)
        if isinstance(version, bool) or not isinstance(version, int) or version != EXPORT_VERSION:
            _fail("version", f"expected {EXPORT_VERSION}, got {_shown(version)}")
        tenant = self.name("tenant", self.field(document, "", "tenant"), "tenant")
        thread_id = self.name("thread_id", self.field(document, "", "thread_id"), "thread_id")
        return document, Scope(thread_id, tenant)

    def document(self, value: object) -> None:
        document, scope = self.header(value)
        self.unicode(document)
        tenant, thread_id = scope.tenant, scope.thread_id
        if "exported_at" in document:
            self.time("exported_at", document["exported_at"])
        thread = self.mapping("thread", self.field(document, "", "thread"))
        edit_version = self.integer(
            "thread.edit_version", self.field(thread, "thread", "edit_version"), 0
        )
        self.time("thread.created_at", self.field(thread, "thread", "created_at"))
        branches = self.branches(self.field(document, "", "branches"))
        events = self.events(self.field(document, "", "events"), branches)
        self.revisions(self.field(document, "", "revisions"), branches, events)
        self.edits(self.field(document, "", "edits"), branches, edit_version)
        summaries = self.summaries(
            self.field(document, "", "summaries"), branches, (tenant, thread_id), edit_version
        )
        self.active_pointers(branches, summaries)
        ledger = document.get("ledger")
        if ledger:
            self.ledger(ledger)
        memories = document.get("memories")
        if memories is not None:
            self.memories(memories)

    def unicode(self, document: Mapping[str, Any]) -> None:
        """Every string, key or value, is text both databases can encode (JSON can carry a
        lone surrogate such as ``"\\ud800"``; UTF-8 cannot). The history's own text (events,
        revisions, summaries) is stored escaped: any text goes there."""
        document = {k: v for k, v in document.items() if k not in _ANY_TEXT}
        try:
            json.dumps(document, ensure_ascii=False, default=lambda _: None).encode()
            return
        except (TypeError, ValueError, RecursionError):
            pass  # find where; a cycle, an odd key or a deep value is left to its part's check
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("", document)]
        while stack:
            path, value = stack.pop()
            if isinstance(value, str):
                if not _encodes(value):
                    _fail(path, f"expected text, got a lone surrogate in {_shown(value)}")
                continue
            if not isinstance(value, (Mapping, list, tuple)) or id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, Mapping):
                for key, item in value.items():
                    shown = str(key).encode("utf-8", "backslashreplace").decode()
                    if isinstance(key, str) and not _encodes(key):
                        _fail(_at(path, shown), "expected text, got a lone surrogate in the key")
                    stack.append((_at(path, shown), item))
            else:
                stack.extend((_at(path, index), item) for index, item in enumerate(value))

    def branches(self, value: object) -> dict[str, _Branch]:
        rows = self.items("branches", value)
        if not rows:
            _fail("branches", "expected at least one branch (every thread has its main branch)")
        branches: dict[str, _Branch] = {}
        for index, item in enumerate(rows):
            path = _at("branches", index)
            row = self.mapping(path, item)
            name = self.name(_at(path, "branch"), self.field(row, path, "branch"))
            if name in branches:
                _fail(_at(path, "branch"), f"branch {name!r} is listed twice")
            parent = self.field(row, path, "parent_branch")
            if parent is not None:
                parent = self.name(_at(path, "parent_branch"), parent)
            fork_seq = self.optional_integer(
                _at(path, "fork_seq"), self.field(row, path, "fork_seq"), 0
            )
            if parent is None and fork_seq is not None:
                _fail(
                    _at(path, "fork_seq"),
                    f"a branch without a parent has no fork point, got {fork_seq}",
                )
            if parent is not None and fork_seq is None:
                _fail(
                    _at(path, "fork_seq"),
                    f"expected the seq branch {name!r} was forked at, got None",
                )
            head_seq = self.integer(_at(path, "head_seq"), self.field(row, path, "head_seq"), 0)
            if fork_seq is not None and head_seq < fork_seq:
                _fail(
                    _at(path, "head_seq"),
                    f"head_seq {head_seq} is below the branch's fork_seq {fork_seq}",
                )
            active_id = self.optional_text(
                _at(path, "active_checkpoint_id"),
                self.field(row, path, "active_checkpoint_id"),
                empty=False,
            )
            active_generation = self.integer(
                _at(path, "active_generation"), self.field(row, path, "active_generation"), 0
            )
            self.time(_at(path, "created_at"), self.field(row, path, "created_at"))
            branches[name] = _Branch(path, parent, fork_seq, head_seq, active_id, active_generation)
        for name, branch in branches.items():
            if branch.parent is None:
                continue
            where = _at(branch.path, "parent_branch")
            parent_branch = branches.get(branch.parent)
            if parent_branch is None:
                _fail(where, f"no branch {branch.parent!r} in branches")
            assert branch.fork_seq is not None
            if branch.fork_seq > parent_branch.head_seq:
                _fail(
                    _at(branch.path, "fork_seq"),
                    f"fork_seq {branch.fork_seq} is past the head_seq {parent_branch.head_seq} "
                    f"of its parent {branch.parent!r}",
                )
            seen = {name}
            current: str | None = branch.parent
            while current is not None:
                if current in seen:
                    _fail(where, f"the parent chain of {name!r} loops back to {current!r}")
                seen.add(current)
                current = branches[current].parent
        return branches

    def branch_of(self, path: str, value: object, branches: Mapping[str, _Branch]) -> str:
        name = self.name(path, value)
        if name not in branches:
            _fail(path, f"no branch {name!r} in branches")
        return name

    def events(
        self, value: object, branches: Mapping[str, _Branch]
    ) -> dict[tuple[str, int], tuple[str, int]]:
        """Returns (event id, revision) by (branch, seq)."""
        events: dict[tuple[str, int], tuple[str, int]] = {}
        ids: set[tuple[str, str]] = set()
        for index, item in enumerate(self.items("events", value)):
            path = _at("events", index)
            row = self.mapping(path, item)
            branch = self.branch_of(_at(path, "branch"), self.field(row, path, "branch"), branches)
            seq = self.integer(_at(path, "seq"), self.field(row, path, "seq"), 1)
            owner = branches[branch]
            if seq > owner.head_seq:
                _fail(
                    _at(path, "seq"),
                    f"seq {seq} is past the head_seq {owner.head_seq} of branch {branch!r} "
                    f"({owner.path}); the next append would collide with it",
                )
            if owner.fork_seq is not None and seq <= owner.fork_seq:
                _fail(
                    _at(path, "seq"),
                    f"seq {seq} is not after the fork_seq {owner.fork_seq} of branch {branch!r}; "
                    "a branch's own events come after its fork point",
                )
            if (branch, seq) in events:
                _fail(_at(path, "seq"), f"branch {branch!r} has two events at seq {seq}")
            event_id = self.text(  # (stored escaped: any text)
                _at(path, "event_id"), self.field(row, path, "event_id"), empty=False, column=False
            )
            if (branch, event_id) in ids:
                _fail(_at(path, "event_id"), f"branch {branch!r} has two events {event_id!r}")
            ids.add((branch, event_id))
            revision = self.integer(
                _at(path, "revision"), self.field(row, path, "revision"), 1, _INTEGER
            )
            self.flag(_at(path, "visible"), self.field(row, path, "visible"))
            self.time(_at(path, "created_at"), self.field(row, path, "created_at"))
            self.message(_at(path, "message"), self.field(row, path, "message"), event_id)
            events[(branch, seq)] = (event_id, revision)
        return events

    def revisions(
        self,
        value: object,
        branches: Mapping[str, _Branch],
        events: Mapping[tuple[str, int], tuple[str, int]],
    ) -> None:
        seen: set[tuple[str, int, int]] = set()
        for index, item in enumerate(self.items("revisions", value)):
            path = _at("revisions", index)
            row = self.mapping(path, item)
            branch = self.branch_of(_at(path, "branch"), self.field(row, path, "branch"), branches)
            seq = self.integer(_at(path, "seq"), self.field(row, path, "seq"), 1)
            event_id = self.text(  # (stored escaped: any text)
                _at(path, "event_id"), self.field(row, path, "event_id"), empty=False, column=False
            )
            revision = self.integer(
                _at(path, "revision"), self.field(row, path, "revision"), 1, _INTEGER
            )
            current = events.get((branch, seq))
            if current is None:
                _fail(_at(path, "seq"), f"no event of branch {branch!r} at seq {seq} in events")
            if current[0] != event_id:
                _fail(
                    _at(path, "event_id"),
                    f"the event at seq {seq} of branch {branch!r} is {current[0]!r}, not "
                    f"{event_id!r}",
                )
            if revision >= current[1]:
                _fail(
                    _at(path, "revision"),
                    f"an earlier revision must be below the event's revision {current[1]}, "
                    f"got {revision}",
                )
            if (branch, seq, revision) in seen:
                _fail(_at(path, "revision"), f"revision {revision} of that event is listed twice")
            seen.add((branch, seq, revision))
            self.time(_at(path, "replaced_at"), self.field(row, path, "replaced_at"))
            self.message(_at(path, "message"), self.field(row, path, "message"), event_id)

    def edits(self, value: object, branches: Mapping[str, _Branch], edit_version: int) -> None:
        for index, item in enumerate(self.items("edits", value)):
            path = _at("edits", index)
            row = self.mapping(path, item)
            branch = self.branch_of(_at(path, "branch"), self.field(row, path, "branch"), branches)
            head_seq = branches[branch].head_seq
            self.integer(_at(path, "seq"), self.field(row, path, "seq"), 1, head_seq)
            version = self.integer(
                _at(path, "edit_version"), self.field(row, path, "edit_version"), 1
            )
            if version > edit_version:
                _fail(
                    _at(path, "edit_version"),
                    f"edit {version} is past the thread's edit_version {edit_version}",
                )
            self.text(_at(path, "kind"), self.field(row, path, "kind"), empty=False)
            self.time(_at(path, "created_at"), self.field(row, path, "created_at"))

    def summaries(
        self,
        value: object,
        branches: Mapping[str, _Branch],
        thread: tuple[str, str],
        edit_version: int,
    ) -> dict[str, _Summary]:
        summaries: dict[str, _Summary] = {}
        for index, item in enumerate(self.items("summaries", value)):
            path = _at("summaries", index)
            row = self.mapping(path, item)
            summary_id = self.text(_at(path, "id"), self.field(row, path, "id"), empty=False)
            if summary_id in summaries:
                _fail(_at(path, "id"), f"summary version {summary_id!r} is listed twice")
            for key, expected in zip(("tenant", "thread_id"), thread, strict=True):
                if self.field(row, path, key) != expected:
                    _fail(
                        _at(path, key),
                        f"expected the document's {key} {expected!r}, got {_shown(row[key])}",
                    )
            branch = self.branch_of(_at(path, "branch"), self.field(row, path, "branch"), branches)
            generation = self.integer(
                _at(path, "generation"), self.field(row, path, "generation"), 1
            )
            self.optional_text(_at(path, "parent_id"), row.get("parent_id"), empty=False)
            head_seq = branches[branch].head_seq
            first_seq = self.integer(
                _at(path, "first_seq"), self.field(row, path, "first_seq"), 1, head_seq
            )
            covered = self.integer(
                _at(path, "covered_through_seq"),
                self.field(row, path, "covered_through_seq"),
                first_seq,
                head_seq,
            )
            self.optional_text(
                _at(path, "first_kept_event_id"), row.get("first_kept_event_id"), column=False
            )
            self.integer(
                _at(path, "source_revision"),
                self.field(row, path, "source_revision"),
                0,
                edit_version,
            )
            self.text(_at(path, "range_hash"), self.field(row, path, "range_hash"))
            self.optional_text(_at(path, "summary_text"), row.get("summary_text"), column=False)
            provider_state = row.get("provider_state")
            if provider_state is not None:
                self.mapping(_at(path, "provider_state"), provider_state)
                self.json_value(_at(path, "provider_state"), provider_state)
            self.integer(
                _at(path, "format_version"), self.field(row, path, "format_version"), 0, _INTEGER
            )
            self.optional_text(_at(path, "summarizer_id"), row.get("summarizer_id"), column=False)
            self.key_facts(_at(path, "key_facts"), row.get("key_facts"), covered)
            self.optional_integer(
                _at(path, "summary_tokens"), row.get("summary_tokens"), 0, _INTEGER
            )
            status = self.choice(
                _at(path, "status"), self.field(row, path, "status"), _SUMMARY_STATUSES
            )
            self.optional_text(_at(path, "error"), row.get("error"), column=False)
            self.time(_at(path, "created_at"), self.field(row, path, "created_at"))
            self.optional_time(_at(path, "committed_at"), row.get("committed_at"))
            metadata = row.get("metadata")
            if metadata is not None:
                self.mapping(_at(path, "metadata"), metadata)
                self.json_value(_at(path, "metadata"), metadata)
            summaries[summary_id] = _Summary(branch, generation, covered, status)
        return summaries

    def key_facts(self, path: str, value: object, covered: int) -> None:
        if value is None:
            return
        for index, item in enumerate(self.items(path, value)):
            where = _at(path, index)
            fact = self.mapping(where, item)
            self.text(_at(where, "text"), self.field(fact, where, "text"), column=False)
            self.integer(
                _at(where, "source_seq"), self.field(fact, where, "source_seq"), 1, covered
            )
            self.text(_at(where, "kind"), fact.get("kind", "fact"), column=False)
            for key in ("source_event_id", "replaces"):
                self.optional_text(_at(where, key), fact.get(key), column=False)

    def active_pointers(
        self, branches: Mapping[str, _Branch], summaries: Mapping[str, _Summary]
    ) -> None:
        """A branch's active summary is on its own lineage, within what the branch can see."""
        for name, branch in branches.items():
            if branch.active_id is None:
                continue
            path = _at(branch.path, "active_checkpoint_id")
            summary = summaries.get(branch.active_id)
            if summary is None:
                _fail(path, f"no summary version {branch.active_id!r} in summaries")
            if summary.status not in _POINTED_STATUSES:
                _fail(path, f"summary version {branch.active_id!r} is {summary.status}")
            bound: int | None = None
            current: _Branch | None = branch
            current_name = name
            while current is not None and current_name != summary.branch:
                if current.parent is None:
                    current = None
                    break
                fork = current.fork_seq or 0
                bound = fork if bound is None else min(bound, fork)
                current_name = current.parent
                current = branches[current_name]
            if current is None:
                _fail(
                    path,
                    f"summary version {branch.active_id!r} belongs to branch {summary.branch!r}, "
                    f"which branch {name!r} does not descend from",
                )
            if bound is not None and summary.covered_through_seq > bound:
                _fail(
                    path,
                    f"summary version {branch.active_id!r} covers through seq "
                    f"{summary.covered_through_seq}, past the fork point {bound} of {name!r}",
                )
            if summary.generation != branch.active_generation:
                _fail(
                    _at(branch.path, "active_generation"),
                    f"expected the active summary's generation {summary.generation}, got "
                    f"{branch.active_generation}",
                )

    def ledger(self, value: object) -> None:
        ledger = self.mapping("ledger", value)
        call_names = [c.strip() for c in _LEDGER_CALL_COLS.split(",")]
        keys: set[str] = set()
        for index, item in enumerate(
            self.items("ledger.calls", self.field(ledger, "ledger", "calls"))
        ):
            path = _at("ledger.calls", index)
            call = self.mapping(path, item)
            values = {name: self.field(call, path, name) for name in call_names}
            key = self.text(_at(path, "call_key"), values["call_key"], empty=False)
            if key in keys:
                _fail(_at(path, "call_key"), f"call {key!r} is listed twice")
            keys.add(key)
            self.name(_at(path, "branch"), values["branch"])
            self.text(_at(path, "purpose"), values["purpose"], empty=False)
            for column in ("provider", "model"):
                self.text(_at(path, column), values[column])
            self.choice(_at(path, "status"), values["status"], _CALL_STATUSES)
            self.integer(_at(path, "version"), values["version"], -1)
            self.optional_text(_at(path, "response_id"), values["response_id"])
            for column in (*_COUNT_COLUMNS, "cost_nano_usd"):
                self.optional_integer(_at(path, column), values[column], 0)
            raw = self.text(_at(path, "raw"), values["raw"])
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = None
            if not isinstance(decoded, dict):
                _fail(_at(path, "raw"), f"expected a JSON object as text, got {_shown(raw)}")
            for column in ("created_at", "updated_at"):
                self.time(_at(path, column), values[column])
        total_names = [c.strip() for c in _LEDGER_TOTAL_COLS.split(",")]
        groups: set[tuple[str, ...]] = set()
        for index, item in enumerate(
            self.items("ledger.totals", self.field(ledger, "ledger", "totals"))
        ):
            path = _at("ledger.totals", index)
            total = self.mapping(path, item)
            values = {name: self.field(total, path, name) for name in total_names}
            group = (
                self.name(_at(path, "branch"), values["branch"]),
                self.text(_at(path, "purpose"), values["purpose"], empty=False),
                self.text(_at(path, "provider"), values["provider"]),
                self.text(_at(path, "model"), values["model"]),
            )
            if group in groups:
                _fail(path, f"the totals of {group!r} are listed twice")
            groups.add(group)
            for column in total_names[4:]:
                # a billing correction books a negative difference: totals are any 64-bit int
                self.integer(_at(path, column), values[column], -_BIGINT)

    def memories(self, value: object) -> None:
        for index, item in enumerate(self.items("memories", value)):
            path = _at("memories", index)
            record = self.mapping(path, item)
            if "format" in record and record["format"] != _MEMORY_FORMAT:
                _fail(
                    _at(path, "format"),
                    f"expected {_MEMORY_FORMAT!r}, got {_shown(record['format'])}",
                )
            # memories go to the LangGraph store, not to this database's text columns
            self.text(_at(path, "id"), self.field(record, path, "id"), empty=False, column=False)
            self.choice(_at(path, "scope"), self.field(record, path, "scope"), _MEMORY_SCOPES)
            owner = self.field(record, path, "owner")
            self.text(_at(path, "owner"), owner, empty=False, column=False)
            for key in ("tenant", "content", "key", "kind", "source_thread"):
                self.optional_text(_at(path, key), record.get(key), column=False)
            for key in ("superseded_by", "replaces"):
                self.optional_text(_at(path, key), record.get(key), empty=False, column=False)
            where = _at(path, "source_event_ids")
            for position, event_id in enumerate(
                self.items(where, record.get("source_event_ids") or [])
            ):
                self.text(_at(where, position), event_id, column=False)
            where = _at(path, "source_seqs")
            for position, seq in enumerate(self.items(where, record.get("source_seqs") or [])):
                self.integer(_at(where, position), seq, 1)
            self.time(_at(path, "created_at"), self.field(record, path, "created_at"))
            for key in ("updated_at", "expires_at"):
                if record.get(key) not in (None, ""):
                    self.time(_at(path, key), record[key])
            confidence = record.get("confidence", 1.0)
            if (
                isinstance(confidence, bool)
                or not isinstance(confidence, (int, float))
                or not 0.0 <= confidence <= 1.0
            ):
                _fail(
                    _at(path, "confidence"),
                    f"expected a number from 0 to 1, got {_shown(confidence)}",
                )
            if record.get("status") not in (None, ""):
                self.choice(_at(path, "status"), record["status"], _MEMORY_STATUSES)
