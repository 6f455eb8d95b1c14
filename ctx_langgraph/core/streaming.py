"""Keep context management out of the user's message stream: our own model calls (summaries,
memory extraction) and the messages our nodes write into the state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar
from uuid import uuid4

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs, var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM

__all__ = ["TAG_NOSTREAM", "keep_out_of_message_stream", "not_streamed"]

Update = TypeVar("Update")


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
    """Model calls made inside are tagged ``nostream`` and do not reach LangGraph's message
    stream (tracing and the other callbacks are unchanged)."""
    config = merge_configs(ensure_config(), {"tags": [TAG_NOSTREAM]})
    config["callbacks"] = _without_stream(config.get("callbacks"))
    token = var_child_runnable_config.set(config)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def _message_streams(callbacks: Any) -> list[Any]:
    """The run's ``stream_mode="messages"`` handlers that keep the ids they have streamed."""
    if isinstance(callbacks, BaseCallbackManager):
        handlers = [*callbacks.handlers, *callbacks.inheritable_handlers]
    else:
        handlers = callbacks if isinstance(callbacks, list) else []
    unique = {id(handler): handler for handler in handlers if _streams_messages(handler)}
    return [h for h in unique.values() if isinstance(getattr(h, "seen", None), set)]


def keep_out_of_message_stream(update: Update, config: RunnableConfig | None) -> Update:
    """``update`` as it is, its messages marked as seen by the run's ``stream_mode="messages"``
    handlers (their ``seen`` set; a node cannot opt out of streaming its output otherwise)."""
    streams = _message_streams((config or {}).get("callbacks"))
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if not streams or not messages:
        return update
    ids = []
    for message in messages if isinstance(messages, Sequence) else [messages]:
        if isinstance(message, BaseMessage):
            if message.id is None:
                message.id = str(uuid4())
            ids.append(message.id)
    for stream in streams:
        stream.seen.update(ids)
    return update
