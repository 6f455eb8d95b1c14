"""Checkpoint retention: prune old LangGraph checkpoints by policy (DESIGN section 9).

Every super-step writes a checkpoint, and the default ``messages`` channel stores the whole list
again each time, so a long thread's checkpoints grow much faster than its conversation. The
open-source savers can delete a whole thread, and only ``PostgresSaver`` can prune (keep the
latest, or nothing). :class:`CheckpointRetention` keeps, per thread and checkpoint namespace:

- ``latest``: the newest checkpoint (the one a run resumes from);
- ``keep_last``: the newest ``keep_last`` checkpoints;
- ``keep_within``: every checkpoint created within ``keep_within`` of now;
- ``pending_writes``: a checkpoint with writes and no child yet, a run that can still resume
  (``interrupt`` is added when one of those writes is an interrupt);
- ``fork_point``: an ancestor of a kept checkpoint with two or more children, where
  ``update_state`` on an old checkpoint (or a replay from it) started another timeline.

Everything else is removed, with its writes and, where blobs are stored apart (PostgreSQL,
``InMemorySaver``), the blobs no kept checkpoint references. A kept checkpoint whose parent is
removed is left with no parent, as ``PostgresSaver.prune`` does. A subgraph call's namespace
goes with the root checkpoint it started from. Threads that use a ``DeltaChannel`` are refused
(:class:`~ctx_langgraph.errors.RetentionError`): their values are rebuilt from older checkpoints.

The history store is never touched: raw history, summary versions and the active summary
pointer live in their own tables, so a thread pruned to its last checkpoint still answers
history lookups for its first turn.

Each thread is pruned in one transaction. On PostgreSQL it reads one ``REPEATABLE READ``
snapshot, so what a run saves meanwhile is neither seen nor deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph._table import format_table
from ctx_langgraph.errors import RetentionError

__all__ = [
    "AsyncRetentionHook",
    "CheckpointDecision",
    "CheckpointRetention",
    "RetentionHook",
    "RetentionPolicy",
    "RetentionReport",
]

log = logging.getLogger(__name__)

INTERRUPT_CHANNEL = "__interrupt__"
_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01
_RETRIES = 3


# --------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class RetentionPolicy:
    """What to keep of each thread's checkpoints (per checkpoint namespace).

    Args:
        keep_last: keep the newest N checkpoints (at least 1: the latest is always kept).
        keep_within: also keep every checkpoint younger than this; None: age does not matter.

    Example:
        >>> RetentionPolicy(keep_last=10, keep_within=dt.timedelta(days=7))
        RetentionPolicy(keep_last=10, keep_within=datetime.timedelta(days=7))
    """

    keep_last: int = 10
    keep_within: dt.timedelta | None = None

    def __post_init__(self) -> None:
        if isinstance(self.keep_last, bool) or self.keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {self.keep_last!r}")
        if self.keep_within is not None and self.keep_within <= dt.timedelta(0):
            raise ValueError(f"keep_within must be positive, got {self.keep_within!r}")


@dataclass(frozen=True)
class _Row:
    """What a backend reads of one checkpoint."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    bytes: int
    writes: int
    writes_bytes: int
    interrupted: bool
    root_id: str | None
    """The root graph's checkpoint a subgraph call started from (``metadata["parents"][""]``)."""
    delta: bool


@dataclass(frozen=True)
class CheckpointDecision:
    """What the policy decided for one checkpoint, and why."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    created_at: dt.datetime | None
    """From the checkpoint id (LangGraph's ids are time-ordered UUIDv6); None for other ids."""
    kept: bool
    reasons: tuple[str, ...]
    """Why it is kept (``latest``, ``keep_last``, ``keep_within``, ``pending_writes``,
    ``interrupt``, ``fork_point``); why it goes (``subgraph call of a removed checkpoint``), or
    empty when no rule keeps it."""
    bytes: int = 0
    """The checkpoint's stored size and its writes' (blobs are counted when deleted)."""


def created_at(checkpoint_id: str) -> dt.datetime | None:
    """The creation time a UUIDv6 checkpoint id carries (LangGraph's ``uuid6``), else None.

    Example:
        >>> from langgraph.checkpoint.base.id import uuid6
        >>> abs(created_at(str(uuid6())) - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(seconds=5)
        True
        >>> created_at("not-a-uuid") is None
        True
    """
    try:
        value = UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if value.version != 6:
        return None
    bits = value.int
    ticks = ((bits >> 96) << 28) | (((bits >> 80) & 0xFFFF) << 12) | ((bits >> 64) & 0x0FFF)
    return dt.datetime.fromtimestamp((ticks - _UUID_EPOCH) / 1e7, dt.timezone.utc)


def decide(
    thread_id: str, rows: Sequence[_Row], policy: RetentionPolicy, now: dt.datetime
) -> list[CheckpointDecision]:
    """The policy applied to one thread's checkpoints (all namespaces), newest first per namespace."""
    by_ns: dict[str, list[_Row]] = defaultdict(list)
    for row in rows:
        by_ns[row.checkpoint_ns].append(row)
    reasons: dict[tuple[str, str], list[str]] = {}
    for ns, ns_rows in by_ns.items():
        ns_rows.sort(key=lambda r: r.checkpoint_id, reverse=True)
        children: dict[str, int] = defaultdict(int)
        for row in ns_rows:
            if row.parent_id:
                children[row.parent_id] += 1
        for index, row in enumerate(ns_rows):
            why: list[str] = []
            if index == 0:
                why.append("latest")
            if index < policy.keep_last:
                why.append("keep_last")
            born = created_at(row.checkpoint_id)
            if (
                policy.keep_within is not None
                and born is not None
                and born >= now - policy.keep_within
            ):
                why.append("keep_within")
            if row.writes and not children[row.checkpoint_id]:
                why.append("pending_writes")
                if row.interrupted:
                    why.append("interrupt")
            reasons[(ns, row.checkpoint_id)] = why
        # where timelines split: every branching ancestor of a kept checkpoint (the fork point
        # of an update_state or a replay from an old checkpoint), however far up
        parents = {row.checkpoint_id: row.parent_id for row in ns_rows}
        visited: set[str] = set()
        for row in ns_rows:
            if not reasons[(ns, row.checkpoint_id)]:
                continue
            parent = parents.get(row.checkpoint_id)
            while parent in parents and parent not in visited:
                visited.add(parent)
                if children[parent] >= 2 and "fork_point" not in reasons[(ns, parent)]:
                    reasons[(ns, parent)].append("fork_point")
                parent = parents.get(parent)
    # a subgraph call's namespace goes with the root checkpoint it started from
    root_ids = {row.checkpoint_id for row in by_ns.get("", ())}
    gone_calls = {
        ns
        for ns, ns_rows in by_ns.items()
        if ":" in ns
        and any(r.root_id in root_ids and not reasons[("", str(r.root_id))] for r in ns_rows)
    }
    decisions = []
    for ns in sorted(by_ns):
        for row in by_ns[ns]:
            why = reasons[(ns, row.checkpoint_id)]
            kept = bool(why) and ns not in gone_calls
            decisions.append(
                CheckpointDecision(
                    thread_id,
                    ns,
                    row.checkpoint_id,
                    row.parent_id,
                    created_at(row.checkpoint_id),
                    kept,
                    tuple(why)
                    if ns not in gone_calls
                    else ("subgraph call of a removed checkpoint",),
                    row.bytes + row.writes_bytes,
                )
            )
    return decisions


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class RetentionReport:
    """What a prune kept and removed, and why.

    Example:
        >>> report = RetentionReport(dry_run=True)
        >>> report.kept, report.removed, report.bytes_freed
        ((), (), 0)
    """

    dry_run: bool
    decisions: tuple[CheckpointDecision, ...] = ()
    removed_writes: int = 0
    removed_blobs: int = 0
    bytes_freed: int | None = 0
    """Bytes of the removed checkpoints, writes and blobs as stored (a dry run: what would be)."""
    threads: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    """Threads left alone, with the reason (a ``DeltaChannel``)."""

    @property
    def kept(self) -> tuple[CheckpointDecision, ...]:
        return tuple(d for d in self.decisions if d.kept)

    @property
    def removed(self) -> tuple[CheckpointDecision, ...]:
        return tuple(d for d in self.decisions if not d.kept)

    def merged(self, other: RetentionReport) -> RetentionReport:
        freed = (
            None
            if self.bytes_freed is None or other.bytes_freed is None
            else self.bytes_freed + other.bytes_freed
        )
        return RetentionReport(
            self.dry_run,
            self.decisions + other.decisions,
            self.removed_writes + other.removed_writes,
            self.removed_blobs + other.removed_blobs,
            freed,
            self.threads + other.threads,
            self.refused + other.refused,
        )

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        return {
            "dry_run": self.dry_run,
            "threads": list(self.threads),
            "kept": len(self.kept),
            "removed": len(self.removed),
            "removed_writes": self.removed_writes,
            "removed_blobs": self.removed_blobs,
            "bytes_freed": self.bytes_freed,
            "refused": list(self.refused),
            "decisions": [
                {
                    **dataclasses.asdict(d),
                    "created_at": d.created_at.isoformat() if d.created_at else None,
                    "reasons": list(d.reasons),
                }
                for d in self.decisions
            ],
        }

    def table(self, *, limit: int | None = 50) -> str:
        """Per thread and namespace: kept and removed counts with the reasons, then totals."""
        groups: dict[tuple[str, str], list[CheckpointDecision]] = defaultdict(list)
        for decision in self.decisions:
            groups[(decision.thread_id, decision.checkpoint_ns)].append(decision)
        rows = []
        for (thread, ns), decisions in sorted(groups.items())[:limit]:
            why: dict[str, int] = defaultdict(int)
            for d in decisions:
                for reason in d.reasons if d.kept else ():
                    why[reason] += 1
            rows.append(
                [
                    thread,
                    ns or "(root)",
                    f"{sum(d.kept for d in decisions):,}",
                    f"{sum(not d.kept for d in decisions):,}",
                    ", ".join(f"{k} {v}" for k, v in why.items()),
                ]
            )
        verb = "would free" if self.dry_run else "freed"
        freed = "unknown" if self.bytes_freed is None else f"{self.bytes_freed:,} bytes"
        lines = [
            format_table(["thread", "namespace", "kept", "removed", "kept because"], rows),
            f"{len(self.kept):,} kept, {len(self.removed):,} removed"
            + (
                ""
                if self.dry_run
                else f", {self.removed_writes:,} writes, {self.removed_blobs:,} blobs"
            )
            + f"; {verb} {freed}"
            + (" (dry run: nothing was deleted)" if self.dry_run else ""),
        ]
        if self.refused:
            lines.append("refused: " + "; ".join(self.refused))
        return "\n".join(lines)


# --------------------------------------------------------------------------- SQL (written once)


@dataclass(frozen=True)
class _Sql:
    """One statement for a backend to run; ``fetch`` says whether its rows come back, and
    ``count`` whether its row count does."""

    sql: str
    params: Sequence[Any] = ()
    fetch: bool = False
    count: bool = False


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


def _sql_thread_flow(
    dialect: Dialect,
    thread_id: str,
    policy: RetentionPolicy,
    now: dt.datetime,
    dry_run: bool,
) -> Generator[_Sql, Any, RetentionReport]:
    """One thread's prune, as statements run in one transaction."""
    p = "%s" if dialect == "postgres" else "?"
    if dialect == "postgres":
        yield _Sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    records = yield _Sql(_ROWS[dialect], (INTERRUPT_CHANNEL, thread_id), fetch=True)
    rows = [_row(r) for r in records]
    if any(r.delta for r in rows):
        raise RetentionError(
            f"thread {thread_id!r} uses a DeltaChannel: its values are rebuilt from older "
            "checkpoints, so they cannot be pruned by age or count"
        )
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
        for chunk in _chunks(gone):
            test, values = _in(dialect, chunk)
            writes_deleted += yield _Sql(
                f"DELETE FROM {_WRITES_TABLE[dialect]} WHERE thread_id = {p} AND "
                f"checkpoint_ns = {p} AND checkpoint_id {test}",
                [thread_id, ns, *values],
                count=True,
            )
            yield _Sql(
                f"DELETE FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = {p} "
                f"AND checkpoint_id {test}",
                [thread_id, ns, *values],
            )
        orphans = [d.checkpoint_id for d in ns_decisions if d.kept and d.parent_id in set(gone)]
        for chunk in _chunks(orphans):
            test, values = _in(dialect, chunk)
            yield _Sql(
                f"UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = {p} "
                f"AND checkpoint_ns = {p} AND checkpoint_id {test}",
                [thread_id, ns, *values],
            )
        if dialect == "postgres":
            # a blob goes only when no kept checkpoint of the namespace references its version
            stored = yield _Sql(
                "SELECT channel, version, octet_length(blob) FROM checkpoint_blobs "
                "WHERE thread_id = %s AND checkpoint_ns = %s",
                (thread_id, ns),
                fetch=True,
            )
            referenced = yield _Sql(
                "SELECT DISTINCT v.key, v.value FROM checkpoints c CROSS JOIN LATERAL "
                "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
                "WHERE c.thread_id = %s AND c.checkpoint_ns = %s",
                (thread_id, ns),
                fetch=True,
            )
            live = {(str(c), str(v)) for c, v in referenced}
            garbage: dict[str, list[str]] = defaultdict(list)
            for channel, version, size in stored:
                if (str(channel), str(version)) not in live:
                    garbage[str(channel)].append(str(version))
                    freed += int(size or 0)
            for channel, versions in garbage.items():
                blobs_deleted += yield _Sql(
                    "DELETE FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s "
                    "AND channel = %s AND version = ANY(%s)",
                    (thread_id, ns, channel, versions),
                    count=True,
                )
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


# --------------------------------------------------------------------------- InMemorySaver


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


# --------------------------------------------------------------------------- the runner


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

    Example:
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
        with self._sync_cursor() as run:
            return [str(r[0]) for r in run(_Sql(_THREADS, fetch=True))]

    def _prune_one(self, thread_id: str, now: dt.datetime, dry_run: bool) -> RetentionReport:
        saver = self.checkpointer
        if isinstance(saver, InMemorySaver):
            return _memory_prune(saver, thread_id, self.policy, now, dry_run)
        assert self.dialect is not None
        for attempt in range(_RETRIES):
            try:
                with self._sync_cursor(transaction=True) as run:
                    flow = _sql_thread_flow(self.dialect, thread_id, self.policy, now, dry_run)
                    return _drive(flow, run)
            except Exception as exc:
                if not _retryable(exc) or attempt == _RETRIES - 1:
                    raise
                log.info("ctx-langgraph: retention of %s raced a writer; retrying", thread_id)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.contextmanager
    def _sync_cursor(self, *, transaction: bool = False) -> Iterator[Any]:
        saver: Any = self.checkpointer
        if self.dialect == "sqlite":
            saver.setup()
            with saver.lock:
                conn = saver.conn
                if transaction:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    yield lambda stmt: _sqlite_run(conn, stmt)
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
                yield lambda stmt: _pg_run(cur, stmt)

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
            async with self._async_cursor() as run:
                threads = [str(r[0]) for r in await run(_Sql(_THREADS, fetch=True))]
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
                async with self._async_cursor(transaction=True) as run:
                    flow = _sql_thread_flow(self.dialect, thread_id, self.policy, now, dry_run)
                    return await _adrive(flow, run)
            except Exception as exc:
                if not _retryable(exc) or attempt == _RETRIES - 1:
                    raise
                log.info("ctx-langgraph: retention of %s raced a writer; retrying", thread_id)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.asynccontextmanager
    async def _async_cursor(self, *, transaction: bool = False) -> AsyncIterator[Any]:
        saver: Any = self.checkpointer
        if self.dialect == "sqlite":
            await saver.setup()
            async with saver.lock:
                conn = saver.conn
                if transaction:
                    await conn.execute("BEGIN IMMEDIATE")
                try:
                    yield lambda stmt: _aiosqlite_run(conn, stmt)
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

                async def run(stmt: _Sql) -> Any:
                    return await _apg_run(cur, stmt)

                yield run


# --------------------------------------------------------------------------- executors


def _drive(flow: Generator[_Sql, Any, RetentionReport], run: Any) -> RetentionReport:
    try:
        stmt = next(flow)
        while True:
            stmt = flow.send(run(stmt))
    except StopIteration as done:
        report: RetentionReport = done.value
        return report


async def _adrive(flow: Generator[_Sql, Any, RetentionReport], run: Any) -> RetentionReport:
    try:
        stmt = next(flow)
        while True:
            stmt = flow.send(await run(stmt))
    except StopIteration as done:
        report: RetentionReport = done.value
        return report


def _sqlite_run(conn: Any, stmt: _Sql) -> Any:
    cur = conn.execute(stmt.sql, list(stmt.params))
    if stmt.fetch:
        return cur.fetchall()
    return cur.rowcount if stmt.count else None


async def _aiosqlite_run(conn: Any, stmt: _Sql) -> Any:
    async with conn.execute(stmt.sql, list(stmt.params)) as cur:
        if stmt.fetch:
            return list(await cur.fetchall())
        return cur.rowcount if stmt.count else None


def _pg_run(cur: Any, stmt: _Sql) -> Any:
    # unprepared: PostgreSQL plans each statement knowing its arrays
    cur.execute(stmt.sql, list(stmt.params) or None, prepare=False)
    if stmt.fetch:
        return cur.fetchall()
    return cur.rowcount if stmt.count else None


async def _apg_run(cur: Any, stmt: _Sql) -> Any:
    await cur.execute(stmt.sql, list(stmt.params) or None, prepare=False)
    if stmt.fetch:
        return await cur.fetchall()
    return cur.rowcount if stmt.count else None


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


# --------------------------------------------------------------------------- after-run hooks


@dataclass(eq=False)
class _Runs:
    """Counts each thread's root runs; says when one is due for pruning."""

    every: int
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    threads: dict[UUID, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"every must be at least 1, got {self.every}")

    def started(
        self, run_id: UUID, parent_run_id: UUID | None, metadata: Mapping[str, Any] | None
    ) -> None:
        thread_id = (metadata or {}).get("thread_id")
        if parent_run_id is None and thread_id is not None:
            self.threads[run_id] = str(thread_id)

    def ended(self, run_id: UUID) -> str | None:
        """The thread to prune now: its root run ended, the N-th since the last prune."""
        thread_id = self.threads.pop(run_id, None)
        if thread_id is None:
            return None
        with self.lock:
            self.counts[thread_id] += 1
            if self.counts[thread_id] < self.every:
                return None
            self.counts[thread_id] = 0
        return thread_id


class RetentionHook(BaseCallbackHandler):
    """Prunes a thread after every N runs of it (attach it to the run's callbacks).

    A failed prune is logged and never breaks the run.

    Example:
        .. code-block:: python

            hook = RetentionHook(CheckpointRetention(saver, RetentionPolicy(keep_last=10)), every=5)
            graph = builder.compile(checkpointer=saver).with_config(callbacks=[hook])
    """

    raise_error = False

    def __init__(self, retention: CheckpointRetention, *, every: int = 10) -> None:
        self.retention = retention
        self.runs = _Runs(every)
        self.reports: list[RetentionReport] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.runs.started(kwargs["run_id"], kwargs.get("parent_run_id"), kwargs.get("metadata"))

    def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        thread_id = self.runs.ended(kwargs["run_id"])
        if thread_id is not None:
            try:
                self.reports.append(self.retention.prune(thread_id))
            except Exception as exc:  # maintenance never breaks the run
                log.warning("ctx-langgraph: pruning checkpoints of %s failed: %s", thread_id, exc)

    def on_chain_error(self, error: BaseException, **kwargs: Any) -> None:
        self.runs.threads.pop(kwargs["run_id"], None)


class AsyncRetentionHook(AsyncCallbackHandler):
    """Async twin of :class:`RetentionHook`, for async savers (prunes with ``aprune``)."""

    raise_error = False

    def __init__(self, retention: CheckpointRetention, *, every: int = 10) -> None:
        self.retention = retention
        self.runs = _Runs(every)
        self.reports: list[RetentionReport] = []

    async def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.runs.started(kwargs["run_id"], kwargs.get("parent_run_id"), kwargs.get("metadata"))

    async def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        thread_id = self.runs.ended(kwargs["run_id"])
        if thread_id is not None:
            try:
                self.reports.append(await self.retention.aprune(thread_id))
            except Exception as exc:  # maintenance never breaks the run
                log.warning("ctx-langgraph: pruning checkpoints of %s failed: %s", thread_id, exc)

    async def on_chain_error(self, error: BaseException, **kwargs: Any) -> None:
        self.runs.threads.pop(kwargs["run_id"], None)


def parse_age(text: str) -> dt.timedelta:
    """``7d``, ``12h``, ``30m``, ``45s`` or ``2w`` as a timedelta (the CLI's ``--keep-within``).

    Example:
        >>> parse_age("7d"), parse_age("36h")
        (datetime.timedelta(days=7), datetime.timedelta(days=1, seconds=43200))
    """
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    text = text.strip().lower()
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit():
        raise ValueError(f"an age looks like 7d, 12h, 30m, 45s or 2w; got {text!r}")
    return dt.timedelta(**{units[text[-1]]: int(text[:-1])})
