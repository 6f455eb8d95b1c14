"""The history store's full-text search: SQLite's FTS5 table and triggers, PostgreSQL's GIN
expression index, and the search document column ``terms`` with its backfills."""

from __future__ import annotations

from collections.abc import Callable

from ctx_langgraph.core.text import STEMS_MARK, search_document, token_document
from ctx_langgraph.storage.codec import load_text
from ctx_langgraph.storage.statements import Op, Stmt
from ctx_langgraph.storage.tables import Backfill, Step, Steps

__all__ = [
    "BACKFILL_STEMS",
    "BACKFILL_TERMS",
    "FTS_TRIGGERS",
    "PG_MAX_LEXEMES",
    "PG_SCOPE_CHARS",
    "PG_STEM_PREFIX",
    "POSTGRES",
    "SQLITE",
    "SQLITE_FTS_TRIGGERS",
    "SQLITE_SEARCH_VIEW",
    "pg_scope_prefix",
    "pg_tsv",
]

FTS_TRIGGERS = ("ctx_events_fts_insert", "ctx_events_fts_delete", "ctx_events_fts_update")
"""The names of the SQLite triggers that keep the full-text table in step with the events."""
PG_STEM_PREFIX = "~"
"""Starts a stem's lexeme in PostgreSQL's indexed document, so a stem never matches as a word."""

PG_SCOPE_CHARS = 13
"""Characters of the scope key that start each of a thread's lexemes on PostgreSQL (threads
sharing them are told apart by their columns)."""

PG_MAX_LEXEMES = 32_768
"""Most lexemes an event's indexed document keeps on PostgreSQL (schema v11): a tsvector holds
at most 1 MiB of lexeme text, and ``array_to_tsvector`` garbles lexemes past that."""

_PG_WORDS = "to_tsvector('simple', regexp_replace({a}text, '[[:punct:][:space:]]+', ' ', 'g'))"


def pg_scope_prefix(scope_key: str) -> str:
    """What starts every lexeme of a thread's events on PostgreSQL: its scope key's start, ':'."""
    return scope_key[:PG_SCOPE_CHARS] + ":"


def pg_tsv(alias: str = "") -> str:
    """An event's indexed document on PostgreSQL (schema v11): the v6 lexemes, each prefixed
    with its thread's :func:`pg_scope_prefix` (so an index entry lists one thread's events), less
    the scope lexeme, cut at :data:`PG_MAX_LEXEMES`. Searches name the same expression."""
    prefix = f"(left({alias}scope_key, {PG_SCOPE_CHARS}) || ':')"
    lexemes = f"replace(strip({_pg_tsv_v6(alias)})::text, '''', '')"
    scoped = f"string_to_array({prefix} || replace({lexemes}, ' ', ' ' || {prefix}), ' ')"
    kept = f"(array_remove({scoped}, {prefix} || {alias}scope_key))[1:{PG_MAX_LEXEMES}]"
    return f"array_to_tsvector({kept})"


def _pg_tsv_v6(alias: str = "") -> str:
    """The indexed document of schema versions 6 to 10: words or tokens, prefixed stems, and the
    thread's scope lexeme."""
    terms = f"{alias}terms"
    mark = f"strpos({terms}, '{STEMS_MARK}')"
    tokens = f"split_part({terms}, '{STEMS_MARK}', 1)"
    stems = f"'{PG_STEM_PREFIX}' || replace(substr({terms}, {mark} + 1), ' ', ' {PG_STEM_PREFIX}')"
    return (
        f"(CASE WHEN {terms} IS NULL OR {mark} = 1 THEN {_PG_WORDS.format(a=alias)} "
        f"ELSE array_to_tsvector(array_remove(string_to_array({tokens}, ' '), '')) END "
        f"|| array_to_tsvector(string_to_array(CASE WHEN {mark} > 0 "
        f"THEN {stems} || ' ' || {alias}scope_key ELSE {alias}scope_key END, ' ')))"
    )


def _pg_tsv_v4(alias: str = "") -> str:
    """The indexed document of schema versions 4 and 5 (no stems)."""
    return (
        f"(CASE WHEN {alias}terms IS NULL THEN {_PG_WORDS.format(a=alias)} "
        f"ELSE array_to_tsvector(array_remove(string_to_array({alias}terms, ' '), '')) END "
        f"|| array_to_tsvector(ARRAY[{alias}scope_key]))"
    )


def _pg_tsv_v3(alias: str = "") -> str:
    """The indexed document of schema version 3 (text only)."""
    return f"({_PG_WORDS.format(a=alias)} || array_to_tsvector(ARRAY[{alias}scope_key]))"


def _fts(columns: str, content: str, detail: str = ", detail=column") -> str:
    return f"""CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        {columns}, content='{content}', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0'{detail}
    )"""


_SQLITE_FTS_V1 = _fts("scope_key, text", "ctx_events", "")
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

# v3: SQLite's full-text index drops token positions; PostgreSQL indexes an expression
_SQLITE_FTS_V3 = _fts("scope_key, text", "ctx_events")
_SQLITE_REBUILD = "INSERT INTO ctx_events_fts (ctx_events_fts) VALUES ('rebuild')"

_BACKFILL_BATCH = 1000


def _refill(document: Callable[[str], str | None]) -> Op[int]:
    """Set every event's ``terms`` to ``document`` of its text where it differs, in batches;
    returns how many rows changed."""
    changed = 0
    after = None
    while True:
        rows = yield Stmt(
            "SELECT pk, text, terms FROM ctx_events"
            + ("" if after is None else " WHERE pk > ?")
            + " ORDER BY pk LIMIT ?",
            (_BACKFILL_BATCH,) if after is None else (after, _BACKFILL_BATCH),
            "all",
        )
        if not rows:
            return changed
        updates = [
            (terms, row[0]) for row in rows if (terms := document(load_text(row[1]))) != row[2]
        ]
        if updates:
            yield Stmt("UPDATE ctx_events SET terms = ? WHERE pk = ?", many=updates)
        changed += len(updates)
        after = rows[-1][0]


BACKFILL_TERMS = Backfill("terms", lambda: _refill(token_document))
"""Fill ``ctx_events.terms`` (the token document, schema v4) for the rows whose text needs one."""

BACKFILL_STEMS = Backfill("stems", lambda: _refill(search_document))
"""Rewrite ``ctx_events.terms`` as the search document of schema v6 (tokens, then stems)."""

# v4: a row the engines would split differently carries its token document in ``terms``, which
# the full-text index reads instead of ``text`` (through the view and triggers of v4 and v5)
_FTS_SOURCE = "coalesce({row}.terms, {row}.text)"
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
_SQLITE_FTS_V4 = _fts("scope_key, text", "ctx_events_search")


# v6: ``terms`` is the token document, then STEMS_MARK and the stems; the full-text table
# indexes the stems in a column of their own
def _fts_columns(row: str) -> tuple[str, str]:
    """SQL of a ``ctx_events`` row's words and stems (``row``: ``""``, ``"new."`` or ``"old."``)."""
    terms, text = f"{row}terms", f"{row}text"
    mark = f"instr({terms}, '{STEMS_MARK}')"
    words = (
        f"CASE WHEN {terms} IS NULL OR {mark} = 1 THEN {text} WHEN {mark} = 0 THEN {terms} "
        f"ELSE substr({terms}, 1, {mark} - 1) END"
    )
    return words, f"CASE WHEN {mark} > 0 THEN substr({terms}, {mark} + 1) END"


_SQLITE_SEARCH_VIEW_V6 = (
    "CREATE VIEW ctx_events_search AS SELECT pk, scope_key, {} AS text, {} AS stems FROM ctx_events"
).format(*_fts_columns(""))
_SQLITE_FTS_V6 = _fts("scope_key, text, stems", "ctx_events_search")
_FTS_INSERT_V6 = (
    "INSERT INTO ctx_events_fts (rowid, scope_key, text, stems) "
    "VALUES (new.pk, new.scope_key, {}, {});"
).format(*_fts_columns("new."))
_FTS_DELETE_V6 = (
    "INSERT INTO ctx_events_fts (ctx_events_fts, rowid, scope_key, text, stems) "
    "VALUES ('delete', old.pk, old.scope_key, {}, {});"
).format(*_fts_columns("old."))
_SQLITE_FTS_TRIGGERS_V6 = [
    f"CREATE TRIGGER ctx_events_fts_insert AFTER INSERT ON ctx_events BEGIN {_FTS_INSERT_V6} END",
    f"CREATE TRIGGER ctx_events_fts_delete AFTER DELETE ON ctx_events BEGIN {_FTS_DELETE_V6} END",
    "CREATE TRIGGER ctx_events_fts_update AFTER UPDATE OF text, terms ON ctx_events BEGIN "
    f"{_FTS_DELETE_V6} {_FTS_INSERT_V6} END",
]

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
    6: [
        *_DROP_FTS,
        "DROP VIEW ctx_events_search",
        BACKFILL_STEMS,
        _SQLITE_SEARCH_VIEW_V6,
        _SQLITE_FTS_V6,
        *_SQLITE_FTS_TRIGGERS_V6,
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
        f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({_pg_tsv_v4()})",
    ],
    6: [
        "DROP INDEX ctx_events_tsv",
        BACKFILL_STEMS,
        f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({_pg_tsv_v6()})",
    ],
    11: [
        "DROP INDEX ctx_events_tsv",
        f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({pg_tsv()})",
    ],
}
