"""Event operations: the append plan and insert, reads, revisions, visibility edits (hide,
show, delete) and the thread's edit log; an edit invalidates the summaries that cover it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctx_langgraph.errors import EventConflict
from ctx_langgraph.history.args import limit_arg, seq_bound, text_arg
from ctx_langgraph.history.branches import (
    Branch,
    Lineage,
    branch_map,
    lineage,
    lineage_clause,
    lock_branch,
    read_branch,
)
from ctx_langgraph.history.rows import (
    EVENT_COLS,
    EventRow,
    event_from_row,
    record_of,
    stored_optional,
)
from ctx_langgraph.history.types import (
    DERIVED_METADATA_KEYS,
    AppendResult,
    HistoryEvent,
    Scope,
)
from ctx_langgraph.storage.codec import load_text, store_names, store_text
from ctx_langgraph.storage.dialects import Dialect, scope_key
from ctx_langgraph.storage.statements import Op, Stmt, chunks, marks
from ctx_langgraph.storage.tables.vectors import BUMP_VECTOR_VERSION

__all__ = [
    "AppendPlan",
    "Known",
    "append",
    "edit_visibility",
    "edits_since",
    "event_revisions",
    "get_event",
    "insert_events",
    "invalidate_covering",
    "invalidate_segments",
    "known_events",
    "plan_append",
    "read_events",
    "write_plan",
]


@dataclass(frozen=True)
class Known:
    """An event already recorded in the branch's view: where it lives and its content hash."""

    branch: str
    seq: int
    revision: int
    content_hash: bytes


@dataclass(frozen=True)
class AppendPlan:
    """What an append does, decided before any write (see :func:`plan_append`)."""

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
    known: dict[str, Known],
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
            known[row.event_id] = Known(scope.branch, head_seq, 1, row.content_hash)
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


def known_events(scope: Scope, chain: Lineage, event_ids: Sequence[str]) -> Op[dict[str, Known]]:
    clause, clause_params = lineage_clause(chain)
    known: dict[str, Known] = {}
    for chunk in chunks(list(dict.fromkeys(store_text(i) for i in event_ids))):
        rows = yield Stmt(
            "SELECT e.event_id, e.branch, e.seq, e.revision, e.content_hash FROM ctx_events e "
            f"WHERE e.tenant = ? AND e.thread_id = ? AND e.event_id IN ({marks(len(chunk))}) AND {clause}",
            (scope.tenant, scope.thread_id, *chunk, *clause_params),
            "all",
        )
        for row in rows:
            known[load_text(row[0])] = Known(row[1], int(row[2]), int(row[3]), row[4])
    return known


def insert_events(
    tenant: str, thread_id: str, entries: Sequence[tuple[str, int, EventRow, int, bool, Any]]
) -> Stmt:
    """One INSERT of events into a thread: entries are (branch, seq, row, revision, visible,
    stored created_at); a batch of plain rows writes no search document column."""
    terms = any(row.terms is not None for _, _, row, _, _, _ in entries)
    key = scope_key(tenant, thread_id)
    return Stmt(
        "INSERT INTO ctx_events (tenant, thread_id, branch, seq, scope_key, event_id, role, "
        "name, content, content_hash, text, tool_call_ids, tool_names, revision, visible, "
        f"created_at{', terms' if terms else ''}) VALUES ({marks(16 + terms)})",
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
    """The stored columns event_id, role, name, content, content_hash, text, tool_call_ids and
    tool_names of an event row."""
    return (
        store_text(row.event_id),
        store_text(row.role),
        stored_optional(row.name),
        row.content_json,
        row.content_hash,
        store_text(row.text),
        json.dumps(list(row.tool_call_ids)),
        store_names(row.tool_names),
    )


def drop_vectors(scope: Scope, keys: Sequence[tuple[str, str, str, int]]) -> Op[None]:
    """Delete the vectors of the events at ``keys`` (tenant, thread, branch, seq) and bump the
    thread's vector version, in the transaction that hides, deletes or revises them."""
    yield Stmt(
        "DELETE FROM ctx_event_vectors WHERE event_pk IN (SELECT pk FROM ctx_events "
        "WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?)",
        many=list(keys),
    )
    yield Stmt(BUMP_VECTOR_VERSION, (scope.tenant, scope.thread_id))


def _bump_edit_version(scope: Scope) -> Op[int]:
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
    """Record ``rows`` at the end of the scope's branch (see
    :meth:`~ctx_langgraph.history.HistoryStore.append`)."""
    branch, chain = yield from lock_branch(d, scope, now, create=True)
    known = yield from known_events(scope, chain, [row.event_id for row in rows])
    plan, _version = yield from write_plan(d, scope, branch, rows, created, known, now)
    return plan.results


def write_plan(
    d: Dialect,
    scope: Scope,
    branch: Branch,
    rows: Sequence[EventRow],
    created: Sequence[dt.datetime],
    known: dict[str, Known],
    now: dt.datetime,
) -> Op[tuple[AppendPlan, int | None]]:
    """Plan and write an append on the locked ``branch``; returns the plan and the thread's
    new edit version when it revised events (None otherwise)."""
    plan = plan_append(scope, branch.head_seq, rows, created, known)
    version: int | None = None
    if plan.inserts:
        yield insert_events(
            scope.tenant,
            scope.thread_id,
            [(scope.branch, seq, row, 1, True, d.ts(when)) for seq, row, when in plan.inserts],
        )
    if plan.revisions:
        version = yield from _bump_edit_version(scope)
        for owner, seq, row, revision in plan.revisions:
            where = (scope.tenant, scope.thread_id, owner, seq)
            yield Stmt(
                "INSERT INTO ctx_event_revisions (tenant, thread_id, branch, seq, event_id, revision, "
                "content, content_hash, text, replaced_at) SELECT tenant, thread_id, branch, seq, "
                "event_id, revision, content, content_hash, text, ? FROM ctx_events "
                "WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?",
                (d.ts(now), *where),
            )
            yield from drop_vectors(scope, [where])  # made from the text replaced: embedded again
            yield Stmt(
                "UPDATE ctx_events SET role = ?, name = ?, content = ?, content_hash = ?, text = ?, "
                "tool_call_ids = ?, tool_names = ?, terms = ?, revision = ? "
                "WHERE tenant = ? AND thread_id = ? AND branch = ? AND seq = ?",
                (*_event_values(row)[1:], row.terms, revision, *where),
            )
        revised = [(o, s) for o, s, _, _ in plan.revisions]
        yield _log_edits(d, scope, version, "revise", revised, now)
        seqs = ", ".join(str(seq) for _, seq in sorted(revised, key=lambda t: t[1])[:5])
        yield from invalidate_covering(scope, revised, f"revision of event seq {seqs}")
    if plan.head_seq != branch.head_seq:
        yield Stmt(
            "UPDATE ctx_branches SET head_seq = ? WHERE tenant = ? AND thread_id = ? AND branch = ?",
            (plan.head_seq, scope.tenant, scope.thread_id, scope.branch),
        )
    return plan, version


def invalidate_covering(
    scope: Scope, targets: Sequence[tuple[str, int]], why: str
) -> Op[list[str]]:
    """Every summary version covering an edited event (on any branch reading its row) loses its
    text and key facts; committed ones become ``invalid`` and stop being active. Returns the
    invalidated committed versions' ids."""
    branches = yield from branch_map(scope)
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
        yield from invalidate_segments(Scope(scope.thread_id, scope.tenant, name), seqs, why)
        yield Stmt(
            "UPDATE ctx_checkpoints SET summary_text = NULL, key_facts = '[]', "
            "provider_state = NULL WHERE tenant = ? AND thread_id = ? AND branch = ? "
            "AND covered_through_seq >= ?",
            where,
        )
        yield from _clear_derived_metadata(where)
    if invalid:
        yield Stmt(
            "UPDATE ctx_checkpoints SET status = 'invalid', error = ? WHERE id = ?",
            many=[(f"invalidated: {why}", checkpoint_id) for checkpoint_id in invalid],
        )
        for chunk in chunks(invalid):
            yield Stmt(
                "UPDATE ctx_branches SET active_checkpoint_id = NULL, "
                "active_generation = active_generation + 1 WHERE tenant = ? AND thread_id = ? "
                f"AND active_checkpoint_id IN ({marks(len(chunk))})",
                (scope.tenant, scope.thread_id, *chunk),
            )
    return invalid


def invalidate_segments(scope: Scope, seqs: Sequence[int], why: str) -> Op[int]:
    """The branch's active segments holding one of ``seqs`` lose their text and key facts and
    become ``invalid``; returns how many."""
    changed = 0
    for seq in sorted(set(seqs)):
        count = yield Stmt(
            "UPDATE ctx_segments SET status = 'invalid', summary_text = NULL, key_facts = '[]', "
            "error = ? WHERE tenant = ? AND thread_id = ? AND branch = ? AND status = 'active' AND first_seq <= ? AND last_seq >= ?",
            (
                store_text(f"invalidated: {why}"[:500]),
                scope.tenant,
                scope.thread_id,
                scope.branch,
                seq,
                seq,
            ),
            "rowcount",
        )
        changed += int(count or 0)
    return changed


def _clear_derived_metadata(where: tuple[str, str, str, int]) -> Op[None]:
    """The covering versions' metadata without what quotes the events (the artifact trail)."""
    rows = yield Stmt(
        "SELECT id, metadata FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? "
        "AND branch = ? AND covered_through_seq >= ?",
        where,
        "all",
    )
    cleared = []
    for checkpoint_id, text in rows:
        metadata = json.loads(text)
        if any(key in metadata for key in DERIVED_METADATA_KEYS):
            kept = {k: v for k, v in metadata.items() if k not in DERIVED_METADATA_KEYS}
            cleared.append((json.dumps(kept), checkpoint_id))
    if cleared:
        yield Stmt("UPDATE ctx_checkpoints SET metadata = ? WHERE id = ?", many=cleared)


def edit_visibility(
    d: Dialect, scope: Scope, event_ids: Sequence[str], now: dt.datetime, *, kind: str
) -> Op[int]:
    """Hide, show or delete events by id in the scope's view (a shared row: in every branch)."""
    event_ids = [store_text(i) for i in event_ids]
    if not event_ids:
        return 0
    found = yield from read_branch(d, scope)
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
    for chunk in chunks(list(dict.fromkeys(event_ids))):
        visible_filter = "" if kind == "delete" else " AND e.visible = ?"
        rows = yield Stmt(
            f"SELECT e.branch, e.seq FROM ctx_events e WHERE e.tenant = ? AND e.thread_id = ? "
            f"AND e.event_id IN ({marks(len(chunk))}) AND {clause}{visible_filter}",
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
    version = yield from _bump_edit_version(scope)
    keys = [(scope.tenant, scope.thread_id, branch, seq) for branch, seq in targets]
    if kind != "show":  # a hidden or deleted event's vector goes with it (shown: embedded again)
        yield from drop_vectors(scope, keys)
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
        yield from invalidate_covering(scope, targets, f"{kind} of event seq {seqs}")
    return len(targets)


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
    found = yield from read_branch(d, scope)
    if found is None:
        return []
    _, chain = found
    clause, params = lineage_clause(chain)
    sql = f"SELECT {EVENT_COLS} FROM ctx_events e WHERE e.tenant = ? AND e.thread_id = ? AND {clause} AND e.seq >= ?"
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
    return [event_from_row(d, row) for row in rows]


def get_event(
    d: Dialect, scope: Scope, event_id: str, include_hidden: bool
) -> Op[HistoryEvent | None]:
    """One event by id in the branch's view, or None."""
    return _get_event(d, scope, text_arg("event_id", event_id), bool(include_hidden))


def _get_event(
    d: Dialect, scope: Scope, event_id: str, include_hidden: bool
) -> Op[HistoryEvent | None]:
    found = yield from read_branch(d, scope)
    if found is None:
        return None
    clause, params = lineage_clause(found[1])
    sql = f"SELECT {EVENT_COLS} FROM ctx_events e WHERE e.tenant = ? AND e.thread_id = ? AND e.event_id = ? AND {clause}"
    args: list[Any] = [scope.tenant, scope.thread_id, store_text(event_id), *params]
    if not include_hidden:
        sql += " AND e.visible = ?"
        args.append(True)
    row = yield Stmt(sql, args, "one")
    return None if row is None else event_from_row(d, row)


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
    return [(int(row[0]), record_of(row[1], row[2] or "")) for row in rows]


def edits_since(scope: Scope, version: int) -> Op[list[tuple[int, str, int, str]]]:
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
