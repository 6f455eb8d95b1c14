"""The one runner: a database handle that runs an operation in one transaction, sync or async.

A backend implements :meth:`Database._execute` and :meth:`Database._aexecute`; each statement
becomes a :mod:`ctx_langgraph.core.effects` call on the open transaction (:func:`bind`).
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.storage import migrations
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.migrations import SCHEMA_VERSION
from ctx_langgraph.storage.statements import Op, Stmt

__all__ = ["Database", "bind", "utcnow"]

T = TypeVar("T")


def utcnow() -> dt.datetime:
    """Now, in UTC (the default clock)."""
    return dt.datetime.now(dt.timezone.utc)


def bind(
    op: Op[T],
    execute: Callable[[Stmt], Any],
    aexecute: Callable[[Stmt], Awaitable[Any]] | None = None,
) -> Flow[T]:
    """``op`` as an effect flow: each statement becomes ``call(execute, aexecute, stmt)``."""
    try:
        stmt = next(op)
        while True:  # a bare yield: one effect per statement, no generator for its result
            stmt = op.send((yield call(execute, aexecute, stmt)))
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        op.close()


class Database(abc.ABC):
    """A database handle: runs operations in transactions, creates and migrates the tables
    (every operation but :meth:`setup` checks the schema version first, once per handle)."""

    dialect: Dialect

    def __init__(self, *, clock: Callable[[], dt.datetime] = utcnow) -> None:
        self.clock = clock
        self._schema_checked = False

    @abc.abstractmethod
    def _execute(self, op: Op[T], *, write: bool) -> T:
        """Run ``op`` in one transaction (a write transaction when ``write``)."""

    @abc.abstractmethod
    async def _aexecute(self, op: Op[T], *, write: bool) -> T:
        """Async twin of :meth:`_execute`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connections."""

    async def aclose(self) -> None:
        self.close()

    def _check_schema(self, version: int) -> None:
        expected = SCHEMA_VERSION
        if version < expected:
            raise HistoryStoreError(
                f"the {self.dialect.name} history store schema is at version {version}, this "
                f"ctx-langgraph needs version {expected}: call setup() (or asetup()) first"
            )
        if version > expected:
            raise HistoryStoreError(
                f"the {self.dialect.name} history store schema is at version {version}, newer "
                f"than this ctx-langgraph understands ({expected}); upgrade ctx-langgraph"
            )
        self._schema_checked = True

    def run(self, op: Op[T], *, write: bool = False) -> T:
        """Run the operation ``op`` in one transaction (a write transaction when ``write``) and
        return its result."""
        if not self._schema_checked:
            self._check_schema(self.schema_version())
        return self._execute(op, write=write)

    async def arun(self, op: Op[T], *, write: bool = False) -> T:
        """Async twin of :meth:`run`."""
        if not self._schema_checked:
            self._check_schema(await self.aschema_version())
        return await self._aexecute(op, write=write)

    def schema_version(self) -> int:
        """The schema version the database is at (0: no tables yet), read unchecked."""
        return self._execute(migrations.schema_version(self.dialect), write=False)

    async def aschema_version(self) -> int:
        """Async twin of :meth:`schema_version`."""
        return await self._aexecute(migrations.schema_version(self.dialect), write=False)

    def setup(self) -> int:
        """Create or migrate the tables (idempotent, safe from several processes); returns the
        schema version now in the database."""
        version = self._execute(migrations.setup(self.dialect), write=True)
        self._schema_checked = True
        return version

    async def asetup(self) -> int:
        """Async twin of :meth:`setup`."""
        version = await self._aexecute(migrations.setup(self.dialect), write=True)
        self._schema_checked = True
        return version
