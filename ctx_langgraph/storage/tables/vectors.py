"""The history store's vector index (schema v10): each event's embeddings (one row, its vectors
one after the other), derived data like the full-text index, and each thread's
``vector_version`` (bumped by every write that adds or drops vectors). A row names the model
that made it (``model``: the index's model id and dimensions) and the event revision it was
made from, so vectors of another model or of an earlier text are never searched
(docs/design.md §4)."""

from __future__ import annotations

from ctx_langgraph.storage.tables import Steps

__all__ = ["BUMP_VECTOR_VERSION", "POSTGRES", "SQLITE"]

BUMP_VECTOR_VERSION = (
    "UPDATE ctx_threads SET vector_version = vector_version + 1 WHERE tenant = ? AND thread_id = ?"
)
"""Run in every transaction that writes or drops vectors of a thread: a search's cache of the
thread's vectors is good while the version is the one it was read at."""


def _vectors(integer: str, blob: str) -> list[str]:
    events = f"""CREATE TABLE ctx_event_vectors (
        event_pk {integer} PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq {integer} NOT NULL,
        revision INTEGER NOT NULL,
        model TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        vector {blob} NOT NULL
    )"""
    return [
        f"ALTER TABLE ctx_threads ADD COLUMN vector_version {integer} NOT NULL DEFAULT 0",
        events,
        # covering: a search after a turn lists a thread's (event, revision) from the index
        # alone, without touching the rows (each about a page of vectors)
        "CREATE INDEX ctx_event_vectors_by_thread ON ctx_event_vectors "
        "(tenant, thread_id, model, event_pk, revision)",
    ]


SQLITE: Steps = {10: list(_vectors("INTEGER", "BLOB"))}
POSTGRES: Steps = {10: list(_vectors("BIGINT", "BYTEA"))}
