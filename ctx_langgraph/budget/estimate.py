"""The estimate of the next request's input tokens (docs/design.md §5): the measured input of the
last request plus the messages appended since, or, when that baseline cannot be trusted, a
recount of the bounded view, with per-message counts from a
:class:`~ctx_langgraph.budget.CountCache`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from ctx_langgraph.budget.counters import REPLY_PRIMING, CountCache, TokenCounter
from ctx_langgraph.state import FlatContext
from ctx_langgraph.view.markers import RETRIEVED_FLAG, is_summary

__all__ = ["BudgetEstimate", "estimate_next_request"]


@dataclass(frozen=True)
class BudgetEstimate:
    """The next request's estimated input, and where the tokens are."""

    input_tokens: int
    """Estimated input tokens of the next request, margin excluded."""
    margin: int
    method: Literal["baseline", "recount", "provider"]
    measured_baseline: int | None
    """The measured input the estimate started from (baseline method)."""
    appended: int
    """Tokens of the messages after the baseline's boundary (baseline method)."""
    overhead: int
    """Tool schemas and reply priming (recount method; inside the baseline otherwise)."""
    system: int
    summary: int
    retrieved: int
    tail: int
    counted_messages: int
    """Messages whose count was needed this turn (cache hits included): the cost evidence."""
    provider_cleared: int = 0
    """Tokens the provider's own context editing clears from the request (Anthropic
    ``clear_tool_uses``), taken off a recount: the measured baseline is after the edits already."""

    @property
    def total(self) -> int:
        """Input estimate plus the safety margin."""
        return self.input_tokens + self.margin

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total}


def estimate_next_request(
    messages: Sequence[BaseMessage],
    *,
    context: FlatContext,
    counter: TokenCounter,
    cache: CountCache,
    tool_tokens: int,
    margin: Any,
) -> BudgetEstimate:
    """Estimate the next request from the measured baseline when it is valid, else recount the view.

    Args:
        messages: the working view the model will receive.
        context: the state's ``context`` channel (``baseline``, ``projection_epoch``).
        counter: the token counter of the model.
        cache: per-message count cache.
        tool_tokens: tokens of the bound tool schemas.
        margin: a callable turning an estimate into its safety margin.
    """
    epoch = int(context.get("projection_epoch", 0))
    baseline = context.get("baseline") or {}
    boundary = None
    through = baseline.get("input_through_message_id")
    if (
        baseline.get("projection_epoch") == epoch
        and baseline.get("measured_input_tokens") is not None
    ):
        # searched from the end: the boundary is almost always recent
        indexes = range(len(messages) - 1, -1, -1)
        boundary = next((i for i in indexes if through and messages[i].id == through), None)
    if boundary is not None:
        measured = int(baseline["measured_input_tokens"])
        appended_messages = messages[boundary + 1 :]
        appended = sum(cache.count(counter, m) for m in appended_messages)
        estimate = measured + appended
        return BudgetEstimate(
            input_tokens=estimate,
            margin=margin(estimate),
            method="baseline",
            measured_baseline=measured,
            appended=appended,
            overhead=0,
            system=0,
            summary=0,
            retrieved=0,
            tail=0,
            counted_messages=len(appended_messages),
        )
    parts = dict.fromkeys(("system", "summary", "retrieved", "tail"), 0)
    for message in messages:
        part = (
            "summary"
            if is_summary(message)
            else "retrieved"
            if message.additional_kwargs.get(RETRIEVED_FLAG)
            else "system"
            if message.type == "system"
            else "tail"
        )
        parts[part] += cache.count(counter, message)
    overhead = tool_tokens + REPLY_PRIMING
    estimate = overhead + sum(parts.values())
    return BudgetEstimate(
        input_tokens=estimate,
        margin=margin(estimate),
        method="recount",
        measured_baseline=None,
        appended=0,
        overhead=overhead,
        counted_messages=len(messages),
        **parts,
    )
