"""SQL dialects and the numbered schema migrations of both backends.

Everything here is pure: it builds SQL text and parameters. The operations in ``_ops`` are
written once against :class:`Dialect`; the backends only execute what the operations yield.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ctx_langgraph.core.text import query_terms

__all__ = ["POSTGRES", "SQLITE", "Backfill", "Dialect", "Stmt", "query_terms", "scope_key"]

Fetch = Literal["none", "one", "all", "rowcount"]


@dataclass(frozen=True)
class Stmt:
    """One statement an operation asks its runner to execute.

    ``sql`` uses ``?`` placeholders; the PostgreSQL runner rewrites them. With ``many`` set the
    statement is executed once per parameter row (``executemany``).
    """

    sql: str
    params: Sequence[Any] = ()
    fetch: Fetch = "none"
    many: Sequence[Sequence[Any]] | None = None


@dataclass(frozen=True)
class Backfill:
    """A migration step that is not SQL: the operations fill a new column from Python."""

    name: str


def scope_key(tenant: str, thread_id: str) -> str:
    """A single full-text token naming a thread, so SQLite FTS can intersect by thread cheaply."""
    digest = hashlib.sha1(f"{tenant}\x1f{thread_id}".encode("utf-8", "surrogatepass"))
    return f"k{digest.hexdigest()[:24]}"


@dataclass(frozen=True)
class Dialect:
    name: Literal["sqlite", "postgres"]

    @property
    def for_update(self) -> str:
        # SQLite serializes writers with BEGIN IMMEDIATE; PostgreSQL locks the row.
        return " FOR UPDATE" if self.name == "postgres" else ""

    @property
    def for_share(self) -> str:
        return " FOR SHARE" if self.name == "postgres" else ""

    def ts(self, value: dt.datetime) -> Any:
        """A timestamp as this backend stores it (SQLite: UNIX seconds; PostgreSQL: timestamptz)."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value if self.name == "postgres" else value.timestamp()

    def from_ts(self, value: Any) -> dt.datetime:
        if isinstance(value, dt.datetime):
            return value.astimezone(dt.timezone.utc)
        return dt.datetime.fromtimestamp(float(value), tz=dt.timezone.utc)

    def table_exists(self, table: str) -> Stmt:
        if self.name == "postgres":
            return Stmt("SELECT to_regclass(?) IS NOT NULL", (table,), "one")
        return Stmt(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?",
            (table,),
            "one",
        )

    def text_match(
        self, tenant: str, thread_id: str, tokens: Sequence[str]
    ) -> tuple[str, str, list[Any]]:
        """(FROM clause, WHERE condition, params) restricting events ``e`` to those whose indexed
        document has every token (:func:`~ctx_langgraph.history._terms.match_tokens`: lower-case
        ASCII letters and digits, so they are quoted as they are)."""
        if self.name == "postgres":
            # cast, not to_tsquery: the tokens are lexemes already, and the parser must not drop
            # one (an empty query would match the whole thread)
            query = " & ".join(f"'{token}'" for token in [scope_key(tenant, thread_id), *tokens])
            return "ctx_events e", f"{pg_tsv('e.')} @@ ?::tsquery", [query]
        # The thread's own token narrows the full-text match to the thread inside FTS5, and
        # CROSS JOIN keeps the match as the outer loop: without it SQLite walks every event of
        # the thread and re-runs the full-text query per row.
        expr = " AND ".join(
            [f'scope_key : "{scope_key(tenant, thread_id)}"'] + [f'text : "{t}"' for t in tokens]
        )
        return (
            "ctx_events_fts CROSS JOIN ctx_events e ON e.pk = ctx_events_fts.rowid",
            "ctx_events_fts MATCH ?",
            [expr],
        )

    def contains(self, column: str) -> str:
        """A condition: ``column`` holds the parameter as a substring (no pattern syntax, and no
        pattern length limit as SQLite's LIKE has)."""
        if self.name == "postgres":
            return f"strpos({column}, ?) > 0"
        return f"instr({column}, ?) > 0"


SQLITE = Dialect("sqlite")
POSTGRES = Dialect("postgres")


@lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """``?`` placeholders to psycopg's ``%s`` (our SQL never holds a literal ``?`` or ``%``)."""
    return sql.replace("?", "%s")


_SQLITE_V1 = [
    """CREATE TABLE ctx_threads (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        edit_version INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        PRIMARY KEY (tenant, thread_id)
    )""",
    """CREATE TABLE ctx_branches (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        parent_branch TEXT,
        fork_seq INTEGER,
        head_seq INTEGER NOT NULL DEFAULT 0,
        active_checkpoint_id TEXT,
        active_generation INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        PRIMARY KEY (tenant, thread_id, branch)
    )""",
    """CREATE TABLE ctx_events (
        pk INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        text TEXT NOT NULL,
        tool_call_ids TEXT NOT NULL,
        tool_names TEXT NOT NULL,
        revision INTEGER NOT NULL DEFAULT 1,
        visible INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL,
        UNIQUE (tenant, thread_id, branch, seq),
        UNIQUE (tenant, thread_id, branch, event_id)
    )""",
    "CREATE INDEX ctx_events_by_event_id ON ctx_events (tenant, thread_id, event_id)",
    """CREATE TABLE ctx_event_revisions (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        replaced_at REAL NOT NULL,
        PRIMARY KEY (tenant, thread_id, branch, seq, revision)
    )""",
    """CREATE TABLE ctx_event_edits (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        edit_version INTEGER NOT NULL,
        kind TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ctx_event_edits_by_version ON ctx_event_edits (tenant, thread_id, edit_version)",
    """CREATE TABLE ctx_checkpoints (
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
    )""",
    "CREATE INDEX ctx_checkpoints_by_scope ON ctx_checkpoints (tenant, thread_id, branch, generation)",
    """CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        scope_key, text, content='ctx_events', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0'
    )""",
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

_POSTGRES_V1 = [
    """CREATE TABLE ctx_threads (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        edit_version BIGINT NOT NULL DEFAULT 0,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (tenant, thread_id)
    )""",
    """CREATE TABLE ctx_branches (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        parent_branch TEXT,
        fork_seq BIGINT,
        head_seq BIGINT NOT NULL DEFAULT 0,
        active_checkpoint_id TEXT,
        active_generation BIGINT NOT NULL DEFAULT 0,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (tenant, thread_id, branch)
    )""",
    """CREATE TABLE ctx_events (
        pk BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        event_id TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        text TEXT NOT NULL,
        tool_call_ids TEXT NOT NULL,
        tool_names TEXT NOT NULL,
        revision INTEGER NOT NULL DEFAULT 1,
        visible BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TIMESTAMPTZ NOT NULL,
        -- Punctuation becomes a space first, so PostgreSQL splits words as query_terms() does
        -- (its parser alone would index 'INV-2023-7' as 'inv-2023-7', 'inv', '-2023', '-7').
        -- The thread's scope_key is one more lexeme, so a search intersects the GIN posting
        -- lists with the thread's inside the index instead of reading a word's postings
        -- across every thread (at 3M events: 0.5 ms instead of 60 ms at p95).
        tsv TSVECTOR GENERATED ALWAYS AS (
            to_tsvector('simple', regexp_replace(text, '[[:punct:][:space:]]+', ' ', 'g'))
            || array_to_tsvector(ARRAY[scope_key])
        ) STORED,
        UNIQUE (tenant, thread_id, branch, seq),
        UNIQUE (tenant, thread_id, branch, event_id)
    )""",
    "CREATE INDEX ctx_events_by_event_id ON ctx_events (tenant, thread_id, event_id)",
    "CREATE INDEX ctx_events_tsv ON ctx_events USING GIN (tsv)",
    """CREATE TABLE ctx_event_revisions (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        event_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        replaced_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (tenant, thread_id, branch, seq, revision)
    )""",
    """CREATE TABLE ctx_event_edits (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        edit_version BIGINT NOT NULL,
        kind TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL
    )""",
    "CREATE INDEX ctx_event_edits_by_version ON ctx_event_edits (tenant, thread_id, edit_version)",
    """CREATE TABLE ctx_checkpoints (
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
    )""",
    "CREATE INDEX ctx_checkpoints_by_scope ON ctx_checkpoints (tenant, thread_id, branch, generation)",
]


def _ledger_tables(*, integer: str, timestamp: str) -> list[str]:
    """Version 2: the usage ledger (one row per real call, running totals per key)."""
    counts = ", ".join(
        f"{name} {integer}"
        for name in (
            "input_total",
            "input_uncached",
            "cache_read",
            "cache_write",
            "output",
            "reasoning",
        )
    )
    total_counts = ", ".join(
        f"{name} {integer} NOT NULL DEFAULT 0"
        for name in (
            "input_total",
            "input_uncached",
            "cache_read",
            "cache_write",
            "output",
            "reasoning",
        )
    )
    return [
        f"""CREATE TABLE ctx_usage_calls (
            call_key TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            branch TEXT NOT NULL,
            purpose TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            status TEXT NOT NULL,
            version {integer} NOT NULL,
            response_id TEXT,
            {counts},
            cost_nano_usd {integer},
            raw TEXT NOT NULL,
            created_at {timestamp} NOT NULL,
            updated_at {timestamp} NOT NULL
        )""",
        "CREATE INDEX ctx_usage_calls_by_thread ON ctx_usage_calls (tenant, thread_id, branch)",
        f"""CREATE TABLE ctx_usage_totals (
            tenant TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            branch TEXT NOT NULL,
            purpose TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            calls {integer} NOT NULL DEFAULT 0,
            unknown_calls {integer} NOT NULL DEFAULT 0,
            {total_counts},
            cost_nano_usd {integer} NOT NULL DEFAULT 0,
            cost_unknown_calls {integer} NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, thread_id, branch, purpose, provider, model)
        )""",
    ]


_FTS_TRIGGERS = ("ctx_events_fts_insert", "ctx_events_fts_delete", "ctx_events_fts_update")

# v3 halves what an event costs on disk. Rows are written compactly (see _serde.expand_record),
# so a revision keeps its text beside its content. SQLite's full-text index drops token
# positions (detail=column: searches are AND-of-words, never phrases). PostgreSQL indexes the
# tsvector expression instead of storing it in every row.
_SQLITE_V3 = [
    "ALTER TABLE ctx_event_revisions ADD COLUMN text TEXT",
    *(f"DROP TRIGGER {name}" for name in _FTS_TRIGGERS),
    "DROP TABLE ctx_events_fts",
    """CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        scope_key, text, content='ctx_events', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0', detail=column
    )""",
    *_SQLITE_V1[-3:],  # the same three triggers
    "INSERT INTO ctx_events_fts (ctx_events_fts) VALUES ('rebuild')",
]


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


_POSTGRES_V3 = [
    "ALTER TABLE ctx_event_revisions ADD COLUMN text TEXT",
    "ALTER TABLE ctx_events DROP COLUMN tsv",
    f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({_pg_tsv_v3()})",
]

BACKFILL_TERMS = Backfill("terms")
"""Fill ``ctx_events.terms`` (the search document) for the rows whose text needs one."""

# v4: search splits words in Python (see _terms): a row whose text the engines would split
# differently (non-ASCII, CJK, very long words, control characters) carries its search document
# in ``terms``, which the full-text index reads instead of ``text``. Plain rows are unchanged.
_FTS_SOURCE = "coalesce({row}.terms, {row}.text)"
# the full-text table's external content: what it indexes per row ('rebuild' reads it)
_SQLITE_SEARCH_VIEW = (
    "CREATE VIEW ctx_events_search AS SELECT pk, scope_key, coalesce(terms, text) AS text "
    "FROM ctx_events"
)
_SQLITE_FTS_TRIGGERS = [
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
_SQLITE_V4: list[str | Backfill] = [
    "ALTER TABLE ctx_events ADD COLUMN terms TEXT",
    *(f"DROP TRIGGER {name}" for name in _FTS_TRIGGERS),
    "DROP TABLE ctx_events_fts",
    BACKFILL_TERMS,
    _SQLITE_SEARCH_VIEW,
    """CREATE VIRTUAL TABLE ctx_events_fts USING fts5(
        scope_key, text, content='ctx_events_search', content_rowid='pk',
        tokenize='unicode61 remove_diacritics 0', detail=column
    )""",
    *_SQLITE_FTS_TRIGGERS,
    "INSERT INTO ctx_events_fts (ctx_events_fts) VALUES ('rebuild')",
]
_POSTGRES_V4: list[str | Backfill] = [
    "ALTER TABLE ctx_events ADD COLUMN terms TEXT",
    "DROP INDEX ctx_events_tsv",
    BACKFILL_TERMS,
    f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({pg_tsv()})",
]

BACKFILL_BINARY_HASHES = Backfill("binary_hashes")
"""SQLite: turn the hex ``content_hash`` of every event and revision into its 32 bytes."""

# v5 drops what every event row paid for twice. One UNIQUE index on (tenant, thread_id,
# event_id, branch) both keeps an event id unique per branch and serves every look-up by id
# (any branch of a lineage), where v1 had a UNIQUE constraint on (..., branch, event_id) and a
# separate index on (..., event_id). The content hash is stored as its 32 bytes instead of 64
# hex characters. SQLite cannot drop a table constraint or change a column's type in place, so
# its two event tables are rebuilt: rows keep their pk, which is the full-text index's rowid,
# so that index stays as it is.
_SQLITE_EVENTS_V5 = """CREATE TABLE ctx_events_v5 (
        pk INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL,
        content_hash BLOB NOT NULL,
        text TEXT NOT NULL,
        tool_call_ids TEXT NOT NULL,
        tool_names TEXT NOT NULL,
        revision INTEGER NOT NULL DEFAULT 1,
        visible INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL,
        terms TEXT,
        UNIQUE (tenant, thread_id, branch, seq)
    )"""
_SQLITE_EVENT_COLUMNS_V5 = (
    "pk, tenant, thread_id, branch, seq, event_id, scope_key, role, name, content, "
    "content_hash, text, tool_call_ids, tool_names, revision, visible, created_at, terms"
)
_SQLITE_REVISIONS_V5 = """CREATE TABLE ctx_event_revisions_v5 (
        tenant TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        branch TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        content TEXT NOT NULL,
        content_hash BLOB NOT NULL,
        replaced_at REAL NOT NULL,
        text TEXT,
        PRIMARY KEY (tenant, thread_id, branch, seq, revision)
    )"""
_SQLITE_REVISION_COLUMNS_V5 = (
    "tenant, thread_id, branch, seq, event_id, revision, content, content_hash, replaced_at, text"
)
_EVENT_ID_INDEX_V5 = (
    "CREATE UNIQUE INDEX ctx_events_by_event_id ON ctx_events (tenant, thread_id, event_id, branch)"
)
_SQLITE_V5: list[str | Backfill] = [
    # the triggers and the view name ctx_events: dropped before it is, made again after
    *(f"DROP TRIGGER {name}" for name in _FTS_TRIGGERS),
    "DROP VIEW ctx_events_search",
    _SQLITE_EVENTS_V5,
    f"INSERT INTO ctx_events_v5 ({_SQLITE_EVENT_COLUMNS_V5}) "
    f"SELECT {_SQLITE_EVENT_COLUMNS_V5} FROM ctx_events",
    "DROP TABLE ctx_events",
    "ALTER TABLE ctx_events_v5 RENAME TO ctx_events",
    _EVENT_ID_INDEX_V5,
    _SQLITE_REVISIONS_V5,
    f"INSERT INTO ctx_event_revisions_v5 ({_SQLITE_REVISION_COLUMNS_V5}) "
    f"SELECT {_SQLITE_REVISION_COLUMNS_V5} FROM ctx_event_revisions",
    "DROP TABLE ctx_event_revisions",
    "ALTER TABLE ctx_event_revisions_v5 RENAME TO ctx_event_revisions",
    BACKFILL_BINARY_HASHES,
    _SQLITE_SEARCH_VIEW,
    *_SQLITE_FTS_TRIGGERS,
]
_POSTGRES_V5 = [
    "ALTER TABLE ctx_events DROP CONSTRAINT ctx_events_tenant_thread_id_branch_event_id_key",
    "DROP INDEX ctx_events_by_event_id",
    "ALTER TABLE ctx_events ALTER COLUMN content_hash TYPE BYTEA USING decode(content_hash, 'hex')",
    "ALTER TABLE ctx_event_revisions ALTER COLUMN content_hash TYPE BYTEA "
    "USING decode(content_hash, 'hex')",
    _EVENT_ID_INDEX_V5,
]

MIGRATIONS: dict[str, list[list[str | Backfill]]] = {
    "sqlite": [
        list(_SQLITE_V1),
        list(_ledger_tables(integer="INTEGER", timestamp="REAL")),
        list(_SQLITE_V3),
        _SQLITE_V4,
        _SQLITE_V5,
    ],
    "postgres": [
        list(_POSTGRES_V1),
        list(_ledger_tables(integer="BIGINT", timestamp="TIMESTAMPTZ")),
        list(_POSTGRES_V3),
        _POSTGRES_V4,
        list(_POSTGRES_V5),
    ],
}
"""Numbered migrations per dialect: ``MIGRATIONS[name][v - 1]`` brings the schema to version ``v``.
A step is SQL, or a :class:`Backfill` the operations run in Python."""

SCHEMA_VERSION = 5
assert all(len(steps) == SCHEMA_VERSION for steps in MIGRATIONS.values())
