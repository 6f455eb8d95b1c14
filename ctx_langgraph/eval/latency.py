"""Context preparation time: what a strategy adds to a turn besides the model call.

Each replayed turn is timed around the agent graph's ``invoke``; the time spent inside the
replayed model's own generate (:class:`~ctx_langgraph.eval.replay.ReplayModel`, which also
meters the request) is taken out. What is left is everything else the agent does in that
turn: counting the budget, recording the history, compacting and summarizing, trimming, the
lookup, and the graph's own machinery (checkpoints, channels), which every strategy pays
alike. A turn in which the strategy's summarizer was called is a compaction turn; what a
compaction adds is the mean over compaction turns minus the mean over the other turns.

These are wall-clock measurements on a shared machine: they vary from run to run.

Examples:
    >>> figures = latency_metrics([2.0, 3.0, 40.0, 2.5, 3.5], compaction_positions={2})
    >>> figures["prep_ms_p50"], figures["compaction_turns"], figures["compaction_extra_ms"]
    (3.0, 1, 37.25)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

__all__ = ["LATENCY_KEYS", "latency_metrics", "percentile"]

LATENCY_KEYS = (
    "prep_turns",
    "prep_ms_p50",
    "prep_ms_p95",
    "prep_ms_mean",
    "compaction_turns",
    "prep_ms_compaction_mean",
    "prep_ms_other_mean",
    "compaction_extra_ms",
)
"""The latency figures of a run or a strategy (:func:`latency_metrics`)."""


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated between the two
    nearest ranks (numpy's default); ``None`` without values.

    Examples:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([5.0], 95), percentile([], 50)
        (2.5, 5.0, None)
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def latency_metrics(
    prep_ms: Sequence[float], compaction_positions: Collection[int]
) -> dict[str, int | float | None]:
    """The preparation time figures of turns ``prep_ms`` (milliseconds, one per turn), of
    which those at ``compaction_positions`` (indexes into ``prep_ms``) compacted: how many
    turns, the median,
    95th percentile and mean over all turns; the count of compaction turns, the mean over them
    and over the others, and the difference (``compaction_extra_ms``: what a compaction adds
    to the turn that pays for it; ``None`` without both kinds of turn)."""
    compacting = [ms for i, ms in enumerate(prep_ms) if i in compaction_positions]
    others = [ms for i, ms in enumerate(prep_ms) if i not in compaction_positions]
    on, off = _mean(compacting), _mean(others)
    return {
        "prep_turns": len(prep_ms),
        "prep_ms_p50": _round(percentile(prep_ms, 50)),
        "prep_ms_p95": _round(percentile(prep_ms, 95)),
        "prep_ms_mean": _round(_mean(prep_ms)),
        "compaction_turns": len(compacting),
        "prep_ms_compaction_mean": _round(on),
        "prep_ms_other_mean": _round(off),
        "compaction_extra_ms": _round(on - off) if on is not None and off is not None else None,
    }
