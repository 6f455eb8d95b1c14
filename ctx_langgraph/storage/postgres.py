"""The production database: PostgreSQL through psycopg 3 and psycopg_pool."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Callable
from typing import Any, TypeVar

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as missing:  # the postgres extra is not installed
    _MISSING_DRIVER: ImportError | None = missing
else:
    _MISSING_DRIVER = None

from ctx_langgraph.core.arguments import described
from ctx_langgraph.core.effects import arun, run
from ctx_langgraph.errors import ContextManagementError, HistoryStoreError
from ctx_langgraph.storage.dialects import POSTGRES, to_pyformat
from ctx_langgraph.storage.runner import Database, bind, utcnow
from ctx_langgraph.storage.statements import DeferredError, Op, Stmt, aexecute, execute

__all__ = ["PostgresDatabase"]

T = TypeVar("T")


def _server_says(exc: BaseException, conninfo: str) -> str:
    """The driver's message on one line, without the connection string (and its password)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text.replace(conninfo, "<the connection string>") if conninfo else text


def _checked_conninfo(conninfo: object, where: str) -> str:
    """``conninfo``, or a ``TypeError`` / ``HistoryStoreError`` when libpq cannot read it."""
    if not isinstance(conninfo, str):
        raise TypeError(
            f"{where}(conninfo=...) expects a libpq connection string, such as "
            f"'postgresql://user:password@host:5432/dbname' or 'host=... dbname=...', got "
            f"{described(conninfo)}"
        )
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        raise HistoryStoreError(
            f"{where}: not a PostgreSQL connection string ({_server_says(exc, conninfo)}); write "
            "it as postgresql://user:password@host:5432/dbname or 'host=... dbname=...'"
        ) from None
    return conninfo


def _where(conninfo: str) -> str:
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "the configured server"
    return (
        f"{params.get('host', 'localhost')}:{params.get('port', 5432)}/{params.get('dbname', '')}"
    )


async def _close_with_the_loop(pool: AsyncConnectionPool, forget: Callable[[], object]) -> None:
    """Wait for the event loop's end, then close ``pool`` and ``forget`` it (a pool worker
    cancelled while reconnecting would otherwise keep the loop from ending)."""
    try:
        await asyncio.get_running_loop().create_future()  # (never set)
    except asyncio.CancelledError:
        forget()
        await pool.close(timeout=5.0)
        raise


_ENDED_BY_THE_SERVER = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown, crash_shutdown, cannot_connect_now: the server ended the session."""


class _Transaction:
    """One transaction on a pooled connection, sync (``execute``) or async (``aexecute``). When
    the first statement finds the connection dead, it runs again on another (once per
    connection the pool can hold)."""

    __slots__ = ("conn", "cur", "db", "pool", "sent")

    def __init__(self, db: PostgresDatabase, pool: Any) -> None:
        self.db, self.pool = db, pool
        self.conn: Any = None
        self.cur: Any = None
        self.sent = False

    def _stale(self, exc: BaseException) -> bool:
        """The first statement found the connection gone (lost, or the server ended it)."""
        if not isinstance(exc, psycopg.OperationalError):
            return False
        state = exc.sqlstate or ""
        return self.conn.broken or state.startswith("08") or state in _ENDED_BY_THE_SERVER

    def open(self) -> None:
        self.conn = self.pool.getconn(timeout=self.db.connect_timeout)
        self.cur = self.conn.cursor()

    def execute(self, stmt: Stmt) -> Any:
        # the first statement: each connection the pool holds, at most once
        for _ in range(0 if self.sent else self.db._pool_size[1]):
            try:
                result = self.db._run_statement(self.cur, stmt)
                self.sent = True
                return result
            except psycopg.OperationalError as exc:
                if not self._stale(exc):
                    raise
                self.conn.close()  # (the pool drops a closed connection)
                self.close()
                self.open()
        result = self.db._run_statement(self.cur, stmt)
        self.sent = True
        return result

    def end(self, commit: bool) -> None:
        if self.conn is not None and not self.conn.broken:
            self.conn.commit() if commit else self.conn.rollback()

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self.cur.close()
            self.pool.putconn(conn)

    async def aopen(self) -> None:
        self.conn = await self.pool.getconn(timeout=self.db.connect_timeout)
        self.cur = self.conn.cursor()

    async def aexecute(self, stmt: Stmt) -> Any:
        for _ in range(0 if self.sent else self.db._pool_size[1]):
            try:
                result = await self.db._arun_statement(self.cur, stmt)
                self.sent = True
                return result
            except psycopg.OperationalError as exc:
                if not self._stale(exc):
                    raise
                await self.conn.close()
                await self.aclose()
                await self.aopen()
        result = await self.db._arun_statement(self.cur, stmt)
        self.sent = True
        return result

    async def aend(self, commit: bool) -> None:
        if self.conn is not None and not self.conn.broken:
            await (self.conn.commit() if commit else self.conn.rollback())

    async def aclose(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            await self.cur.close()
            await self.pool.putconn(conn)


class PostgresDatabase(Database):
    """A PostgreSQL database: a pool opened on first use (connecting bounded by
    ``connect_timeout``), and an async pool per event loop, closed by :meth:`aclose` or with the
    loop."""

    dialect = POSTGRES

    def __init__(
        self,
        conninfo: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 5.0,
        clock: Callable[[], dt.datetime] = utcnow,
        owner: str | None = None,
    ) -> None:
        owner = owner or type(self).__name__  # the class the user called, for the messages
        if _MISSING_DRIVER is not None:
            raise ImportError(
                f"{owner} needs psycopg and psycopg_pool: pip install 'ctx-langgraph[postgres]'"
            ) from _MISSING_DRIVER
        super().__init__(clock=clock)
        self.conninfo = _checked_conninfo(conninfo, f"{owner}.from_conn_string")
        self.connect_timeout = connect_timeout
        self._pool_size = (min_size, max_size)
        self._pool: ConnectionPool | None = None
        self._apools: dict[
            asyncio.AbstractEventLoop, tuple[AsyncConnectionPool, asyncio.Task[None]]
        ] = {}
        self._pool_lock = threading.Lock()

    def _pool_options(self) -> dict[str, Any]:
        return {
            "min_size": self._pool_size[0],
            "max_size": self._pool_size[1],
            "kwargs": {**self._probe_options(), "autocommit": False},
            "timeout": self.connect_timeout,
            "open": False,
        }

    def _refused(self, exc: psycopg.Error) -> HistoryStoreError:
        """The server's own reason a connection failed (a pool only logs it while it retries)."""
        return HistoryStoreError(
            f"cannot reach the PostgreSQL history store at {_where(self.conninfo)}: "
            f"{_server_says(exc, self.conninfo)}. Check the connection string (host, port, "
            "database, user, password) and that the server is up"
        )

    def _probe(self) -> None:
        """One connection before the pool opens, so a refusal is reported at once."""
        try:
            psycopg.connect(self.conninfo, **self._probe_options()).close()
        except psycopg.OperationalError as exc:
            raise self._refused(exc) from exc

    async def _aprobe(self) -> None:
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, **self._probe_options())
        except psycopg.OperationalError as exc:
            raise self._refused(exc) from exc
        await conn.close()

    def _probe_options(self) -> dict[str, Any]:
        return {"connect_timeout": max(1, round(self.connect_timeout)), "autocommit": True}

    def _unreachable(self, exc: BaseException) -> HistoryStoreError:
        return HistoryStoreError(
            f"cannot reach the PostgreSQL history store at {_where(self.conninfo)} within "
            f"{self.connect_timeout:g}s: {exc}"
        )

    def _driver_error(self, exc: psycopg.Error) -> HistoryStoreError:
        # SQLSTATE class 08 (or none at all) is a lost or refused connection.
        if isinstance(exc, psycopg.OperationalError) and (exc.sqlstate or "08").startswith("08"):
            return self._unreachable(exc)
        return HistoryStoreError(f"PostgreSQL history store error: {exc}")

    def _sync_pool(self) -> ConnectionPool:
        with self._pool_lock:
            if self._pool is None:
                self._probe()
                pool = ConnectionPool(self.conninfo, **self._pool_options())
                try:
                    pool.open(wait=True, timeout=self.connect_timeout)
                except (PoolTimeout, psycopg.Error) as exc:
                    pool.close()
                    raise self._unreachable(exc) from exc
                self._pool = pool
            return self._pool

    async def _async_pool(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        if loop in self._apools:
            return self._apools[loop][0]
        await self._aprobe()
        pool = AsyncConnectionPool(self.conninfo, **self._pool_options())
        try:
            await pool.open(wait=True, timeout=self.connect_timeout)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise self._unreachable(exc) from exc
        if loop in self._apools:  # another task of this loop opened one meanwhile
            await pool.close()
            return self._apools[loop][0]
        closer = loop.create_task(
            _close_with_the_loop(pool, lambda: self._forget(loop, pool)),
            name=f"close {pool.name} with its loop",
        )
        self._apools[loop] = (pool, closer)
        return pool

    def _forget(self, loop: asyncio.AbstractEventLoop, pool: AsyncConnectionPool) -> None:
        if loop in self._apools and self._apools[loop][0] is pool:  # (not a newer one)
            del self._apools[loop]

    def close(self) -> None:
        """Close the sync pool (async pools close with :meth:`aclose` or their loop)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    async def aclose(self) -> None:
        entry = self._apools.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            pool, closer = entry
            closer.cancel()
            await pool.close()
        self.close()

    @staticmethod
    def _run_statement(cur: psycopg.Cursor[Any], stmt: Stmt) -> Any:
        return execute(cur, stmt, to_pyformat(stmt.sql))

    @staticmethod
    async def _arun_statement(cur: psycopg.AsyncCursor[Any], stmt: Stmt) -> Any:
        return await aexecute(cur, stmt, to_pyformat(stmt.sql))

    def _execute(self, op: Op[T], *, write: bool) -> T:
        tx = _Transaction(self, self._sync_pool())
        deferred: DeferredError | None = None
        try:
            tx.open()
            try:
                result = run(bind(op, tx.execute))
            except DeferredError as exc:
                deferred = exc  # what the operation wrote is committed
            except BaseException:
                tx.end(commit=False)
                raise
            tx.end(commit=True)
        except PoolTimeout as exc:
            op.close()
            raise self._unreachable(exc) from exc
        except ContextManagementError:
            raise
        except psycopg.Error as exc:
            raise self._driver_error(exc) from exc
        finally:
            tx.close()
        if deferred is not None:
            raise deferred.error from None
        return result

    async def _aexecute(self, op: Op[T], *, write: bool) -> T:
        tx = _Transaction(self, await self._async_pool())
        deferred: DeferredError | None = None
        try:
            await tx.aopen()
            try:
                result = await arun(bind(op, tx.execute, tx.aexecute))
            except DeferredError as exc:
                deferred = exc
            except BaseException:
                await tx.aend(commit=False)
                raise
            await tx.aend(commit=True)
        except PoolTimeout as exc:
            op.close()
            raise self._unreachable(exc) from exc
        except ContextManagementError:
            raise
        except psycopg.Error as exc:
            raise self._driver_error(exc) from exc
        finally:
            await tx.aclose()
        if deferred is not None:
            raise deferred.error from None
        return result
