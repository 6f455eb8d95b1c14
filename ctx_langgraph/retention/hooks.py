"""After-run hooks: prune a thread every N runs of it."""

from __future__ import annotations

import logging
import operator
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, SupportsIndex
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler

from ctx_langgraph.retention.prune import CheckpointRetention
from ctx_langgraph.retention.report import RetentionReport

log = logging.getLogger(__name__)

__all__ = ["AsyncRetentionHook", "RetentionHook"]


@dataclass(eq=False)
class _Runs:
    """Counts each thread's root runs; says when one is due for pruning."""

    every: int
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    threads: dict[UUID, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        given: object = self.every
        # a count of runs: never a float (nan < 1 is False) nor a bool
        if isinstance(given, bool) or not isinstance(given, SupportsIndex):
            raise TypeError(f"every must be an int (a count of runs), got {given!r}")
        self.every = operator.index(given)
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

    Examples:
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
