"""After-run hooks: prune a thread every N runs of it."""

from __future__ import annotations

import logging
import operator
import threading
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, SupportsIndex
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler

from ctx_langgraph.retention.prune import CheckpointRetention
from ctx_langgraph.retention.report import RetentionReport

log = logging.getLogger(__name__)

__all__ = ["AsyncRetentionHook", "RetentionHook"]


class _EveryN:
    """Counts each thread's root runs; a thread is due for pruning at every N-th."""

    raise_error = False

    def __init__(self, retention: CheckpointRetention, *, every: int = 10) -> None:
        given: object = every
        # a count of runs: never a float (nan < 1 is False) nor a bool
        if isinstance(given, bool) or not isinstance(given, SupportsIndex):
            raise TypeError(f"every must be an int (a count of runs), got {given!r}")
        self.every = operator.index(given)
        if self.every < 1:
            raise ValueError(f"every must be at least 1, got {self.every}")
        self.retention = retention
        self.reports: list[RetentionReport] = []
        self._counts: dict[str, int] = defaultdict(int)
        self._threads: dict[UUID, str] = {}
        self._lock = threading.Lock()

    def _started(self, kwargs: Mapping[str, Any]) -> None:
        thread_id = (kwargs.get("metadata") or {}).get("thread_id")
        if kwargs.get("parent_run_id") is None and thread_id is not None:
            self._threads[kwargs["run_id"]] = str(thread_id)

    def _due(self, run_id: UUID) -> str | None:
        """The thread to prune now: its root run ended, the N-th since the last prune."""
        thread_id = self._threads.pop(run_id, None)
        if thread_id is None:
            return None
        with self._lock:
            self._counts[thread_id] += 1
            if self._counts[thread_id] < self.every:
                return None
            self._counts[thread_id] = 0
        return thread_id


def _failed(thread_id: str, exc: Exception) -> None:
    log.warning("ctx-langgraph: pruning checkpoints of %s failed: %s", thread_id, exc)


class RetentionHook(_EveryN, BaseCallbackHandler):
    """Prunes a thread after every N runs of it (attach it to the run's callbacks).

    A failed prune is logged and never breaks the run.

    Examples:
        .. code-block:: python

            hook = RetentionHook(CheckpointRetention(saver, RetentionPolicy(keep_last=10)), every=5)
            graph = builder.compile(checkpointer=saver).with_config(callbacks=[hook])
    """

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self._started(kwargs)

    def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        thread_id = self._due(kwargs["run_id"])
        if thread_id is not None:
            try:
                self.reports.append(self.retention.prune(thread_id))
            except Exception as exc:  # maintenance never breaks the run
                _failed(thread_id, exc)

    def on_chain_error(self, error: BaseException, **kwargs: Any) -> None:
        self._threads.pop(kwargs["run_id"], None)


class AsyncRetentionHook(_EveryN, AsyncCallbackHandler):
    """Async twin of :class:`RetentionHook`, for async savers (prunes with ``aprune``)."""

    async def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self._started(kwargs)

    async def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        thread_id = self._due(kwargs["run_id"])
        if thread_id is not None:
            try:
                self.reports.append(await self.retention.aprune(thread_id))
            except Exception as exc:  # maintenance never breaks the run
                _failed(thread_id, exc)

    async def on_chain_error(self, error: BaseException, **kwargs: Any) -> None:
        self._threads.pop(kwargs["run_id"], None)
