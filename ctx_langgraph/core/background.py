"""Work that goes on after a node returns, in a daemon thread or a task of the running loop,
with the run's context; a failure is logged, never raised into the run."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["in_task", "in_thread"]

log = logging.getLogger("ctx_langgraph")

_TASKS: set[asyncio.Task[None]] = set()


def in_thread(job: Callable[[], Any], name: str, done: Callable[[Any], None] | None = None) -> None:
    """Run ``job`` in a daemon thread with the caller's context variables (its config and
    callbacks go along); ``done`` gets its result; a failure is logged."""

    def guarded() -> None:
        try:
            result = job()
        except Exception as exc:
            log.warning("ctx-langgraph: background %s failed: %s", name, exc)
            return
        if done is not None:
            done(result)

    in_context = contextvars.copy_context().run
    threading.Thread(target=in_context, args=(guarded,), name=name, daemon=True).start()


def in_task(job: Awaitable[Any], name: str, done: Callable[[Any], None] | None = None) -> None:
    """Run ``job`` as a task of the running loop, held until it ends; ``done`` gets its
    result; a failure is logged."""

    async def guarded() -> None:
        try:
            result = await job
        except Exception as exc:
            log.warning("ctx-langgraph: background %s failed: %s", name, exc)
            return
        if done is not None:
            done(result)

    task = asyncio.get_running_loop().create_task(guarded())
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
