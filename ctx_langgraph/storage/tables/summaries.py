"""The history store's summary versions (compaction checkpoints: candidates, the active one,
superseded and failed ones)."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Step, Steps

__all__ = ["POSTGRES", "SQLITE"]


def _tables(big: str, ts: str) -> list[Step]:
    return [
        f"""CREATE TABLE ctx_checkpoints (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        generation {big} NOT NULL,
        parent_id TEXT,
        first_seq {big} NOT NULL,
        covered_through_seq {big} NOT NULL,
        first_kept_event_id TEXT,
        source_revision {big} NOT NULL,
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
        created_at {ts} NOT NULL,
        committed_at {ts}
    )""",
        "CREATE INDEX ctx_checkpoints_by_scope ON ctx_checkpoints "
        "(tenant, thread_id, branch, generation)",
    ]


SQLITE: Steps = {1: _tables("INTEGER", "REAL")}
POSTGRES: Steps = {1: _tables("BIGINT", "TIMESTAMPTZ")}
