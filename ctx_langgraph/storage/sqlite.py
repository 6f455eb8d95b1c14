"""The embedded database: stdlib ``sqlite3``, WAL mode, one connection per handle."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ctx_langgraph.core.effects import run
from ctx_langgraph.errors import ContextManagementError, HistoryStoreError
from ctx_langgraph.storage.dialects import SQLITE
from ctx_langgraph.storage.runner import Database, bind, utcnow
from ctx_langgraph.storage.statements import DeferredError, Op, Stmt, execute

__all__ = ["SQLiteDatabase", "table_names", "use_wal"]

T = TypeVar("T")
Self = TypeVar("Self", bound="SQLiteDatabase")


def use_wal(conn: sqlite3.Connection) -> None:
    """WAL mode with ``synchronous=NORMAL`` on a file's connection."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")


def table_names(path: str | Path) -> set[str]:
    """The tables of an existing SQLite database file, read-only (``sqlite3.Error``: not one)."""
    conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return {str(name) for (name,) in rows}


class SQLiteDatabase(Database):
    """A SQLite database: a file (WAL mode) or ``":memory:"``, one connection per handle (a lock
    serializes threads, ``BEGIN IMMEDIATE`` writers); async runs use a worker thread."""

    dialect = SQLITE

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        super().__init__(clock=clock)
        conn.isolation_level = None  # we issue BEGIN / COMMIT ourselves
        self.conn = conn
        self._lock = threading.RLock()

    @classmethod
    def from_path(
        cls: type[Self],
        path: str | Path,
        *,
        busy_timeout: float = 30.0,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> Self:
        """Open (creating if needed) a database file, or ``":memory:"``; ``busy_timeout``: seconds
        a writer waits for another process's write lock."""
        try:
            conn = sqlite3.connect(
                str(path), timeout=busy_timeout, check_same_thread=False, isolation_level=None
            )
            if str(path) != ":memory:":
                use_wal(conn)
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        except sqlite3.Error as exc:
            raise HistoryStoreError(f"cannot open SQLite history store at {path}: {exc}") from exc
        return cls(conn, clock=clock)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def _run_statement(self, cur: sqlite3.Cursor, stmt: Stmt) -> Any:
        return execute(cur, stmt)

    def _execute(self, op: Op[T], *, write: bool) -> T:
        with self._lock:
            try:
                cur = self.conn.cursor()
            except sqlite3.ProgrammingError as exc:
                op.close()
                raise HistoryStoreError(f"the SQLite history store is closed: {exc}") from exc
            try:
                cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = run(bind(op, partial(self._run_statement, cur)))
                except DeferredError as deferred:
                    cur.execute("COMMIT")
                    raise deferred.error from None
                except BaseException:
                    cur.execute("ROLLBACK")
                    raise
                cur.execute("COMMIT")
                return result
            except ContextManagementError:
                raise
            except (sqlite3.Error, OverflowError) as exc:
                raise HistoryStoreError(f"SQLite history store error: {exc}") from exc
            finally:
                cur.close()

    async def _aexecute(self, op: Op[T], *, write: bool) -> T:
        return await asyncio.to_thread(self._execute, op, write=write)
