"""The history store's threads and branches: one row per thread (its edit version), one per
branch (lineage, head seq, active summary pointer)."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Steps

__all__ = ["POSTGRES", "SQLITE"]

_SQLITE_THREADS = """CREATE TABLE ctx_threads (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        edit_version INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        PRIMARY KEY (tenant, thread_id)
    )"""
_SQLITE_BRANCHES = """CREATE TABLE ctx_branches (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        parent_branch TEXT,
        fork_seq INTEGER,
        head_seq INTEGER NOT NULL DEFAULT 0,
        active_checkpoint_id TEXT,
        active_generation INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        PRIMARY KEY (tenant, thread_id, branch)
    )"""
_POSTGRES_THREADS = """CREATE TABLE ctx_threads (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        edit_version BIGINT NOT NULL DEFAULT 0,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (tenant, thread_id)
    )"""
_POSTGRES_BRANCHES = """CREATE TABLE ctx_branches (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        parent_branch TEXT,
        fork_seq BIGINT,
        head_seq BIGINT NOT NULL DEFAULT 0,
        active_checkpoint_id TEXT,
        active_generation BIGINT NOT NULL DEFAULT 0,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (tenant, thread_id, branch)
    )"""

SQLITE: Steps = {
    1: [_SQLITE_THREADS, _SQLITE_BRANCHES],
}

POSTGRES: Steps = {
    1: [_POSTGRES_THREADS, _POSTGRES_BRANCHES],
}
