"""Cut-point selection: where the covered span ends and the verbatim tail begins (pure).

Keep the recent ``keep_recent_tokens`` verbatim, cut at a user turn (else an assistant
boundary), never between a tool call and its results; system messages and the summary are
not history (docs/design.md §6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctx_langgraph.view.markers import is_summary

__all__ = ["CutPoint", "choose_cut", "first_coverable", "pairing_problems", "tool_groups"]

CutKind = Literal["user_turn", "assistant_boundary", "last_group", "server"]


@dataclass(frozen=True)
class CutPoint:
    """``messages[start:index]`` are covered by the new summary; ``messages[index:]`` stay verbatim."""

    start: int
    index: int
    kind: CutKind
    tail_tokens: int
    covered_tokens: int


def first_coverable(messages: Sequence[BaseMessage]) -> int:
    """Index of the first message that is history (after the leading system prompt and summary)."""
    index = 0
    while index < len(messages) and (
        messages[index].type == "system" or is_summary(messages[index])
    ):
        index += 1
    return index


def tool_groups(messages: Sequence[BaseMessage], start: int = 0) -> list[tuple[int, int]]:
    """Atomic ``(begin, end)`` index ranges: an AI message with tool calls and the tool messages
    that follow it (a system message between them included); every other message alone."""
    groups: list[tuple[int, int]] = []
    index = start
    while index < len(messages):
        end = index + 1
        message = messages[index]
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            scan = end
            while scan < len(messages) and (
                isinstance(messages[scan], ToolMessage) or messages[scan].type == "system"
            ):
                scan += 1
                if isinstance(messages[scan - 1], ToolMessage):
                    end = scan
        groups.append((index, end))
        index = end
    return groups


def choose_cut(
    messages: Sequence[BaseMessage], tokens: Sequence[int], *, keep_recent_tokens: int
) -> CutPoint | None:
    """Choose the cut, or None when nothing can be covered.

    Args:
        messages: the working view (system prompt, summary message, then history).
        tokens: the token count of each message, same order.
        keep_recent_tokens: how much recent history to keep verbatim.

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> view = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2"),
        ...         AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"},
        ...                                   {"name": "g", "args": {}, "id": "c2"}]),
        ...         ToolMessage("r1", tool_call_id="c1"), ToolMessage("r2", tool_call_id="c2"),
        ...         AIMessage("a2"), HumanMessage("q3")]
        >>> cut = choose_cut(view, [10] * len(view), keep_recent_tokens=60)
        >>> cut.index, cut.kind, cut.covered_tokens  # q2 starts the tail, its parallel results with it
        (2, 'user_turn', 20)
        >>> choose_cut(view[:7], [10] * 7, keep_recent_tokens=15)  # q2's turn alone is too big: split it
        CutPoint(start=0, index=6, kind='assistant_boundary', tail_tokens=10, covered_tokens=60)
    """
    if len(tokens) != len(messages):
        raise ValueError(f"got {len(messages)} messages but {len(tokens)} token counts")
    start = first_coverable(messages)
    groups = tool_groups(messages, start)
    if len(groups) < 2:
        return None
    suffix = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        history = messages[index].type != "system"
        suffix[index] = suffix[index + 1] + (tokens[index] if history else 0)
    boundaries = [begin for begin, _ in groups[1:] if not isinstance(messages[begin], ToolMessage)]
    if not boundaries:
        return None

    def fits(position: int) -> bool:
        return suffix[position] <= keep_recent_tokens

    user_turns = [b for b in boundaries if isinstance(messages[b], HumanMessage) and fits(b)]
    others = [b for b in boundaries if fits(b)]
    if user_turns:
        index, kind = user_turns[0], "user_turn"
    elif others:
        index, kind = others[0], "assistant_boundary"
    else:
        index, kind = boundaries[-1], "last_group"
    return CutPoint(
        start=start,
        index=index,
        kind=kind,  # type: ignore[arg-type]
        tail_tokens=suffix[index],
        covered_tokens=suffix[start] - suffix[index],
    )


def pairing_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """What makes a message list invalid for providers' tool protocol (empty list: valid): a
    result without its earlier call, a call without its result, history starting with a result.

    Examples:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> pairing_problems([ToolMessage("r", tool_call_id="c1")])
        ['history starts with a tool result', "tool result for 'c1' has no call"]
    """
    problems: list[str] = []
    start = first_coverable(messages)
    if start < len(messages) and isinstance(messages[start], ToolMessage):
        problems.append("history starts with a tool result")
    calls: dict[str, bool] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                calls[str(call.get("id"))] = False
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in calls:
                problems.append(f"tool result for {message.tool_call_id!r} has no call")
            else:
                calls[message.tool_call_id] = True
    problems.extend(
        f"tool call {call_id!r} has no result"
        for call_id, answered in calls.items()
        if not answered
    )
    return problems
