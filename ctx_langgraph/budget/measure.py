"""Steps 4-5 of ``ctx_budget``: the projection epoch and the estimate of the next request
(docs/design.md §5).

The epoch moves when the prefix the baseline measured changed (an edited message, cleared
results, a changed system prompt, tool set or model); the estimate is the measured baseline plus
what was appended, or a recount of the bounded view, and the provider's own count near the limit.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Sequence
from dataclasses import replace

from langchain_core.messages import BaseMessage, ToolMessage

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.budget.estimate import BudgetEstimate, estimate_next_request
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.errors import ProviderCountError
from ctx_langgraph.state import FlatContext
from ctx_langgraph.view.markers import is_summary

__all__ = ["bump_epoch", "count_exactly", "estimate_request", "estimate_view", "fingerprint"]

log = logging.getLogger("ctx_langgraph.budget.node")  # (one logger for the whole node)


def fingerprint(messages: Sequence[BaseMessage], overhead: str, model_id: str) -> str:
    """Hash of what every request starts with: the leading system prompt, the tools, the model."""
    system = [
        str(m.content)
        for m in itertools.takewhile(lambda m: m.type == "system", messages)
        if not is_summary(m)
    ]
    hashed = hashlib.blake2b(json.dumps([system, overhead, model_id]).encode(), digest_size=12)
    return hashed.hexdigest()


def bump_epoch(s: BudgetSettings, turn: BudgetPass) -> None:
    """4. Invalidate the baseline when the measured prefix changed."""
    turn.fingerprint = fingerprint(turn.view, s.overhead_text, s.model_id)
    if turn.context.get("fingerprint") not in (None, turn.fingerprint):
        turn.reasons.append("system prompt, tools or model changed")
    if turn.reasons:
        turn.epoch += 1
        turn.context["projection_epoch"] = turn.epoch


def estimate_view(
    s: BudgetSettings,
    counter: TokenCounter,
    view: Sequence[BaseMessage],
    context: FlatContext,
) -> BudgetEstimate:
    """The estimate of a request of ``view``, less what the provider's own context editing
    clears again from a recount."""
    estimate = estimate_next_request(
        view,
        context=context,
        counter=counter,
        cache=s.cache,
        tool_tokens=s.overhead_tokens,
        margin=s.config.margin,
    )
    cleared = int((context.get("provider_edits") or {}).get("cleared_input_tokens") or 0)
    if cleared and estimate.method == "recount":
        # the provider clears these again on the next request (the client keeps them); it
        # clears tool results only, so never more than the view holds of them
        results = sum(s.cache.count(counter, m) for m in view if isinstance(m, ToolMessage))
        tokens = max(0, estimate.input_tokens - min(cleared, results))
        estimate = replace(
            estimate,
            input_tokens=tokens,
            margin=s.config.margin(tokens),
            provider_cleared=estimate.input_tokens - tokens,
        )
    return estimate


def estimate_request(s: BudgetSettings, turn: BudgetPass) -> None:
    """5. The estimate of the next request."""
    turn.estimate = estimate_view(s, turn.counter, turn.view, turn.context)


def count_exactly(s: BudgetSettings, turn: BudgetPass) -> Flow[None]:
    """5. Near the limit, the provider's exact count replaces the estimate (on failure the
    local estimate stands)."""
    estimate = turn.estimate
    assert estimate is not None
    if s.provider_count is None or estimate.total < s.exact_count_above * s.budget.usable:
        return
    try:
        exact = yield from call(
            s.provider_count.count_request, s.provider_count.acount_request, turn.view, s.tools
        )
    except ProviderCountError as exc:
        log.warning("ctx-langgraph: %s", exc)
        return
    if exact is not None:
        turn.estimate = replace(
            estimate,
            input_tokens=int(exact),
            margin=s.config.margin(int(exact)),
            method="provider",
        )
