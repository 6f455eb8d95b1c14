"""SQL dialects: what differs between SQLite and PostgreSQL, as pure SQL-text builders."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ctx_langgraph.storage.statements import Stmt
from ctx_langgraph.storage.tables.search import PG_STEM_PREFIX, pg_scope_prefix, pg_tsv

__all__ = ["POSTGRES", "SQLITE", "Dialect", "scope_key", "to_pyformat"]


def scope_key(tenant: str, thread_id: str) -> str:
    """A single full-text token naming a thread, so SQLite FTS can intersect by thread cheaply."""
    digest = hashlib.sha1(f"{tenant}\x1f{thread_id}".encode("utf-8", "surrogatepass"))
    return f"k{digest.hexdigest()[:24]}"


@dataclass(frozen=True)
class Dialect:
    """What differs between SQLite and PostgreSQL, as SQL text and value conversions."""

    name: Literal["sqlite", "postgres"]

    @property
    def for_update(self) -> str:
        return " FOR UPDATE" if self.name == "postgres" else ""

    @property
    def for_share(self) -> str:
        return " FOR SHARE" if self.name == "postgres" else ""

    @property
    def materialized(self) -> str:
        """Written between ``AS`` and a CTE's query: PostgreSQL plans that query on its own."""
        return "MATERIALIZED " if self.name == "postgres" else ""

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
        self, tenant: str, thread_id: str, tokens: Sequence[str], *, stems: bool = False
    ) -> tuple[str, str, list[Any]]:
        """(FROM clause, WHERE condition, params) restricting events ``e`` to those whose indexed
        document has every token (``stems``: as a word or a stem)."""
        if self.name == "postgres":
            # cast, not to_tsquery: the parser must not drop a lexeme
            prefix = pg_scope_prefix(scope_key(tenant, thread_id))
            terms = [
                f"('{prefix}{token}' | '{prefix}{PG_STEM_PREFIX}{token}')"
                if stems
                else f"'{prefix}{token}'"
                for token in tokens
            ]
            return "ctx_events e", f"{pg_tsv('e.')} @@ ?::tsquery", [" & ".join(terms)]
        # the thread's token narrows the match inside FTS5; CROSS JOIN keeps it the outer loop
        columns = "{text stems}" if stems else "text"
        expr = " AND ".join(
            [f'scope_key : "{scope_key(tenant, thread_id)}"']
            + [f'{columns} : "{t}"' for t in tokens]
        )
        return (
            "ctx_events_fts CROSS JOIN ctx_events e ON e.pk = ctx_events_fts.rowid",
            "ctx_events_fts MATCH ?",
            [expr],
        )

    def contains(self, column: str) -> str:
        """A condition: ``column`` holds the parameter as a substring (no pattern syntax)."""
        if self.name == "postgres":
            return f"strpos({column}, ?) > 0"
        return f"instr({column}, ?) > 0"


SQLITE = Dialect("sqlite")
POSTGRES = Dialect("postgres")


@lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """``?`` placeholders to psycopg's ``%s`` (our SQL never holds a literal ``?`` or ``%``)."""
    return sql.replace("?", "%s")
