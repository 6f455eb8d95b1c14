"""Cut-point selection: where the covered span ends and the verbatim tail begins (pure).

Rules (docs/design.md §6):

- keep the most recent ``keep_recent_tokens`` verbatim (tokens, not N messages);
- prefer a user-turn boundary; when one turn alone is too large, split it at an assistant
  boundary;
- never separate an AI message with tool calls from its tool results (parallel calls included),
  so the tail never starts with a tool result; reasoning/thinking blocks live inside the AI
  message and stay with its calls;
- leading system messages and the summary message are never covered (they are not history);
  a system message later in the view is not history either: it stays in the view whatever the
  cut (:func:`~ctx_langgraph.view.summary.rewrite_view` moves it up to the leading ones), so it
  counts as no covered or kept tokens, and one inside a tool step stays in that step's group.
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
    """Atomic ``(begin, end)`` index ranges: an AI message with tool calls together with the tool
    messages that follow it (its results, parallel ones included, and a system message between
    them); every other message alone. Cutting is allowed only between groups, and never in
    front of a tool message."""
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
                    end = scan  # (a system message after the last result is not the step's)
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
        return None  # a single group (or none) cannot be split: nothing to cover
    suffix = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        # a system message stays in the view wherever the cut is: not history, kept or covered
        history = messages[index].type != "system"
        suffix[index] = suffix[index + 1] + (tokens[index] if history else 0)
    # cut positions: every group start but the first, never in front of a (stray) tool result
    boundaries = [begin for begin, _ in groups[1:] if not isinstance(messages[begin], ToolMessage)]
    if not boundaries:
        return None

    def fits(position: int) -> bool:
        return suffix[position] <= keep_recent_tokens

    user_turns = [b for b in boundaries if isinstance(messages[b], HumanMessage) and fits(b)]
    if user_turns:
        index, kind = user_turns[0], "user_turn"  # the longest tail that fits, starting a turn
    else:
        others = [b for b in boundaries if fits(b)]
        if others:
            index, kind = others[0], "assistant_boundary"  # one turn is too big: split inside it
        else:
            index, kind = (
                boundaries[-1],
                "last_group",
            )  # even the newest group is too big: keep it whole
    return CutPoint(
        start=start,
        index=index,
        kind=kind,  # type: ignore[arg-type]
        tail_tokens=suffix[index],
        covered_tokens=suffix[start] - suffix[index],
    )


def pairing_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """What makes a message list invalid for providers' tool protocol (empty list: valid).

    Every tool result needs its call earlier in the list, every call needs its result, and the
    history (after the system prompt and summary) must not start with a tool result.

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
            # (providers get an invalid call, arguments that did not parse, as a call too)
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
