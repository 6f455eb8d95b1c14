"""After a provider's context-length error: a forced compaction, one retry (docs/design.md §6).

The view is compacted as if the budget had said so (or, with no cut left, its tool results are
capped smaller), ``ctx_budget`` runs again and the model is called once more; a second rejection
raises :class:`~ctx_langgraph.errors.ContextBudgetExceeded`. Written once as a generator of
``("call" | "compact" | "budget" | "retry", state)`` steps (:func:`retry_on_overflow`), served
sync or async by the wrapped model node and by the middleware.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.types import Command

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.errors import ContextBudgetExceeded, ContextManagementError
from ctx_langgraph.providers import context_overflow_message
from ctx_langgraph.state import BudgetReport, FlatContext, OverflowReport, merge_facts, unpack

__all__ = ["OverflowStep", "Recovered", "apply_update", "merge_recovery", "retry_on_overflow"]

OverflowStep = tuple[Literal["call", "compact", "budget", "retry"], dict[str, Any]]


@dataclass(frozen=True)
class Recovered:
    """How a model call ended: its result, and the recovery's state update and
    ``context["overflow"]`` when there was one."""

    result: Any
    update: dict[str, Any] | None = None
    overflow: OverflowReport | None = None


def apply_update(state: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The ``{"messages", "context"}`` state after one node update, reduced as the graph would.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> state = {"messages": [HumanMessage("a", id="1")], "context": {"projection_epoch": 1}}
        >>> after = apply_update(state, {"messages": [HumanMessage("b", id="2")], "context": {"x": 1}})
        >>> [m.id for m in after["messages"]], after["context"]
        (['1', '2'], {'projection_epoch': 1, 'x': 1})
    """
    messages = state["messages"]
    if "messages" in update:
        messages = add_messages(messages, update["messages"])
    return {"messages": messages, "context": merge_facts(state["context"], update.get("context"))}


def _exceeded(
    state: dict[str, Any], counter: TokenCounter, provider_error: str, what: str
) -> ContextBudgetExceeded:
    budget = state["context"].get("budget") or {}
    largest = max((counter.count_message(m) for m in state["messages"]), default=0)
    return ContextBudgetExceeded(
        estimate=int(budget.get("total") or 0),
        usable=int(budget.get("usable") or 0),
        window=int(budget.get("window") or 0),
        reserve=int(budget.get("output_reserve") or 0),
        largest=largest,
        advice=f"The provider rejected the request as too long {what} ({provider_error!r}). "
        "Our estimate fits, so the model's real input window is smaller than the configured "
        "one or the token counter undercounts: set ContextConfig(context_window=...) to the "
        "model's real window, lower keep_recent_tokens, or shorten the newest message.",
    )


def _small_cap(budget: dict[str, Any]) -> int:
    """A sixteenth of the usable window."""
    usable = budget.get("usable")
    return max(64, int(usable) // 16) if isinstance(usable, int) and usable > 0 else 256


def _forced(context: FlatContext) -> FlatContext:
    """The context with its budget decision forced to compact, as for a request over the
    usable window."""
    budget = context.get("budget") or BudgetReport()
    forced: BudgetReport = {**budget, "decision": "compact"}
    usable = budget.get("usable")
    if isinstance(usable, int):
        forced["total"] = max(int(budget.get("total") or 0), usable + 1)
    return {**context, "budget": forced}


def _compact(
    view: dict[str, Any], error: Exception
) -> Generator[OverflowStep, Any, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """The forced compaction and the budget pass after it: both updates, and the state after."""
    try:
        compacted = yield ("compact", {**view, "context": _forced(view["context"])})
        local = apply_update(view, compacted)
        if "messages" in compacted:
            refreshed = yield ("budget", local)
        else:  # no cut is left: the tool results are capped smaller
            cap = _small_cap(view["context"].get("budget") or {})
            shrink = {**local["context"], "shrink_tool_results": cap}
            refreshed = yield ("budget", {**local, "context": shrink})
    except ContextManagementError as exc:
        if exc.__cause__ is None:
            exc.__cause__ = error
        raise
    return compacted, refreshed, apply_update(local, refreshed)


def _report(
    view: dict[str, Any],
    error: Exception,
    provider_error: str,
    compacted: dict[str, Any],
    refreshed: dict[str, Any],
) -> OverflowReport:
    """``context["overflow"]`` after the recovery."""
    compaction = unpack(compacted.get("context")).get("compaction") or {}
    previous = view["context"].get("overflow") or {}
    shortened = 0
    if "messages" not in compacted:
        shortened = len([m for m in refreshed.get("messages") or [] if m.type == "tool"])
    return {
        "retries": int(previous.get("retries") or 0) + 1,
        "error": provider_error,
        "error_type": type(error).__name__,
        "compaction": compaction.get("status"),
        "shortened_tool_results": shortened,
        "at_message_id": view["messages"][-1].id if view["messages"] else None,
        "unchanged": "messages" not in compacted and "messages" not in refreshed,
        "retry_epoch": int(unpack(refreshed.get("context")).get("projection_epoch") or 0),
    }


def _rejected_again(
    local: dict[str, Any],
    counter: TokenCounter,
    again: str,
    overflow: OverflowReport,
    compacted: dict[str, Any],
) -> ContextBudgetExceeded:
    if not overflow["unchanged"]:
        return _exceeded(local, counter, again, "even after compaction")
    compaction = unpack(compacted.get("context")).get("compaction") or {}
    problems = "; ".join(compaction.get("problems") or [])[:300]
    return _exceeded(
        local,
        counter,
        again,
        "twice, and nothing could be compacted or shortened (compaction: "
        f"{compaction.get('status')}" + (f", {problems}" if problems else "") + ")",
    )


def retry_on_overflow(
    state: dict[str, Any], counter: TokenCounter
) -> Generator[OverflowStep, Any, Recovered]:
    """The model call on ``state`` (``{"messages", "context"}``), and after a context-length
    error one forced compaction and one retry (``counter`` gives the error's numbers)."""
    view: dict[str, Any] = {
        "messages": list(state.get("messages") or []),
        "context": unpack(state.get("context")),
    }
    try:
        result = yield ("call", view)
    except Exception as exc:
        provider_error = context_overflow_message(exc)
        if provider_error is None:
            raise
        error = exc
    else:
        return Recovered(result)
    compacted, refreshed, local = yield from _compact(view, error)
    overflow = _report(view, error, provider_error, compacted, refreshed)
    try:
        result = yield ("retry", local)
    except Exception as exc:
        again = context_overflow_message(exc)
        if again is None:
            raise
        raise _rejected_again(local, counter, again, overflow, compacted) from exc
    update_context = merge_facts(compacted.get("context"), refreshed.get("context"))
    update_context["overflow"] = overflow
    messages: list[BaseMessage] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *local["messages"]]
    return Recovered(result, {"messages": messages, "context": update_context}, overflow)


def _merged(node_update: dict[str, Any], recovery: dict[str, Any]) -> dict[str, Any]:
    """A node's update after the recovery: the compacted view, then the node's messages."""
    replies = node_update.get("messages")
    if replies is None:
        replies = []
    elif not isinstance(replies, list):  # one message (or a message-like tuple), as add_messages
        replies = [replies]
    return {
        **node_update,
        "messages": [*recovery["messages"], *replies],
        "context": merge_facts(recovery["context"], node_update.get("context")),
    }


def merge_recovery(result: Any, update: dict[str, Any] | None) -> Any:
    """A model node's return (a dict update, or a ``Command`` with one) with the recovery's
    update folded in; anything else as it is (``ctx_budget`` applies the summary next turn).

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> update = {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "context": {"x": 1}}
        >>> merged = merge_recovery({"messages": AIMessage("hi", id="r")}, update)
        >>> [type(m).__name__ for m in merged["messages"]], merged["context"]
        (['RemoveMessage', 'AIMessage'], {'x': 1})
        >>> merge_recovery("other", update)
        'other'
    """
    if update is None:
        return result
    if isinstance(result, dict):
        return _merged(result, update)
    if isinstance(result, Command) and isinstance(result.update, dict):
        return dataclasses.replace(result, update=_merged(result.update, update))
    return result
