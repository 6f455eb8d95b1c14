"""Steps 4-6 of ``ctx_budget`` (docs/design.md §2, §5): the projection epoch (moved when the
prefix the baseline measured changed), the estimate of the next request (the provider's own count
near the limit), and the decision: ``compact``, ``precompact``, ``done``, ``proceed``, or
:class:`~ctx_langgraph.errors.ContextBudgetExceeded` when nothing can make the request fit.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.budget.estimate import BudgetEstimate, estimate_next_request
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.core.compact_request import read_request
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.errors import ContextBudgetExceeded, ProviderCountError
from ctx_langgraph.state import BudgetDecision, CompactionReport, FlatContext
from ctx_langgraph.view.markers import is_summary

__all__ = [
    "bump_epoch",
    "count_exactly",
    "decide",
    "decision",
    "estimate_request",
    "estimate_view",
    "fingerprint",
    "step_in_progress",
]

log = logging.getLogger("ctx_langgraph.budget.node")


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
    """The estimate of a request of ``view``, less what the provider's context editing clears."""
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
        # (tool results only: never more than the view holds of them)
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
    """5. Near the limit, the provider's exact count replaces the estimate (if it answers)."""
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


def decide(s: BudgetSettings, turn: BudgetPass) -> None:
    """6. Decide, on the view as the estimate counted it."""
    assert turn.estimate is not None
    turn.decision, turn.fallback = decision(s, turn, turn.view, turn.estimate)


def _backing_off(context: FlatContext) -> bool:
    """After a failure the configured summarizer waits (passes and time, see CompactNode)."""
    backoff = context.get("summarizer_backoff")
    if not backoff:
        return False
    return int(context.get("budget_passes") or 0) < int(
        backoff.get("retry_after_pass") or 0
    ) or time.time() < float(backoff.get("retry_at") or 0)


def _tried(context: FlatContext, view: Sequence[BaseMessage]) -> bool:
    """A compaction that did not commit on this very view is not retried in a loop."""
    last = context.get("compaction") or {}
    return (
        last.get("epoch") == int(context.get("projection_epoch", 0))
        and last.get("at_message_id") == (view[-1].id if view else None)
        and last.get("status") != "committed"
    )


def _rounds_stopped(
    s: BudgetSettings, context: FlatContext, view: Sequence[BaseMessage], total: int
) -> CompactionReport | None:
    """The last compaction's report with why the request gets no further ``ctx_compact`` round
    (one that neither lowered the estimate nor covered new history, or the last one allowed);
    None when it may have one."""
    last: CompactionReport = context.get("compaction") or {}
    rounds = last.get("rounds")
    if not view or last.get("at_message_id") != view[-1].id or not isinstance(rounds, int):
        return None
    limit = s.config.max_compaction_rounds
    before = last.get("estimate_before")
    status = last.get("status", "not reported")
    covered = status in ("committed", "committed_precomputed")
    if _tried(context, view):
        why = f"round {rounds} ({status}) did not commit on this very view: not tried again on it"
    elif not covered and not (isinstance(before, int) and total < before):
        was = f"{before:,}" if isinstance(before, int) else "not estimated"
        why = (
            f"no progress: round {rounds} ({status}) left the estimate at {total:,} tokens "
            f"(it was {was}) and covered no new history"
        )
    elif rounds >= limit:
        why = f"{rounds} rounds for this request: the most max_compaction_rounds={limit} allows"
    else:
        return None
    return {**last, "stopped": why}


def _served_and_done(context: FlatContext, view: Sequence[BaseMessage]) -> bool:
    """A requested compaction was just served on this view, which ends with the model's final
    reply (or holds no conversation)."""
    last = context.get("compaction") or {}
    served = bool(last.get("requested") or last.get("request_error"))
    if not served or last.get("at_message_id") != (view[-1].id if view else None):
        return False
    end = view[-1] if view else None
    return end is None or is_summary(end) or (isinstance(end, AIMessage) and not end.tool_calls)


def decision(
    s: BudgetSettings, turn: BudgetPass, view: Sequence[BaseMessage], estimate: BudgetEstimate
) -> tuple[BudgetDecision, bool]:
    """The decision, and whether the configured summarizer is backing off after failures."""
    budget, context = s.budget, turn.context
    requested, problem = read_request(context.get("compact"))
    if (requested is not None or problem is not None) and s.compact_node is not None:
        return "compact", False  # asked for: served (or refused, when malformed) once, now
    if _served_and_done(context, view):
        return "done", False
    backing_off = _backing_off(context)
    stopped = _rounds_stopped(s, context, view, estimate.total)
    can_compact = s.compact_node is not None and not _tried(context, view) and stopped is None
    rebuild = context.get("rebuild") or context.get("server_compaction")
    if rebuild and can_compact and not backing_off:
        return "compact", False  # an edit took the summary away, or the provider compacted
    if estimate.total <= budget.trigger:
        precompaction = context.get("precompaction")
        started = precompaction.get("epoch") if precompaction else None
        if (
            budget.precompact is not None
            and s.compact_node is not None
            and estimate.total > budget.precompact
            and started != int(context.get("projection_epoch", 0))
            and not backing_off
        ):
            return "precompact", False  # ctx_compact builds a candidate in the background
        return "proceed", False
    largest = _check_floor(s, turn, view, estimate)
    if can_compact:
        if not backing_off:
            return "compact", False
        if estimate.total > budget.usable:
            return "compact", True  # cannot wait: the offline summarizer covers the span
    turn.compaction = stopped  # (why no round ran, in context["compaction"]["stopped"])
    if estimate.total <= budget.usable:
        return "proceed", False  # over the trigger but fits: compaction waits or is not wired
    if stopped is not None and _fallback_round_left(s, context, stopped):
        turn.compaction = None
        return "compact", True  # one round of the offline summarizer, cutting deeper
    last: CompactionReport = context.get("compaction") or {}
    what = (
        "No cut can make this request fit"
        if s.compact_node is not None
        else "Compaction is not wired (compact_node=None)"
    )
    problems = "; ".join(last.get("problems") or [])[:300] or "no problem noted"
    if stopped is not None:
        problems = f"{stopped['stopped']}; {problems}"
    raise _exceeded(
        s,
        estimate,
        largest,
        f"{what} (last compaction: {last.get('status', 'not tried')}, {problems}): lower "
        "keep_recent_tokens or tool_output_cap_tokens, or use a model with a larger window.",
    )


def _fallback_round_left(s: BudgetSettings, context: FlatContext, last: CompactionReport) -> bool:
    """A request over the usable window whose rounds stopped gets one round of the offline
    summarizer, within the rounds allowed, unless the one that stopped was that already."""
    rounds = int(last.get("rounds") or 0)
    tried = (context.get("budget") or {}).get("summarizer") == "fallback"
    return s.compact_node is not None and not tried and rounds < s.config.max_compaction_rounds


def _exceeded(
    s: BudgetSettings, estimate: BudgetEstimate, largest: int, advice: str
) -> ContextBudgetExceeded:
    return ContextBudgetExceeded(
        estimate=estimate.total,
        usable=s.budget.usable,
        window=s.budget.context_window,
        reserve=s.budget.output_reserve,
        largest=largest,
        advice=advice,
    )


def _check_floor(
    s: BudgetSettings, turn: BudgetPass, view: Sequence[BaseMessage], estimate: BudgetEstimate
) -> int:
    """What compaction can never remove (system messages, overhead, the newest message or step
    in progress) must fit; returns the largest message's tokens (for the error's advice)."""
    counter = turn.counter
    step = step_in_progress(view)
    newest = view[-1:] if step is None else view[step:]
    pinned = [m for m in view if m.type == "system" and not is_summary(m)] + list(newest)
    largest = max((s.cache.count(counter, m) for m in view), default=0)
    floor = s.overhead_tokens + sum(s.cache.count(counter, m) for m in pinned)
    if floor + s.config.margin(floor) > s.budget.usable:
        raise _exceeded(
            s,
            estimate,
            largest,
            "No cut can make this request fit: even with all history compacted, the system "
            "prompt, the tool schemas and the newest message or step (a tool call with its "
            "results) are over the usable window. Shorten the newest message or the system "
            "prompt, lower tool_output_cap_tokens, or use a model with a larger window.",
        )
    return largest


def step_in_progress(view: Sequence[BaseMessage]) -> int | None:
    """The index of the AI message whose tool results end the view; None when it does not end so."""
    begin = len(view)
    while begin > 0 and isinstance(view[begin - 1], ToolMessage):
        begin -= 1
    caller = view[begin - 1] if 0 < begin < len(view) else None
    if isinstance(caller, AIMessage) and (caller.tool_calls or caller.invalid_tool_calls):
        return begin - 1
    return None
