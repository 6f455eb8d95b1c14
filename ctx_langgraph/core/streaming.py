"""Keep our own model calls (summaries, memory extraction) out of the user's token stream.

LangGraph's ``stream_mode="messages"`` streams every chat-model call made inside a node unless
the call is tagged ``nostream``. A summarizer or a memory extractor is part of context
management, not of the conversation: its calls are still traced and booked in the ledger (those
callbacks stay), only the stream skips them, even when a custom summarizer passes its own
``config`` with tags of its own (which replace the run's tags).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables.config import ensure_config, merge_configs, var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM

__all__ = ["TAG_NOSTREAM", "not_streamed"]


def _streams_messages(handler: Any) -> bool:
    """LangGraph's ``stream_mode="messages"`` handler (a private class: matched by name)."""
    return any(
        cls.__name__.startswith("StreamMessagesHandler") and cls.__module__.startswith("langgraph")
        for cls in type(handler).__mro__
    )


def _without_stream(callbacks: Any) -> Any:
    if isinstance(callbacks, BaseCallbackManager):
        quiet = callbacks.copy()
        for handler in [*quiet.handlers, *quiet.inheritable_handlers]:
            if _streams_messages(handler):
                quiet.remove_handler(handler)
        return quiet
    if isinstance(callbacks, list):
        return [handler for handler in callbacks if not _streams_messages(handler)]
    return callbacks


@contextmanager
def not_streamed() -> Iterator[None]:
    """Model calls made inside (in this context, and threads or tasks started with a copy of
    it) are tagged ``nostream`` and do not reach LangGraph's message stream; tracing, the
    ledger's handler, metadata and the run's other callbacks are unchanged."""
    config = merge_configs(ensure_config(), {"tags": [TAG_NOSTREAM]})
    config["callbacks"] = _without_stream(config.get("callbacks"))
    token = var_child_runnable_config.set(config)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)
