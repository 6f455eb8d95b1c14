"""The history store's full-text search: SQLite's FTS5 table over the events (with the
triggers keeping it in step), PostgreSQL's GIN expression index; and the search document
column (``terms``, schema v4) with its backfill."""

from __future__ import annotations

from ctx_langgraph.core.text import search_document
from ctx_langgraph.storage.codec import load_text
from ctx_langgraph.storage.statements import Op, Stmt
from ctx_langgraph.storage.tables import Backfill, Step, Steps

__all__ = [
    "BACKFILL_TERMS",
    "FTS_TRIGGERS",
    "POSTGRES",
    "SQLITE",
    "SQLITE_FTS_TRIGGERS",
    "SQLITE_SEARCH_VIEW",
    "pg_tsv",
]

FTS_TRIGGERS = ("ctx_events_fts_insert", "ctx_events_fts_delete", "ctx_events_fts_update")
"""The names of the SQLite triggers that keep the full-text table in step with the events."""


def pg_tsv(alias: str = "") -> str:
    """The indexed document of an event on PostgreSQL: the search document's tokens when the row
    has one, else the words of its text, split as query_terms() splits plain text; plus the
    thread's scope lexeme. The search names the same expression, so the planner uses the
    expression index."""
    return (
        f"(CASE WHEN {alias}terms IS NULL THEN to_tsvector('simple', "
        f"regexp_replace({alias}text, '[[:punct:][:space:]]+', ' ', 'g')) "
        f"ELSE array_to_tsvector(array_remove(string_to_array({alias}terms, ' '), '')) END "
        f"|| array_to_tsvector(ARRAY[{alias}scope_key]))"
    )


def _pg_tsv_v3(alias: str = "") -> str:
    """The indexed document of schema version 3 (text only)."""
    return (
        f"(to_tsvector('simple', regexp_replace({alias}text, '[[:punct:][:space:]]+', ' ', 'g')) "
        f"|| array_to_tsvector(ARRAY[{alias}scope_key]))"
    )


_SQLITE_FTS_V1 = """CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        scope_key, text, content='ctx_events', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0'
    )"""
_SQLITE_FTS_TRIGGERS_V1 = [
    """CREATE TRIGGER ctx_events_fts_insert AFTER INSERT ON ctx_events BEGIN
        INSERT INTO ctx_events_fts (rowid, scope_key, text) VALUES (new.pk, new.scope_key, new.text);
    END""",
    """CREATE TRIGGER ctx_events_fts_delete AFTER DELETE ON ctx_events BEGIN
        INSERT INTO ctx_events_fts (ctx_events_fts, rowid, scope_key, text)
        VALUES ('delete', old.pk, old.scope_key, old.text);
    END""",
    """CREATE TRIGGER ctx_events_fts_update AFTER UPDATE OF text ON ctx_events BEGIN
        INSERT INTO ctx_events_fts (ctx_events_fts, rowid, scope_key, text)
        VALUES ('delete', old.pk, old.scope_key, old.text);
        INSERT INTO ctx_events_fts (rowid, scope_key, text) VALUES (new.pk, new.scope_key, new.text);
    END""",
]

# v3 halves what an event costs on disk: SQLite's full-text index drops token positions
# (detail=column: searches are AND-of-words, never phrases). PostgreSQL indexes the tsvector
# expression instead of storing it in every row.
_SQLITE_FTS_V3 = """CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        scope_key, text, content='ctx_events', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0', detail=column
    )"""
_SQLITE_REBUILD = "INSERT INTO ctx_events_fts (ctx_events_fts) VALUES ('rebuild')"

_BACKFILL_BATCH = 1000


def _backfill_terms() -> Op[int]:
    """Give every event whose text needs a search document its ``terms`` (schema v4); returns how
    many did. Reads the table in primary-key batches, so memory stays bounded."""
    filled = 0
    after = None
    while True:
        rows = yield Stmt(
            "SELECT pk, text FROM ctx_events"
            + ("" if after is None else " WHERE pk > ?")
            + " ORDER BY pk LIMIT ?",
            (_BACKFILL_BATCH,) if after is None else (after, _BACKFILL_BATCH),
            "all",
        )
        if not rows:
            return filled
        updates = [
            (terms, row[0])
            for row in rows
            if (terms := search_document(load_text(row[1]))) is not None
        ]
        if updates:
            yield Stmt("UPDATE ctx_events SET terms = ? WHERE pk = ?", many=updates)
        filled += len(updates)
        after = rows[-1][0]


BACKFILL_TERMS = Backfill("terms", _backfill_terms)
"""Fill ``ctx_events.terms`` (the search document) for the rows whose text needs one."""

# v4: search splits words in Python (see core.text): a row whose text the engines would split
# differently (non-ASCII, CJK, very long words, control characters) carries its search document
# in ``terms``, which the full-text index reads instead of ``text``. Plain rows are unchanged.
_FTS_SOURCE = "coalesce({row}.terms, {row}.text)"
# the full-text table's external content: what it indexes per row ('rebuild' reads it)
SQLITE_SEARCH_VIEW = (
    "CREATE VIEW ctx_events_search AS SELECT pk, scope_key, coalesce(terms, text) AS text "
    "FROM ctx_events"
)
SQLITE_FTS_TRIGGERS = [
    f"""CREATE TRIGGER ctx_events_fts_insert AFTER INSERT ON ctx_events BEGIN
        INSERT INTO ctx_events_fts (rowid, scope_key, text)
        VALUES (new.pk, new.scope_key, {_FTS_SOURCE.format(row="new")});
    END""",
    f"""CREATE TRIGGER ctx_events_fts_delete AFTER DELETE ON ctx_events BEGIN
        INSERT INTO ctx_events_fts (ctx_events_fts, rowid, scope_key, text)
        VALUES ('delete', old.pk, old.scope_key, {_FTS_SOURCE.format(row="old")});
    END""",
    f"""CREATE TRIGGER ctx_events_fts_update AFTER UPDATE OF text, terms ON ctx_events BEGIN
        INSERT INTO ctx_events_fts (ctx_events_fts, rowid, scope_key, text)
        VALUES ('delete', old.pk, old.scope_key, {_FTS_SOURCE.format(row="old")});
        INSERT INTO ctx_events_fts (rowid, scope_key, text)
        VALUES (new.pk, new.scope_key, {_FTS_SOURCE.format(row="new")});
    END""",
]
_SQLITE_FTS_V4 = """CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        scope_key, text, content='ctx_events_search', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0', detail=column
    )"""

_DROP_FTS: list[Step] = [
    *(f"DROP TRIGGER {name}" for name in FTS_TRIGGERS),
    "DROP TABLE ctx_events_fts",
]

SQLITE: Steps = {
    1: [_SQLITE_FTS_V1, *_SQLITE_FTS_TRIGGERS_V1],
    3: [*_DROP_FTS, _SQLITE_FTS_V3, *_SQLITE_FTS_TRIGGERS_V1, _SQLITE_REBUILD],
    4: [
        "ALTER TABLE ctx_events ADD COLUMN terms TEXT",
        *_DROP_FTS,
        BACKFILL_TERMS,
        SQLITE_SEARCH_VIEW,
        _SQLITE_FTS_V4,
        *SQLITE_FTS_TRIGGERS,
        _SQLITE_REBUILD,
    ],
}

POSTGRES: Steps = {
    3: [
        "ALTER TABLE ctx_events DROP COLUMN tsv",
        f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({_pg_tsv_v3()})",
    ],
    4: [
        "ALTER TABLE ctx_events ADD COLUMN terms TEXT",
        "DROP INDEX ctx_events_tsv",
        BACKFILL_TERMS,
        f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({pg_tsv()})",
    ],
}
