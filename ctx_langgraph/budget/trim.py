"""Steps 2-3 of ``ctx_budget``: the tool results' cheap edits (docs/design.md §2). A new result
above ``tool_output_cap_tokens`` is capped to a head/tail preview, the results of one step that
together overflow the room the window leaves them are shortened alike, and old results are
cleared to placeholders as :class:`~ctx_langgraph.config.ToolClearing` says. The originals stay
in the history store, which ``history_lookup`` reads them back from.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.budget.counters import REPLY_PRIMING
from ctx_langgraph.budget.measure import estimate_view, step_in_progress
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.config import ToolClearing
from ctx_langgraph.view.markers import CAPPED_FLAG, CLEARED_FLAG, is_lookup_result, is_summary
from ctx_langgraph.view.tool_results import capped, cleared, cleared_inputs

__all__ = [
    "DueResult",
    "apply_replacements",
    "cap_tool_results",
    "clear_old_tool_results",
    "due_results",
    "fit_step_results",
    "replaced",
    "shares",
]

MIN_CAP = 64
"""The smallest cap a tool result is given."""


def cap_tool_results(s: BudgetSettings, turn: BudgetPass) -> None:
    """2. Cap oversized new tool results, at most to a quarter of the usable window (every
    result of the view, when the overflow recovery asks for a smaller cap)."""
    shrink = turn.context.pop("shrink_tool_results", None)
    cap = s.config.tool_output_cap_tokens
    if cap is not None:
        cap = min(cap, max(64, s.budget.usable // 4))
    if shrink is not None:
        cap = min(cap or int(shrink), int(shrink))
    if not cap:
        return
    by_id, counter = turn.by_id, turn.counter
    for message in turn.fresh if shrink is None else turn.messages:
        if (
            isinstance(message, ToolMessage)
            and message.id
            and (message.id in by_id or shrink is not None)
            and not message.additional_kwargs.get(CLEARED_FLAG)
            and not is_lookup_result(message)
            and s.cache.count(counter, message) > cap
        ):
            turn.replacements[message.id] = _preview(s, turn, message, cap)


def _preview(s: BudgetSettings, turn: BudgetPass, message: ToolMessage, cap: int) -> ToolMessage:
    """The head/tail preview of ``message`` in at most ``cap`` tokens (cut shorter while its
    count is over, down to :data:`MIN_CAP`)."""
    seq = turn.by_id[message.id].seq if message.id in turn.by_id else None
    earlier = message.additional_kwargs.get(CAPPED_FLAG) or {}
    original = earlier.get("original_tokens") or turn.counter.count_text(message.text)
    target = cap
    for _ in range(6):
        preview = capped(message, message.text, target, seq, original_tokens=original)
        tokens = s.cache.count(turn.counter, preview)
        if tokens <= cap or target <= MIN_CAP:
            break
        target = max(MIN_CAP, min(target - 1, target * cap // tokens))
    return preview


def shares(sizes: Sequence[int], room: int) -> list[int | None]:
    """Caps for results that together must fit ``room``: those under an equal share stay whole
    (None), the others share alike what those leave (never below :data:`MIN_CAP`)."""
    caps: list[int | None] = [None] * len(sizes)
    if sum(sizes) <= room:
        return caps
    order = sorted(range(len(sizes)), key=lambda index: sizes[index])
    left = room
    for position, index in enumerate(order):
        share = left // (len(order) - position)
        if sizes[index] > share:  # this one and every larger one share what is left
            for larger in order[position:]:
                caps[larger] = max(MIN_CAP, share)
            break
        left -= sizes[index]
    return caps


def fit_step_results(s: BudgetSettings, turn: BudgetPass) -> None:
    """2b. The results of the step in progress share alike the room under the trigger that what
    a compaction cannot remove leaves (lookup pages and cleared results keep their size)."""
    view = replaced(turn)
    begin = step_in_progress(view)
    if begin is None:
        return
    counter = turn.counter

    def count(message: BaseMessage) -> int:
        return s.cache.count(counter, message)

    lead = 0
    while lead < begin and (view[lead].type == "system" or is_summary(view[lead])):
        lead += 1
    system = sum(count(m) for m in view[:lead] if not is_summary(m))
    earlier = sum(count(m) for m in view[:lead] if is_summary(m))
    earlier += sum(count(m) for m in view[lead:begin])
    if s.compact_node is not None:
        earlier = min(earlier, s.summary_allowance())
    floor = s.overhead_tokens + REPLY_PRIMING + system + earlier + count(view[begin])
    limit = s.budget.trigger if s.compact_node is not None else s.budget.usable
    room = limit - s.config.margin(limit) - floor
    results = [m for m in view[begin + 1 :] if isinstance(m, ToolMessage) and m.id]
    fixed = [m for m in results if is_lookup_result(m) or m.additional_kwargs.get(CLEARED_FLAG)]
    movable = [m for m in results if m not in fixed]
    caps = shares([count(m) for m in movable], room - sum(count(m) for m in fixed))
    originals = {str(m.id): m for m in turn.messages if isinstance(m, ToolMessage)}
    shortened = False
    for message, cap in zip(movable, caps, strict=True):
        if cap is None or count(message) <= cap:
            continue
        preview = _preview(s, turn, originals.get(str(message.id), message), cap)
        if count(preview) >= count(message):
            continue  # as short as a preview gets
        turn.replacements[str(message.id)] = preview
        shortened = shortened or message.id not in turn.by_id
    if shortened:  # results the last request held are shorter now: the baseline is stale
        turn.reasons.append("tool results of one step shortened to fit the window")


def apply_replacements(turn: BudgetPass) -> None:
    """The view the estimate counts: the messages with their capped or cleared copies."""
    turn.view = replaced(turn) if turn.replacements else turn.messages


def replaced(turn: BudgetPass) -> list[BaseMessage]:
    """The messages with this pass's replacements so far."""
    return [turn.replacements.get(str(m.id), m) if m.id else m for m in turn.messages]


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
    history lookup page unless ``clearing.clear_lookup_results``."""
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
