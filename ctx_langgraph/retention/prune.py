"""``CheckpointRetention``: prune a checkpointer's old checkpoints by a policy."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph.core.effects import arun, run
from ctx_langgraph.errors import RetentionError
from ctx_langgraph.retention._sql import (
    Dialect,
    Executor,
    PostgresExecutor,
    SqliteExecutor,
    _apg_connection,
    _memory_prune,
    _pg_connection,
    sql_thread_flow,
    thread_ids,
)
from ctx_langgraph.retention.policy import RetentionPolicy
from ctx_langgraph.retention.report import RetentionReport

log = logging.getLogger(__name__)
_RETRIES = 3

__all__ = ["CheckpointRetention"]


def _dialect_of(saver: BaseCheckpointSaver[Any]) -> Dialect | None:
    module = type(saver).__module__
    if module.startswith("langgraph.checkpoint.sqlite"):
        return "sqlite"
    if module.startswith("langgraph.checkpoint.postgres"):
        if "shallow" in module:
            return None
        return "postgres"
    return None


def _is_async(saver: BaseCheckpointSaver[Any]) -> bool:
    return type(saver).__name__.startswith("Async")


def _retryable(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    return isinstance(exc, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected)


class CheckpointRetention:
    """Prunes a checkpointer's old checkpoints by a :class:`RetentionPolicy`.

    Works with ``InMemorySaver``, ``SqliteSaver`` / ``AsyncSqliteSaver`` and ``PostgresSaver`` /
    ``AsyncPostgresSaver``: on the SQL savers through scoped statements on their documented
    tables (``checkpoints``, ``writes`` / ``checkpoint_writes``, ``checkpoint_blobs``), one
    transaction per thread. Use :meth:`prune` with sync savers, :meth:`aprune` with async ones
    (``InMemorySaver`` takes both).

    Examples:
        >>> from langgraph.graph import START, StateGraph
        >>> from typing_extensions import TypedDict
        >>> class S(TypedDict):
        ...     n: int
        >>> builder = StateGraph(S)
        >>> _ = builder.add_node("inc", lambda s: {"n": s["n"] + 1}); _ = builder.add_edge(START, "inc")
        >>> saver = InMemorySaver()
        >>> graph = builder.compile(checkpointer=saver)
        >>> run = {"configurable": {"thread_id": "t"}}
        >>> for _ in range(5):
        ...     _ = graph.invoke({"n": 0}, run)
        >>> len(list(graph.get_state_history(run)))
        15
        >>> report = CheckpointRetention(saver, RetentionPolicy(keep_last=2)).prune("t")
        >>> len(report.kept), len(report.removed), [c.values for c in graph.get_state_history(run)]
        (2, 13, [{'n': 1}, {'n': 0}])
    """

    def __init__(
        self, checkpointer: BaseCheckpointSaver[Any], policy: RetentionPolicy | None = None
    ) -> None:
        if not isinstance(checkpointer, BaseCheckpointSaver):
            raise TypeError(f"expected a LangGraph checkpointer, got {type(checkpointer).__name__}")
        self.checkpointer = checkpointer
        self.policy = policy or RetentionPolicy()
        self.dialect = _dialect_of(checkpointer)
        if self.dialect is None and not isinstance(checkpointer, InMemorySaver):
            raise RetentionError(
                f"{type(checkpointer).__name__} is not supported: use InMemorySaver, SqliteSaver, "
                "AsyncSqliteSaver, PostgresSaver or AsyncPostgresSaver (a shallow saver keeps "
                "one checkpoint per thread already)"
            )

    # ------------------------------------------------------------------ sync

    def prune(
        self, thread_id: str | None = None, *, dry_run: bool = False, now: dt.datetime | None = None
    ) -> RetentionReport:
        """Prune one thread, or every thread when ``thread_id`` is None.

        Args:
            thread_id: the thread; None prunes all of them (each in its own transaction).
            dry_run: decide and report, delete nothing.
            now: the time ``keep_within`` is measured from (default: now).

        Raises:
            RetentionError: the thread uses a ``DeltaChannel`` (with ``thread_id``; when pruning
                every thread such threads are skipped and listed in ``report.refused``), or the
                saver is async-only (use :meth:`aprune`).
        """
        if _is_async(self.checkpointer):
            raise RetentionError(
                f"{type(self.checkpointer).__name__} is async: use `await retention.aprune(...)`"
            )
        when = now or dt.datetime.now(dt.timezone.utc)
        threads = [thread_id] if thread_id is not None else self._threads()
        report = RetentionReport(dry_run, bytes_freed=0)
        for thread in threads:
            try:
                report = report.merged(self._prune_one(str(thread), when, dry_run))
            except RetentionError as exc:
                if thread_id is not None:
                    raise
                report = report.merged(RetentionReport(dry_run, refused=(f"{thread}: {exc}",)))
        return report

    def _threads(self) -> list[str]:
        saver = self.checkpointer
        if isinstance(saver, InMemorySaver):
            return sorted(saver.storage)
        with self._sync_cursor() as executor:
            return run(thread_ids(executor))

    def _prune_one(self, thread_id: str, now: dt.datetime, dry_run: bool) -> RetentionReport:
        saver = self.checkpointer
        if isinstance(saver, InMemorySaver):
            return _memory_prune(saver, thread_id, self.policy, now, dry_run)
        assert self.dialect is not None
        for attempt in range(_RETRIES):
            try:
                with self._sync_cursor(transaction=True) as executor:
                    flow = sql_thread_flow(
                        executor, self.dialect, thread_id, self.policy, now, dry_run
                    )
                    return run(flow)
            except Exception as exc:
                if not _retryable(exc) or attempt == _RETRIES - 1:
                    raise
                log.info("ctx-langgraph: retention of %s raced a writer; retrying", thread_id)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.contextmanager
    def _sync_cursor(self, *, transaction: bool = False) -> Iterator[Executor]:
        saver: Any = self.checkpointer
        if self.dialect == "sqlite":
            saver.setup()
            with saver.lock:
                conn = saver.conn
                if transaction:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    yield SqliteExecutor(conn)
                    if transaction:
                        conn.commit()
                except BaseException:
                    if transaction:
                        conn.rollback()
                    raise
            return
        with _pg_connection(saver) as conn:
            if getattr(saver, "pipe", None) is not None:
                saver.pipe.sync()
            from psycopg.rows import tuple_row

            with (
                conn.transaction() if transaction else contextlib.nullcontext(),
                conn.cursor(row_factory=tuple_row) as cur,
            ):
                yield PostgresExecutor(cur)

    # ------------------------------------------------------------------ async

    async def aprune(
        self, thread_id: str | None = None, *, dry_run: bool = False, now: dt.datetime | None = None
    ) -> RetentionReport:
        """Async twin of :meth:`prune`, for ``AsyncSqliteSaver`` / ``AsyncPostgresSaver``."""
        saver = self.checkpointer
        when = now or dt.datetime.now(dt.timezone.utc)
        if isinstance(saver, InMemorySaver):
            return self.prune(thread_id, dry_run=dry_run, now=when)
        if not _is_async(saver):
            return await asyncio.to_thread(self.prune, thread_id, dry_run=dry_run, now=when)
        if thread_id is not None:
            threads = [thread_id]
        else:
            async with self._async_cursor() as executor:
                threads = await arun(thread_ids(executor))
        report = RetentionReport(dry_run, bytes_freed=0)
        for thread in threads:
            try:
                report = report.merged(await self._aprune_one(str(thread), when, dry_run))
            except RetentionError as exc:
                if thread_id is not None:
                    raise
                report = report.merged(RetentionReport(dry_run, refused=(f"{thread}: {exc}",)))
        return report

    async def _aprune_one(self, thread_id: str, now: dt.datetime, dry_run: bool) -> RetentionReport:
        assert self.dialect is not None
        for attempt in range(_RETRIES):
            try:
                async with self._async_cursor(transaction=True) as executor:
                    flow = sql_thread_flow(
                        executor, self.dialect, thread_id, self.policy, now, dry_run
                    )
                    return await arun(flow)
            except Exception as exc:
                if not _retryable(exc) or attempt == _RETRIES - 1:
                    raise
                log.info("ctx-langgraph: retention of %s raced a writer; retrying", thread_id)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.asynccontextmanager
    async def _async_cursor(self, *, transaction: bool = False) -> AsyncIterator[Executor]:
        saver: Any = self.checkpointer
        if self.dialect == "sqlite":
            await saver.setup()
            async with saver.lock:
                conn = saver.conn
                if transaction:
                    await conn.execute("BEGIN IMMEDIATE")
                try:
                    yield SqliteExecutor(conn)
                    if transaction:
                        await conn.commit()
                except BaseException:
                    if transaction:
                        await conn.rollback()
                    raise
            return
        async with _apg_connection(saver) as conn:
            if getattr(saver, "pipe", None) is not None:
                await saver.pipe.sync()
            from psycopg.rows import tuple_row

            async with (
                conn.transaction() if transaction else contextlib.nullcontext(),
                conn.cursor(row_factory=tuple_row) as cur,
            ):
                yield PostgresExecutor(cur)
