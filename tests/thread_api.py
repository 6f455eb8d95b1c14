"""The whole-thread operations of :mod:`ctx_langgraph.threads` behind one awaitable, in the
mode of the ``api`` fixture: ``await threads_of(api).export_thread("t")`` calls
``export_thread(store, "t")`` (sync mode) or awaits ``aexport_thread(store, "t")`` (async)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ctx_langgraph.threads as threads


class ThreadApi:
    def __init__(self, store: Any, mode: str) -> None:
        self.store = store
        self.mode = mode

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if self.mode == "sync":
            function = getattr(threads, name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                return function(self.store, *args, **kwargs)
        else:
            function = getattr(threads, "a" + name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                return await function(self.store, *args, **kwargs)

        return call


def threads_of(api: Any) -> ThreadApi:
    """The whole-thread operations on ``api``'s store, in ``api``'s mode."""
    return ThreadApi(api.store, api.mode)
