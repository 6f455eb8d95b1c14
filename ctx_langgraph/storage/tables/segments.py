"""The history store's segment index: summaries of separate history ranges (events 1-100,
101-200, ...), each with its source range, revision and status, searched by the lookup and
never loaded into a prompt by default."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Step, Steps

__all__ = ["POSTGRES", "SQLITE"]


def _segments(integer: str, timestamp: str) -> list[Step]:
    return [
        f"""CREATE TABLE ctx_segments (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        first_seq {integer} NOT NULL,
        last_seq {integer} NOT NULL,
        generation {integer} NOT NULL,
        source_revision {integer} NOT NULL,
        range_hash TEXT NOT NULL,
        summary_text TEXT,
        key_facts TEXT NOT NULL,
        summarizer_id TEXT,
        summary_tokens INTEGER,
        status TEXT NOT NULL,
        error TEXT,
        metadata TEXT NOT NULL,
        created_at {timestamp} NOT NULL
    )""",
        "CREATE INDEX ctx_segments_by_scope ON ctx_segments (tenant, thread_id, branch, first_seq)",
    ]


SQLITE: Steps = {8: _segments("INTEGER", "REAL")}
POSTGRES: Steps = {8: _segments("BIGINT", "TIMESTAMPTZ")}
