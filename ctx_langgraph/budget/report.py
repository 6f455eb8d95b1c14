"""The end of a ``ctx_budget`` pass: the state update (the view, and ``context``'s report).

The estimate and its breakdown go to ``context["budget"]``, visible in Studio and notebooks;
``context["request"]`` is what ``ctx_usage`` measures the reply against.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ctx_langgraph.budget.calibration import calibration_report
from ctx_langgraph.budget.counters import ApproximateCounter
from ctx_langgraph.budget.estimate import BudgetEstimate
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.core.digest import extend_digest
from ctx_langgraph.state import BudgetReport, FlatContext, PendingRequest, RecordedDigest
from ctx_langgraph.view.markers import is_flagged, is_synthetic

__all__ = ["budget_update"]


def budget_update(s: BudgetSettings, turn: BudgetPass) -> dict[str, Any]:
    """The node's return value: the ``context`` report, and the messages when the view changed
    (all of them after a rewrite, else only the capped or cleared copies)."""
    context = turn.context
    estimate = turn.estimate
    assert estimate is not None
    last_recorded = next(
        (m.id for m in reversed(turn.messages) if m.id and not is_synthetic(m)),
        turn.recorded_through,
    )
    report: FlatContext = {
        "projection_epoch": turn.epoch,
        "recorded_through_id": last_recorded,
        "fingerprint": turn.fingerprint,
        "branch": turn.scope.branch,
        "budget": _budget_report(s, turn, estimate),
        "budget_passes": int(context.get("budget_passes") or 0) + 1,
    }
    if s.memory is not None:
        report["memory"] = turn.memory_info
    report["request"] = _pending_request(turn, estimate)
    if turn.makeup is not None:
        report["request"]["makeup"] = turn.makeup
    counter = turn.counter
    if isinstance(counter, ApproximateCounter):
        report["calibration"] = calibration_report(counter)
        counted = turn.view[-estimate.counted_messages :] if estimate.counted_messages else []
        words = counter.message_word_chars(counted)
        if estimate.method == "recount":
            words += counter.word_chars(s.overhead_text)
        report["request"]["counted_word_chars"] = words
        report["calibrated_with"] = context.get("calibrated_with")
    report["recorded_digest"] = _recorded_digest(turn, last_recorded)
    if turn.cache is not None:
        report["cache"] = turn.cache
    if turn.compaction is not None:
        report["compaction"] = turn.compaction
    update: dict[str, Any] = {"context": report}
    if turn.rewritten:
        update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *turn.view]
    elif turn.replacements:
        update["messages"] = list(turn.replacements.values())
    given = turn.given
    for key, value in context.items():  # what a step changed, and the report does not say
        if key not in report and (key not in given or given[key] is not value):
            report[key] = value  # type: ignore[literal-required]
    return update


def _budget_report(s: BudgetSettings, turn: BudgetPass, estimate: BudgetEstimate) -> BudgetReport:
    budget = s.budget
    report: BudgetReport = {
        **estimate.to_json(),  # type: ignore[typeddict-item]
        "decision": turn.decision,
        "epoch_bumped_for": turn.reasons,
        "trigger": budget.trigger,
        "target": budget.target,
        "usable": budget.usable,
        "window": budget.context_window,
        "output_reserve": budget.output_reserve,
        "counter": turn.counter.id,
        "generation": int(turn.context.get("active_generation", 0)),  # of the active summary
    }
    if turn.fallback:
        report["summarizer"] = "fallback"
    return report


def _pending_request(turn: BudgetPass, estimate: BudgetEstimate) -> PendingRequest:
    view = turn.view
    return {
        "epoch": turn.epoch,
        "input_through_message_id": view[-1].id if view else None,
        "estimate": estimate.input_tokens,
        "method": estimate.method,
        "measured_baseline": estimate.measured_baseline,
        # what the counter itself guessed (the rest was measured): calibration compares it
        "counted_tokens": estimate.appended
        if estimate.method == "baseline"
        else estimate.input_tokens,
    }


def _recorded_digest(turn: BudgetPass, last_recorded: str | None) -> RecordedDigest:
    """What the next pass checks edits by id against: the recorded part of the state (the
    checksum of this pass extended by what it recorded, or recounted over a new view)."""
    base: dict[str, Any] | None = None
    if turn.rewritten or turn.replacements:
        view = turn.view
        upto = next((i + 1 for i in range(len(view) - 1, -1, -1) if view[i].id == last_recorded), 0)
        added = [m for m in view[:upto] if m.id and not is_flagged(m)]
    else:
        if turn.prefix:
            base = {"first": turn.prefix[0].id, "count": len(turn.prefix), "value": turn.checksum}
        added = [m for m in turn.fresh if m.id]
    return extend_digest(base, added)  # type: ignore[return-value]
