"""Render evaluation results: terminal tables, a Markdown report and PNG plots.

The inputs are the two dicts the harness writes: ``metrics`` (``metrics.json``: one entry per
strategy with its overall, per-category and per-conversation numbers) and ``series``
(``series.json``: input tokens of every model call, per conversation and strategy).

Plots need matplotlib (``pip install 'ctx-langgraph[eval]'``); it is imported only when a
figure is drawn, and without it :func:`write_report` still writes the Markdown report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctx_langgraph.eval._format import (
    MISSING,
    aligned,
    f1,
    integer,
    markdown_table,
    milliseconds,
    pct,
    seconds,
    usd,
)
from ctx_langgraph.eval._readings import (
    CATEGORY_LABELS,
    category_entry,
    category_label,
    is_number,
    question_categories,
    strategy_entries,
)
from ctx_langgraph.eval.figures import (
    DRIFT_PLOT,
    category_figure,
    drift_figure,
    has_drift,
    input_tokens_figure,
    plots_available,
)
from ctx_langgraph.eval.plan_tables import means_note, plan_markdown, plan_text
from ctx_langgraph.eval.strategy_table import (
    STRATEGY_HEADERS,
    over_window_counts,
    over_window_note,
    strategy_table,
)

__all__ = [
    "CATEGORY_LABELS",
    "METRIC_DEFINITIONS",
    "category_figure",
    "category_table",
    "input_tokens_figure",
    "plan_summary",
    "price_note",
    "summary_columns",
    "summary_table",
    "write_outputs",
    "write_report",
]

METRIC_DEFINITIONS: dict[str, str] = {
    "evidence_available_strict": (
        "share of questions whose every evidence message is verbatim in the model input "
        "at question time"
    ),
    "evidence_available_lenient": (
        "share of questions with at least one evidence message verbatim in the model input "
        "at question time"
    ),
    "answer_in_context": (
        "share of answerable questions whose normalized answer tokens all appear in the model input"
    ),
    "correction_respected": (
        "share of correction questions where the new value is present and the superseded "
        "value does not appear after it"
    ),
    "answer_f1": (
        "token F1 of the model's answer against the reference answer (only when a real "
        "model answered)"
    ),
    "input_tokens_total": (
        "input tokens summed over every model call of the replay (one tokenizer for all strategies)"
    ),
    "question_input_tokens_total": (
        "input tokens summed over every model call of the question phase (each question "
        "asked from the final state; a lookup call and the answer after it both count)"
    ),
    "input_tokens_with_questions": (
        "input tokens of the replay and of the question phase together "
        "(input_tokens_total + question_input_tokens_total)"
    ),
    "input_tokens_max": "largest input of a single model call, in tokens",
    "cacheable_prefix_ratio": (
        "cacheable prefix tokens / input tokens, summed over the replay's model calls: a "
        "call's cacheable prefix is its leading tokens identical to the previous call's "
        "request (tool schemas and whole messages, in order), what a provider's prompt cache "
        "would read at the cached-input price"
    ),
    "cost_usd": (
        "USD of the replay's model calls and summarizer calls at the stated prices, each "
        "call's cacheable prefix (a summarizer call's own cache reads) at the cached-input "
        "price; cost_usd_uncached prices the same calls without a prompt cache"
    ),
    "over_window_calls": (
        "model calls whose input is larger than the usable window (the window minus the "
        "output reserve)"
    ),
    "question_over_window_calls": (
        "model calls of the question phase whose input is larger than the usable window"
    ),
    "question_model_calls": "model calls of the question phase, lookup calls included",
    "summarizer_calls": (
        "calls to the summarizer; summarizer_input_tokens / summarizer_output_tokens are "
        "what those calls read and wrote"
    ),
    "compactions": "times the history was compacted into a summary",
    "coverage_gaps": (
        "model calls where some earlier message is neither in the input nor covered by the "
        "summary in it"
    ),
    "coverage_overlaps": (
        "model calls where a message is both verbatim and inside the summary's claimed "
        "coverage, or covered by two summaries"
    ),
    "orphan_tool_messages": (
        "tool results without their call (or calls without their results) in a model input"
    ),
    "max_summaries_in_prompt": "most summaries present in a single model input",
    "wall_seconds": "wall-clock time of the replay",
    "drift_final": (
        "share of the facts covered by each conversation's last summary generation that its "
        "summary text still states correctly (the answer's content words, and for a "
        "correction the superseded value not read as current); n/a without a summary"
    ),
    "drift_mean": "the same share, averaged over every summary generation that covers a fact",
    "prep_ms_p50": (
        "median context preparation time of a turn: its graph invoke minus the time inside "
        "the replayed model's generate, in milliseconds (prep_ms_p95: the 95th percentile)"
    ),
    "compaction_extra_ms": (
        "mean preparation time of the turns in which the summarizer was called minus the mean "
        "of the other turns, in milliseconds"
    ),
    "cost_usd_with_questions": (
        "USD of the replay and of the question phase together: answer calls, the lookup "
        "results in them (retrieval) and summarizer calls, at the stated prices"
    ),
}
"""One-line definition of each reported metric (the report's "How to read" section)."""

_INSTALL_HINT = "pip install 'ctx-langgraph[eval]'"


_Column = tuple[str, str, Callable[[object], str]]

_BASE_COLUMNS: list[_Column] = [
    ("evidence strict", "evidence_available_strict", pct),
    ("evidence lenient", "evidence_available_lenient", pct),
    ("answer in ctx", "answer_in_context", pct),
]
_OPTIONAL_COLUMNS: list[_Column] = [
    ("correction", "correction_respected", pct),
    ("answer F1", "answer_f1", f1),
]
_COST_COLUMNS: list[_Column] = [
    ("input tokens total", "input_tokens_total", integer),
    ("max input", "input_tokens_max", integer),
]
_CACHE_COLUMNS: list[_Column] = [
    ("cacheable prefix", "cacheable_prefix_ratio", pct),
    ("cost $", "cost_usd", usd),
    ("cost w/o cache $", "cost_usd_uncached", usd),
]
_QUESTION_COLUMNS: list[_Column] = [
    ("question tokens", "question_input_tokens_total", integer),
    ("replay + question", "input_tokens_with_questions", integer),
]
_PLAN_COLUMNS: list[_Column] = [
    ("drift final", "drift_final", pct),
    ("prep p50 ms", "prep_ms_p50", milliseconds),
    ("prep p95 ms", "prep_ms_p95", milliseconds),
]
_OVER_WINDOW: list[_Column] = [
    ("over window", "over_window_calls", integer),
    ("question over window", "question_over_window_calls", integer),
]
_TAIL_COLUMNS: list[_Column] = [
    ("summarizer calls", "summarizer_calls", integer),
    ("compactions", "compactions", integer),
    ("gaps", "coverage_gaps", integer),
    ("overlaps", "coverage_overlaps", integer),
    ("orphans", "orphan_tool_messages", integer),
    ("max summaries", "max_summaries_in_prompt", integer),
    ("seconds", "wall_seconds", seconds),
]
_ALL_COLUMNS: list[_Column] = [
    *_BASE_COLUMNS,
    *_OPTIONAL_COLUMNS,
    *_COST_COLUMNS,
    *_CACHE_COLUMNS,
    *_PLAN_COLUMNS,
    *_QUESTION_COLUMNS,
    *_OVER_WINDOW,
    *_TAIL_COLUMNS,
    ("question calls", "question_model_calls", integer),
]


def _summary_columns(strategies: Mapping[str, Mapping[str, Any]]) -> list[_Column]:
    def present(key: str) -> bool:
        return any(entry.get(key) is not None for entry in strategies.values())

    columns = list(_BASE_COLUMNS)
    columns += [column for column in _OPTIONAL_COLUMNS if present(column[1])]
    columns.append(_COST_COLUMNS[0])
    if present("question_input_tokens_total"):
        columns += _QUESTION_COLUMNS
    columns += _COST_COLUMNS[1:]
    columns += [column for column in _CACHE_COLUMNS if present(column[1])]
    columns += [column for column in _PLAN_COLUMNS if present(column[1])]
    if over_window_counts({"strategies": strategies}):
        columns += _OVER_WINDOW
    return columns + _TAIL_COLUMNS


def _with_question_totals(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """``entry`` with ``input_tokens_with_questions``: replay and question-phase tokens."""
    replay, questions = entry.get("input_tokens_total"), entry.get("question_input_tokens_total")
    if not (is_number(replay) and is_number(questions)):
        return entry
    return {**entry, "input_tokens_with_questions": replay + questions}


def summary_columns(metrics: Mapping[str, Any]) -> list[_Column]:
    """The summary table's columns for ``metrics``: title, metric key and how it is written."""
    return _summary_columns(strategy_entries(metrics))


def plan_summary(metrics: Mapping[str, Any]) -> str:
    """The drift, preparation-time, cost and across-seeds tables for the terminal
    (:func:`~ctx_langgraph.eval.plan_tables.plan_text`)."""
    return plan_text(metrics, summary_columns(metrics))


def _summary(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    strategies = {
        name: _with_question_totals(entry) for name, entry in strategy_entries(metrics).items()
    }
    columns = _summary_columns(strategies)
    headers = ["strategy", *(title for title, _, _ in columns)]
    rows = [
        [name, *(render(entry.get(key)) for _, key, render in columns)]
        for name, entry in strategies.items()
    ]
    return headers, rows


def _category(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    strategies = strategy_entries(metrics)
    headers = ["category", "questions", *strategies]
    rows: list[list[str]] = []
    for category in question_categories(strategies):
        cells: list[str] = []
        questions: object = None
        for entry in strategies.values():
            found = category_entry(entry, category)
            if found is None:
                cells.append(MISSING)
                continue
            if questions is None:
                questions = found.get("questions")
            lenient = pct(found.get("evidence_available_lenient"))
            answer = pct(found.get("answer_in_context"))
            cells.append(f"{lenient} / {answer}")
        rows.append([category_label(category), integer(questions), *cells])
    return headers, rows


def _conversation_names(metrics: Mapping[str, Any]) -> list[str]:
    names = [str(name) for name in metrics.get("conversations") or []]
    for entry in strategy_entries(metrics).values():
        for name in entry.get("conversations") or {}:
            if str(name) not in names:
                names.append(str(name))
    return names


def _per_conversation(
    metrics: Mapping[str, Any], key: str, render: Callable[[object], str]
) -> tuple[list[str], list[list[str]]]:
    strategies = strategy_entries(metrics)
    headers = ["conversation", *strategies]
    rows: list[list[str]] = []
    for conversation in _conversation_names(metrics):
        row = [conversation]
        for entry in strategies.values():
            per: Mapping[Any, Any] = entry.get("conversations") or {}
            found = next((v for k, v in per.items() if str(k) == conversation), None)
            row.append(render((found or {}).get(key)))
        rows.append(row)
    return headers, rows


def summary_table(metrics: dict[str, Any]) -> str:
    """The strategy comparison table for the terminal, one row per strategy in ``metrics`` order.

    Shares are percentages, token counts have thousands separators, and a missing value shows as
    ``n/a``. The ``correction`` column appears when some strategy has ``correction_respected``,
    ``answer F1`` when some strategy has ``answer_f1``, ``question tokens`` and ``replay +
    question`` (the question phase's input tokens, and with the replay's) when the metrics
    have ``question_input_tokens_total``, and ``over window`` / ``question over window`` when
    some model call's input was larger than the usable window; then a note under the table
    names those strategies.

    Examples:
        >>> metrics = {"strategies": {
        ...     "full": {"evidence_available_strict": 1.0, "evidence_available_lenient": 1.0,
        ...              "answer_in_context": 0.95, "input_tokens_total": 1234567,
        ...              "input_tokens_max": 9001, "summarizer_calls": 0, "compactions": 0,
        ...              "coverage_gaps": 0, "coverage_overlaps": 0, "orphan_tool_messages": 0,
        ...              "max_summaries_in_prompt": 0, "wall_seconds": 1.3},
        ...     "last_n": {"evidence_available_strict": 0.412, "evidence_available_lenient": 0.5,
        ...                "answer_in_context": 0.375, "input_tokens_total": 98765,
        ...                "input_tokens_max": 4001, "summarizer_calls": 0, "compactions": 0,
        ...                "coverage_gaps": 31, "coverage_overlaps": 0,
        ...                "orphan_tool_messages": 2, "max_summaries_in_prompt": 0,
        ...                "wall_seconds": 0.5}}}
        >>> print(summary_table(metrics))
        strategy | evidence strict | evidence lenient | answer in ctx | input tokens total | max input | summarizer calls | compactions | gaps | overlaps | orphans | max summaries | seconds
        ---------+-----------------+------------------+---------------+--------------------+-----------+------------------+-------------+------+----------+---------+---------------+--------
        full     |          100.0% |           100.0% |         95.0% |          1,234,567 |     9,001 |                0 |           0 |    0 |        0 |       0 |             0 |     1.3
        last_n   |           41.2% |            50.0% |         37.5% |             98,765 |     4,001 |                0 |           0 |   31 |        0 |       2 |             0 |     0.5
    """
    table = aligned(*_summary(metrics))
    notes = [note for note in (price_note(metrics), over_window_note(metrics)) if note]
    return "\n\n".join([table, *notes])


def price_note(metrics: Mapping[str, Any]) -> str | None:
    """The prices the cost columns use, as ``metrics["settings"]["prices"]`` states them
    (``None`` when the metrics have no cost).

    Examples:
        >>> price_note({"settings": {"prices": {"model": "gpt-4o", "input": 2.5,
        ...     "cached_input": 1.25, "output": 10.0}}})  # doctest: +NORMALIZE_WHITESPACE
        'Costs at gpt-4o list prices, USD per 1M tokens: input 2.50, cached input 1.25, output
        10.00; replay answer calls and summarizer calls, the question phase not included.'
    """
    settings: Mapping[str, Any] = metrics.get("settings") or {}
    prices = settings.get("prices")
    if not isinstance(prices, Mapping):
        return None
    rates = ", ".join(
        f"{label} {prices[key]:.2f}"
        for label, key in (
            ("input", "input"),
            ("cached input", "cached_input"),
            ("output", "output"),
        )
        if is_number(prices.get(key))
    )
    return (
        f"Costs at {prices.get('model', MISSING)} list prices, USD per 1M tokens: {rates}; "
        "replay answer calls and summarizer calls, the question phase not included."
    )


def category_table(metrics: dict[str, Any]) -> str:
    """Per-category results: one row per question category, one column per strategy.

    Each strategy cell is ``evidence lenient / answer in ctx``; ``questions`` is the category's
    question count. LoCoMo's categories 1-5 get their names (``2 temporal``); other categories
    (``identifier``, ``correction``, ...) show verbatim. The first line says what the cells are.

    Examples:
        >>> metrics = {"strategies": {
        ...     "last_n": {"by_category": {
        ...         "correction": {"questions": 4, "evidence_available_lenient": 0.25,
        ...                        "answer_in_context": 0.5},
        ...         "2": {"questions": 10, "evidence_available_lenient": 0.3,
        ...               "answer_in_context": 0.2}}}}}
        >>> print(category_table(metrics))
        evidence lenient / answer in ctx, by question category
        category   | questions |        last_n
        -----------+-----------+--------------
        2 temporal |        10 | 30.0% / 20.0%
        correction |         4 | 25.0% / 50.0%
    """
    caption = "evidence lenient / answer in ctx, by question category"
    return caption + "\n" + aligned(*_category(metrics))


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "conversation"


def _header(metrics: Mapping[str, Any]) -> list[str]:
    dataset = metrics.get("dataset", MISSING)
    window = metrics.get("window")
    lines = [f"# Context strategies on {Path(str(dataset)).name or dataset}", ""]
    details = [
        f"- **dataset**: `{dataset}` (format {metrics.get('format', MISSING)}), "
        f"conversations: {', '.join(_conversation_names(metrics)) or MISSING}",
        f"- **window**: {integer(window)} tokens, {_seeds(metrics)}",
    ]
    versions: Mapping[str, Any] = metrics.get("versions") or {}
    if versions:
        details.append(
            "- **versions**: " + ", ".join(f"{name} {value}" for name, value in versions.items())
        )
    settings: Mapping[str, Any] = metrics.get("settings") or {}
    if settings:
        details.append(
            "- **settings**: " + ", ".join(f"{name}={value}" for name, value in settings.items())
        )
    return lines + details


def _seeds(metrics: Mapping[str, Any]) -> str:
    seeds = metrics.get("seeds") or []
    if len(seeds) > 1:
        return f"seeds {', '.join(str(seed) for seed in seeds)} (one dataset per seed)"
    return f"seed {metrics.get('seed', MISSING)}"


def _how_to_read(with_plots: bool) -> list[str]:
    lines = ["## How to read", ""]
    titles = {key: title for title, key, _ in _ALL_COLUMNS}
    for key, text in METRIC_DEFINITIONS.items():
        name = f"**{titles[key]}** (`{key}`)" if key in titles else f"**{key}**"
        lines.append(f"- {name}: {text}.")
    if with_plots:
        lines += [
            "- **input_tokens_<conversation>.png**: input tokens of each model call per "
            "strategy; dots mark the first call after a compaction, the dashed line is the "
            "window.",
            "- **recall_by_category.png**: evidence available (lenient) and answer in context "
            "per question category, one bar per strategy.",
            "- **drift.png** (when some strategy summarized): the share of covered facts each "
            "summary generation still states correctly, one line per strategy.",
        ]
    lines += [
        "",
        "The strategy table says how each strategy builds the model input, which tools its "
        "agent has, and what the reader does when the questions are asked (the question "
        "phase, whose tokens the summary shows apart from the replay's).",
        "",
        "In the category table each cell is `evidence lenient / answer in ctx`; "
        "`n/a` means the value does not apply or was not measured.",
    ]
    return lines


def _render_markdown(
    metrics: Mapping[str, Any], plots: Sequence[tuple[str, Path]], plots_missing: bool
) -> str:
    lines = _header(metrics)
    lines += ["", "## Strategies", ""]
    lines.append(markdown_table(*strategy_table(metrics), text_columns=len(STRATEGY_HEADERS) - 1))
    lines += ["", "## Summary", "", markdown_table(*_summary(metrics))]
    prices = price_note(metrics)
    if prices is not None:
        lines += ["", prices]
    for note in (over_window_note(metrics), means_note(metrics)):
        if note is not None:
            lines += ["", f"**{note}**"]
    lines += [
        "",
        "## By question category",
        "",
        "Evidence available (lenient) / answer in context.",
        "",
        markdown_table(*_category(metrics)),
    ]
    lines += [
        "",
        "## Per conversation",
        "",
        "### Input tokens total",
        "",
        markdown_table(*_per_conversation(metrics, "input_tokens_total", integer)),
        "",
        "### Evidence available (lenient)",
        "",
        markdown_table(*_per_conversation(metrics, "evidence_available_lenient", pct)),
    ]
    drift = next((path.name for _, path in plots if path.name == DRIFT_PLOT), None)
    lines += plan_markdown(metrics, summary_columns(metrics), drift)
    lines += ["", "## Plots", ""]
    if plots_missing:
        lines.append(f"Plots were not drawn: matplotlib is not installed (`{_INSTALL_HINT}`).")
    elif not plots:
        lines.append("No plots.")
    for title, path in plots:
        lines += [f"**{title}** ([{path.name}]({path.name}))", "", f"![{title}]({path.name})", ""]
    if plots:
        lines.pop()
    lines += ["", *_how_to_read(bool(plots))]
    return "\n".join(lines) + "\n"


def write_report(metrics: dict[str, Any], series: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``report.md`` and the plots into ``out_dir``; return the written paths.

    Files: ``report.md`` (settings and versions, what each strategy is: its context method,
    its agent's tools and what its reader does at question time; the summary with replay and
    question-phase tokens and a note on calls over the window, the category and
    per-conversation tables, the drift, preparation-time, cost and across-seeds tables
    (:mod:`~ctx_langgraph.eval.plan_tables`), links to the plots, and what each metric
    means), ``input_tokens_<conversation>.png``
    for each conversation (characters other than letters, digits, ``.``, ``_`` and ``-`` become
    ``_``), ``recall_by_category.png``, and ``drift.png`` when some strategy summarized.
    Without matplotlib only ``report.md`` is written,
    and it says how to get the plots.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    plots: list[tuple[str, Path]] = []
    plots_missing = not plots_available()
    if not plots_missing:
        conversations = _conversation_names(metrics)
        conversations += [str(c) for c in series if str(c) not in conversations]
        names: set[str] = set()
        for conversation in conversations:
            stem = base = f"input_tokens_{_safe_name(conversation)}"
            number = 2
            while stem in names:
                stem, number = f"{base}_{number}", number + 1
            names.add(stem)
            path = out_dir / f"{stem}.png"
            input_tokens_figure(metrics, series, conversation).savefig(path, dpi=110)
            plots.append((f"Input tokens per model call, conversation {conversation}", path))
        path = out_dir / "recall_by_category.png"
        category_figure(metrics).savefig(path, dpi=110)
        plots.append(("Evidence and answer in context by question category", path))
        if has_drift(series):
            path = out_dir / DRIFT_PLOT
            drift_figure(metrics, series).savefig(path, dpi=110)
            plots.append(("Long-term drift: facts kept per summary generation", path))
    report = out_dir / "report.md"
    report.write_text(_render_markdown(metrics, plots, plots_missing), encoding="utf-8")
    written.append(report)
    written += [path for _, path in plots]
    return written


def write_outputs(metrics: dict[str, Any], series: dict[str, Any], out: Path) -> list[Path]:
    """``metrics.json``, ``series.json``, ``report.md`` and the plots, in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (out / "series.json").write_text(json.dumps(series) + "\n")
    return [out / "metrics.json", out / "series.json", *write_report(metrics, series, out)]
