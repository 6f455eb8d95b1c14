"""The usage ledger's rows of one thread for whole-thread operations: delete, export and
import (operation generators run in the caller's transaction). Import copies the totals as
exported: they were booked by difference when the calls were recorded."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ctx_langgraph.core.scope import Scope
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt, marks
from ctx_langgraph.usage.types import COUNT_FIELDS

__all__ = [
    "CALL_COLUMNS",
    "LEDGER_TABLES",
    "TOTAL_COLUMNS",
    "delete_rows",
    "export_rows",
    "import_rows",
    "note_request_op",
]

LEDGER_TABLES = ("ctx_usage_calls", "ctx_usage_totals", "ctx_usage_requests")
OPTIONAL_COLUMNS = {"cacheable_prefix": None, "makeup": None}
"""Exported fields added later, with the value a call of an older export gets (totals: 0)."""
CALL_COLUMNS = (
    "call_key",
    "branch",
    "purpose",
    "provider",
    "model",
    "status",
    "version",
    "response_id",
    *COUNT_FIELDS,
    "cost_nano_usd",
    "raw",
    "created_at",
    "updated_at",
    "cacheable_prefix",
    "makeup",
)
"""The fields of an exported call, in column order."""
TOTAL_COLUMNS = (
    "branch",
    "purpose",
    "provider",
    "model",
    "calls",
    "unknown_calls",
    *COUNT_FIELDS,
    "cost_nano_usd",
    "cost_unknown_calls",
    "cacheable_prefix",
)
_TIMES = frozenset({"created_at", "updated_at"})
_CALLS = ", ".join(CALL_COLUMNS)
_TOTALS = ", ".join(TOTAL_COLUMNS)


def delete_rows(scope: Scope) -> Op[dict[str, int]]:
    """Delete the ledger's rows of one thread; the rows deleted per table."""
    deleted: dict[str, int] = {}
    for table in LEDGER_TABLES:
        deleted[table] = yield Stmt(
            f"DELETE FROM {table} WHERE tenant = ? AND thread_id = ?",
            (scope.tenant, scope.thread_id),
            "rowcount",
        )
    return deleted


def export_rows(d: Dialect, scope: Scope) -> Op[dict[str, list[dict[str, Any]]]]:
    """The ledger's rows of one thread: ``{"calls": [...], "totals": [...]}``."""
    key = (scope.tenant, scope.thread_id)
    calls = yield Stmt(
        f"SELECT {_CALLS} FROM ctx_usage_calls WHERE tenant = ? AND thread_id = ? "
        "ORDER BY created_at, call_key",
        key,
        "all",
    )
    totals = yield Stmt(
        f"SELECT {_TOTALS} FROM ctx_usage_totals WHERE tenant = ? AND thread_id = ? "
        "ORDER BY branch, purpose, provider, model",
        key,
        "all",
    )
    return {
        "calls": [
            {
                name: d.from_ts(value).isoformat()
                if name in _TIMES and value is not None
                else value
                for name, value in zip(CALL_COLUMNS, row, strict=True)
            }
            for row in calls
        ],
        "totals": [dict(zip(TOTAL_COLUMNS, row, strict=True)) for row in totals],
    }


def _value(d: Dialect, call: Mapping[str, Any], name: str) -> Any:
    if name in _TIMES:
        return None if call[name] is None else d.ts(dt.datetime.fromisoformat(call[name]))
    return call.get(name, OPTIONAL_COLUMNS[name]) if name in OPTIONAL_COLUMNS else call[name]


def import_rows(d: Dialect, ledger: Mapping[str, Any], scope: Scope) -> Op[int]:
    """Write a checked export's ``"ledger"`` part as the thread's rows; the calls written."""
    key = (scope.tenant, scope.thread_id)
    if ledger["calls"]:
        yield Stmt(
            f"INSERT INTO ctx_usage_calls (tenant, thread_id, {_CALLS}) "
            f"VALUES ({marks(len(CALL_COLUMNS) + 2)})",
            many=[(*key, *(_value(d, call, n) for n in CALL_COLUMNS)) for call in ledger["calls"]],
        )
    if ledger["totals"]:
        yield Stmt(
            f"INSERT INTO ctx_usage_totals (tenant, thread_id, {_TOTALS}) "
            f"VALUES ({marks(len(TOTAL_COLUMNS) + 2)})",
            many=[
                (
                    *key,
                    *(
                        total.get(n, 0) if n in OPTIONAL_COLUMNS else total[n]
                        for n in TOTAL_COLUMNS
                    ),
                )
                for total in ledger["totals"]
            ],
        )
    return len(ledger["calls"])


_SWAP_REQUEST = (
    "INSERT INTO ctx_usage_requests (tenant, thread_id, branch, digests, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, thread_id, branch) DO UPDATE SET "
    "digests = excluded.digests, updated_at = excluded.updated_at"
)


def note_request_op(
    d: Dialect, scope: Scope, digests: tuple[str, ...], now: dt.datetime
) -> Op[tuple[str, ...] | None]:
    """Read the thread's last request digests under a row lock and replace them."""
    key = (scope.tenant, scope.thread_id, scope.branch)
    row = yield Stmt(
        "SELECT digests FROM ctx_usage_requests WHERE tenant = ? AND thread_id = ? AND branch = ?"
        + d.for_update,
        key,
        "one",
    )
    yield Stmt(_SWAP_REQUEST, (*key, " ".join(digests), d.ts(now)))
    if row is None:
        return None
    return tuple(str(row[0]).split())
