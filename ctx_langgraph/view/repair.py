"""Keep the model's view provider-valid: every tool call answered right after its assistant
message, no tool result without its call (providers reject both with HTTP 400). Only the view is
repaired; the history store keeps what really happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.view.markers import REPAIR_FLAG

__all__ = ["ViewRepairs", "needs_repair", "repair_tool_pairs"]

MISSING_RESULT = (
    "[no result was recorded for this tool call: the call was interrupted or its result was "
    "lost. Call the tool again if the result is still needed.]"
)
NOT_RUN = (
    "[this tool call was not run: its arguments could not be parsed. Call the tool again with "
    "valid JSON arguments if the result is still needed.]"
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
    """Whether :func:`repair_tool_pairs` would find a dangling call or a stray result."""
    return bool(repair_tool_pairs(messages)[1])


def repair_tool_pairs(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], ViewRepairs]:
    """The view with every tool call (invalid ones too) answered in the run of tool messages
    right after its assistant message, a synthetic result for a call with none, and no stray or
    second result."""
    out: list[BaseMessage] = []
    dangling = orphans = 0
    open_calls: dict[str, str] = {}  # the calls the current run of tool messages may answer
    invalid: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if open_calls.pop(message.tool_call_id, None) is None:
                orphans += 1
            else:
                out.append(message)
            continue
        for call_id, name in open_calls.items():  # the run of results ended: the rest dangle
            out.append(_missing(call_id, name, call_id in invalid))
            dangling += 1
        open_calls = {}
        out.append(message)
        if isinstance(message, AIMessage):
            calls = [*message.tool_calls, *message.invalid_tool_calls]
            open_calls = {str(c["id"]): str(c.get("name") or "") for c in calls if c.get("id")}
            invalid = {str(call["id"]) for call in message.invalid_tool_calls if call.get("id")}
    for call_id, name in open_calls.items():
        out.append(_missing(call_id, name, call_id in invalid))
        dangling += 1
    repairs = ViewRepairs(dangling, orphans)
    return (out if repairs else list(messages)), repairs
