"""One thread's prune, written once: scoped statements on the savers' documented tables, and the
same policy on ``InMemorySaver``'s dictionaries.

The statements are yielded as calls on an executor (``call(executor, "execute", statement)``)
and run by :func:`ctx_langgraph.core.effects.run` or :func:`~ctx_langgraph.core.effects.arun`:
:class:`SqliteExecutor` wraps a ``sqlite3`` or ``aiosqlite`` connection,
:class:`PostgresExecutor` a psycopg cursor, sync or async.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.errors import RetentionError
from ctx_langgraph.retention.policy import (
    INTERRUPT_CHANNEL,
    CheckpointDecision,
    RetentionPolicy,
    _Row,
    decide,
)
from ctx_langgraph.retention.report import RetentionReport


@dataclass(frozen=True)
class Statement:
    """One statement for a backend to run; ``fetch`` says whether its rows come back, and
    ``count`` whether its row count does."""

    sql: str
    params: Sequence[Any] = ()
    fetch: bool = False
    count: bool = False


class SqliteExecutor:
    """Runs statements on a ``sqlite3`` connection (``execute``) or an ``aiosqlite`` one
    (``aexecute``)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, statement: Statement) -> Any:
        cur = self.conn.execute(statement.sql, list(statement.params))
        if statement.fetch:
            return cur.fetchall()
        return cur.rowcount if statement.count else None

    async def aexecute(self, statement: Statement) -> Any:
        async with self.conn.execute(statement.sql, list(statement.params)) as cur:
            if statement.fetch:
                return list(await cur.fetchall())
            return cur.rowcount if statement.count else None


class PostgresExecutor:
    """Runs statements on a psycopg cursor (``execute``) or async cursor (``aexecute``),
    unprepared: PostgreSQL plans each statement knowing its arrays."""

    def __init__(self, cur: Any) -> None:
        self.cur = cur

    def execute(self, statement: Statement) -> Any:
        self.cur.execute(statement.sql, list(statement.params) or None, prepare=False)
        if statement.fetch:
            return self.cur.fetchall()
        return self.cur.rowcount if statement.count else None

    async def aexecute(self, statement: Statement) -> Any:
        await self.cur.execute(statement.sql, list(statement.params) or None, prepare=False)
        if statement.fetch:
            return await self.cur.fetchall()
        return self.cur.rowcount if statement.count else None


Executor = SqliteExecutor | PostgresExecutor


def _execute(
    executor: Executor,
    sql: str,
    params: Sequence[Any] = (),
    *,
    fetch: bool = False,
    count: bool = False,
) -> Flow[Any]:
    """The statement's result: its rows with ``fetch``, its row count with ``count``."""
    return (yield call(executor, "execute", Statement(sql, params, fetch, count)))


Dialect = Literal["sqlite", "postgres"]

_ROWS = {
    "sqlite": """
SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
    coalesce(length(c.checkpoint), 0) + coalesce(length(c.metadata), 0),
    (SELECT count(*) FROM writes w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id),
    (SELECT coalesce(sum(length(w.value)), 0) FROM writes w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id),
    EXISTS (SELECT 1 FROM writes w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id
        AND w.channel = ?),
    CAST(c.metadata AS TEXT)
FROM checkpoints c WHERE c.thread_id = ?""",
    "postgres": """
SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
    pg_column_size(c.checkpoint) + pg_column_size(c.metadata),
    (SELECT count(*) FROM checkpoint_writes w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id),
    (SELECT coalesce(sum(octet_length(w.blob)), 0) FROM checkpoint_writes w
        WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
        AND w.checkpoint_id = c.checkpoint_id),
    EXISTS (SELECT 1 FROM checkpoint_writes w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id
        AND w.channel = %s),
    c.metadata::text
FROM checkpoints c WHERE c.thread_id = %s""",
}
_THREADS = "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
_WRITES_TABLE = {"sqlite": "writes", "postgres": "checkpoint_writes"}


def _row(record: Sequence[Any]) -> _Row:
    metadata: Mapping[str, Any] = {}
    with contextlib.suppress(TypeError, ValueError):
        loaded = json.loads(record[7]) if record[7] else {}
        metadata = loaded if isinstance(loaded, dict) else {}
    parents = metadata.get("parents")
    root = parents.get("") if isinstance(parents, dict) else None
    return _Row(
        checkpoint_ns=str(record[0]),
        checkpoint_id=str(record[1]),
        parent_id=None if record[2] is None else str(record[2]),
        bytes=int(record[3] or 0),
        writes=int(record[4] or 0),
        writes_bytes=int(record[5] or 0),
        interrupted=bool(record[6]),
        root_id=None if root is None else str(root),
        delta="counters_since_delta_snapshot" in metadata or "delta_writes_versioned" in metadata,
    )


def _in(dialect: Dialect, values: Sequence[str]) -> tuple[str, list[Any]]:
    """A membership test on a list of values, for either dialect."""
    if dialect == "postgres":
        return "= ANY(%s)", [list(values)]
    return f"IN ({', '.join('?' * len(values))})", list(values)


def thread_ids(executor: Executor) -> Flow[list[str]]:
    """Every thread with a checkpoint, in order."""
    return [str(r[0]) for r in (yield from _execute(executor, _THREADS, fetch=True))]


def _read_rows(executor: Executor, dialect: Dialect, thread_id: str) -> Flow[list[_Row]]:
    """The thread's checkpoints (on PostgreSQL in one ``REPEATABLE READ`` snapshot); a thread
    that uses a ``DeltaChannel`` is refused."""
    if dialect == "postgres":
        yield from _execute(executor, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    records = yield from _execute(
        executor, _ROWS[dialect], (INTERRUPT_CHANNEL, thread_id), fetch=True
    )
    rows = [_row(r) for r in records]
    if any(r.delta for r in rows):
        raise RetentionError(
            f"thread {thread_id!r} uses a DeltaChannel: its values are rebuilt from older "
            "checkpoints, so they cannot be pruned by age or count"
        )
    return rows


def _delete_checkpoints(
    executor: Executor, dialect: Dialect, thread_id: str, ns: str, gone: Sequence[str]
) -> Flow[int]:
    """Delete the namespace's ``gone`` checkpoints and their writes; how many writes went."""
    p = "%s" if dialect == "postgres" else "?"
    writes_deleted = 0
    for chunk in _chunks(gone):
        test, values = _in(dialect, chunk)
        writes_deleted += yield from _execute(
            executor,
            f"DELETE FROM {_WRITES_TABLE[dialect]} WHERE thread_id = {p} AND "
            f"checkpoint_ns = {p} AND checkpoint_id {test}",
            [thread_id, ns, *values],
            count=True,
        )
        yield from _execute(
            executor,
            f"DELETE FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = {p} "
            f"AND checkpoint_id {test}",
            [thread_id, ns, *values],
        )
    return writes_deleted


def _unlink_orphans(
    executor: Executor, dialect: Dialect, thread_id: str, ns: str, orphans: Sequence[str]
) -> Flow[None]:
    """Kept checkpoints whose parent was deleted are left with no parent."""
    p = "%s" if dialect == "postgres" else "?"
    for chunk in _chunks(orphans):
        test, values = _in(dialect, chunk)
        yield from _execute(
            executor,
            f"UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = {p} "
            f"AND checkpoint_ns = {p} AND checkpoint_id {test}",
            [thread_id, ns, *values],
        )


def _delete_unreferenced_blobs(
    executor: Executor, thread_id: str, ns: str
) -> Flow[tuple[int, int]]:
    """PostgreSQL: a blob goes only when no kept checkpoint of the namespace references its
    version. Returns how many blobs went and their bytes."""
    stored = yield from _execute(
        executor,
        "SELECT channel, version, octet_length(blob) FROM checkpoint_blobs "
        "WHERE thread_id = %s AND checkpoint_ns = %s",
        (thread_id, ns),
        fetch=True,
    )
    referenced = yield from _execute(
        executor,
        "SELECT DISTINCT v.key, v.value FROM checkpoints c CROSS JOIN LATERAL "
        "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
        "WHERE c.thread_id = %s AND c.checkpoint_ns = %s",
        (thread_id, ns),
        fetch=True,
    )
    live = {(str(c), str(v)) for c, v in referenced}
    garbage: dict[str, list[str]] = defaultdict(list)
    freed = deleted = 0
    for channel, version, size in stored:
        if (str(channel), str(version)) not in live:
            garbage[str(channel)].append(str(version))
            freed += int(size or 0)
    for channel, versions in garbage.items():
        deleted += yield from _execute(
            executor,
            "DELETE FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND channel = %s AND version = ANY(%s)",
            (thread_id, ns, channel, versions),
            count=True,
        )
    return deleted, freed


def sql_thread_flow(
    executor: Executor,
    dialect: Dialect,
    thread_id: str,
    policy: RetentionPolicy,
    now: dt.datetime,
    dry_run: bool,
) -> Flow[RetentionReport]:
    """One thread's prune, as statements run in one transaction."""
    rows = yield from _read_rows(executor, dialect, thread_id)
    decisions = decide(thread_id, rows, policy, now)
    removed = [d for d in decisions if not d.kept]
    freed = sum(d.bytes for d in removed)
    if dry_run or not removed:
        return RetentionReport(dry_run, tuple(decisions), bytes_freed=freed, threads=(thread_id,))
    writes_deleted = blobs_deleted = 0
    by_ns: dict[str, list[CheckpointDecision]] = defaultdict(list)
    for decision in decisions:
        by_ns[decision.checkpoint_ns].append(decision)
    for ns, ns_decisions in by_ns.items():
        gone = [d.checkpoint_id for d in ns_decisions if not d.kept]
        if not gone:
            continue
        writes_deleted += yield from _delete_checkpoints(executor, dialect, thread_id, ns, gone)
        gone_ids = set(gone)
        orphans = [d.checkpoint_id for d in ns_decisions if d.kept and d.parent_id in gone_ids]
        yield from _unlink_orphans(executor, dialect, thread_id, ns, orphans)
        if dialect == "postgres":
            deleted, blob_bytes = yield from _delete_unreferenced_blobs(executor, thread_id, ns)
            blobs_deleted += deleted
            freed += blob_bytes
    return RetentionReport(
        False,
        tuple(decisions),
        removed_writes=writes_deleted,
        removed_blobs=blobs_deleted,
        bytes_freed=freed,
        threads=(thread_id,),
    )


def _chunks(values: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _memory_prune(
    saver: InMemorySaver,
    thread_id: str,
    policy: RetentionPolicy,
    now: dt.datetime,
    dry_run: bool,
) -> RetentionReport:
    """The same policy on ``InMemorySaver``'s dictionaries (its storage has no other API)."""
    storage = saver.storage.get(thread_id, {})
    rows: list[_Row] = []
    versions: dict[tuple[str, str], dict[str, Any]] = {}
    for ns, checkpoints in storage.items():
        for checkpoint_id, (checkpoint, metadata, parent) in checkpoints.items():
            writes = saver.writes.get((thread_id, ns, checkpoint_id), {})
            loaded_metadata = saver.serde.loads_typed(metadata)
            parents = (loaded_metadata or {}).get("parents") or {}
            versions[(ns, checkpoint_id)] = dict(
                saver.serde.loads_typed(checkpoint).get("channel_versions") or {}
            )
            rows.append(
                _Row(
                    ns,
                    checkpoint_id,
                    parent,
                    len(checkpoint[1]) + len(metadata[1]),
                    len(writes),
                    sum(len(w[2][1]) for w in writes.values()),
                    any(w[1] == INTERRUPT_CHANNEL for w in writes.values()),
                    parents.get(""),
                    "counters_since_delta_snapshot" in (loaded_metadata or {}),
                )
            )
    if any(r.delta for r in rows):
        raise RetentionError(f"thread {thread_id!r} uses a DeltaChannel: it cannot be pruned")
    decisions = decide(thread_id, rows, policy, now)
    removed = [d for d in decisions if not d.kept]
    freed = sum(d.bytes for d in removed)
    if dry_run or not removed:
        return RetentionReport(dry_run, tuple(decisions), bytes_freed=freed, threads=(thread_id,))
    writes_deleted = blobs_deleted = 0
    gone_ids = {(d.checkpoint_ns, d.checkpoint_id) for d in removed}
    for ns, checkpoint_id in gone_ids:
        del storage[ns][checkpoint_id]
        writes_deleted += len(saver.writes.pop((thread_id, ns, checkpoint_id), {}))
    for decision in decisions:
        if decision.kept and (decision.checkpoint_ns, decision.parent_id) in gone_ids:
            checkpoint, metadata, _parent = storage[decision.checkpoint_ns][decision.checkpoint_id]
            storage[decision.checkpoint_ns][decision.checkpoint_id] = (checkpoint, metadata, None)
    live = {
        (ns, channel, str(version))
        for (ns, checkpoint_id), channels in versions.items()
        if (ns, checkpoint_id) not in gone_ids
        for channel, version in channels.items()
    }
    for key in [k for k in saver.blobs if k[0] == thread_id]:
        _thread, ns, channel, version = key
        if (ns, channel, str(version)) not in live:
            freed += len(saver.blobs.pop(key)[1])
            blobs_deleted += 1
    for ns in [ns for ns, checkpoints in storage.items() if not checkpoints]:
        del storage[ns]
    return RetentionReport(
        False, tuple(decisions), writes_deleted, blobs_deleted, freed, (thread_id,)
    )


@contextlib.contextmanager
def _pg_connection(saver: Any) -> Iterator[Any]:
    from psycopg_pool import ConnectionPool

    if isinstance(saver.conn, ConnectionPool):
        with saver.conn.connection() as conn:
            yield conn
    else:
        with saver.lock:
            yield saver.conn


@contextlib.asynccontextmanager
async def _apg_connection(saver: Any) -> AsyncIterator[Any]:
    from psycopg_pool import AsyncConnectionPool

    if isinstance(saver.conn, AsyncConnectionPool):
        async with saver.conn.connection() as conn:
            yield conn
    else:
        async with saver.lock:
            yield saver.conn
