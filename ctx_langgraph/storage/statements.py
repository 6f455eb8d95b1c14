"""What an operation yields: one statement, run by the runner on its open transaction.

An operation is a generator (:data:`Op`) that yields :class:`Stmt` objects and receives
their results (a row, all rows, or a row count); its return value is the operation's result.
Operations do no I/O, so each is written once for both backends and both I/O styles
(the ``httpx.Auth.auth_flow`` pattern); :class:`~ctx_langgraph.storage.runner.Database` runs
one in one transaction.

Examples:
    >>> def count_events(thread_id: str) -> Op[int]:
    ...     row = yield Stmt("SELECT count(*) FROM ctx_events WHERE thread_id = ?", (thread_id,), "one")
    ...     return int(row[0])
    >>> op = count_events("t")
    >>> next(op).sql
    'SELECT count(*) FROM ctx_events WHERE thread_id = ?'
    >>> try:
    ...     op.send((3,))
    ... except StopIteration as done:
    ...     done.value
    3
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
    """One statement an operation asks its runner to execute.

    ``sql`` uses ``?`` placeholders; the PostgreSQL runner rewrites them. With ``many`` set the
    statement is executed once per parameter row (``executemany``).
    """

    sql: str
    params: Sequence[Any] = ()
    fetch: Fetch = "none"
    many: Sequence[Sequence[Any]] | None = None


Op = Generator[Stmt, Any, T]
"""An operation: yields :class:`Stmt` objects, receives their results, returns ``T``."""


class DeferredError(Exception):
    """Raised by an operation whose writes must be committed before ``error`` reaches the caller
    (a losing candidate is marked ``failed``, then the conflict is raised)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


IN_CHUNK = 500
"""Most values one ``IN (...)`` list holds."""


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size`` (for ``IN`` lists)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def marks(count: int) -> str:
    """``count`` comma-separated ``?`` placeholders.

    Examples:
        >>> marks(3)
        '?, ?, ?'
    """
    return ", ".join("?" * count)


def execute(cursor: Any, stmt: Stmt, sql: str | None = None, **options: Any) -> Any:
    """Run ``stmt`` on a DB-API cursor and return what it asks for (a row, all rows, the row
    count, or None); ``sql`` is its text in the driver's parameter style when that differs,
    ``options`` go to the driver's ``execute`` (psycopg's ``prepare``). A batch (``many``)
    returns its row count; an empty batch runs nothing and counts 0."""
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
