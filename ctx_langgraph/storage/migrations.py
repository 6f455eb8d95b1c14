"""The numbered schema migrations, composed from what each domain's tables declare, and setup."""

from __future__ import annotations

from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt
from ctx_langgraph.storage.tables import (
    Backfill,
    Step,
    Steps,
    branches,
    events,
    search,
    segments,
    summaries,
    usage,
    vectors,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Backfill", "schema_version", "setup"]

SCHEMA_VERSION = 11
"""The schema version ``setup()`` migrates a database up to."""

_DOMAINS = (branches, events, summaries, search, usage, segments, vectors)

_SETUP_LOCK_KEY = 0x637478_4C47  # pg_advisory_xact_lock key for concurrent setup() calls


def _compose(declared: list[Steps]) -> list[list[Step]]:
    return [
        [step for steps in declared for step in steps.get(version, [])]
        for version in range(1, SCHEMA_VERSION + 1)
    ]


MIGRATIONS: dict[str, list[list[Step]]] = {
    "sqlite": _compose([domain.SQLITE for domain in _DOMAINS]),
    "postgres": _compose([domain.POSTGRES for domain in _DOMAINS]),
}
"""Per dialect: ``MIGRATIONS[name][v - 1]`` brings the schema to version ``v``."""


def schema_version(d: Dialect) -> Op[int]:
    """The schema version the database is at (0: never set up)."""
    exists = yield d.table_exists("ctx_migrations")
    if not exists[0]:
        return 0
    row = yield Stmt("SELECT max(v) FROM ctx_migrations", (), "one")
    return int(row[0] or 0)


def setup(d: Dialect) -> Op[int]:
    """Run the migrations this database has not seen yet; returns the schema version."""
    if d.name == "postgres":
        yield Stmt("SELECT pg_advisory_xact_lock(?)", (_SETUP_LOCK_KEY,), "one")
    yield Stmt("CREATE TABLE IF NOT EXISTS ctx_migrations (v INTEGER PRIMARY KEY)")
    current = yield from schema_version(d)
    if current > SCHEMA_VERSION:
        raise HistoryStoreError(
            f"the database schema is version {current}, newer than this ctx-langgraph "
            f"understands ({SCHEMA_VERSION}); upgrade ctx-langgraph"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        for step in MIGRATIONS[d.name][version - 1]:
            if isinstance(step, Backfill):
                yield from step.run()
            else:
                yield Stmt(step)
        yield Stmt("INSERT INTO ctx_migrations (v) VALUES (?)", (version,))
    return SCHEMA_VERSION
