"""Whole-thread operations over the history store's tables and the usage ledger's: delete,
export and import (operations run in one transaction by a store)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from langchain_core.messages import messages_from_dict

from ctx_langgraph.core.scope import Scope
from ctx_langgraph.errors import ScopeError
from ctx_langgraph.history.branches import delete_thread as history_rows_deleted
from ctx_langgraph.history.events import insert_events
from ctx_langgraph.history.rows import (
    BRANCH_COLS,
    CHECKPOINT_COLS,
    SEGMENT_COLS,
    EventRow,
    checkpoint_from_row,
    message_to_row,
    record_of,
    segment_from_row,
)
from ctx_langgraph.history.segments import segment_values
from ctx_langgraph.history.summaries import checkpoint_values
from ctx_langgraph.history.types import CompactionCheckpoint, Segment
from ctx_langgraph.storage.codec import load_text, store_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt, marks
from ctx_langgraph.threads.document import EXPORT_FORMAT, EXPORT_VERSION, check_document
from ctx_langgraph.usage import ledger_rows

__all__ = ["delete_thread", "export_thread", "import_thread"]

_Key = tuple[str, str]  # (tenant, thread_id)


def delete_thread(scope: Scope, *, ledger: bool) -> Op[dict[str, int]]:
    """Delete every row of one thread (the ledger's too when ``ledger``); rows per table."""
    deleted = yield from history_rows_deleted(scope)
    if ledger:
        deleted.update((yield from ledger_rows.delete_rows(scope)))
    return deleted


# --------------------------------------------------------------------------- export


def _iso(d: Dialect, value: Any) -> str | None:
    return None if value is None else d.from_ts(value).isoformat()


def export_thread(
    d: Dialect, scope: Scope, now: dt.datetime, *, ledger: bool
) -> Op[dict[str, Any]]:
    """One thread (every branch) as one JSON-ready document."""
    key = (scope.tenant, scope.thread_id)
    thread = yield from _exported_thread(d, scope)
    branches = yield from _exported_rows(d, key, "ctx_branches", _BRANCH_FIELDS, "branch")
    events = yield from _exported_rows(d, key, "ctx_events", _EVENT_FIELDS, "seq, branch")
    revisions = yield from _exported_rows(
        d, key, "ctx_event_revisions", _REVISION_FIELDS, "seq, branch, revision"
    )
    edits = yield from _exported_rows(
        d, key, "ctx_event_edits", _EDIT_FIELDS, "edit_version, branch, seq"
    )
    summaries = yield from _exported_summaries(d, key)
    segments = yield from _exported_segments(d, key)
    document: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": now.isoformat(),
        "tenant": scope.tenant,
        "thread_id": scope.thread_id,
        "thread": thread,
        "branches": branches,
        "events": events,
        "revisions": revisions,
        "edits": edits,
        "summaries": summaries,
        "segments": segments,
    }
    if ledger:
        document["ledger"] = yield from ledger_rows.export_rows(d, scope)
    return document


def _exported_thread(d: Dialect, scope: Scope) -> Op[dict[str, Any]]:
    thread = yield Stmt(
        "SELECT edit_version, created_at FROM ctx_threads WHERE tenant = ? AND thread_id = ?",
        (scope.tenant, scope.thread_id),
        "one",
    )
    if thread is None:
        raise ScopeError(f"nothing to export: {scope.tenant}/{scope.thread_id} has no history")
    return {"edit_version": int(thread[0]), "created_at": _iso(d, thread[1])}


class _Field(NamedTuple):
    """One key of an exported row, read from ``columns`` by ``read`` (None: as stored)."""

    key: str
    read: Callable[..., Any] | None
    columns: tuple[str, ...]


def _field(key: str, read: Callable[..., Any] | None = None, *columns: str) -> _Field:
    return _Field(key, read, columns or (key,))


_BRANCH_FIELDS = (
    _field("branch"),
    _field("parent_branch"),
    _field("fork_seq"),
    _field("head_seq", int),
    _field("active_checkpoint_id"),
    _field("active_generation", int),
    _field("created_at", _iso),
)
_EVENT_FIELDS = (
    _field("branch"),
    _field("seq", int),
    _field("event_id", load_text),
    _field("message", record_of, "content", "text"),
    _field("revision", int),
    _field("visible", bool),
    _field("created_at", _iso),
)
_REVISION_FIELDS = (
    _field("branch"),
    _field("seq", int),
    _field("event_id", load_text),
    _field("revision", int),
    _field("message", record_of, "content", "text"),
    _field("replaced_at", _iso),
)
_EDIT_FIELDS = (
    _field("branch"),
    _field("seq", int),
    _field("edit_version", int),
    _field("kind"),
    _field("created_at", _iso),
)


def _exported_rows(
    d: Dialect, key: _Key, table: str, fields: Sequence[_Field], order: str
) -> Op[list[dict[str, Any]]]:
    columns = ", ".join(column for field in fields for column in field.columns)
    rows = yield Stmt(
        f"SELECT {columns} FROM {table} WHERE tenant = ? AND thread_id = ? ORDER BY {order}",
        key,
        "all",
    )
    return [_exported_row(d, row, fields) for row in rows]


def _exported_row(d: Dialect, row: Sequence[Any], fields: Sequence[_Field]) -> dict[str, Any]:
    exported: dict[str, Any] = {}
    at = 0
    for key, read, columns in fields:
        values = row[at : at + len(columns)]
        at += len(columns)
        if read is None:
            exported[key] = values[0]
        elif read is _iso:
            exported[key] = _iso(d, values[0])
        else:
            exported[key] = read(*values)
    return exported


def _exported_segments(d: Dialect, key: _Key) -> Op[list[dict[str, Any]]]:
    rows = yield Stmt(
        f"SELECT {SEGMENT_COLS} FROM ctx_segments WHERE tenant = ? AND thread_id = ? "
        "ORDER BY branch, first_seq, generation",
        key,
        "all",
    )
    return [segment_from_row(d, row).to_json() for row in rows]


def _exported_summaries(d: Dialect, key: _Key) -> Op[list[dict[str, Any]]]:
    rows = yield Stmt(
        f"SELECT {CHECKPOINT_COLS} FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? "
        "ORDER BY branch, generation, created_at",
        key,
        "all",
    )
    return [checkpoint_from_row(d, row).to_json() for row in rows]


# --------------------------------------------------------------------------- import


def _when(d: Dialect, value: str | None) -> Any:
    return None if value is None else d.ts(dt.datetime.fromisoformat(value))


def import_thread(d: Dialect, document: dict[str, Any], scope: Scope) -> Op[dict[str, int]]:
    """Write an exported thread into ``scope``'s (empty) tenant and thread id."""
    check_document(document, d)  # the whole document, before anything is written
    key = (scope.tenant, scope.thread_id)
    yield from _claim_thread(d, scope)
    yield from _insert_thread(d, key, document["thread"])
    yield from _insert_branches(d, key, document["branches"])
    events = yield from _insert_events(d, key, document["events"])
    revisions = yield from _insert_revisions(d, key, document["revisions"])
    yield from _insert_edits(d, key, document["edits"])
    summaries = yield from _insert_summaries(d, key, document["summaries"])
    segments = [Segment.from_json(item) for item in document.get("segments") or ()]
    if segments:
        yield Stmt(
            f"INSERT INTO ctx_segments ({SEGMENT_COLS}) VALUES ({marks(17)})",
            many=[
                segment_values(d, replace(seg, scope=Scope(key[1], key[0], seg.scope.branch)))
                for seg in segments
            ],
        )
    counts = {
        "branches": len(document["branches"]),
        "events": events,
        "revisions": revisions,
        "summaries": summaries,
        "segments": len(segments),
    }
    ledger = document.get("ledger")
    if ledger:
        counts["ledger_calls"] = yield from ledger_rows.import_rows(d, ledger, scope)
    return counts


def _claim_thread(d: Dialect, scope: Scope) -> Op[None]:
    taken = yield Stmt(
        "SELECT 1 FROM ctx_threads WHERE tenant = ? AND thread_id = ?" + d.for_update,
        (scope.tenant, scope.thread_id),
        "one",
    )
    if taken is not None:
        raise ScopeError(
            f"{scope.tenant}/{scope.thread_id} already has history: import into an empty thread "
            "(delete_thread first to replace it)"
        )


def _row_of(record: dict[str, Any], event_id: str) -> EventRow:
    [message] = messages_from_dict([record])
    row = message_to_row(message)
    if row.event_id != event_id:
        raise ValueError(f"event {event_id!r}: its message carries id {row.event_id!r}")
    return row


def _insert_thread(d: Dialect, key: _Key, thread: Mapping[str, Any]) -> Op[None]:
    yield Stmt(
        "INSERT INTO ctx_threads (tenant, thread_id, edit_version, created_at) VALUES (?, ?, ?, ?)",
        (*key, int(thread["edit_version"]), _when(d, thread["created_at"])),
    )


def _insert_branches(d: Dialect, key: _Key, branches: Sequence[Mapping[str, Any]]) -> Op[None]:
    yield Stmt(
        f"INSERT INTO ctx_branches (tenant, thread_id, {BRANCH_COLS}) VALUES ({marks(9)})",
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
            for b in branches
        ],
    )


def _insert_events(d: Dialect, key: _Key, events: Sequence[Mapping[str, Any]]) -> Op[int]:
    rows = [(e, _row_of(e["message"], e["event_id"])) for e in events]
    if rows:
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
    return len(rows)


def _insert_revisions(d: Dialect, key: _Key, revisions: Sequence[Mapping[str, Any]]) -> Op[int]:
    old = [(r, _row_of(r["message"], r["event_id"])) for r in revisions]
    if old:
        yield Stmt(
            "INSERT INTO ctx_event_revisions (tenant, thread_id, branch, seq, event_id, revision, "
            f"content, content_hash, text, replaced_at) VALUES ({marks(10)})",
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
    return len(old)


def _insert_edits(d: Dialect, key: _Key, edits: Sequence[Mapping[str, Any]]) -> Op[None]:
    if edits:
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
                for e in edits
            ],
        )


def _insert_summaries(d: Dialect, key: _Key, items: Sequence[Mapping[str, Any]]) -> Op[int]:
    summaries = [CompactionCheckpoint.from_json(item) for item in items]
    if summaries:
        yield Stmt(
            f"INSERT INTO ctx_checkpoints ({CHECKPOINT_COLS}) VALUES ({marks(22)})",
            many=[checkpoint_values(d, key, c) for c in summaries],
        )
    return len(summaries)
