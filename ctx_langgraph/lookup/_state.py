"""What the lookup reads from the graph state (an injected ToolRuntime only): the ``context``
channel, the current turn, and the room a page may take under the compaction trigger.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.prebuilt import ToolRuntime

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.state import unpack

__all__ = [
    "MIN_MAX_TOKENS",
    "ROOM_MARGIN",
    "current_turn",
    "page_cap",
    "state_context",
    "useful_page",
]

MIN_MAX_TOKENS = 300
"""Room for the notice, one record's header, its cut mark and a cursor."""
ROOM_MARGIN = 64
"""Tokens kept free under the trigger besides the page."""


def _state(runtime: object) -> Any:
    return runtime.state if isinstance(runtime, ToolRuntime) else None


def state_context(runtime: object) -> Mapping[str, Any] | None:
    """The graph state's ``context`` channel, when the tool runs inside a graph."""
    state = _state(runtime)
    context = (
        state.get("context") if isinstance(state, Mapping) else getattr(state, "context", None)
    )
    return unpack(context) if isinstance(context, Mapping) else None


def _messages(runtime: object) -> list[BaseMessage]:
    state = _state(runtime)
    if not isinstance(state, Mapping):
        return []
    return [m for m in state.get("messages") or () if isinstance(m, BaseMessage)]


def current_turn(runtime: object) -> frozenset[str]:
    """Ids of the current turn's messages: the last user message and what followed it."""
    messages = _messages(runtime)
    start = max((i for i, m in enumerate(messages) if m.type == "human"), default=0)
    return frozenset(str(m.id) for m in messages[start:] if m.id)


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def page_cap(max_tokens: int, runtime: object, tool_name: str, counter: TokenCounter) -> int:
    """``max_tokens``, or less when ``ctx_budget`` left less room under its trigger (shared by
    the reply's calls of this tool), never below :func:`useful_page`."""
    context = state_context(runtime)
    budget = context.get("budget") if context is not None else None
    if not isinstance(budget, Mapping):
        return max_tokens
    trigger, total = _whole(budget.get("trigger")), _whole(budget.get("total"))
    if trigger is None or total is None:
        return max_tokens
    margin, estimate = _whole(budget.get("margin")), _whole(budget.get("input_tokens"))
    rate = margin / estimate if margin and estimate and margin > 0 and estimate > 0 else 0.0
    reply = next((m for m in reversed(_messages(runtime)) if isinstance(m, AIMessage)), None)
    calls = 1
    spent = total + ROOM_MARGIN
    if reply is not None:
        spent += counter.count_message(reply)
        calls = max(1, sum(call["name"] == tool_name for call in reply.tool_calls))
    room = int((trigger - spent) / (1 + rate)) // calls
    return max(useful_page(max_tokens), min(max_tokens, room))


def useful_page(max_tokens: int) -> int:
    """The smallest page served: half ``max_tokens``, at least :data:`MIN_MAX_TOKENS`."""
    return max(MIN_MAX_TOKENS, max_tokens // 2)
