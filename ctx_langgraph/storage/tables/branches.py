"""The history store's threads and branches: one row per thread (its edit version), one per
branch (lineage, head seq, active summary pointer)."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Step, Steps

__all__ = ["POSTGRES", "SQLITE"]


def _tables(big: str, ts: str) -> list[Step]:
    return [
        f"""CREATE TABLE ctx_threads (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        edit_version {big} NOT NULL DEFAULT 0,
        created_at {ts} NOT NULL,
        PRIMARY KEY (tenant, thread_id)
    )""",
        f"""CREATE TABLE ctx_branches (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        parent_branch TEXT,
        fork_seq {big},
        head_seq {big} NOT NULL DEFAULT 0,
        active_checkpoint_id TEXT,
        active_generation {big} NOT NULL DEFAULT 0,
        created_at {ts} NOT NULL,
        PRIMARY KEY (tenant, thread_id, branch)
    )""",
    ]


SQLITE: Steps = {1: _tables("INTEGER", "REAL")}
POSTGRES: Steps = {1: _tables("BIGINT", "TIMESTAMPTZ")}
