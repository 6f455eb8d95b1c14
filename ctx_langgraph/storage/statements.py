"""What an operation yields: one statement, run by the runner on its open transaction.

An operation (:data:`Op`) yields :class:`Stmt` objects, receives their results and returns its
own; it does no I/O, so it is written once for both backends, sync and async.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = ["DeferredError", "Fetch", "Op", "Stmt", "aexecute", "chunks", "execute", "marks"]

T = TypeVar("T")

Fetch = Literal["none", "one", "all", "rowcount"]


@dataclass(frozen=True)
class Stmt:
    """One statement (``?`` placeholders); with ``many``, executed once per parameter row."""

    sql: str
    params: Sequence[Any] = ()
    fetch: Fetch = "none"
    many: Sequence[Sequence[Any]] | None = None


Op = Generator[Stmt, Any, T]
"""An operation: yields :class:`Stmt` objects, receives their results, returns ``T``."""


class DeferredError(Exception):
    """Raised by an operation whose writes must be committed before ``error`` is raised."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


IN_CHUNK = 500


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size`` (for ``IN`` lists)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def marks(count: int) -> str:
    """``count`` comma-separated ``?`` placeholders."""
    return ", ".join("?" * count)


def execute(cursor: Any, stmt: Stmt, sql: str | None = None, **options: Any) -> Any:
    """Run ``stmt`` on a DB-API cursor and return what it asks for; ``sql`` is its text in the
    driver's parameter style, ``options`` go to the driver's ``execute``."""
    text = stmt.sql if sql is None else sql
    if stmt.many is not None:
        if not stmt.many:
            return 0
        cursor.executemany(text, stmt.many)
        return cursor.rowcount
    cursor.execute(text, tuple(stmt.params), **options)
    if stmt.fetch == "one":
        return cursor.fetchone()
    if stmt.fetch == "all":
        return cursor.fetchall()
    if stmt.fetch == "rowcount":
        return cursor.rowcount
    return None


async def aexecute(cursor: Any, stmt: Stmt, sql: str | None = None, **options: Any) -> Any:
    """Async twin of :func:`execute`, on an async cursor (psycopg's, ``aiosqlite``'s)."""
    text = stmt.sql if sql is None else sql
    if stmt.many is not None:
        if not stmt.many:
            return 0
        await cursor.executemany(text, stmt.many)
        return cursor.rowcount
    await cursor.execute(text, tuple(stmt.params), **options)
    if stmt.fetch == "one":
        return await cursor.fetchone()
    if stmt.fetch == "all":
        return await cursor.fetchall()
    if stmt.fetch == "rowcount":
        return cursor.rowcount
    return None
