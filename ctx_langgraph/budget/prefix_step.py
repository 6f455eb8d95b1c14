"""Step 7 of ``ctx_budget``: how much of the request about to be sent a prompt cache can read.

The request (the tool schemas and system prompt the model node adds, then the view) is measured
against the previous request sent on the thread, whose part digests ``context["cache"]`` keeps:
``prefix_tokens`` leading tokens are identical (:func:`~ctx_langgraph.budget.prefix.cacheable_prefix`),
``moved_by`` names the first part that differs when the previous request is not a prefix of this
one (``summary``: a compaction committed; ``memory``, ``pinned rules``, ``cleared tool result``,
``tools or system prompt``, or the kind of message that changed). A pass that routes to
compaction sends nothing, so it keeps the report (and the digests) of the last request sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from ctx_langgraph.budget.prefix import RequestShape, cacheable_prefix, request_shape, shared_parts
from ctx_langgraph.budget.turn import BudgetSettings, Turn
from ctx_langgraph.state import CacheReport
from ctx_langgraph.view.markers import (
    CAPPED_FLAG,
    CLEARED_FLAG,
    PINNED_FLAG,
    is_memory_message,
    is_summary,
)

__all__ = ["measure_prefix", "moved_by"]


def _label(message: BaseMessage) -> str:
    if is_summary(message):
        return "summary"
    if is_memory_message(message):
        return "memory"
    kwargs = message.additional_kwargs
    if kwargs.get(PINNED_FLAG):
        return "pinned rules"
    if kwargs.get(CLEARED_FLAG):
        return "cleared tool result"
    if kwargs.get(CAPPED_FLAG):
        return "capped tool result"
    return f"{message.type} message"


def moved_by(
    previous: Sequence[str] | None,
    shape: RequestShape,
    view: Sequence[BaseMessage],
    has_overhead: bool,
) -> str | None:
    """What moved the cacheable prefix: the first part of the request that differs from the
    previous request, or None when the previous request is a prefix of this one (or there was
    none)."""
    if not previous:
        return None
    shared = shared_parts(previous, shape.digests)
    if shared == len(previous):
        return None
    if shared == len(shape.digests):
        return "removed messages"
    if has_overhead:
        if shared == 0:
            return "tools or system prompt"
        shared -= 1
    return _label(view[shared])


def measure_prefix(s: BudgetSettings, turn: Turn) -> None:
    """``turn.cache``: the request about to be sent against the thread's previous one."""
    if turn.decision != "proceed":
        return
    has_overhead = bool(s.tools or s.overhead_tokens)
    shape = request_shape(
        turn.view,
        turn.counter,
        system=s.overhead_text if has_overhead else None,  # the schemas and prompt as one part
        cache=s.cache,
        overhead_tokens=s.overhead_tokens,
    )
    previous = (turn.context.get("cache") or {}).get("digests")
    prefix = cacheable_prefix(previous, shape)
    total = shape.input_tokens
    turn.cache = CacheReport(
        prefix_tokens=prefix,
        input_tokens=total,
        ratio=round(prefix / total, 4) if total else None,
        moved_by=moved_by(previous, shape, turn.view, has_overhead),
        digests=list(shape.digests),
    )
