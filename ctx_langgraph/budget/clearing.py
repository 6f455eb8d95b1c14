"""Step 3 of ``ctx_budget``: old tool results cleared to placeholders, as
:class:`~ctx_langgraph.config.ToolClearing` says (docs/design.md §2); the originals stay in the
history store, which ``history_lookup`` reads them back from.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.budget.measure import estimate_view
from ctx_langgraph.budget.trim import replaced
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.config import ToolClearing
from ctx_langgraph.view.markers import CLEARED_FLAG, is_lookup_result
from ctx_langgraph.view.tool_results import cleared, cleared_inputs

__all__ = ["DueResult", "clear_old_tool_results", "due_results"]


@dataclass(frozen=True)
class DueResult:
    """A tool result the clearing may replace, with the AI message that called it."""

    result: ToolMessage
    tool: str
    call: AIMessage | None


def due_results(
    view: Sequence[BaseMessage], clearing: ToolClearing, lookup_tools: Collection[str] = ()
) -> list[DueResult]:
    """The tool results of ``view`` due for clearing, oldest first: past the last
    ``clearing.keep``, read by the model already, not cleared yet, of no excluded tool, and no
    history lookup page unless ``clearing.clear_lookup_results``.

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> def step(n, tool):
        ...     call = {"name": tool, "args": {}, "id": f"c{n}"}
        ...     return [AIMessage("", tool_calls=[call]), ToolMessage("r", tool_call_id=f"c{n}", id=f"t{n}")]
        >>> view = [HumanMessage("go"), *step(0, "search"), *step(1, "read"), *step(2, "read"), *step(3, "read")]
        >>> [d.result.id for d in due_results(view, ToolClearing(keep=1, exclude_tools=["search"]))]
        ['t1', 't2']
        >>> [d.result.id for d in due_results(view, ToolClearing(keep=0))]  # t3 is unread
        ['t0', 't1', 't2']
    """
    last_call = max((i for i, m in enumerate(view) if isinstance(m, AIMessage)), default=-1)
    calls: dict[str, tuple[AIMessage, str]] = {}
    results: list[tuple[int, ToolMessage]] = []
    for index, message in enumerate(view):
        if isinstance(message, AIMessage):
            for tool_call in message.tool_calls:
                if tool_call.get("id"):
                    calls[str(tool_call["id"])] = (message, str(tool_call.get("name") or ""))
        elif isinstance(message, ToolMessage) and message.id:
            results.append((index, message))
    past_keep = results[: max(0, len(results) - clearing.keep)]
    excluded = set(clearing.exclude_tools)
    due: list[DueResult] = []
    for index, result in past_keep:
        caller, called = calls.get(result.tool_call_id, (None, ""))
        tool = result.name or called
        lookup = is_lookup_result(result) or tool in lookup_tools
        if (
            index < last_call
            and not result.additional_kwargs.get(CLEARED_FLAG)
            and tool not in excluded
            and (clearing.clear_lookup_results or not lookup)
        ):
            due.append(DueResult(result, tool, caller))
    return due


def clear_old_tool_results(s: BudgetSettings, turn: BudgetPass) -> None:
    """3. Clear the due tool results (and their calls' arguments, when asked), oldest first,
    once ``batch`` of them are due, the request is over the clearing trigger and they reclaim
    ``clear_at_least`` tokens."""
    clearing = s.config.clearing()
    if clearing is None:
        return
    view = replaced(turn)
    due = due_results(view, clearing, s.lookup_tools)
    if not due or len(due) < clearing.batch:
        return
    trigger = clearing.trigger_tokens(s.budget.usable)
    if trigger is not None:
        estimate = estimate_view(s, turn.counter, view, turn.context)
        if estimate.total <= trigger:
            return
    counter = turn.counter

    def count(message: BaseMessage) -> int:
        return s.cache.count(counter, message)

    edits: dict[str, BaseMessage] = {}
    calls: dict[str, AIMessage] = {}
    reclaimed = 0
    for item in due:
        result = item.result
        tokens = count(result)
        seq = turn.by_id[str(result.id)].seq if str(result.id) in turn.by_id else None
        handle = f"history:{result.id}"
        call = item.call if clearing.clear_tool_inputs else None
        if call is not None and call.id:
            before = calls.get(call.id, call)
            calls[call.id] = edits[call.id] = cleared_inputs(before, [result.tool_call_id])
            reclaimed += count(before) - count(calls[call.id])
        else:
            call = None
        text = None
        if clearing.placeholder is not None:
            text = clearing.placeholder_text(tool=item.tool, handle=handle, seq=seq, tokens=tokens)
        placeholder = cleared(result, tokens, seq, text=text, inputs_cleared=call is not None)
        reclaimed += tokens - count(placeholder)
        edits[str(result.id)] = placeholder
        if clearing.clear_at_least and reclaimed >= clearing.clear_at_least:
            break
    if reclaimed < clearing.clear_at_least:
        return
    turn.replacements.update(edits)
    turn.reasons.append("tool results cleared")
