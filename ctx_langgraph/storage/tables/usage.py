"""The usage ledger's tables: one row per real model call, running totals per key."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Step, Steps

__all__ = ["COUNT_COLUMNS", "POSTGRES", "SQLITE"]

COUNT_COLUMNS = (
    "input_total",
    "input_uncached",
    "cache_read",
    "cache_write",
    "output",
    "reasoning",
)
"""The token count columns of both ledger tables, in their order."""


def _ledger_tables(*, integer: str, timestamp: str) -> list[Step]:
    """Version 2: the usage ledger (one row per real call, running totals per key)."""
    counts = ", ".join(f"{name} {integer}" for name in COUNT_COLUMNS)
    total_counts = ", ".join(f"{name} {integer} NOT NULL DEFAULT 0" for name in COUNT_COLUMNS)
    return [
        f"""CREATE TABLE ctx_usage_calls (
            call_key TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            branch TEXT NOT NULL,
            purpose TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            status TEXT NOT NULL,
            version {integer} NOT NULL,
            response_id TEXT,
            {counts},
            cost_nano_usd {integer},
            raw TEXT NOT NULL,
            created_at {timestamp} NOT NULL,
            updated_at {timestamp} NOT NULL
        )""",
        "CREATE INDEX ctx_usage_calls_by_thread ON ctx_usage_calls (tenant, thread_id, branch)",
        f"""CREATE TABLE ctx_usage_totals (
            tenant TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            branch TEXT NOT NULL,
            purpose TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            calls {integer} NOT NULL DEFAULT 0,
            unknown_calls {integer} NOT NULL DEFAULT 0,
            {total_counts},
            cost_nano_usd {integer} NOT NULL DEFAULT 0,
            cost_unknown_calls {integer} NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, thread_id, branch, purpose, provider, model)
        )""",
    ]


def _prefix_tables(*, integer: str, timestamp: str) -> list[Step]:
    """Version 7: each call's cacheable prefix, its sum in the totals, and the part digests of
    each thread's last request."""
    return [
        f"ALTER TABLE ctx_usage_calls ADD COLUMN cacheable_prefix {integer}",
        f"ALTER TABLE ctx_usage_totals ADD COLUMN cacheable_prefix {integer} NOT NULL DEFAULT 0",
        f"""CREATE TABLE ctx_usage_requests (
            tenant TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            branch TEXT NOT NULL,
            digests TEXT NOT NULL,
            updated_at {timestamp} NOT NULL,
            PRIMARY KEY (tenant, thread_id, branch)
        )""",
    ]


# v9: an answer call's request make-up as JSON text (ctx_langgraph.makeup), else NULL
_MAKEUP_COLUMN = "ALTER TABLE ctx_usage_calls ADD COLUMN makeup TEXT"

SQLITE: Steps = {
    2: _ledger_tables(integer="INTEGER", timestamp="REAL"),
    7: _prefix_tables(integer="INTEGER", timestamp="REAL"),
    9: [_MAKEUP_COLUMN],
}
POSTGRES: Steps = {
    2: _ledger_tables(integer="BIGINT", timestamp="TIMESTAMPTZ"),
    7: _prefix_tables(integer="BIGINT", timestamp="TIMESTAMPTZ"),
    9: [_MAKEUP_COLUMN],
}
