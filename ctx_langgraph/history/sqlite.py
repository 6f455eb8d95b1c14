"""The embedded history store: stdlib ``sqlite3``, WAL mode, FTS5 search."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ctx_langgraph.errors import ContextManagementError, HistoryStoreError
from ctx_langgraph.history import _ops
from ctx_langgraph.history._sql import SQLITE, Stmt
from ctx_langgraph.history.base import HistoryStore, _utcnow, drive

__all__ = ["SQLiteHistoryStore"]

T = TypeVar("T")


class SQLiteHistoryStore(HistoryStore):
    """History store on SQLite: a file (WAL mode) or ``":memory:"``.

    One connection per store, used by one transaction at a time (a lock serializes threads;
    ``BEGIN IMMEDIATE`` serializes writers across processes sharing the file). Async methods
    run the same code in a worker thread.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> with SQLiteHistoryStore.from_path(":memory:") as store:
        ...     _ = store.setup()
        ...     store.append("thread-1", [HumanMessage("The order id is A-1042", id="m1")])[0].seq
        ...     store.search("thread-1", "A-1042").hits[0].event_id
        1
        'm1'
    """

    dialect = SQLITE

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        clock: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        super().__init__(clock=clock)
        conn.isolation_level = None  # we issue BEGIN / COMMIT ourselves
        self.conn = conn
        self._lock = threading.RLock()

    @classmethod
    def from_path(
        cls,
        path: str | Path,
        *,
        busy_timeout: float = 30.0,
        clock: Callable[[], dt.datetime] = _utcnow,
    ) -> SQLiteHistoryStore:
        """Open (creating if needed) a database file, or an in-memory database for ``":memory:"``.

        Args:
            path: file path or ``":memory:"``.
            busy_timeout: seconds a writer waits for another process's write lock.
        """
        try:
            conn = sqlite3.connect(
                str(path), timeout=busy_timeout, check_same_thread=False, isolation_level=None
            )
            if str(path) != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        except sqlite3.Error as exc:
            raise HistoryStoreError(f"cannot open SQLite history store at {path}: {exc}") from exc
        return cls(conn, clock=clock)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def _run_statement(self, cur: sqlite3.Cursor, stmt: Stmt) -> Any:
        if stmt.many is not None:
            cur.executemany(stmt.sql, stmt.many)
            return cur.rowcount
        cur.execute(stmt.sql, tuple(stmt.params))
        if stmt.fetch == "one":
            return cur.fetchone()
        if stmt.fetch == "all":
            return cur.fetchall()
        if stmt.fetch == "rowcount":
            return cur.rowcount
        return None

    def _execute(self, op: _ops.Op[T], *, write: bool) -> T:
        with self._lock:
            try:
                cur = self.conn.cursor()
            except sqlite3.ProgrammingError as exc:
                op.close()
                raise HistoryStoreError(f"the SQLite history store is closed: {exc}") from exc
            try:
                cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = drive(op, lambda stmt: self._run_statement(cur, stmt))
                except _ops.DeferredError as deferred:
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

    async def _aexecute(self, op: _ops.Op[T], *, write: bool) -> T:
        return await asyncio.to_thread(self._execute, op, write=write)
