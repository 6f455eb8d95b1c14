"""``CheckpointRetention``: prune a checkpointer's old checkpoints by a policy."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.errors import RetentionError
from ctx_langgraph.retention.memory_saver import memory_prune, memory_threads
from ctx_langgraph.retention.policy import (
    INTERRUPT_CHANNEL,
    CheckpointDecision,
    RetentionPolicy,
    _Row,
)
from ctx_langgraph.retention.report import RetentionReport, planned
from ctx_langgraph.storage import checkpoints as saver_ops
from ctx_langgraph.storage.checkpoints import asaver_transaction, saver_transaction
from ctx_langgraph.storage.dialects import POSTGRES, SQLITE, Dialect
from ctx_langgraph.storage.runner import bind
from ctx_langgraph.storage.statements import Op

log = logging.getLogger(__name__)
_RETRIES = 3

__all__ = ["CheckpointRetention"]


def _dialect_of(saver: BaseCheckpointSaver[Any]) -> Dialect | None:
    module = type(saver).__module__
    if module.startswith("langgraph.checkpoint.sqlite"):
        return SQLITE
    if module.startswith("langgraph.checkpoint.postgres") and "shallow" not in module:
        return POSTGRES
    return None


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


def _thread_op(
    d: Dialect, thread_id: str, policy: RetentionPolicy, now: dt.datetime, dry_run: bool
) -> Op[RetentionReport]:
    """One thread's prune, as statements run in one transaction; a thread that uses a
    ``DeltaChannel`` is refused."""
    records = yield from saver_ops.checkpoint_records(d, thread_id, INTERRUPT_CHANNEL)
    plan = planned(thread_id, [_row(r) for r in records], policy, now, dry_run)
    if dry_run or not plan.removed:
        return plan
    writes_deleted = blobs_deleted = 0
    freed = plan.bytes_freed or 0
    by_ns: dict[str, list[CheckpointDecision]] = defaultdict(list)
    for decision in plan.decisions:
        by_ns[decision.checkpoint_ns].append(decision)
    for ns, ns_decisions in by_ns.items():
        gone = [c.checkpoint_id for c in ns_decisions if not c.kept]
        if not gone:
            continue
        writes_deleted += yield from saver_ops.delete_checkpoints(d, thread_id, ns, gone)
        gone_ids = set(gone)
        orphans = [c.checkpoint_id for c in ns_decisions if c.kept and c.parent_id in gone_ids]
        yield from saver_ops.unlink_checkpoints(d, thread_id, ns, orphans)
        if d == POSTGRES:
            deleted, blob_bytes = yield from saver_ops.delete_unreferenced_blobs(thread_id, ns)
            blobs_deleted += deleted
            freed += blob_bytes
    return replace(
        plan, removed_writes=writes_deleted, removed_blobs=blobs_deleted, bytes_freed=freed
    )


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
    ``AsyncPostgresSaver`` (one transaction per thread on the SQL savers). Use :meth:`prune` with
    sync savers, :meth:`aprune` with async ones (``InMemorySaver`` takes both).

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
        return run(self._prune(thread_id, dry_run, now or dt.datetime.now(dt.timezone.utc)))

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
        return await arun(self._prune(thread_id, dry_run, when))

    def _prune(
        self, thread_id: str | None, dry_run: bool, now: dt.datetime
    ) -> Flow[RetentionReport]:
        threads = (
            [thread_id]
            if thread_id is not None
            else (yield from call(self._threads, self._athreads))
        )
        report = RetentionReport(dry_run, bytes_freed=0)
        for thread in threads:
            try:
                for attempt in range(_RETRIES):
                    try:
                        one = yield from call(
                            self._prune_one, self._aprune_one, str(thread), now, dry_run
                        )
                        break
                    except Exception as exc:
                        if not _retryable(exc) or attempt == _RETRIES - 1:
                            raise
                        log.info("ctx-langgraph: retention of %s raced a writer; retrying", thread)
                report = report.merged(one)
            except RetentionError as exc:
                if thread_id is not None:
                    raise
                report = report.merged(RetentionReport(dry_run, refused=(f"{thread}: {exc}",)))
        return report

    def _threads(self) -> list[str]:
        saver = self.checkpointer
        if isinstance(saver, InMemorySaver):
            return memory_threads(saver)
        assert self.dialect is not None
        with saver_transaction(saver, self.dialect) as statements:
            return run(bind(saver_ops.thread_ids(), statements.execute))

    async def _athreads(self) -> list[str]:
        assert self.dialect is not None
        async with asaver_transaction(self.checkpointer, self.dialect) as tx:
            return await arun(bind(saver_ops.thread_ids(), tx.execute, tx.aexecute))

    def _prune_one(self, thread_id: str, now: dt.datetime, dry_run: bool) -> RetentionReport:
        saver = self.checkpointer
        if isinstance(saver, InMemorySaver):
            return memory_prune(saver, thread_id, self.policy, now, dry_run)
        assert self.dialect is not None
        with saver_transaction(saver, self.dialect, write=True) as statements:
            op = _thread_op(self.dialect, thread_id, self.policy, now, dry_run)
            return run(bind(op, statements.execute))

    async def _aprune_one(self, thread_id: str, now: dt.datetime, dry_run: bool) -> RetentionReport:
        assert self.dialect is not None
        async with asaver_transaction(self.checkpointer, self.dialect, write=True) as tx:
            op = _thread_op(self.dialect, thread_id, self.policy, now, dry_run)
            return await arun(bind(op, tx.execute, tx.aexecute))
