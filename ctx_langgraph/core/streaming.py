"""Keep context management out of the user's message stream: our own model calls (summaries,
memory extraction) and the messages our nodes write into the state.

LangGraph's ``stream_mode="messages"`` streams every chat-model call made inside a node unless
the call is tagged ``nostream``. A summarizer or a memory extractor is part of context
management, not of the conversation: its calls are still traced and booked in the ledger (those
callbacks stay), only the stream skips them, even when a custom summarizer passes its own
``config`` with tags of its own (which replace the run's tags).

The same stream also yields every message a node *returns* that it has not yet seen in a node's
input: the summary message, the long-term memory message, pinned rules, a stand-in tool result,
and the ``RemoveMessage`` that rewrites the view. A chat UI would show them as turns of the
conversation. :func:`keep_out_of_message_stream` keeps a node's update out of it.
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


def _message_streams(callbacks: Any) -> list[Any]:
    """The run's ``stream_mode="messages"`` handlers that keep the ids they have streamed."""
    if isinstance(callbacks, BaseCallbackManager):
        handlers = [*callbacks.handlers, *callbacks.inheritable_handlers]
    elif isinstance(callbacks, list):
        handlers = callbacks
    else:
        return []
    unique = {id(handler): handler for handler in handlers if _streams_messages(handler)}
    return [h for h in unique.values() if isinstance(getattr(h, "seen", None), set)]


def keep_out_of_message_stream(update: Update, config: RunnableConfig | None) -> Update:
    """``update`` (a node's state update) as it is, with none of its messages streamed by
    LangGraph's ``stream_mode="messages"`` for this run; the state gets them all the same.

    Why by hand: LangGraph (checked against 1.2.24) streams the messages of a node's output that
    it has not seen in a node's input, and a node cannot opt out. ``nostream`` is read for
    chat-model calls only (langgraph issue #7509: a node tagged ``nostream`` still streams its
    output), the hidden tag also hides the node from the ``updates``, ``tasks`` and ``debug``
    streams and from ``interrupt_before="*"``, and ``StateGraph.add_node`` takes neither. What the
    handler does honour is its record of the message ids it has seen (its ``seen`` set, not a
    public API: tests/test_stream_leak.py fails if it goes): the ids of the update's messages are
    added to it before the node returns, so the handler takes them for state it has already
    seen. The user's messages and the model's replies are never new in an update of ours (they
    reach our nodes in their input), so nothing they stream is held back. With no such handler
    (another stream mode, ``invoke``), nothing happens.
    """
    streams = _message_streams((config or {}).get("callbacks"))
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if not streams or not messages:
        return update
    ids = []
    for message in messages if isinstance(messages, Sequence) else [messages]:
        if isinstance(message, BaseMessage):
            if message.id is None:  # (the messages reducer would give it one anyway)
                message.id = str(uuid4())
            ids.append(message.id)
    for stream in streams:
        stream.seen.update(ids)
    return update
