"""Keep the model's view provider-valid: every tool call answered, no tool result without its call.

Providers reject a request where an assistant tool call has no result right after it, or where a
tool result answers a call that is not in the request (OpenAI and Anthropic answer HTTP 400). A
thread gets there through ordinary events: a run interrupted between the model and its tools, a
message list edited by hand or in Studio, a tool node that skipped a call, an imported history.

:func:`repair_tool_pairs` fixes the *view* only: a dangling call gets a synthetic tool message
saying no result was recorded (flagged, never recorded in the history store), and a stray tool
result leaves the view. The history store keeps what really happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.view.markers import REPAIR_FLAG

__all__ = ["ViewRepairs", "is_repair", "needs_repair", "repair_tool_pairs"]

MISSING_RESULT = (
    "[no result was recorded for this tool call: the call was interrupted or its result was "
    "lost. Call the tool again if the result is still needed.]"
)


@dataclass(frozen=True)
class ViewRepairs:
    """What :func:`repair_tool_pairs` changed."""

    dangling_tool_calls: int = 0
    """Tool calls that got a synthetic "no result was recorded" tool message."""
    orphan_tool_results: int = 0
    """Tool results left out of the view: no call for them right before (or a second result)."""

    def __bool__(self) -> bool:
        return bool(self.dangling_tool_calls or self.orphan_tool_results)


def is_repair(message: BaseMessage) -> bool:
    """Whether ``message`` is a synthetic tool result added by :func:`repair_tool_pairs`."""
    return bool(message.additional_kwargs.get(REPAIR_FLAG))


NOT_RUN = (
    "[this tool call was not run: its arguments could not be parsed. Call the tool again with "
    "valid JSON arguments if the result is still needed.]"
)


def _missing(call_id: str, name: str, invalid: bool = False) -> ToolMessage:
    return ToolMessage(
        NOT_RUN if invalid else MISSING_RESULT,
        tool_call_id=call_id,
        name=name or None,
        id=f"ctx-missing-result-{call_id}",
        status="error",
        additional_kwargs={REPAIR_FLAG: {"tool_call_id": call_id}},
    )


def needs_repair(messages: Sequence[BaseMessage]) -> bool:
    """Whether :func:`repair_tool_pairs` would find a dangling call or a stray result (of a
    view, or of the messages after a part known to be valid: its calls all answered)."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:  # a stray result, or a stale stand-in
                return True
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:  # the run of results ended with calls unanswered
            return True
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            open_calls = {
                str(call["id"])
                for call in [*message.tool_calls, *message.invalid_tool_calls]
                if call.get("id")
            }
    return bool(open_calls)


def repair_tool_pairs(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], ViewRepairs]:
    """The view with every tool call answered right after its assistant message, and no stray
    tool result; the same list object when nothing needed a repair.

    A tool result belongs to the run of tool messages directly after the assistant message that
    made the call (parallel calls answered in any order). Results elsewhere, or a second result
    for the same call, are left out; calls with no result get a synthetic one.

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> call = {"name": "search", "args": {}, "id": "c1"}
        >>> view = [HumanMessage("q", id="h1"), AIMessage("", tool_calls=[call], id="a1"),
        ...         HumanMessage("never mind", id="h2"), ToolMessage("late", tool_call_id="c1", id="t1")]
        >>> fixed, repairs = repair_tool_pairs(view)
        >>> [m.id for m in fixed], repairs
        (['h1', 'a1', 'ctx-missing-result-c1', 'h2'], ViewRepairs(dangling_tool_calls=1, orphan_tool_results=1))
    """
    if not needs_repair(messages):  # the usual case, checked without building a new list
        return list(messages), ViewRepairs()
    out: list[BaseMessage] = []
    dangling = orphans = 0
    # the calls the current run of tool messages may answer: {call id: tool name}
    open_calls: dict[str, str] = {}
    invalid: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            # (a stand-in of ours from an earlier turn is kept while its call still waits, and
            # goes with its call like any result)
            if open_calls.pop(message.tool_call_id, None) is None:
                orphans += 1
                continue
            out.append(message)
            continue
        for call_id, name in open_calls.items():  # the run of results ended: the rest dangle
            out.append(_missing(call_id, name, call_id in invalid))
            dangling += 1
        open_calls = {}
        out.append(message)
        if isinstance(message, AIMessage):
            # (an invalid call, arguments that did not parse, is sent to the provider as a call
            # too: it needs its answer like any other)
            open_calls = {
                str(call["id"]): str(call.get("name") or "")
                for call in [*message.tool_calls, *message.invalid_tool_calls]
                if call.get("id")
            }
            invalid = {str(call["id"]) for call in message.invalid_tool_calls if call.get("id")}
    for call_id, name in open_calls.items():
        out.append(_missing(call_id, name, call_id in invalid))
        dangling += 1
    repairs = ViewRepairs(dangling, orphans)
    return (out if repairs else list(messages)), repairs
