"""Whole-thread operations over the history store's tables and the usage ledger's: delete,
export and import (pure operation generators, run in one transaction by a store)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ctx_langgraph.core.scope import Scope
from ctx_langgraph.errors import ScopeError
from ctx_langgraph.history._ops import (
    _BRANCH_COLS,
    _CHECKPOINT_COLS,
    Op,
    _checkpoint,
    _marks,
    _record_of,
    _stored_optional,
    insert_events,
)
from ctx_langgraph.history._serde import EventRow, json_text, load_text, store_text
from ctx_langgraph.history._sql import Dialect, Stmt
from ctx_langgraph.history.types import CompactionCheckpoint
from ctx_langgraph.threads.document import (
    _LEDGER_CALL_COLS,
    _LEDGER_TOTAL_COLS,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    check_document,
)

_THREAD_TABLES = (
    "ctx_event_revisions",
    "ctx_event_edits",
    "ctx_events",
    "ctx_checkpoints",
    "ctx_branches",
    "ctx_threads",
)
_LEDGER_TABLES = ("ctx_usage_calls", "ctx_usage_totals")


def delete_thread(scope: Scope, *, ledger: bool) -> Op[dict[str, int]]:
    """Every row of one thread (all its branches), in one transaction; the usage ledger's too
    when ``ledger``. Returns the rows deleted per table."""
    tables = _THREAD_TABLES + (_LEDGER_TABLES if ledger else ())
    deleted: dict[str, int] = {}
    for table in tables:
        deleted[table] = yield Stmt(
            f"DELETE FROM {table} WHERE tenant = ? AND thread_id = ?",
            (scope.tenant, scope.thread_id),
            "rowcount",
        )
    return deleted


# --------------------------------------------------------------------------- export / import


def _iso(d: Dialect, value: Any) -> str | None:
    return None if value is None else d.from_ts(value).isoformat()


def export_thread(
    d: Dialect, scope: Scope, now: dt.datetime, *, ledger: bool
) -> Op[dict[str, Any]]:
    """One thread (every branch) as one JSON-ready document, read in one transaction."""
    key = (scope.tenant, scope.thread_id)
    thread = yield Stmt(
        "SELECT edit_version, created_at FROM ctx_threads WHERE tenant = ? AND thread_id = ?",
        key,
        "one",
    )
    if thread is None:
        raise ScopeError(f"nothing to export: {scope.tenant}/{scope.thread_id} has no history")
    branches = yield Stmt(
        f"SELECT {_BRANCH_COLS} FROM ctx_branches WHERE tenant = ? AND thread_id = ? ORDER BY branch",
        key,
        "all",
    )
    events = yield Stmt(
        "SELECT branch, seq, event_id, content, text, revision, visible, created_at FROM ctx_events "
        "WHERE tenant = ? AND thread_id = ? ORDER BY seq, branch",
        key,
        "all",
    )
    revisions = yield Stmt(
        "SELECT branch, seq, event_id, revision, content, text, replaced_at FROM ctx_event_revisions "
        "WHERE tenant = ? AND thread_id = ? ORDER BY seq, branch, revision",
        key,
        "all",
    )
    edits = yield Stmt(
        "SELECT branch, seq, edit_version, kind, created_at FROM ctx_event_edits "
        "WHERE tenant = ? AND thread_id = ? ORDER BY edit_version, branch, seq",
        key,
        "all",
    )
    versions = yield Stmt(
        f"SELECT {_CHECKPOINT_COLS} FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? "
        "ORDER BY branch, generation, created_at",
        key,
        "all",
    )
    document: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": now.isoformat(),
        "tenant": scope.tenant,
        "thread_id": scope.thread_id,
        "thread": {"edit_version": int(thread[0]), "created_at": _iso(d, thread[1])},
        "branches": [
            {
                "branch": row[0],
                "parent_branch": row[1],
                "fork_seq": row[2],
                "head_seq": int(row[3]),
                "active_checkpoint_id": row[4],
                "active_generation": int(row[5]),
                "created_at": _iso(d, row[6]),
            }
            for row in branches
        ],
        "events": [
            {
                "branch": row[0],
                "seq": int(row[1]),
                "event_id": load_text(row[2]),
                "message": _record_of(row[3], row[4]),
                "revision": int(row[5]),
                "visible": bool(row[6]),
                "created_at": _iso(d, row[7]),
            }
            for row in events
        ],
        "revisions": [
            {
                "branch": row[0],
                "seq": int(row[1]),
                "event_id": load_text(row[2]),
                "revision": int(row[3]),
                "message": _record_of(row[4], row[5]),
                "replaced_at": _iso(d, row[6]),
            }
            for row in revisions
        ],
        "edits": [
            {
                "branch": row[0],
                "seq": int(row[1]),
                "edit_version": int(row[2]),
                "kind": row[3],
                "created_at": _iso(d, row[4]),
            }
            for row in edits
        ],
        "summaries": [_checkpoint(d, row).to_json() for row in versions],
    }
    if ledger:
        calls = yield Stmt(
            f"SELECT {_LEDGER_CALL_COLS} FROM ctx_usage_calls WHERE tenant = ? AND thread_id = ? "
            "ORDER BY created_at, call_key",
            key,
            "all",
        )
        totals = yield Stmt(
            f"SELECT {_LEDGER_TOTAL_COLS} FROM ctx_usage_totals WHERE tenant = ? AND thread_id = ? "
            "ORDER BY branch, purpose, provider, model",
            key,
            "all",
        )
        names = [c.strip() for c in _LEDGER_CALL_COLS.split(",")]
        document["ledger"] = {
            "calls": [
                {
                    name: _iso(d, value) if name in ("created_at", "updated_at") else value
                    for name, value in zip(names, row, strict=True)
                }
                for row in calls
            ],
            "totals": [
                dict(zip([c.strip() for c in _LEDGER_TOTAL_COLS.split(",")], row, strict=True))
                for row in totals
            ],
        }
    return document


def _when(d: Dialect, value: str | None) -> Any:
    return None if value is None else d.ts(dt.datetime.fromisoformat(value))


def import_thread(d: Dialect, document: dict[str, Any], scope: Scope) -> Op[dict[str, int]]:
    """Write an exported thread into ``scope``'s tenant and thread id, which must be empty."""
    from langchain_core.messages import messages_from_dict

    from ctx_langgraph.history._serde import message_to_row

    check_document(document, d)  # the whole document, before anything is written
    key = (scope.tenant, scope.thread_id)
    taken = yield Stmt(
        "SELECT 1 FROM ctx_threads WHERE tenant = ? AND thread_id = ?" + d.for_update, key, "one"
    )
    if taken is not None:
        raise ScopeError(
            f"{scope.tenant}/{scope.thread_id} already has history: import into an empty thread "
            "(delete_thread first to replace it)"
        )

    def row_of(record: dict[str, Any], event_id: str) -> EventRow:
        [message] = messages_from_dict([record])
        row = message_to_row(message)
        if row.event_id != event_id:
            raise ValueError(f"event {event_id!r}: its message carries id {row.event_id!r}")
        return row

    thread = document["thread"]
    yield Stmt(
        "INSERT INTO ctx_threads (tenant, thread_id, edit_version, created_at) VALUES (?, ?, ?, ?)",
        (*key, int(thread["edit_version"]), _when(d, thread["created_at"])),
    )
    yield Stmt(
        f"INSERT INTO ctx_branches (tenant, thread_id, {_BRANCH_COLS}) VALUES ({_marks(9)})",
        many=[
            (
                *key,
                b["branch"],
                b["parent_branch"],
                b["fork_seq"],
                int(b["head_seq"]),
                b["active_checkpoint_id"],
                int(b["active_generation"]),
                _when(d, b["created_at"]),
            )
            for b in document["branches"]
        ],
    )
    rows = [(e, row_of(e["message"], e["event_id"])) for e in document["events"]]
    if rows:  # written as append writes them: stored text, search document
        yield insert_events(
            *key,
            [
                (
                    e["branch"],
                    int(e["seq"]),
                    row,
                    int(e["revision"]),
                    bool(e["visible"]),
                    _when(d, e["created_at"]),
                )
                for e, row in rows
            ],
        )
    old = [(r, row_of(r["message"], r["event_id"])) for r in document["revisions"]]
    if old:
        yield Stmt(
            "INSERT INTO ctx_event_revisions (tenant, thread_id, branch, seq, event_id, revision, "
            f"content, content_hash, text, replaced_at) VALUES ({_marks(10)})",
            many=[
                (
                    *key,
                    r["branch"],
                    int(r["seq"]),
                    store_text(r["event_id"]),
                    int(r["revision"]),
                    row.content_json,
                    row.content_hash,
                    store_text(row.text),
                    _when(d, r["replaced_at"]),
                )
                for r, row in old
            ],
        )
    if document["edits"]:
        yield Stmt(
            "INSERT INTO ctx_event_edits (tenant, thread_id, branch, seq, edit_version, kind, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            many=[
                (
                    *key,
                    e["branch"],
                    int(e["seq"]),
                    int(e["edit_version"]),
                    e["kind"],
                    _when(d, e["created_at"]),
                )
                for e in document["edits"]
            ],
        )
    summaries = [CompactionCheckpoint.from_json(item) for item in document["summaries"]]
    if summaries:
        yield Stmt(
            f"INSERT INTO ctx_checkpoints ({_CHECKPOINT_COLS}) VALUES ({_marks(22)})",
            many=[
                (
                    c.id,
                    *key,
                    c.scope.branch,
                    c.generation,
                    c.parent_id,
                    c.first_seq,
                    c.covered_through_seq,
                    _stored_optional(c.first_kept_event_id),
                    c.source_revision,
                    c.range_hash,
                    _stored_optional(c.summary_text),
                    None if c.provider_state is None else json.dumps(c.provider_state),
                    c.format_version,
                    _stored_optional(c.summarizer_id),
                    json_text([fact.to_json() for fact in c.key_facts]),
                    c.summary_tokens,
                    c.status,
                    _stored_optional(c.error),
                    json.dumps(c.metadata),
                    d.ts(c.created_at),
                    None if c.committed_at is None else d.ts(c.committed_at),
                )
                for c in summaries
            ],
        )
    counts = {
        "branches": len(document["branches"]),
        "events": len(rows),
        "revisions": len(old),
        "summaries": len(summaries),
    }
    ledger = document.get("ledger")
    if ledger:
        call_names = [c.strip() for c in _LEDGER_CALL_COLS.split(",")]
        total_names = [c.strip() for c in _LEDGER_TOTAL_COLS.split(",")]
        if ledger["calls"]:
            yield Stmt(
                f"INSERT INTO ctx_usage_calls (tenant, thread_id, {_LEDGER_CALL_COLS}) "
                f"VALUES ({_marks(len(call_names) + 2)})",
                many=[
                    (
                        *key,
                        *(
                            _when(d, call[n]) if n in ("created_at", "updated_at") else call[n]
                            for n in call_names
                        ),
                    )
                    for call in ledger["calls"]
                ],
            )
        if ledger["totals"]:
            yield Stmt(
                f"INSERT INTO ctx_usage_totals (tenant, thread_id, {_LEDGER_TOTAL_COLS}) "
                f"VALUES ({_marks(len(total_names) + 2)})",
                many=[(*key, *(total[n] for n in total_names)) for total in ledger["totals"]],
            )
        counts["ledger_calls"] = len(ledger["calls"])
    return counts
