"""The history store's summary versions (compaction checkpoints: candidates, the active one,
superseded and failed ones)."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Steps

__all__ = ["POSTGRES", "SQLITE"]

_SQLITE_CHECKPOINTS = """CREATE TABLE ctx_checkpoints (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        generation INTEGER NOT NULL,
        parent_id TEXT,
        first_seq INTEGER NOT NULL,
        covered_through_seq INTEGER NOT NULL,
        first_kept_event_id TEXT,
        source_revision INTEGER NOT NULL,
        range_hash TEXT NOT NULL,
        summary_text TEXT,
        provider_state TEXT,
        format_version INTEGER NOT NULL,
        summarizer_id TEXT,
        key_facts TEXT NOT NULL,
        summary_tokens INTEGER,
        status TEXT NOT NULL,
        error TEXT,
        metadata TEXT NOT NULL,
        created_at REAL NOT NULL,
        committed_at REAL
    )"""
_SQLITE_CHECKPOINTS_INDEX = "CREATE INDEX ctx_checkpoints_by_scope ON ctx_checkpoints (tenant, thread_id, branch, generation)"
_POSTGRES_CHECKPOINTS = """CREATE TABLE ctx_checkpoints (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        generation BIGINT NOT NULL,
        parent_id TEXT,
        first_seq BIGINT NOT NULL,
        covered_through_seq BIGINT NOT NULL,
        first_kept_event_id TEXT,
        source_revision BIGINT NOT NULL,
        range_hash TEXT NOT NULL,
        summary_text TEXT,
        provider_state TEXT,
        format_version INTEGER NOT NULL,
        summarizer_id TEXT,
        key_facts TEXT NOT NULL,
        summary_tokens INTEGER,
        status TEXT NOT NULL,
        error TEXT,
        metadata TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        committed_at TIMESTAMPTZ
    )"""
_POSTGRES_CHECKPOINTS_INDEX = "CREATE INDEX ctx_checkpoints_by_scope ON ctx_checkpoints (tenant, thread_id, branch, generation)"

SQLITE: Steps = {
    1: [_SQLITE_CHECKPOINTS, _SQLITE_CHECKPOINTS_INDEX],
}

POSTGRES: Steps = {
    1: [_POSTGRES_CHECKPOINTS, _POSTGRES_CHECKPOINTS_INDEX],
}
