"""Steps 2-3 of ``ctx_budget``: the cheap edits, before any compaction (docs/design.md §2).

A new tool result above ``tool_output_cap_tokens`` is capped to a head/tail preview (the
original stays in the history store, the preview carries a handle the history lookup pages
through). (Old tool results are cleared to placeholders in step 3,
:mod:`ctx_langgraph.budget.clearing`.)
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from ctx_langgraph.budget.turn import BudgetSettings, Turn
from ctx_langgraph.view.markers import CLEARED_FLAG, is_lookup_result
from ctx_langgraph.view.tool_results import capped

__all__ = ["apply_replacements", "cap_tool_results"]


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


def apply_replacements(turn: Turn) -> None:
    """The view the estimate counts: the messages with their capped or cleared copies."""
    replacements = turn.replacements
    view: Sequence[BaseMessage] = (
        [replacements.get(str(m.id), m) if m.id else m for m in turn.messages]
        if replacements
        else turn.messages
    )
    turn.view = view
