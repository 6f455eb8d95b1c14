"""Statements on LangGraph's SQL checkpointers' tables (``checkpoints``, ``writes`` or
``checkpoint_writes``, ``checkpoint_blobs``), and a transaction on a saver's own connection."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from ctx_langgraph.storage.dialects import POSTGRES, Dialect, to_pyformat
from ctx_langgraph.storage.statements import Op, Stmt, aexecute, chunks, execute, marks

__all__ = [
    "asaver_transaction",
    "checkpoint_records",
    "delete_checkpoints",
    "delete_unreferenced_blobs",
    "saver_transaction",
    "thread_ids",
    "unlink_checkpoints",
]

_COLUMNS = {
    "sqlite": (
        "coalesce(length(c.checkpoint), 0) + coalesce(length(c.metadata), 0)",
        "writes",
        "coalesce(sum(length(w.value)), 0)",
        "CAST(c.metadata AS TEXT)",
    ),
    "postgres": (
        "pg_column_size(c.checkpoint) + pg_column_size(c.metadata)",
        "checkpoint_writes",
        "coalesce(sum(octet_length(w.blob)), 0)",
        "c.metadata::text",
    ),
}
"""Per dialect: a checkpoint's bytes, the writes table, its writes' bytes, its metadata JSON."""

_SAME_CHECKPOINT = (
    "w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns "
    "AND w.checkpoint_id = c.checkpoint_id"
)


def thread_ids() -> Op[list[str]]:
    """Every thread with a checkpoint, in order."""
    rows = yield Stmt("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id", (), "all")
    return [str(r[0]) for r in rows]


def checkpoint_records(d: Dialect, thread_id: str, channel: str) -> Op[list[tuple[Any, ...]]]:
    """The thread's checkpoints as ``(ns, id, parent_id, bytes, writes, writes_bytes, has a
    write to channel, metadata JSON)`` (PostgreSQL: call first, it sets ``REPEATABLE READ``)."""
    size, writes, writes_size, metadata = _COLUMNS[d.name]
    if d == POSTGRES:
        yield Stmt("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    rows = yield Stmt(
        f"SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, {size}, "
        f"(SELECT count(*) FROM {writes} w WHERE {_SAME_CHECKPOINT}), "
        f"(SELECT {writes_size} FROM {writes} w WHERE {_SAME_CHECKPOINT}), "
        f"EXISTS (SELECT 1 FROM {writes} w WHERE {_SAME_CHECKPOINT} AND w.channel = ?), "
        f"{metadata} FROM checkpoints c WHERE c.thread_id = ?",
        (channel, thread_id),
        "all",
    )
    return [tuple(r) for r in rows]


def _in(d: Dialect, values: Sequence[str]) -> tuple[str, list[Any]]:
    if d == POSTGRES:
        return "= ANY(?)", [list(values)]
    return f"IN ({marks(len(values))})", list(values)


def delete_checkpoints(d: Dialect, thread_id: str, ns: str, gone: Sequence[str]) -> Op[int]:
    """Delete the namespace's ``gone`` checkpoints and their writes; how many writes went."""
    writes_deleted = 0
    for chunk in chunks(gone):
        test, values = _in(d, chunk)
        where = f"thread_id = ? AND checkpoint_ns = ? AND checkpoint_id {test}"
        params = [thread_id, ns, *values]
        writes_deleted += yield Stmt(
            f"DELETE FROM {_COLUMNS[d.name][1]} WHERE {where}", params, "rowcount"
        )
        yield Stmt(f"DELETE FROM checkpoints WHERE {where}", params)
    return writes_deleted


def unlink_checkpoints(d: Dialect, thread_id: str, ns: str, ids: Sequence[str]) -> Op[None]:
    """The namespace's checkpoints ``ids`` are left with no parent."""
    for chunk in chunks(ids):
        test, values = _in(d, chunk)
        yield Stmt(
            "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? "
            f"AND checkpoint_ns = ? AND checkpoint_id {test}",
            [thread_id, ns, *values],
        )


def delete_unreferenced_blobs(thread_id: str, ns: str) -> Op[tuple[int, int]]:
    """PostgreSQL: delete the blobs no checkpoint of the namespace references; returns how many
    went and their bytes."""
    stored = yield Stmt(
        "SELECT channel, version, octet_length(blob) FROM checkpoint_blobs "
        "WHERE thread_id = ? AND checkpoint_ns = ?",
        (thread_id, ns),
        "all",
    )
    referenced = yield Stmt(
        "SELECT DISTINCT v.key, v.value FROM checkpoints c CROSS JOIN LATERAL "
        "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
        "WHERE c.thread_id = ? AND c.checkpoint_ns = ?",
        (thread_id, ns),
        "all",
    )
    live = {(str(c), str(v)) for c, v in referenced}
    garbage: dict[str, list[str]] = defaultdict(list)
    freed = deleted = 0
    for channel, version, size in stored:
        if (str(channel), str(version)) not in live:
            garbage[str(channel)].append(str(version))
            freed += int(size or 0)
    for channel, versions in garbage.items():
        deleted += yield Stmt(
            "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND channel = ? AND version = ANY(?)",
            (thread_id, ns, channel, versions),
            "rowcount",
        )
    return deleted, freed


class _OnCursor:
    """Runs statements on a saver's cursor, sync or async (unprepared on PostgreSQL)."""

    def __init__(self, d: Dialect, cur: Any) -> None:
        self.cur = cur
        self.postgres = d == POSTGRES
        self.options = {"prepare": False} if self.postgres else {}

    def execute(self, stmt: Stmt) -> Any:
        sql = to_pyformat(stmt.sql) if self.postgres else None
        return execute(self.cur, stmt, sql, **self.options)

    async def aexecute(self, stmt: Stmt) -> Any:
        sql = to_pyformat(stmt.sql) if self.postgres else None
        return await aexecute(self.cur, stmt, sql, **self.options)


@contextlib.contextmanager
def saver_transaction(saver: Any, d: Dialect, *, write: bool = False) -> Iterator[_OnCursor]:
    """A statement runner on a sync saver's connection (in one transaction with ``write``)."""
    if d != POSTGRES:
        saver.setup()
        with saver.lock:
            conn = saver.conn
            if write:
                conn.execute("BEGIN IMMEDIATE")
            cur = conn.cursor()
            try:
                yield _OnCursor(d, cur)
                if write:
                    conn.commit()
            except BaseException:
                if write:
                    conn.rollback()
                raise
            finally:
                cur.close()
        return
    from psycopg.rows import tuple_row
    from psycopg_pool import ConnectionPool

    with contextlib.ExitStack() as stack:
        if isinstance(saver.conn, ConnectionPool):
            conn = stack.enter_context(saver.conn.connection())
        else:
            stack.enter_context(saver.lock)
            conn = saver.conn
        if getattr(saver, "pipe", None) is not None:
            saver.pipe.sync()
        if write:
            stack.enter_context(conn.transaction())
        yield _OnCursor(d, stack.enter_context(conn.cursor(row_factory=tuple_row)))


@contextlib.asynccontextmanager
async def asaver_transaction(
    saver: Any, d: Dialect, *, write: bool = False
) -> AsyncIterator[_OnCursor]:
    """Async twin of :func:`saver_transaction`, for ``AsyncSqliteSaver`` /
    ``AsyncPostgresSaver``."""
    if d != POSTGRES:
        await saver.setup()
        async with saver.lock:
            conn = saver.conn
            if write:
                await conn.execute("BEGIN IMMEDIATE")
            try:
                async with conn.cursor() as cur:
                    yield _OnCursor(d, cur)
                if write:
                    await conn.commit()
            except BaseException:
                if write:
                    await conn.rollback()
                raise
        return
    from psycopg.rows import tuple_row
    from psycopg_pool import AsyncConnectionPool

    async with contextlib.AsyncExitStack() as stack:
        if isinstance(saver.conn, AsyncConnectionPool):
            conn = await stack.enter_async_context(saver.conn.connection())
        else:
            await stack.enter_async_context(saver.lock)
            conn = saver.conn
        if getattr(saver, "pipe", None) is not None:
            await saver.pipe.sync()
        if write:
            await stack.enter_async_context(conn.transaction())
        yield _OnCursor(d, await stack.enter_async_context(conn.cursor(row_factory=tuple_row)))
