"""Steps 2-3 of ``ctx_budget``: the cheap edits, before any compaction (docs/design.md §2).

A new tool result above ``tool_output_cap_tokens`` is capped to a head/tail preview (the
original stays in the history store, the preview carries a handle the history lookup pages
through); old tool results are cleared to placeholders when ``clear_tool_results_keep`` is set
(persisted in the state, so the prompt prefix stays stable from turn to turn).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from ctx_langgraph.budget.turn import BudgetSettings, Turn
from ctx_langgraph.view.markers import CLEARED_FLAG, is_lookup_result
from ctx_langgraph.view.tool_results import capped, cleared

__all__ = ["apply_replacements", "cap_tool_results", "clear_old_tool_results"]


def _cap(s: BudgetSettings, shrink: int | None) -> int | None:
    """The cap of this pass: the configured one, never more than a quarter of the usable window
    (a result the window cannot hold next to the rest is capped too), and the smaller cap the
    overflow recovery asks for."""
    cap = s.config.tool_output_cap_tokens
    if cap is not None:
        cap = min(cap, max(64, s.budget.usable // 4))
    if shrink is not None:
        cap = min(cap or int(shrink), int(shrink))
    return cap


def cap_tool_results(s: BudgetSettings, turn: Turn) -> None:
    """2. Cap oversized new tool results. (After a provider rejected the view as too long and no
    cut was left, every result in the view is capped to the smaller cap the recovery asks for:
    the originals stay in the store.)"""
    shrink = turn.context.pop("shrink_tool_results", None)
    cap = _cap(s, shrink)
    if not cap:
        return
    by_id, counter = turn.by_id, turn.counter
    for message in turn.fresh if shrink is None else turn.messages:
        if (
            isinstance(message, ToolMessage)
            and message.id
            and (message.id in by_id or shrink is not None)
            and not message.additional_kwargs.get(CLEARED_FLAG)
            and not is_lookup_result(message)  # a lookup page is bounded by its own cap
            and s.cache.count(counter, message) > cap
        ):
            seq = by_id[message.id].seq if message.id in by_id else None
            turn.replacements[message.id] = capped(
                message, message.text, cap, seq, count_text=counter.count_text
            )


def clear_old_tool_results(s: BudgetSettings, turn: Turn) -> None:
    """3. Clear old tool results to placeholders, keeping the last ``clear_tool_results_keep``,
    once ``clear_tool_results_batch`` of them are due (a clearing moves the cacheable prefix
    back to the oldest result it rewrites: in batches, it moves less often)."""
    keep = s.config.clear_tool_results_keep
    if keep is None:
        return
    by_id, replacements = turn.by_id, turn.replacements
    tool_results = [m for m in turn.messages if isinstance(m, ToolMessage) and m.id]
    due = [
        m
        for m in tool_results[: max(0, len(tool_results) - keep)]
        if not m.additional_kwargs.get(CLEARED_FLAG)
    ]
    if len(due) < s.config.clear_tool_results_batch:
        return
    for message in due:
        seq = by_id[message.id].seq if message.id in by_id else None
        tokens = s.cache.count(turn.counter, message)
        replacements[str(message.id)] = cleared(message, tokens, seq)
    if any(r.additional_kwargs.get(CLEARED_FLAG) for r in replacements.values()):
        turn.reasons.append("tool results cleared")


def apply_replacements(turn: Turn) -> None:
    """The view the estimate counts: the messages with their capped or cleared copies."""
    replacements = turn.replacements
    view: Sequence[BaseMessage] = (
        [replacements.get(str(m.id), m) if m.id else m for m in turn.messages]
        if replacements
        else turn.messages
    )
    turn.view = view
