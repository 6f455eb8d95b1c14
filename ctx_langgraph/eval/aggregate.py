"""One strategy's figures over several runs: rates over every question, sums, maxima, and the
drift and preparation-time figures pooled over every run's generations and turns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict

from ctx_langgraph.eval.drift import GenerationCheck, pooled_drift
from ctx_langgraph.eval.latency import latency_metrics
from ctx_langgraph.eval.pricing import prefix_ratio

__all__ = [
    "COST_KEYS",
    "RATES",
    "ConversationRun",
    "RunSeries",
    "aggregate",
    "question_rates",
]

RATES = (
    "evidence_available_strict",
    "evidence_available_lenient",
    "answer_in_context",
    "correction_respected",
    "answer_f1",
)
COST_KEYS = (
    "cost_answer_usd",
    "cost_retrieval_usd",
    "cost_summary_usd",
    "cost_usd",
    "cost_usd_uncached",
    "question_cost_answer_usd",
    "question_cost_retrieval_usd",
    "question_cost_summary_usd",
    "question_cost_usd",
    "cost_usd_with_questions",
)
"""USD figures of a run (summed to the micro-dollar over runs)."""
_SUMS = (
    "input_tokens_total",
    "cacheable_prefix_tokens",
    "output_tokens_total",
    "retrieval_tokens",
    "model_calls",
    "over_window_calls",
    "summarizer_calls",
    "summarizer_input_tokens",
    "summarizer_output_tokens",
    "summarizer_cache_read_tokens",
    "compactions",
    "coverage_gaps",
    "coverage_overlaps",
    "orphan_tool_messages",
    "question_input_tokens_total",
    "question_cacheable_prefix_tokens",
    "question_output_tokens_total",
    "question_retrieval_tokens",
    "question_model_calls",
    "question_over_window_calls",
    "question_summarizer_calls",
    "question_summarizer_input_tokens",
    "question_summarizer_output_tokens",
    "question_summarizer_cache_read_tokens",
    "warnings",
    "wall_seconds",
)
_INDEX_SUMS = tuple(
    f"{phase}embed_{what}" for phase in ("", "question_") for what in ("calls", "tokens", "seconds")
)
"""The vector index's embedding work (only strategies with an index have it)."""
_MAXES = ("input_tokens_max", "max_summaries_in_prompt")


class RunSeries(TypedDict):
    """``series.json``'s entry of one run."""

    input_tokens: list[int]
    """Input tokens of every replay model call."""
    cacheable_prefix: list[int]
    """The cacheable prefix of every replay model call."""
    turn: list[int]
    """The turn of every replay model call."""
    compaction_calls: list[int]
    """Indexes of the calls right after a compaction."""
    prep_ms: list[float]
    """Context preparation time of every replayed turn, in milliseconds."""
    compaction_turns: list[int]
    """The turns (numbered from 1) in which the summarizer was called."""
    drift: list[GenerationCheck]
    """Each summary generation checked for drift."""


@dataclass
class ConversationRun:
    """One strategy over one conversation: scalar metrics, per-question checks, per-call series."""

    strategy: str
    conversation: str
    metrics: dict[str, Any] = field(default_factory=dict)
    questions: list[dict[str, Any]] = field(default_factory=list)
    series: Mapping[str, Any] = field(default_factory=dict)
    """:class:`RunSeries` (a hand-made run may hold only some of its keys)."""
    tools: tuple[str, ...] = ()
    """The names of the tools the strategy's agent had."""
    seed: int = 0
    """The seed the conversation belongs to (its generator's, or the run's)."""


def _rate(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows if row.get(key) is not None]
    return round(sum(float(v) for v in values) / len(values), 4) if values else None


def question_rates(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rates over questions, overall and by category."""
    out: dict[str, Any] = {"questions": len(rows)}
    out.update({key: _rate(rows, key) for key in RATES})
    by_category: dict[str, Any] = {}
    for category in sorted({row["category"] for row in rows}, key=lambda c: (len(c), c)):
        group = [row for row in rows if row["category"] == category]
        by_category[category] = {"questions": len(group)} | {k: _rate(group, k) for k in RATES}
    out["by_category"] = by_category
    return out


def pooled_latency(runs: Sequence[ConversationRun]) -> dict[str, int | float | None]:
    """The preparation time figures over every turn of ``runs``."""
    prep_ms: list[float] = []
    positions: set[int] = set()
    for run in runs:
        turns = [float(ms) for ms in run.series.get("prep_ms") or []]
        positions.update(
            len(prep_ms) + turn - 1 for turn in run.series.get("compaction_turns") or []
        )
        prep_ms += turns
    return latency_metrics(prep_ms, positions)


def aggregate(runs: Sequence[ConversationRun]) -> dict[str, Any]:
    """One strategy's metrics over conversations: rates over all questions, sums, maxima, the
    pooled drift and preparation time, and each conversation's own figures."""
    rows = [row for run in runs for row in run.questions]
    out = question_rates(rows)
    for key in _SUMS:
        out[key] = round(sum(run.metrics.get(key) or 0 for run in runs), 3)
    for key in _INDEX_SUMS:
        if any(key in run.metrics for run in runs):
            out[key] = round(sum(run.metrics.get(key) or 0 for run in runs), 3)
    for key in COST_KEYS:  # (USD to the micro-dollar, as each run has it)
        out[key] = round(sum(run.metrics.get(key) or 0 for run in runs), 6)
    for key in _MAXES:
        out[key] = max((run.metrics[key] for run in runs), default=0)
    out["cacheable_prefix_ratio"] = prefix_ratio(
        out["cacheable_prefix_tokens"], out["input_tokens_total"]
    )
    out["input_tokens_with_questions"] = (
        out["input_tokens_total"] + out["question_input_tokens_total"]
    )
    out.update(pooled_drift([run.series.get("drift") or [] for run in runs]))
    out.update(pooled_latency(runs))
    out["conversations"] = {
        run.conversation: {k: v for k, v in run.metrics.items() if k != "by_category"}
        for run in runs
    }
    return out
