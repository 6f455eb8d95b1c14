"""The history store's full-text search: SQLite's FTS5 table over the events (with the
triggers keeping it in step), PostgreSQL's GIN expression index; and the search document
column (``terms``: tokens since schema v4, stems since v6) with its backfills."""

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
"""Starts a stem's lexeme in PostgreSQL's indexed document, so that a stem never matches as a
word (a search for ``go`` finds the word, a ranked search for the stem ``go`` finds ``~go``
too). Words are letters and digits only, so no word starts with it."""

PG_SCOPE_CHARS = 13
"""Characters of the scope key (``k`` and 12 hex digits of the thread's digest) that start each
of its lexemes on PostgreSQL: enough that two threads seldom share them; when they do, a search
reads the other's entries too and drops them by the thread's columns."""

PG_MAX_LEXEMES = 32_768
"""Most lexemes an event's indexed document keeps on PostgreSQL (schema v11), in the order the
document sorts them (bytewise). A tsvector addresses its lexemes' text with 20 bits, so it
holds at most 1 MiB of it, and ``array_to_tsvector`` does not check: past that, lexemes read
back garbled. The v6 document holds at most about 500,000 characters of lexemes (a plain text
of 100,000 characters, or a search document of 400,000, and their stems); 32,768 prefixes of 14
characters add 458,752. Only a document of more distinct words than that (a dump of ids, say)
loses its last ones from the index."""

_PG_WORDS = "to_tsvector('simple', regexp_replace({a}text, '[[:punct:][:space:]]+', ' ', 'g'))"


def pg_scope_prefix(scope_key: str) -> str:
    """What starts every lexeme of a thread's events in PostgreSQL's indexed document (schema
    v11): the start of the thread's scope key (:func:`~ctx_langgraph.storage.dialects.scope_key`)
    and a colon."""
    return scope_key[:PG_SCOPE_CHARS] + ":"


def pg_tsv(alias: str = "") -> str:
    """The indexed document of an event on PostgreSQL (schema v11): the lexemes of schema v6
    (:func:`_pg_tsv_v6`: its words, its stems starting with :data:`PG_STEM_PREFIX`), each
    starting with its thread's :func:`pg_scope_prefix`. A word's entry in the index then lists
    the events of one thread, and a search reads only those: with one entry per word for every
    thread, it read the word's events in every thread and intersected them with the thread's
    (a common word's list is long in a large store). The search names the same expression, so
    the planner uses the expression index.

    The text form of the stripped v6 document is its lexemes, each quoted, separated by single
    spaces (no lexeme holds a quote, a backslash or a space: words are letters and digits); the
    quotes dropped and each lexeme prefixed, it is an array again, less the thread's scope
    lexeme (the prefix does its work), and cut at :data:`PG_MAX_LEXEMES`."""
    prefix = f"(left({alias}scope_key, {PG_SCOPE_CHARS}) || ':')"
    lexemes = f"replace(strip({_pg_tsv_v6(alias)})::text, '''', '')"
    scoped = f"string_to_array({prefix} || replace({lexemes}, ' ', ' ' || {prefix}), ' ')"
    kept = f"(array_remove({scoped}, {prefix} || {alias}scope_key))[1:{PG_MAX_LEXEMES}]"
    return f"array_to_tsvector({kept})"


def _pg_tsv_v6(alias: str = "") -> str:
    """The indexed document of schema versions 6 to 10: the words of an event's text, split as
    query_terms() splits plain text, or the search document's tokens when it has some; then its
    stems, each as a lexeme starting with :data:`PG_STEM_PREFIX`, and the thread's scope lexeme
    (one array)."""
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
    """The indexed document of schema versions 4 and 5 (the tokens, no stems)."""
    return (
        f"(CASE WHEN {alias}terms IS NULL THEN {_PG_WORDS.format(a=alias)} "
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


def _refill(document: Callable[[str], str | None]) -> Op[int]:
    """Set every event's ``terms`` to ``document`` of its text where it differs; returns how
    many rows changed. Reads the table in primary-key batches, so memory stays bounded."""
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
"""Rewrite ``ctx_events.terms`` as the search document of schema v6: the tokens, then the
stems that differ from their word (see :func:`~ctx_langgraph.core.text.search_document`)."""

# v4: search splits words in Python (see core.text): a row whose text the engines would split
# differently (non-ASCII, CJK, very long words, control characters) carries its token document
# in ``terms``, which the full-text index reads instead of ``text``. Plain rows are unchanged.
# The view and triggers of v4 (and v5, which rebuilds the events table) are kept as they were.
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


# v6: ranked search matches stems. ``terms`` is the search document: the token document (empty
# for plain text, which the index reads itself), then, when some word's stem differs from it,
# STEMS_MARK and those stems. The full-text table gets a column of its own for stems, so a stem
# never matches as a word: ``text`` has the words, ``stems`` the stems.
def _fts_columns(row: str) -> tuple[str, str]:
    """SQL of what the full-text table indexes for a row of ``ctx_events`` (``row`` is ``""``
    in the view, ``"new."`` or ``"old."`` in a trigger): its words, and its stems."""
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
_SQLITE_FTS_V6 = """CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        scope_key, text, stems, content='ctx_events_search', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0', detail=column
    )"""
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
