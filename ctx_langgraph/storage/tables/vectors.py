"""The history store's vector index (schema v10): each event's embeddings in one row, naming the
model and event revision they were made from, and each thread's ``vector_version``."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Step, Steps

__all__ = ["BUMP_VECTOR_VERSION", "POSTGRES", "SQLITE"]

BUMP_VECTOR_VERSION = (
    "UPDATE ctx_threads SET vector_version = vector_version + 1 WHERE tenant = ? AND thread_id = ?"
)
"""Run in every transaction that writes or drops vectors of a thread (invalidates caches)."""


def _vectors(integer: str, blob: str) -> list[Step]:
    return [
        f"ALTER TABLE ctx_threads ADD COLUMN vector_version {integer} NOT NULL DEFAULT 0",
        f"""CREATE TABLE ctx_event_vectors (
        event_pk {integer} PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq {integer} NOT NULL,
        revision INTEGER NOT NULL,
        model TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        vector {blob} NOT NULL
    )""",
        # covering: a search lists a thread's (event, revision) without reading the rows
        "CREATE INDEX ctx_event_vectors_by_thread ON ctx_event_vectors "
        "(tenant, thread_id, model, event_pk, revision)",
    ]


SQLITE: Steps = {10: _vectors("INTEGER", "BLOB")}
POSTGRES: Steps = {10: _vectors("BIGINT", "BYTEA")}
