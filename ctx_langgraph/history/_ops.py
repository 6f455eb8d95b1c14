"""The history store's operations, written once for both backends and both I/O styles.

Each operation is a generator: it yields :class:`~ctx_langgraph.history._sql.Stmt` objects and
receives their results (a row, all rows, or a row count); its return value is the operation's
result. A backend runs the whole generator inside one transaction, with a sync or an async
connection (the ``httpx.Auth.auth_flow`` pattern). Nothing here does I/O.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import operator
import uuid
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ctx_langgraph.core.text import match_tokens, search_document
from ctx_langgraph.errors import (
    CompactionConflict,
    EventConflict,
    HistoryStoreError,
    ScopeError,
    StaleCandidate,
)
from ctx_langgraph.history._serde import (
    EventRow,
    expand_record,
    json_text,
    load_names,
    load_text,
    store_names,
    store_text,
)
from ctx_langgraph.history._sql import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Backfill,
    Dialect,
    Stmt,
    scope_key,
)
from ctx_langgraph.history.types import (
    DEFAULT_BRANCH,
    AppendResult,
    BranchInfo,
    CompactionCheckpoint,
    CoverageSnapshot,
    HistoryEvent,
    KeyFact,
    Scope,
    SearchPage,
)

T = TypeVar("T")
Op = Generator[Stmt, Any, T]

_IN_CHUNK = 500
_SETUP_LOCK_KEY = 0x637478_4C47  # pg_advisory_xact_lock key for concurrent setup() calls


class DeferredError(Exception):
    """Raised by an operation whose writes must be committed before ``error`` reaches the caller
    (a losing candidate is marked ``failed``, then the conflict is raised)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


# --------------------------------------------------------------------------- arguments

SEQ_MIN = -(2**63)
SEQ_MAX = 2**63 - 1
"""The range of a seq (and of every integer column): 64-bit signed on both backends."""
_LIMIT_MAX = 2**62
_MAX_ROLES = 100
MAX_QUERY_WORDS = 1000
"""Most distinct words (CJK character pairs count one each) a search query may have."""


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else f"{shown[:60]}... ({len(shown)} characters)"


def integer_arg(name: str, value: object) -> int:
    """``value`` as an int (bools and floats are refused: TypeError naming ``name``)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got a bool ({value!r})")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__}: {_shown(value)}"
        ) from None


def seq_bound(name: str, value: object) -> int:
    """A seq bound clamped into the 64-bit range: a bound past every seq keeps its meaning
    (``min_seq=2**70`` finds nothing, ``max_seq=-10**30`` finds nothing) without overflowing
    the database driver.

    Example:
        >>> seq_bound("min_seq", 2**70) == SEQ_MAX, seq_bound("max_seq", -10**30) == SEQ_MIN
        (True, True)
    """
    return min(max(integer_arg(name, value), SEQ_MIN), SEQ_MAX)


def limit_arg(name: str, value: object) -> int:
    """A page size: at least 1 (ValueError), capped where the driver's integers end."""
    limit = integer_arg(name, value)
    if limit < 1:
        raise ValueError(f"{name} must be at least 1, got {limit}")
    return min(limit, _LIMIT_MAX)


def text_arg(name: str, value: object) -> str:
    """``value``, which must be a string (TypeError naming ``name`` otherwise)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}: {_shown(value)}")
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


# --------------------------------------------------------------------------- rows <-> records

_EVENT_COLS = (
    "e.seq, e.event_id, e.branch, e.role, e.name, e.content, e.text, e.tool_call_ids, "
    "e.tool_names, e.revision, e.visible, e.created_at"
)
_BRANCH_COLS = (
    "branch, parent_branch, fork_seq, head_seq, active_checkpoint_id, active_generation, created_at"
)
_CHECKPOINT_COLS = (
    "id, tenant, thread_id, branch, generation, parent_id, first_seq, covered_through_seq, "
    "first_kept_event_id, source_revision, range_hash, summary_text, provider_state, "
    "format_version, summarizer_id, key_facts, summary_tokens, status, error, metadata, "
    "created_at, committed_at"
)


def _names_column(names: Sequence[str]) -> str:
    return store_names(names)


def _optional_text(stored: str | None) -> str | None:
    return None if stored is None else load_text(stored)


def _stored_optional(value: str | None) -> str | None:
    return None if value is None else store_text(value)


def _event(d: Dialect, row: Sequence[Any]) -> HistoryEvent:
    text = load_text(row[6])
    return HistoryEvent(
        seq=int(row[0]),
        event_id=load_text(row[1]),
        branch=row[2],
        role=load_text(row[3]),
        name=_optional_text(row[4]),
        content=expand_record(json.loads(row[5]), text),
        text=text,
        tool_call_ids=tuple(json.loads(row[7])),
        tool_names=load_names(row[8]),
        revision=int(row[9]),
        visible=bool(row[10]),
        created_at=d.from_ts(row[11]),
    )


def _checkpoint(d: Dialect, row: Sequence[Any]) -> CompactionCheckpoint:
    return CompactionCheckpoint(
        id=row[0],
        scope=Scope(row[2], row[1], row[3]),
        generation=int(row[4]),
        parent_id=row[5],
        first_seq=int(row[6]),
        covered_through_seq=int(row[7]),
        first_kept_event_id=_optional_text(row[8]),
        source_revision=int(row[9]),
        range_hash=row[10],
        summary_text=_optional_text(row[11]),
        provider_state=None if row[12] is None else json.loads(row[12]),
        format_version=int(row[13]),
        summarizer_id=_optional_text(row[14]),
        key_facts=tuple(KeyFact.from_json(item) for item in json.loads(row[15])),
        summary_tokens=None if row[16] is None else int(row[16]),
        status=row[17],
        error=_optional_text(row[18]),
        metadata=json.loads(row[19]),
        created_at=d.from_ts(row[20]),
        committed_at=None if row[21] is None else d.from_ts(row[21]),
    )


@dataclass(frozen=True)
class _Branch:
    name: str
    parent: str | None
    fork_seq: int | None
    head_seq: int
    active_id: str | None
    active_generation: int
    created_at: Any

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> _Branch:
        return cls(
            row[0],
            row[1],
            None if row[2] is None else int(row[2]),
            int(row[3]),
            row[4],
            int(row[5]),
            row[6],
        )

    def info(self, d: Dialect, scope: Scope) -> BranchInfo:
        return BranchInfo(
            scope=scope.on_branch(self.name),
            parent_branch=self.parent,
            fork_seq=self.fork_seq,
            head_seq=self.head_seq,
            active_checkpoint_id=self.active_id,
            active_generation=self.active_generation,
            created_at=d.from_ts(self.created_at),
        )


Lineage = list[tuple[str, "int | None"]]


def lineage(branches: dict[str, _Branch], name: str) -> Lineage:
    """The (branch, highest visible seq) pairs a branch reads: itself unbounded, then each
    ancestor up to the lowest fork point on the way.

    Example:
        >>> b = {"main": _Branch("main", None, None, 9, None, 0, 0),
        ...      "a": _Branch("a", "main", 5, 8, None, 0, 0),
        ...      "b": _Branch("b", "a", 7, 7, None, 0, 0)}
        >>> lineage(b, "b")
        [('b', None), ('a', 7), ('main', 5)]
    """
    chain: Lineage = []
    bound: int | None = None
    current: str | None = name
    while current is not None:
        if any(seen == current for seen, _ in chain):
            raise HistoryStoreError(f"branch lineage of {name!r} has a cycle at {current!r}")
        branch = branches[current]
        chain.append((current, bound))
        if branch.parent is None:
            break
        fork = int(branch.fork_seq or 0)
        bound = fork if bound is None else min(bound, fork)
        current = branch.parent
    return chain


def lineage_clause(chain: Lineage, alias: str = "e") -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    for name, bound in chain:
        if bound is None:
            parts.append(f"{alias}.branch = ?")
            params.append(name)
        else:
            parts.append(f"({alias}.branch = ? AND {alias}.seq <= ?)")
            params.extend([name, bound])
    return "(" + " OR ".join(parts) + ")", params


def _chunks(items: Sequence[T], size: int = _IN_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _marks(count: int) -> str:
    return ", ".join("?" * count)


# --------------------------------------------------------------------------- schema


def schema_version(d: Dialect) -> Op[int]:
    exists = yield d.table_exists("ctx_migrations")
    if not exists[0]:
        return 0
    row = yield Stmt("SELECT max(v) FROM ctx_migrations", (), "one")
    return int(row[0] or 0)


def setup(d: Dialect) -> Op[int]:
    """Run the migrations this database has not seen yet; returns the schema version."""
    if d.name == "postgres":
        yield Stmt("SELECT pg_advisory_xact_lock(?)", (_SETUP_LOCK_KEY,), "one")
    yield Stmt("CREATE TABLE IF NOT EXISTS ctx_migrations (v INTEGER PRIMARY KEY)")
    current = yield from schema_version(d)
    if current > SCHEMA_VERSION:
        raise HistoryStoreError(
            f"the database schema is version {current}, newer than this ctx-langgraph "
            f"understands ({SCHEMA_VERSION}); upgrade ctx-langgraph"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        for step in MIGRATIONS[d.name][version - 1]:
            if isinstance(step, Backfill):
                yield from _BACKFILLS[step.name]()
            else:
                yield Stmt(step)
        yield Stmt("INSERT INTO ctx_migrations (v) VALUES (?)", (version,))
    return SCHEMA_VERSION


_BACKFILL_BATCH = 1000


def _backfill_terms() -> Op[int]:
    """Give every event whose text needs a search document its ``terms`` (schema v4); returns how
    many did. Reads the table in primary-key batches, so memory stays bounded."""
    filled = 0
    after = None
    while True:
        rows = yield Stmt(
            "SELECT pk, text FROM ctx_events"
            + ("" if after is None else " WHERE pk > ?")
            + " ORDER BY pk LIMIT ?",
            (_BACKFILL_BATCH,) if after is None else (after, _BACKFILL_BATCH),
            "all",
        )
        if not rows:
            return filled
        updates = [
            (terms, row[0])
            for row in rows
            if (terms := search_document(load_text(row[1]))) is not None
        ]
        if updates:
            yield Stmt("UPDATE ctx_events SET terms = ? WHERE pk = ?", many=updates)
        filled += len(updates)
        after = rows[-1][0]


def _backfill_binary_hashes() -> Op[int]:
    """SQLite, schema v5: store each event's and revision's hex ``content_hash`` as its 32
    bytes; returns how many rows changed. A row written as bytes already is left alone."""
    converted = 0
    for table in ("ctx_events", "ctx_event_revisions"):
        after = -1  # rowids of both tables are positive
        while True:
            rows = yield Stmt(
                f"SELECT rowid, content_hash FROM {table} WHERE rowid > ? "
                "AND typeof(content_hash) = 'text' ORDER BY rowid LIMIT ?",
                (after, _BACKFILL_BATCH),
                "all",
            )
            if not rows:
                break
            yield Stmt(
                f"UPDATE {table} SET content_hash = ? WHERE rowid = ?",
                many=[(bytes.fromhex(row[1]), row[0]) for row in rows],
            )
            converted += len(rows)
            after = rows[-1][0]
    return converted


_BACKFILLS = {"terms": _backfill_terms, "binary_hashes": _backfill_binary_hashes}


# --------------------------------------------------------------------------- branches


def _select_branch(d: Dialect, scope: Scope, *, lock: bool) -> Stmt:
    return Stmt(
        f"SELECT {_BRANCH_COLS} FROM ctx_branches WHERE tenant = ? AND thread_id = ? AND branch = ?"
        + (d.for_update if lock else ""),
        (scope.tenant, scope.thread_id, scope.branch),
        "one",
    )


def _branch_map(scope: Scope) -> Op[dict[str, _Branch]]:
    rows = yield Stmt(
        f"SELECT {_BRANCH_COLS} FROM ctx_branches WHERE tenant = ? AND thread_id = ?",
        (scope.tenant, scope.thread_id),
        "all",
    )
    return {row[0]: _Branch.from_row(row) for row in rows}


def _with_lineage(scope: Scope, branch: _Branch) -> Op[tuple[_Branch, Lineage]]:
    if branch.parent is None:
        return branch, [(branch.name, None)]
    branches = yield from _branch_map(scope)
    return branch, lineage(branches, branch.name)


def _missing_branch(scope: Scope) -> ScopeError:
    return ScopeError(
        f"branch {scope.branch!r} of thread {scope.thread_id!r} (tenant {scope.tenant!r}) does not "
        "exist; create it with create_branch(scope, from_branch, fork_seq)"
    )


def _lock_branch(
    d: Dialect, scope: Scope, now: dt.datetime, *, create: bool
) -> Op[tuple[_Branch, Lineage]]:
    """Lock the scope's branch row for this transaction (creating the default branch of a new
    thread when ``create``); returns it with its lineage."""
    row = yield _select_branch(d, scope, lock=True)
    if row is None:
        if not (create and scope.branch == DEFAULT_BRANCH):
            raise _missing_branch(scope)
        yield Stmt(
            "INSERT INTO ctx_threads (tenant, thread_id, edit_version, created_at) VALUES (?, ?, 0, ?) "
            "ON CONFLICT DO NOTHING",
            (scope.tenant, scope.thread_id, d.ts(now)),
        )
        yield Stmt(
            "INSERT INTO ctx_branches (tenant, thread_id, branch, head_seq, active_generation, created_at) "
            "VALUES (?, ?, ?, 0, 0, ?) ON CONFLICT DO NOTHING",
            (scope.tenant, scope.thread_id, scope.branch, d.ts(now)),
        )
        row = yield _select_branch(d, scope, lock=True)
    return (yield from _with_lineage(scope, _Branch.from_row(row)))


def _read_branch(d: Dialect, scope: Scope) -> Op[tuple[_Branch, Lineage] | None]:
    """The branch and its lineage, or None for the not-yet-written default branch."""
    row = yield _select_branch(d, scope, lock=False)
    if row is None:
        if scope.branch == DEFAULT_BRANCH:
            return None
        raise _missing_branch(scope)
    return (yield from _with_lineage(scope, _Branch.from_row(row)))


def branch_info(d: Dialect, scope: Scope) -> Op[BranchInfo | None]:
    # one statement: ctx_budget reads this on every turn (the thread's edit counter with it)
    row = yield Stmt(
        f"SELECT {_BRANCH_COLS}, (SELECT t.edit_version FROM ctx_threads t WHERE "
        "t.tenant = b.tenant AND t.thread_id = b.thread_id) FROM ctx_branches b "
        "WHERE b.tenant = ? AND b.thread_id = ? AND b.branch = ?",
        (scope.tenant, scope.thread_id, scope.branch),
        "one",
    )
    if row is None:
        return None
    info = _Branch.from_row(row).info(d, scope)
    return replace(info, edit_version=int(row[7] or 0))


def list_branches(d: Dialect, scope: Scope) -> Op[list[BranchInfo]]:
    branches = yield from _branch_map(scope)
    return [branches[name].info(d, scope) for name in sorted(branches)]


def _inherited_checkpoint(
    d: Dialect, scope: Scope, parent: _Branch, fork_seq: int
) -> Op[tuple[str | None, int]]:
    """The newest version on the parent's chain of active summaries that covers only shared events."""
    if parent.active_id is None:
        return None, 0
    rows = yield Stmt(
        "SELECT id, parent_id, covered_through_seq, generation FROM ctx_checkpoints "
        "WHERE tenant = ? AND thread_id = ? AND status IN ('active', 'superseded')",
        (scope.tenant, scope.thread_id),
        "all",
    )
    versions = {row[0]: row for row in rows}
    current = versions.get(parent.active_id)
    while current is not None and int(current[2]) > fork_seq:
        current = versions.get(current[1]) if current[1] else None
    return (None, 0) if current is None else (current[0], int(current[3]))


def create_branch(
    d: Dialect, scope: Scope, from_branch: str, fork_seq: int, now: dt.datetime
) -> Op[BranchInfo]:
    return _create_branch(d, scope, from_branch, integer_arg("fork_seq", fork_seq), now)


def _create_branch(
    d: Dialect, scope: Scope, from_branch: str, fork_seq: int, now: dt.datetime
) -> Op[BranchInfo]:
    if scope.branch == from_branch:
        raise ScopeError(f"a branch cannot be forked from itself ({scope})")
    parent, _ = yield from _lock_branch(d, scope.on_branch(from_branch), now, create=True)
    if not 0 <= fork_seq <= parent.head_seq:
        raise ScopeError(
            f"fork_seq {fork_seq} is outside branch {from_branch!r} of {scope.thread_id!r}, "
            f"whose events run from 1 to {parent.head_seq}"
        )
    existing = yield _select_branch(d, scope, lock=True)
    if existing is not None:
        branch = _Branch.from_row(existing)
        if branch.parent == from_branch and branch.fork_seq == fork_seq:
            return branch.info(d, scope)
        raise ScopeError(
            f"branch {scope.branch!r} of {scope.thread_id!r} already exists, forked from "
            f"{branch.parent!r} at seq {branch.fork_seq}, not from {from_branch!r} at seq {fork_seq}"
        )
    active_id, generation = yield from _inherited_checkpoint(d, scope, parent, fork_seq)
    yield Stmt(
        "INSERT INTO ctx_branches (tenant, thread_id, branch, parent_branch, fork_seq, head_seq, "
        "active_checkpoint_id, active_generation, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            scope.tenant,
            scope.thread_id,
            scope.branch,
            from_branch,
            fork_seq,
            fork_seq,
            active_id,
            generation,
            d.ts(now),
        ),
    )
    return BranchInfo(scope, from_branch, fork_seq, fork_seq, active_id, generation, now)


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class _Known:
    branch: str
    seq: int
    revision: int
    content_hash: bytes


@dataclass(frozen=True)
class AppendPlan:
    inserts: list[tuple[int, EventRow, dt.datetime]]
    revisions: list[tuple[str, int, EventRow, int]]
    """(owning branch, seq, new content, new revision), in order."""
    results: list[AppendResult]
    head_seq: int


def plan_append(
    scope: Scope,
    head_seq: int,
    rows: Sequence[EventRow],
    created: Sequence[dt.datetime],
    known: dict[str, _Known],
) -> AppendPlan:
    """Decide, without I/O, what appending ``rows`` does: new seqs, duplicates, revisions."""
    known = dict(known)
    inserts: list[tuple[int, EventRow, dt.datetime]] = []
    revisions: list[tuple[str, int, EventRow, int]] = []
    results: list[AppendResult] = []
    for row, created_at in zip(rows, created, strict=True):
        seen = known.get(row.event_id)
        if seen is None:
            head_seq += 1
            inserts.append((head_seq, row, created_at))
            known[row.event_id] = _Known(scope.branch, head_seq, 1, row.content_hash)
            results.append(AppendResult(row.event_id, head_seq, 1, "appended"))
        elif seen.content_hash == row.content_hash:
            results.append(AppendResult(row.event_id, seen.seq, seen.revision, "duplicate"))
        elif seen.branch != scope.branch:
            raise EventConflict(
                f"event {row.event_id!r} (seq {seen.seq}) is inherited by {scope} from branch "
                f"{seen.branch!r}; a branch cannot revise an event it shares with its parent. "
                f"Fork the branch before seq {seen.seq} to record a different version of it"
            )
        else:
            revision = seen.revision + 1
            revisions.append((seen.branch, seen.seq, row, revision))
            known[row.event_id] = replace(seen, revision=revision, content_hash=row.content_hash)
            results.append(AppendResult(row.event_id, seen.seq, revision, "revised"))
    return AppendPlan(inserts, revisions, results, head_seq)


def _known_events(scope: Scope, chain: Lineage, event_ids: Sequence[str]) -> Op[dict[str, _Known]]:
    clause, clause_params = lineage_clause(chain)
    known: dict[str, _Known] = {}
    for chunk in _chunks(list(dict.fromkeys(store_text(i) for i in event_ids))):
        rows = yield Stmt(
            "SELECT e.event_id, e.branch, e.seq, e.revision, e.content_hash FROM ctx_events e "
            f"WHERE e.tenant = ? AND e.thread_id = ? AND e.event_id IN ({_marks(len(chunk))}) AND {clause}",
            (scope.tenant, scope.thread_id, *chunk, *clause_params),
            "all",
        )
        for row in rows:
            known[load_text(row[0])] = _Known(row[1], int(row[2]), int(row[3]), row[4])
    return known


def insert_events(
    tenant: str, thread_id: str, entries: Sequence[tuple[str, int, EventRow, int, bool, Any]]
) -> Stmt:
    """One INSERT of events into a thread: entries are (branch, seq, row, revision, visible,
    created_at as the dialect stores it). Every text column is written as stored (see
    :func:`~ctx_langgraph.history._serde.store_text`), with the row's search document."""
    # A batch of plain rows writes no search document column (NULL: the index reads text).
    terms = any(row.terms is not None for _, _, row, _, _, _ in entries)
    key = scope_key(tenant, thread_id)
    return Stmt(
        "INSERT INTO ctx_events (tenant, thread_id, branch, seq, scope_key, event_id, role, "
        "name, content, content_hash, text, tool_call_ids, tool_names, revision, visible, "
        f"created_at{', terms' if terms else ''}) VALUES ({_marks(16 + terms)})",
        many=[
            (
                tenant,
                thread_id,
                branch,
                seq,
                key,
                *_event_values(row),
                revision,
                visible,
                created_at,
                *((row.terms,) if terms else ()),
            )
            for branch, seq, row, revision, visible, created_at in entries
        ],
    )


def _event_values(row: EventRow) -> tuple[Any, ...]:
    """The columns an event row writes, as stored: event_id, role, name, content, content_hash,
    text, tool_call_ids, tool_names (then the search document, see :func:`append`)."""
    return (
        store_text(row.event_id),
        store_text(row.role),
        _stored_optional(row.name),
        row.content_json,
        row.content_hash,
        store_text(row.text),
        json.dumps(list(row.tool_call_ids)),
        store_names(row.tool_names),
    )


def _bump_edit_version(d: Dialect, scope: Scope) -> Op[int]:
    row = yield Stmt(
        "UPDATE ctx_threads SET edit_version = edit_version + 1 WHERE tenant = ? AND thread_id = ? "
        "RETURNING edit_version",
        (scope.tenant, scope.thread_id),
        "one",
    )
    return int(row[0])


def _log_edits(
    d: Dialect,
    scope: Scope,
    version: int,
    kind: str,
    targets: Sequence[tuple[str, int]],
    now: dt.datetime,
) -> Stmt:
    return Stmt(
        "INSERT INTO ctx_event_edits (tenant, thread_id, branch, seq, edit_version, kind, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        many=[
            (scope.tenant, scope.thread_id, branch, seq, version, kind, d.ts(now))
            for branch, seq in targets
        ],
    )


def append(
    d: Dialect,
    scope: Scope,
    rows: Sequence[EventRow],
    created: Sequence[dt.datetime],
    now: dt.datetime,
) -> Op[list[AppendResult]]:
    branch, chain = yield from _lock_branch(d, scope, now, create=True)
    known = yield from _known_events(scope, chain, [row.event_id for row in rows])
    plan = plan_append(scope, branch.head_seq, rows, created, known)
    if plan.inserts:
        yield insert_events(
            scope.tenant,
            scope.thread_id,
            [(scope.branch, seq, row, 1, True, d.ts(when)) for seq, row, when in plan.inserts],
        )
    if plan.revisions:
        version = yield from _bump_edit_version(d, scope)
        for owner, seq, row, revision in plan.revisions:
            where = (scope.tenant, scope.thread_id, owner, seq)
            yield Stmt(
                "INSERT INTO ctx_event_revisions (tenant, thread_id, branch, seq, event_id, revision, "
                "content, content_hash, text, replaced_at) SELECT tenant, thread_id, branch, seq, "
                "event_id, revision, content, content_hash, text, ? FROM ctx_events "
                "WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?",
                (d.ts(now), *where),
            )
            yield Stmt(
                "UPDATE ctx_events SET role = ?, name = ?, content = ?, content_hash = ?, text = ?, "
                "tool_call_ids = ?, tool_names = ?, terms = ?, revision = ? "
                "WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?",
                (*_event_values(row)[1:], row.terms, revision, *where),
            )
        revised = [(o, s) for o, s, _, _ in plan.revisions]
        yield _log_edits(d, scope, version, "revise", revised, now)
        seqs = ", ".join(str(seq) for _, seq in sorted(revised, key=lambda t: t[1])[:5])
        yield from _invalidate_covering(scope, revised, f"revision of event seq {seqs}")
    if plan.head_seq != branch.head_seq:
        yield Stmt(
            "UPDATE ctx_branches SET head_seq = ? WHERE tenant = ? AND thread_id = ? AND branch = ?",
            (plan.head_seq, scope.tenant, scope.thread_id, scope.branch),
        )
    return plan.results


def _invalidate_covering(
    scope: Scope, targets: Sequence[tuple[str, int]], why: str
) -> Op[list[str]]:
    """Every summary version that covers an edited event (on any branch that reads the event's
    row) loses its text and key facts; committed ones become ``invalid``. A branch whose active
    summary was among them has no active summary any more (its generation still moves on), so
    the next compaction rebuilds one from the remaining raw history. Returns the invalidated
    committed versions' ids."""
    branches = yield from _branch_map(scope)
    invalid: list[str] = []
    for name in branches:
        chain = lineage(branches, name)
        seqs = [
            seq
            for owner, seq in targets
            for branch, bound in chain
            if branch == owner and (bound is None or seq <= bound)
        ]
        if not seqs:
            continue
        where = (scope.tenant, scope.thread_id, name, min(seqs))
        rows = yield Stmt(
            "SELECT id FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? AND branch = ? "
            "AND covered_through_seq >= ? AND status IN ('active', 'superseded')",
            where,
            "all",
        )
        invalid.extend(row[0] for row in rows)
        yield Stmt(
            "UPDATE ctx_checkpoints SET summary_text = NULL, key_facts = '[]', "
            "provider_state = NULL WHERE tenant = ? AND thread_id = ? AND branch = ? "
            "AND covered_through_seq >= ?",
            where,
        )
    if invalid:
        yield Stmt(
            "UPDATE ctx_checkpoints SET status = 'invalid', error = ? WHERE id = ?",
            many=[(f"invalidated: {why}", checkpoint_id) for checkpoint_id in invalid],
        )
        for chunk in _chunks(invalid):
            yield Stmt(
                "UPDATE ctx_branches SET active_checkpoint_id = NULL, "
                "active_generation = active_generation + 1 WHERE tenant = ? AND thread_id = ? "
                f"AND active_checkpoint_id IN ({_marks(len(chunk))})",
                (scope.tenant, scope.thread_id, *chunk),
            )
    return invalid


def _edit_visibility(
    d: Dialect, scope: Scope, event_ids: Sequence[str], now: dt.datetime, *, kind: str
) -> Op[int]:
    """Hide, show or delete events by id in the scope's view (inherited rows included: an event
    shared by several branches is one row, so the change applies to every branch that shares it)."""
    event_ids = [store_text(i) for i in event_ids]
    if not event_ids:
        return 0
    found = yield from _read_branch(d, scope)
    if found is None:
        return 0
    _, chain = found
    lock = yield Stmt(
        "SELECT edit_version FROM ctx_threads WHERE tenant = ? AND thread_id = ?" + d.for_update,
        (scope.tenant, scope.thread_id),
        "one",
    )
    if lock is None:
        return 0
    clause, clause_params = lineage_clause(chain)
    targets: list[tuple[str, int]] = []
    for chunk in _chunks(list(dict.fromkeys(event_ids))):
        visible_filter = "" if kind == "delete" else " AND e.visible = ?"
        rows = yield Stmt(
            f"SELECT e.branch, e.seq FROM ctx_events e WHERE e.tenant = ? AND e.thread_id = ? "
            f"AND e.event_id IN ({_marks(len(chunk))}) AND {clause}{visible_filter}",
            (
                scope.tenant,
                scope.thread_id,
                *chunk,
                *clause_params,
                *(() if kind == "delete" else (kind == "hide",)),
            ),
            "all",
        )
        targets.extend((row[0], int(row[1])) for row in rows)
    if not targets:
        return 0
    version = yield from _bump_edit_version(d, scope)
    keys = [(scope.tenant, scope.thread_id, branch, seq) for branch, seq in targets]
    if kind == "delete":
        yield Stmt(
            "DELETE FROM ctx_event_revisions WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?",
            many=keys,
        )
        yield Stmt(
            "DELETE FROM ctx_events WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?",
            many=keys,
        )
    else:
        yield Stmt(
            "UPDATE ctx_events SET visible = ? WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?",
            many=[(kind == "show", *key) for key in keys],
        )
    yield _log_edits(d, scope, version, kind, targets, now)
    if kind != "show":
        seqs = ", ".join(str(seq) for _, seq in sorted(targets, key=lambda t: t[1])[:5])
        yield from _invalidate_covering(scope, targets, f"{kind} of event seq {seqs}")
    return len(targets)


def hide_events(
    d: Dialect, scope: Scope, event_ids: Sequence[str] | str, now: dt.datetime
) -> Op[int]:
    return _edit_visibility(d, scope, id_list("event_ids", event_ids), now, kind="hide")


def show_events(
    d: Dialect, scope: Scope, event_ids: Sequence[str] | str, now: dt.datetime
) -> Op[int]:
    return _edit_visibility(d, scope, id_list("event_ids", event_ids), now, kind="show")


def delete_events(
    d: Dialect, scope: Scope, event_ids: Sequence[str] | str, now: dt.datetime
) -> Op[int]:
    return _edit_visibility(d, scope, id_list("event_ids", event_ids), now, kind="delete")


def read_events(
    d: Dialect,
    scope: Scope,
    from_seq: int,
    to_seq: int | None,
    limit: int | None,
    include_hidden: bool,
) -> Op[list[HistoryEvent]]:
    """The branch's events from ``from_seq`` through ``to_seq``, at most ``limit`` of them
    (arguments checked now: a seq beyond the 64-bit range is clamped, so it finds nothing)."""
    return _read_events(
        d,
        scope,
        seq_bound("from_seq", from_seq),
        None if to_seq is None else seq_bound("to_seq", to_seq),
        None if limit is None else limit_arg("limit", limit),
        bool(include_hidden),
    )


def _read_events(
    d: Dialect,
    scope: Scope,
    from_seq: int,
    to_seq: int | None,
    limit: int | None,
    include_hidden: bool,
) -> Op[list[HistoryEvent]]:
    found = yield from _read_branch(d, scope)
    if found is None:
        return []
    _, chain = found
    clause, params = lineage_clause(chain)
    sql = f"SELECT {_EVENT_COLS} FROM ctx_events e WHERE e.tenant = ? AND e.thread_id = ? AND {clause} AND e.seq >= ?"
    args: list[Any] = [scope.tenant, scope.thread_id, *params, from_seq]
    if to_seq is not None:
        sql += " AND e.seq <= ?"
        args.append(to_seq)
    if not include_hidden:
        sql += " AND e.visible = ?"
        args.append(True)
    sql += " ORDER BY e.seq"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    rows = yield Stmt(sql, args, "all")
    return [_event(d, row) for row in rows]


def get_event(
    d: Dialect, scope: Scope, event_id: str, include_hidden: bool
) -> Op[HistoryEvent | None]:
    return _get_event(d, scope, text_arg("event_id", event_id), bool(include_hidden))


def _get_event(
    d: Dialect, scope: Scope, event_id: str, include_hidden: bool
) -> Op[HistoryEvent | None]:
    found = yield from _read_branch(d, scope)
    if found is None:
        return None
    clause, params = lineage_clause(found[1])
    sql = f"SELECT {_EVENT_COLS} FROM ctx_events e WHERE e.tenant = ? AND e.thread_id = ? AND e.event_id = ? AND {clause}"
    args: list[Any] = [scope.tenant, scope.thread_id, store_text(event_id), *params]
    if not include_hidden:
        sql += " AND e.visible = ?"
        args.append(True)
    row = yield Stmt(sql, args, "one")
    return None if row is None else _event(d, row)


def event_revisions(
    d: Dialect, scope: Scope, event_id: str
) -> Op[list[tuple[int, dict[str, Any]]]]:
    """Every earlier revision of an event, oldest first, as (revision, message record)."""
    current = yield from get_event(d, scope, event_id, True)
    if current is None:
        return []
    rows = yield Stmt(
        "SELECT revision, content, text FROM ctx_event_revisions WHERE tenant = ? "
        "AND thread_id = ? AND branch = ? AND seq = ? ORDER BY revision",
        (scope.tenant, scope.thread_id, current.branch, current.seq),
        "all",
    )
    return [(int(row[0]), _record_of(row[1], row[2] or "")) for row in rows]


def edits_since(d: Dialect, scope: Scope, version: int) -> Op[list[tuple[int, str, int, str]]]:
    """The thread's edit log after ``version``: (edit_version, branch, seq, kind), in order."""
    return _edits_since(scope, seq_bound("version", version))


def _edits_since(scope: Scope, version: int) -> Op[list[tuple[int, str, int, str]]]:
    rows = yield Stmt(
        "SELECT edit_version, branch, seq, kind FROM ctx_event_edits WHERE tenant = ? AND "
        "thread_id = ? AND edit_version > ? ORDER BY edit_version, branch, seq",
        (scope.tenant, scope.thread_id, version),
        "all",
    )
    return [(int(row[0]), str(row[1]), int(row[2]), str(row[3])) for row in rows]


def _record_of(content: str, text: str | None) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(content)
    return stored if text is None else expand_record(stored, load_text(text))


# --------------------------------------------------------------------------- search


def encode_cursor(seq: int, newest_first: bool) -> str:
    raw = json.dumps({"v": 1, "seq": seq, "desc": newest_first}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, newest_first: bool) -> int:
    """The seq a cursor made by :func:`encode_cursor` continues from.

    Raises:
        ValueError: not such a cursor (a forged seq that is not a whole number within the
            64-bit range included), or one made for the other ordering.
    """
    try:
        if not isinstance(cursor, str):
            raise TypeError(f"a cursor is a string, not {type(cursor).__name__}")
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        seq = data["seq"]
        if type(seq) is not int or not 0 <= seq <= SEQ_MAX:
            raise ValueError(f"seq {_shown(seq)} is not a seq")
        if data.get("v") != 1 or data.get("desc") is not newest_first:
            raise ValueError("cursor made for another ordering")
    except (
        ValueError,
        KeyError,
        TypeError,
        binascii.Error,
        RecursionError,
    ) as exc:
        raise ValueError(f"malformed search cursor {_shown(cursor)}: {exc}") from None
    return seq


@dataclass(frozen=True)
class SearchFilter:
    """What a search asks for, checked when built: wrong types raise TypeError naming the
    argument, a seq bound beyond the 64-bit range is clamped (a ``min_seq`` above every seq just
    finds nothing), and a malformed cursor or query raises ValueError."""

    query: str | None = None
    min_seq: int | None = None
    max_seq: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    roles: tuple[str, ...] = ()
    tool_name: str | None = None
    limit: int = 20
    cursor: str | None = None
    newest_first: bool = False

    def __post_init__(self) -> None:
        checked = {
            "limit": limit_arg("limit", self.limit),
            "min_seq": None if self.min_seq is None else seq_bound("min_seq", self.min_seq),
            "max_seq": None if self.max_seq is None else seq_bound("max_seq", self.max_seq),
            "roles": tuple(dict.fromkeys(text_arg("roles", role) for role in self.roles)),
            "newest_first": bool(self.newest_first),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if len(self.roles) > _MAX_ROLES:
            raise ValueError(
                f"roles names {len(self.roles)} distinct roles; a search takes at most {_MAX_ROLES}"
            )
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dt.datetime):
                raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
        if self.tool_name is not None:
            text_arg("tool_name", self.tool_name)
        if self.cursor is not None:
            decode_cursor(self.cursor, self.newest_first)
        if self.query is not None:
            tokens = match_tokens(text_arg("query", self.query))
            if not tokens:
                raise ValueError(f"search query {_shown(self.query)} has no searchable words")
            if len(tokens) > MAX_QUERY_WORDS:
                raise ValueError(
                    f"search query has {len(tokens)} distinct words; at most {MAX_QUERY_WORDS} "
                    "are matched at once (every one must be in a hit): search for fewer"
                )


def search(d: Dialect, scope: Scope, flt: SearchFilter) -> Op[SearchPage]:
    found = yield from _read_branch(d, scope)
    if found is None:
        return SearchPage((), None, False)
    clause, clause_params = lineage_clause(found[1])
    source = "ctx_events e"
    where = ["e.tenant = ?", "e.thread_id = ?", clause, "e.visible = ?"]
    args: list[Any] = [scope.tenant, scope.thread_id, *clause_params, True]
    if flt.query is not None:
        source, match, match_params = d.text_match(
            scope.tenant, scope.thread_id, match_tokens(flt.query)
        )
        where.insert(0, match)
        args[0:0] = match_params
    if flt.min_seq is not None:
        where.append("e.seq >= ?")
        args.append(flt.min_seq)
    if flt.max_seq is not None:
        where.append("e.seq <= ?")
        args.append(flt.max_seq)
    if flt.since is not None:
        where.append("e.created_at >= ?")
        args.append(d.ts(flt.since))
    if flt.until is not None:
        where.append("e.created_at < ?")
        args.append(d.ts(flt.until))
    if flt.roles:
        where.append(f"e.role IN ({_marks(len(flt.roles))})")
        args.extend(store_text(role) for role in flt.roles)
    if flt.tool_name is not None:
        where.append(d.contains("e.tool_names"))
        args.append(store_names([flt.tool_name]))
    if flt.cursor is not None:
        where.append("e.seq < ?" if flt.newest_first else "e.seq > ?")
        args.append(decode_cursor(flt.cursor, flt.newest_first))
    order = "DESC" if flt.newest_first else "ASC"
    rows = yield Stmt(
        f"SELECT {_EVENT_COLS} FROM {source} WHERE {' AND '.join(where)} "
        f"ORDER BY e.seq {order} LIMIT ?",
        (*args, flt.limit + 1),
        "all",
    )
    hits = tuple(_event(d, row) for row in rows[: flt.limit])
    has_more = len(rows) > flt.limit
    return SearchPage(
        hits, encode_cursor(hits[-1].seq, flt.newest_first) if has_more else None, has_more
    )


# --------------------------------------------------------------------------- compaction checkpoints


def range_hash(events: Sequence[HistoryEvent]) -> str:
    digest = hashlib.sha256()
    for event in events:
        line = f"{event.seq}\x1f{event.event_id}\x1f{event.revision}\x1e"
        digest.update(line.encode("utf-8", "surrogatepass"))  # any id, surrogates included
    return digest.hexdigest()


def _select_checkpoint(checkpoint_id: str) -> Stmt:
    return Stmt(
        f"SELECT {_CHECKPOINT_COLS} FROM ctx_checkpoints WHERE id = ?",
        (store_text(text_arg("checkpoint id", checkpoint_id)),),
        "one",
    )


def get_checkpoint(d: Dialect, checkpoint_id: str) -> Op[CompactionCheckpoint | None]:
    row = yield _select_checkpoint(checkpoint_id)
    return None if row is None else _checkpoint(d, row)


def snapshot(d: Dialect, scope: Scope, through_seq: int) -> Op[CoverageSnapshot]:
    return _snapshot(d, scope, integer_arg("through_seq", through_seq))


def _snapshot(d: Dialect, scope: Scope, through_seq: int) -> Op[CoverageSnapshot]:
    # The edit counter is read before the events: an edit landing in between makes the
    # snapshot look older than it is, which can only cause a needless rebuild, never a miss.
    version_row = yield Stmt(
        "SELECT edit_version FROM ctx_threads WHERE tenant = ? AND thread_id = ?",
        (scope.tenant, scope.thread_id),
        "one",
    )
    found = yield from _read_branch(d, scope)
    if found is None or version_row is None:
        raise ValueError(f"nothing to compact in {scope}: it has no events")
    branch, _ = found
    covered = 0
    if branch.active_id is not None:
        row = yield _select_checkpoint(branch.active_id)
        covered = int(row[7])
    if not covered < through_seq <= branch.head_seq:
        raise ValueError(
            f"cannot cover {scope} through seq {through_seq}: the active summary covers through "
            f"seq {covered} and the branch head is seq {branch.head_seq}"
        )
    events = yield from read_events(d, scope, covered + 1, through_seq, None, False)
    return CoverageSnapshot(
        scope=scope,
        base_checkpoint_id=branch.active_id,
        base_generation=branch.active_generation,
        first_seq=covered + 1,
        covered_through_seq=through_seq,
        events=tuple(events),
        source_revision=int(version_row[0]),
        range_hash=range_hash(events),
    )


@dataclass(frozen=True)
class CandidateContent:
    summary_text: str | None
    key_facts: tuple[KeyFact, ...] = ()
    first_kept_event_id: str | None = None
    summarizer_id: str | None = None
    summary_tokens: int | None = None
    format_version: int = 1
    provider_state: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


def create_candidate(
    d: Dialect, snap: CoverageSnapshot, content: CandidateContent, now: dt.datetime
) -> Op[CompactionCheckpoint]:
    if content.summary_text is None and content.provider_state is None:
        raise ValueError("a compaction candidate needs summary_text or provider_state")
    for fact in content.key_facts:
        if not 1 <= fact.source_seq <= snap.covered_through_seq:
            raise ValueError(
                f"key fact {fact.text!r} cites seq {fact.source_seq}, outside the covered range "
                f"1..{snap.covered_through_seq}"
            )
    checkpoint = CompactionCheckpoint(
        id=str(uuid.uuid4()),
        scope=snap.scope,
        generation=snap.base_generation + 1,
        parent_id=snap.base_checkpoint_id,
        first_seq=snap.first_seq,
        covered_through_seq=snap.covered_through_seq,
        first_kept_event_id=content.first_kept_event_id,
        source_revision=snap.source_revision,
        range_hash=snap.range_hash,
        summary_text=content.summary_text,
        provider_state=content.provider_state,
        format_version=content.format_version,
        summarizer_id=content.summarizer_id,
        key_facts=content.key_facts,
        summary_tokens=content.summary_tokens,
        status="candidate",
        error=None,
        created_at=now,
        committed_at=None,
        metadata=dict(content.metadata or {}),
    )
    scope = snap.scope
    yield Stmt(
        f"INSERT INTO ctx_checkpoints ({_CHECKPOINT_COLS}) VALUES ({_marks(22)})",
        (
            checkpoint.id,
            scope.tenant,
            scope.thread_id,
            scope.branch,
            checkpoint.generation,
            checkpoint.parent_id,
            checkpoint.first_seq,
            checkpoint.covered_through_seq,
            _stored_optional(checkpoint.first_kept_event_id),
            checkpoint.source_revision,
            checkpoint.range_hash,
            _stored_optional(checkpoint.summary_text),
            None if checkpoint.provider_state is None else json.dumps(checkpoint.provider_state),
            checkpoint.format_version,
            _stored_optional(checkpoint.summarizer_id),
            json_text([fact.to_json() for fact in checkpoint.key_facts]),
            checkpoint.summary_tokens,
            "candidate",
            None,
            json.dumps(checkpoint.metadata),
            d.ts(now),
            None,
        ),
    )
    return checkpoint


def _fail(checkpoint_id: str, reason: str) -> Stmt:
    return Stmt(
        "UPDATE ctx_checkpoints SET status = 'failed', error = ? WHERE id = ? AND status = 'candidate'",
        (store_text(text_arg("reason", reason)), store_text(checkpoint_id)),
        "rowcount",
    )


def commit_candidate(d: Dialect, checkpoint_id: str, now: dt.datetime) -> Op[CompactionCheckpoint]:
    row = yield _select_checkpoint(checkpoint_id)
    if row is None:
        raise HistoryStoreError(f"no compaction checkpoint with id {checkpoint_id!r}")
    candidate = _checkpoint(d, row)
    scope = candidate.scope
    branch, chain = yield from _lock_branch(d, scope, now, create=False)
    if candidate.status == "active" and branch.active_id == candidate.id:
        return candidate
    if candidate.status != "candidate":
        raise HistoryStoreError(
            f"checkpoint {checkpoint_id} of {scope} is {candidate.status}; only a candidate can be committed"
        )
    if (
        branch.active_generation != candidate.generation - 1
        or branch.active_id != candidate.parent_id
    ):
        yield _fail(checkpoint_id, f"conflict: active generation became {branch.active_generation}")
        raise DeferredError(
            CompactionConflict(
                scope,
                candidate_id=checkpoint_id,
                expected_generation=candidate.generation - 1,
                actual_generation=branch.active_generation,
            )
        )
    version_row = yield Stmt(
        "SELECT edit_version FROM ctx_threads WHERE tenant = ? AND thread_id = ?" + d.for_share,
        (scope.tenant, scope.thread_id),
        "one",
    )
    if int(version_row[0]) != candidate.source_revision:
        clause, clause_params = lineage_clause(chain)
        edit = yield Stmt(
            "SELECT e.seq, e.kind, e.edit_version FROM ctx_event_edits e WHERE e.tenant = ? AND "
            f"e.thread_id = ? AND e.edit_version > ? AND e.seq <= ? AND {clause} "
            "ORDER BY e.edit_version LIMIT 1",
            (
                scope.tenant,
                scope.thread_id,
                candidate.source_revision,
                candidate.covered_through_seq,
                *clause_params,
            ),
            "one",
        )
        if edit is not None:
            reason = (
                f"event seq {edit[0]} (covered range ends at seq {candidate.covered_through_seq}) "
                f"had a {edit[1]} edit after the snapshot"
            )
            yield _fail(checkpoint_id, f"stale: {reason}")
            raise DeferredError(StaleCandidate(scope, candidate_id=checkpoint_id, reason=reason))
    swapped = yield Stmt(
        "UPDATE ctx_branches SET active_checkpoint_id = ?, active_generation = ? "
        "WHERE tenant = ? AND thread_id = ? AND branch = ? AND active_generation = ?",
        (
            candidate.id,
            candidate.generation,
            scope.tenant,
            scope.thread_id,
            scope.branch,
            candidate.generation - 1,
        ),
        "rowcount",
    )
    if swapped != 1:
        raise CompactionConflict(
            scope,
            candidate_id=checkpoint_id,
            expected_generation=candidate.generation - 1,
            actual_generation=branch.active_generation,
        )
    if branch.active_id is not None:
        yield Stmt(
            "UPDATE ctx_checkpoints SET status = 'superseded' WHERE id = ? AND status = 'active' "
            "AND tenant = ? AND thread_id = ? AND branch = ?",
            (branch.active_id, scope.tenant, scope.thread_id, scope.branch),
        )
    yield Stmt(
        "UPDATE ctx_checkpoints SET status = 'active', committed_at = ? WHERE id = ?",
        (d.ts(now), candidate.id),
    )
    return replace(candidate, status="active", committed_at=now)


def mark_failed(d: Dialect, checkpoint_id: str, reason: str) -> Op[CompactionCheckpoint]:
    changed = yield _fail(checkpoint_id, reason)
    row = yield _select_checkpoint(checkpoint_id)
    if row is None:
        raise HistoryStoreError(f"no compaction checkpoint with id {checkpoint_id!r}")
    checkpoint = _checkpoint(d, row)
    if not changed and checkpoint.status != "failed":
        raise HistoryStoreError(
            f"checkpoint {checkpoint_id} is {checkpoint.status}; only a candidate can be marked failed"
        )
    return checkpoint


def get_active(d: Dialect, scope: Scope) -> Op[CompactionCheckpoint | None]:
    row = yield _select_branch(d, scope, lock=False)
    if row is None:
        if scope.branch != DEFAULT_BRANCH:
            raise _missing_branch(scope)
        return None
    branch = _Branch.from_row(row)
    if branch.active_id is None:
        return None
    return (yield from get_checkpoint(d, branch.active_id))


def list_versions(d: Dialect, scope: Scope) -> Op[list[CompactionCheckpoint]]:
    rows = yield Stmt(
        f"SELECT {_CHECKPOINT_COLS} FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? AND branch = ? "
        "ORDER BY generation DESC, created_at DESC",
        (scope.tenant, scope.thread_id, scope.branch),
        "all",
    )
    return [_checkpoint(d, row) for row in rows]


def prune_versions(d: Dialect, scope: Scope, keep: int, now: dt.datetime) -> Op[int]:
    """Delete this branch's superseded, failed and invalid versions beyond the ``keep`` newest,
    except any version some branch still uses as its active summary."""
    if integer_arg("keep", keep) < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    return _prune_versions(d, scope, keep, now)


def _prune_versions(d: Dialect, scope: Scope, keep: int, now: dt.datetime) -> Op[int]:
    yield from _lock_branch(d, scope, now, create=False)
    rows = yield Stmt(
        "SELECT id FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? AND branch = ? "
        "AND status IN ('superseded', 'failed', 'invalid') ORDER BY created_at DESC, generation DESC",
        (scope.tenant, scope.thread_id, scope.branch),
        "all",
    )
    in_use = yield Stmt(
        "SELECT active_checkpoint_id FROM ctx_branches WHERE tenant = ? AND thread_id = ? "
        "AND active_checkpoint_id IS NOT NULL",
        (scope.tenant, scope.thread_id),
        "all",
    )
    used = {row[0] for row in in_use}
    doomed = [(row[0],) for row in rows[keep:] if row[0] not in used]
    if doomed:
        yield Stmt("DELETE FROM ctx_checkpoints WHERE id = ?", many=doomed)
    return len(doomed)
