"""The history store's vector index (schema v10): one embedding per event and per segment,
derived data like the full-text index. A vector names the model that made it (``model``: the
index's model id and dimensions) and, for an event, the revision it was made from, so a vector
of another model or of an earlier text is never searched (docs/design.md §4)."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Steps

__all__ = ["POSTGRES", "SQLITE"]


def _vectors(integer: str, blob: str) -> list[str]:
    events = f"""CREATE TABLE ctx_event_vectors (
        event_pk {integer} PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        model TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        vector {blob} NOT NULL
    )"""
    segments = f"""CREATE TABLE ctx_segment_vectors (
        segment_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        model TEXT NOT NULL,
        vector {blob} NOT NULL
    )"""
    return [
        events,
        "CREATE INDEX ctx_event_vectors_by_thread ON ctx_event_vectors (tenant, thread_id)",
        segments,
        "CREATE INDEX ctx_segment_vectors_by_thread ON ctx_segment_vectors (tenant, thread_id)",
    ]


SQLITE: Steps = {10: list(_vectors("INTEGER", "BLOB"))}
POSTGRES: Steps = {10: list(_vectors("BIGINT", "BYTEA"))}
