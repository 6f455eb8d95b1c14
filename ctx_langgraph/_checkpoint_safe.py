"""Replies a checkpointer can store: an integer beyond 64 bits in a model's reply (which msgpack
cannot store) is kept as its decimal text, which a tool's argument parsing reads back."""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.types import Command

__all__ = ["checkpoint_safe"]

log = logging.getLogger(__name__)

_LOW, _HIGH = -(2**63), 2**64 - 1


def _storable(value: Any) -> tuple[Any, bool]:
    """``value`` with every integer msgpack cannot store as its text, and whether any was."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, False) if _LOW <= value <= _HIGH else (str(value), True)
    if isinstance(value, dict):
        pairs = {key: _storable(item) for key, item in value.items()}
        if any(hit for _item, hit in pairs.values()):
            return {key: item for key, (item, _hit) in pairs.items()}, True
    elif isinstance(value, list | tuple):
        items = [_storable(item) for item in value]
        if any(hit for _item, hit in items):
            return type(value)(item for item, _hit in items), True
    return value, False


def _message(message: Any) -> Any:
    if not isinstance(message, AIMessage):
        return message
    calls, calls_changed = _storable([dict(call) for call in message.tool_calls])
    content, content_changed = _storable(message.content)
    if not (calls_changed or content_changed):
        return message
    log.warning(
        "ctx-langgraph: a reply (%s) carries an integer beyond 64 bits; it is kept as text so "
        "the checkpoint can store it",
        message.id,
    )
    update: dict[str, Any] = {}
    if calls_changed:
        update["tool_calls"] = calls
    if content_changed:
        update["content"] = content
    return message.model_copy(update=update)


def _messages(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return _message(value)
    if isinstance(value, list):
        return [_message(item) for item in value]
    return value


def checkpoint_safe(result: Any) -> Any:
    """A model node's return (a dict update, a ``Command``, a message or a list of them, or a
    ``ModelResponse``) with its replies made storable by the checkpointer.

    Examples:
        >>> reply = AIMessage("", tool_calls=[{"name": "f", "args": {"n": -10**30}, "id": "c"}])
        >>> checkpoint_safe({"messages": [reply]})["messages"][0].tool_calls[0]["args"]
        {'n': '-1000000000000000000000000000000'}
    """
    if isinstance(result, dict) and "messages" in result:
        return {**result, "messages": _messages(result["messages"])}
    if isinstance(result, Command) and isinstance(result.update, dict):
        return dataclasses.replace(result, update=checkpoint_safe(result.update))
    if isinstance(result, BaseMessage | list):
        return _messages(result)
    replies = getattr(result, "result", None)
    if isinstance(replies, list) and _is_model_response(result):
        return dataclasses.replace(result, result=_messages(replies))
    return result


def _is_model_response(value: Any) -> bool:
    """``value`` is ``create_agent``'s ``ModelResponse`` (looked up, never imported)."""
    module = sys.modules.get("langchain.agents.middleware.types")
    response = getattr(module, "ModelResponse", None)
    return isinstance(response, type) and isinstance(value, response)
