"""The approximate counter's calibration, per thread: carried in the state, learned from usage.

The node's counter is shared by every thread of a compiled graph; an approximate one learns a
``chars_per_token`` ratio from each thread's measured usage. Each pass works on a copy with the
thread's ratio (``context["calibration"]``), so threads never move each other's estimates.
"""

from __future__ import annotations

import copy

from ctx_langgraph.budget.counters import ApproximateCounter, TokenCounter
from ctx_langgraph.state import Calibration, FlatContext

__all__ = ["calibration_report", "thread_counter"]


def thread_counter(configured: TokenCounter, context: FlatContext) -> TokenCounter:
    """The counter of this pass: ``configured`` itself when it is exact, else a copy with the
    thread's calibration, which has learned from a new baseline when there is one.

    The signal is exactly what the estimate guessed: for a baseline-method request, the tokens
    of the appended messages (new measured input - previous measured input) against their
    approximate count; for a recount, the whole request. ``context["calibrated_with"]`` is set
    to the reply it learned from.

    Examples:
        >>> shared = ApproximateCounter("claude-sonnet-4-5")
        >>> context = {"calibration": {"chars_per_token": 5.0, "count": 2}}
        >>> counter = thread_counter(shared, context)
        >>> counter.chars_per_token, shared.chars_per_token
        (5.0, 4.2)
    """
    if not isinstance(configured, ApproximateCounter):
        return configured
    counter = copy.copy(configured)
    saved = context.get("calibration")
    if saved is not None and saved.get("count", 0) > counter.calibrations:
        counter.chars_per_token = float(saved["chars_per_token"])
        counter.calibrations = int(saved["count"])
    baseline = context.get("baseline") or {}
    request = context.get("request") or {}
    reply_id = baseline.get("reply_message_id")
    if (
        not reply_id
        or reply_id == context.get("calibrated_with")
        or not request.get("counted_tokens")
    ):
        return counter
    measured = int(baseline.get("measured_input_tokens") or 0)
    if request.get("method") == "baseline":
        measured -= int(request.get("measured_baseline") or 0)
    if measured > 0:
        # (counts of the old ratio stay in the shared cache under the old counter id, unused)
        counter.calibrate(
            measured_tokens=measured,
            estimated_tokens=int(request["counted_tokens"]),
            word_chars=int(request.get("counted_word_chars") or 0),
        )
    context["calibrated_with"] = reply_id
    return counter


def calibration_report(counter: ApproximateCounter) -> Calibration:
    """What the state keeps of the thread's calibration."""
    return {"chars_per_token": counter.chars_per_token, "count": counter.calibrations}
