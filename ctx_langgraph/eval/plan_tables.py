"""What the report says of a whole context plan beyond recall: long-term drift, context
preparation time, cost per phase, and the spread of every figure across seeds.

Each table reads ``metrics.json`` as the harness writes it and comes with the sentence saying
how its figures are measured (:data:`TABLE_NOTES`); a value a file does not have, or that does
not apply (drift without a summary), shows as ``n/a``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctx_langgraph.eval._format import (
    MISSING,
    Render,
    aligned,
    integer,
    markdown_table,
    milliseconds,
    pct,
)
from ctx_langgraph.eval._readings import is_number, strategy_entries

__all__ = [
    "TABLE_NOTES",
    "Column",
    "cost_table",
    "drift_table",
    "latency_table",
    "means_note",
    "plan_markdown",
    "plan_text",
    "spread_note",
    "spread_table",
]

Column = tuple[str, str, Render]
"""A column of the summary table: its title, the metric's key, how a value is written."""

TABLE_NOTES: dict[str, str] = {
    "drift": (
        "Long-term drift: each time the summary in the model input changed during the replay "
        "(a summary generation), the conversation's facts whose evidence that summary already "
        "covers (ours: through its covered_through_seq; langmem: the ids it records; "
        "LangChain: the messages it replaced) were looked for in the summary's text: a fact is "
        "kept when every content word of its answer is there and, for a correction, the "
        "superseded value never reads as current. final: the share kept by each "
        "conversation's last generation (pooled); mean: the mean share over every generation "
        "that covers a fact; n/a: the strategy has no summary."
    ),
    "latency": (
        "Context preparation time per turn: the wall time of the turn's graph invoke minus "
        "the time spent inside the replayed model's generate, so everything but the model "
        "call (budget, recording, compaction and summarizing, trimming, lookup, checkpoints; "
        "the offline extractive summarizer works locally, a real --summarizer's calls would "
        "count here too); p50 / p95 over every replayed turn of every conversation, in "
        "milliseconds. A compaction turn is one in "
        "which the strategy's summarizer was called; compaction adds = mean over compaction "
        "turns minus mean over the other turns. Wall-clock measurements on a shared machine: "
        "they vary from run to run."
    ),
    "cost": (
        "Cost per phase (replay: the recorded conversation; questions: the question phase) "
        "at the stated list prices, each call's cacheable prefix at the cached-input price. "
        "answer: the model calls without the history lookup's results; retrieval: the lookup "
        "results' tokens inside the model inputs that follow them (priced as the uncached part "
        "of the input first); summary: the summarizer's calls. total = answer + retrieval + "
        "summary. Input tokens include the lookup results. embed tokens / embed s: the vector "
        "index's embedding calls (events after each turn, the lookup's query), booked in the "
        "usage ledger; the local model costs nothing, so they add no USD."
    ),
    "spread": (
        "Across seeds: each figure computed per seed over that seed's conversations, then "
        "the mean ± the sample standard deviation (min to max) across seeds."
    ),
}
"""How each table's figures are measured, one paragraph each."""

_DRIFT_COLUMNS: list[Column] = [
    ("summary generations", "drift_generations", integer),
    ("facts covered (last)", "drift_facts_final", integer),
    ("kept (last)", "drift_kept_final", integer),
    ("drift final", "drift_final", pct),
    ("drift mean", "drift_mean", pct),
]
_LATENCY_COLUMNS: list[Column] = [
    ("turns", "prep_turns", integer),
    ("p50 ms", "prep_ms_p50", milliseconds),
    ("p95 ms", "prep_ms_p95", milliseconds),
    ("mean ms", "prep_ms_mean", milliseconds),
    ("compaction turns", "compaction_turns", integer),
    ("mean ms, compaction turns", "prep_ms_compaction_mean", milliseconds),
    ("mean ms, other turns", "prep_ms_other_mean", milliseconds),
    ("compaction adds ms", "compaction_extra_ms", milliseconds),
]
_COST_HEADERS = [
    "strategy",
    "phase",
    "answer calls",
    "input tokens",
    "output tokens",
    "retrieval tokens",
    "summarizer calls",
    "summarizer in",
    "summarizer out",
    "embed tokens",
    "embed s",
    "answer $",
    "retrieval $",
    "summary $",
    "total $",
]
_PHASES = (("replay", ""), ("questions", "question_"))
_SPREAD_EXTRA: list[Column] = [
    ("drift mean", "drift_mean", pct),
    ("total cost $ (replay + questions)", "cost_usd_with_questions", lambda v: _usd4(v)),
]


def _usd4(value: object) -> str:
    return f"{value:,.4f}" if is_number(value) else MISSING


def _rows(
    metrics: Mapping[str, Any], columns: Sequence[Column], blank_without: str | None = None
) -> tuple[list[str], list[list[str]]]:
    headers = ["strategy", *(title for title, _, _ in columns)]
    rows: list[list[str]] = []
    for name, entry in strategy_entries(metrics).items():
        blank = blank_without is not None and not entry.get(blank_without)
        rows.append(
            [name, *(MISSING if blank else render(entry.get(key)) for _, key, render in columns)]
        )
    return headers, rows


def drift_table(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the drift table: per strategy, its summary generations, the facts
    its last generations cover and keep, the final share and the mean over generations (all
    ``n/a`` for a strategy that never summarized)."""
    return _rows(metrics, _DRIFT_COLUMNS, blank_without="drift_generations")


def latency_table(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the preparation-time table (milliseconds per turn)."""
    return _rows(metrics, _LATENCY_COLUMNS)


def _phase_row(name: str, phase: str, entry: Mapping[str, Any], prefix: str) -> list[str]:
    calls = entry.get("model_calls" if not prefix else "question_model_calls")
    summarizer = "summarizer" if not prefix else "question_summarizer"
    return [
        name,
        phase,
        integer(calls),
        integer(entry.get(f"{prefix}input_tokens_total")),
        integer(entry.get(f"{prefix}output_tokens_total")),
        integer(entry.get(f"{prefix}retrieval_tokens")),
        integer(entry.get(f"{summarizer}_calls")),
        integer(entry.get(f"{summarizer}_input_tokens")),
        integer(entry.get(f"{summarizer}_output_tokens")),
        integer(entry.get(f"{prefix}embed_tokens")),
        _seconds(entry.get(f"{prefix}embed_seconds")),
        *(
            _usd4(entry.get(f"{prefix}{key}"))
            for key in ("cost_answer_usd", "cost_retrieval_usd", "cost_summary_usd", "cost_usd")
        ),
    ]


def _seconds(value: object) -> str:
    return f"{value:,.1f}" if is_number(value) else "n/a"


def _sum(entry: Mapping[str, Any], *keys: str) -> float | None:
    values = [entry.get(key) for key in keys]
    return sum(v for v in values if is_number(v)) if all(is_number(v) for v in values) else None


def _total_row(name: str, entry: Mapping[str, Any]) -> list[str]:
    def both(key: str, question_key: str) -> float | None:
        return _sum(entry, key, question_key)

    return [
        name,
        "total",
        integer(both("model_calls", "question_model_calls")),
        integer(both("input_tokens_total", "question_input_tokens_total")),
        integer(both("output_tokens_total", "question_output_tokens_total")),
        integer(both("retrieval_tokens", "question_retrieval_tokens")),
        integer(both("summarizer_calls", "question_summarizer_calls")),
        integer(both("summarizer_input_tokens", "question_summarizer_input_tokens")),
        integer(both("summarizer_output_tokens", "question_summarizer_output_tokens")),
        integer(both("embed_tokens", "question_embed_tokens")),
        _seconds(both("embed_seconds", "question_embed_seconds")),
        *(
            _usd4(both(key, f"question_{key}"))
            for key in ("cost_answer_usd", "cost_retrieval_usd", "cost_summary_usd", "cost_usd")
        ),
    ]


def cost_table(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the cost table: three rows per strategy (the replay, the question
    phase, both), each with its calls and tokens and its USD split into answer, retrieval and
    summary, which add up to the total."""
    rows: list[list[str]] = []
    for name, entry in strategy_entries(metrics).items():
        rows += [_phase_row(name, phase, entry, prefix) for phase, prefix in _PHASES]
        rows.append(_total_row(name, entry))
    return list(_COST_HEADERS), rows


def _samples(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    for entry in strategy_entries(metrics).values():
        samples = entry.get("samples")
        if isinstance(samples, Mapping):
            return samples
    return {}


def _seed_count(metrics: Mapping[str, Any]) -> int:
    count = _samples(metrics).get("seeds")
    return int(count) if is_number(count) else 1


def spread_note(metrics: Mapping[str, Any]) -> str:
    """How many samples the figures rest on; with one seed, that there is no spread (n=1).

    Examples:
        >>> spread_note({"strategies": {"full": {"samples": {"seeds": 1, "conversations": 3,
        ...     "questions": 60}}}})  # doctest: +NORMALIZE_WHITESPACE
        'Spread across seeds: n=1 (one seed: 3 conversations, 60 questions per strategy); with
        --seeds 0,1,2 every figure is reported as the mean, min-max and standard deviation
        across seeds.'
    """
    samples = _samples(metrics)
    conversations, questions = samples.get("conversations"), samples.get("questions")
    size = f"{integer(conversations)} conversations, {integer(questions)} questions per strategy"
    seeds = _seed_count(metrics)
    if seeds <= 1:
        return (
            f"Spread across seeds: n=1 (one seed: {size}); with --seeds 0,1,2 every figure is "
            "reported as the mean, min-max and standard deviation across seeds."
        )
    listed = ", ".join(str(seed) for seed in metrics.get("seeds") or [])
    return f"n = {seeds} seeds ({listed}): {size} over every seed."


def means_note(metrics: Mapping[str, Any]) -> str | None:
    """With several seeds, that every figure shown is the mean across them (else ``None``)."""
    seeds = _seed_count(metrics)
    if seeds <= 1:
        return None
    listed = ", ".join(str(seed) for seed in metrics.get("seeds") or [])
    return (
        f"Several seeds ({listed}): every figure of the summary, drift, preparation-time and "
        f"cost tables is the mean across the {seeds} seeds, each computed over its own "
        "conversations; the question categories and conversations pool every seed. The "
        "table across seeds gives each figure's spread."
    )


def _spread_cell(entry: Mapping[str, Any], key: str, render: Render) -> str:
    spread: Mapping[str, Any] = (entry.get("spread") or {}).get(key) or {}
    mean = spread.get("mean", entry.get(key))
    if not is_number(mean):
        return MISSING
    if not is_number(spread.get("std")):
        return f"{render(mean)} (n={spread.get('n', 1)})"
    low, high = render(spread["min"]), render(spread["max"])
    return f"{render(mean)} ± {render(spread['std'])} ({low} to {high})"


def spread_table(
    metrics: Mapping[str, Any], columns: Sequence[Column]
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the table across seeds: one row per figure of ``columns`` (the
    summary table's) and the drift mean and total cost, one column per strategy, each cell
    ``mean ± standard deviation (min to max)`` (``value (n=1)`` for a figure with one seed)."""
    strategies = strategy_entries(metrics)
    shown = [*columns, *(c for c in _SPREAD_EXTRA if c[1] not in {k for _, k, _ in columns})]
    rows = [
        [title, *(_spread_cell(entry, key, render) for entry in strategies.values())]
        for title, key, render in shown
    ]
    return ["figure", *strategies], rows


def _tables(
    metrics: Mapping[str, Any], columns: Sequence[Column]
) -> list[tuple[str, str, tuple[list[str], list[list[str]]] | None]]:
    """Each section: its title, its note, and its table (none for a single seed's spread)."""
    spread = spread_table(metrics, columns) if _seed_count(metrics) > 1 else None
    return [
        ("Long-term drift", TABLE_NOTES["drift"], drift_table(metrics)),
        ("Context preparation time", TABLE_NOTES["latency"], latency_table(metrics)),
        ("Cost", TABLE_NOTES["cost"], cost_table(metrics)),
        ("Across seeds", f"{TABLE_NOTES['spread']} {spread_note(metrics)}", spread),
    ]


def plan_text(metrics: Mapping[str, Any], columns: Sequence[Column]) -> str:
    """The four tables for the terminal, each under its title and note."""
    means = means_note(metrics)
    parts: list[str] = [means] if means else []
    for title, note, table in _tables(metrics, columns):
        if table is None:
            parts.append(spread_note(metrics))
            continue
        text_columns = 2 if title == "Cost" else 1
        body = aligned(*table) if text_columns == 1 else _cost_text(*table)
        parts.append(f"{title}\n{body}\n{note}")
    return "\n\n".join(parts)


def _cost_text(headers: list[str], rows: list[list[str]]) -> str:
    """The cost table for the terminal: strategy and phase joined into the first column."""
    joined = [[f"{row[0]} · {row[1]}", *row[2:]] for row in rows]
    return aligned(["strategy · phase", *headers[2:]], joined)


def plan_markdown(
    metrics: Mapping[str, Any], columns: Sequence[Column], drift_plot: str | None = None
) -> list[str]:
    """The four sections of ``report.md`` (lines), the drift plot linked when drawn."""
    lines: list[str] = []
    for title, note, table in _tables(metrics, columns):
        lines += ["", f"## {title}", "", note]
        if table is not None:
            text_columns = 2 if title == "Cost" else 1
            lines += ["", markdown_table(*table, text_columns=text_columns)]
        if title == "Long-term drift" and drift_plot is not None:
            lines += ["", f"![Drift over summary generations]({drift_plot})"]
    return lines
