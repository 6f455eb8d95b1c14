"""The history store's events: one row per event (its message record and searchable text),
earlier revisions, and the edit log (hide, show, delete, revise)."""

from __future__ import annotations

from ctx_langgraph.storage.statements import Op, Stmt
from ctx_langgraph.storage.tables import Backfill, Step, Steps
from ctx_langgraph.storage.tables.search import (
    FTS_TRIGGERS,
    SQLITE_FTS_TRIGGERS,
    SQLITE_SEARCH_VIEW,
)

__all__ = ["BACKFILL_BINARY_HASHES", "POSTGRES", "SQLITE"]

_IDENTITY = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
# PostgreSQL v1 stored the tsvector (dropped by v3): punctuation became a space, plus the
# thread's scope_key as one more lexeme
_PG_TSV = """tsv TSVECTOR GENERATED ALWAYS AS (
            to_tsvector('simple', regexp_replace(text, '[[:punct:][:space:]]+', ' ', 'g'))
            || array_to_tsvector(ARRAY[scope_key])
        ) STORED,"""


def _events(
    table: str, pk: str, big: str, ts: str, visible: str, content_hash: str, extra: str, unique: str
) -> str:
    return f"""CREATE TABLE {table} (
        pk {pk},
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq {big} NOT NULL,
        event_id TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL,
        content_hash {content_hash} NOT NULL,
        text TEXT NOT NULL,
        tool_call_ids TEXT NOT NULL,
        tool_names TEXT NOT NULL,
        revision INTEGER NOT NULL DEFAULT 1,
        visible {visible},
        created_at {ts} NOT NULL,
        {extra}
        UNIQUE (tenant, thread_id, branch, seq){unique}
    )"""


def _revisions(table: str, big: str, ts: str, content_hash: str = "TEXT", text: str = "") -> str:
    return f"""CREATE TABLE {table} (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq {big} NOT NULL,
        event_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        content TEXT NOT NULL,
        content_hash {content_hash} NOT NULL,
        replaced_at {ts} NOT NULL,
        {text}PRIMARY KEY (tenant, thread_id, branch, seq, revision)
    )"""


def _v1(pg: bool) -> list[Step]:
    big, ts = ("BIGINT", "TIMESTAMPTZ") if pg else ("INTEGER", "REAL")
    visible = "BOOLEAN NOT NULL DEFAULT TRUE" if pg else "INTEGER NOT NULL DEFAULT 1"
    unique = ",\n        UNIQUE (tenant, thread_id, branch, event_id)"
    pk = _IDENTITY if pg else "INTEGER PRIMARY KEY"
    return [
        _events("ctx_events", pk, big, ts, visible, "TEXT", _PG_TSV if pg else "", unique),
        "CREATE INDEX ctx_events_by_event_id ON ctx_events (tenant, thread_id, event_id)",
        *(["CREATE INDEX ctx_events_tsv ON ctx_events USING GIN (tsv)"] if pg else []),
        _revisions("ctx_event_revisions", big, ts),
        f"""CREATE TABLE ctx_event_edits (
        id {_IDENTITY if pg else "INTEGER PRIMARY KEY AUTOINCREMENT"},
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq {big} NOT NULL,
        edit_version {big} NOT NULL,
        kind TEXT NOT NULL,
        created_at {ts} NOT NULL
    )""",
        "CREATE INDEX ctx_event_edits_by_version ON ctx_event_edits "
        "(tenant, thread_id, edit_version)",
    ]


# v3: rows are written compactly, so a revision keeps its text beside its content
_REVISION_TEXT = "ALTER TABLE ctx_event_revisions ADD COLUMN text TEXT"

_BACKFILL_BATCH = 1000


def _backfill_binary_hashes() -> Op[int]:
    """SQLite v5: each hex ``content_hash`` as its 32 bytes; returns how many rows changed."""
    converted = 0
    for table in ("ctx_events", "ctx_event_revisions"):
        after = -1  # rowids of both tables are positive
        while True:
            rows = yield Stmt(
                f"SELECT rowid, content_hash FROM {table} WHERE rowid > ? "
                "AND typeof(content_hash) = 'text' ORDER BY rowid LIMIT ?",
                (after, _BACKFILL_BATCH),
                "all",
            )
            if not rows:
                break
            yield Stmt(
                f"UPDATE {table} SET content_hash = ? WHERE rowid = ?",
                many=[(bytes.fromhex(row[1]), row[0]) for row in rows],
            )
            converted += len(rows)
            after = rows[-1][0]
    return converted


BACKFILL_BINARY_HASHES = Backfill("binary_hashes", _backfill_binary_hashes)
"""SQLite: turn the hex ``content_hash`` of every event and revision into its 32 bytes."""

# v5: one UNIQUE index on (tenant, thread_id, event_id, branch) replaces v1's constraint and
# index; the content hash is stored as 32 bytes. SQLite rebuilds both tables (keeping pk, the
# full-text rowid), dropping and remaking the search triggers and view around it.
_SQLITE_EVENT_COLUMNS_V5 = (
    "pk, tenant, thread_id, branch, seq, event_id, scope_key, role, name, content, "
    "content_hash, text, tool_call_ids, tool_names, revision, visible, created_at, terms"
)
_SQLITE_REVISION_COLUMNS_V5 = (
    "tenant, thread_id, branch, seq, event_id, revision, content, content_hash, replaced_at, text"
)
_EVENT_ID_INDEX_V5 = (
    "CREATE UNIQUE INDEX ctx_events_by_event_id ON ctx_events (tenant, thread_id, event_id, branch)"
)

SQLITE: Steps = {
    1: _v1(pg=False),
    3: [_REVISION_TEXT],
    5: [
        *(f"DROP TRIGGER {name}" for name in FTS_TRIGGERS),
        "DROP VIEW ctx_events_search",
        _events(
            "ctx_events_v5",
            "INTEGER PRIMARY KEY",
            "INTEGER",
            "REAL",
            "INTEGER NOT NULL DEFAULT 1",
            "BLOB",
            "terms TEXT,",
            "",
        ),
        f"INSERT INTO ctx_events_v5 ({_SQLITE_EVENT_COLUMNS_V5}) "
        f"SELECT {_SQLITE_EVENT_COLUMNS_V5} FROM ctx_events",
        "DROP TABLE ctx_events",
        "ALTER TABLE ctx_events_v5 RENAME TO ctx_events",
        _EVENT_ID_INDEX_V5,
        _revisions("ctx_event_revisions_v5", "INTEGER", "REAL", "BLOB", "text TEXT,\n        "),
        f"INSERT INTO ctx_event_revisions_v5 ({_SQLITE_REVISION_COLUMNS_V5}) "
        f"SELECT {_SQLITE_REVISION_COLUMNS_V5} FROM ctx_event_revisions",
        "DROP TABLE ctx_event_revisions",
        "ALTER TABLE ctx_event_revisions_v5 RENAME TO ctx_event_revisions",
        BACKFILL_BINARY_HASHES,
        SQLITE_SEARCH_VIEW,
        *SQLITE_FTS_TRIGGERS,
    ],
}

POSTGRES: Steps = {
    1: _v1(pg=True),
    3: [_REVISION_TEXT],
    5: [
        "ALTER TABLE ctx_events DROP CONSTRAINT ctx_events_tenant_thread_id_branch_event_id_key",
        "DROP INDEX ctx_events_by_event_id",
        "ALTER TABLE ctx_events ALTER COLUMN content_hash TYPE BYTEA USING decode(content_hash, 'hex')",
        "ALTER TABLE ctx_event_revisions ALTER COLUMN content_hash TYPE BYTEA "
        "USING decode(content_hash, 'hex')",
        _EVENT_ID_INDEX_V5,
    ],
}
