"""The report's plots: input tokens per model call, the scores by question category, and the
long-term drift over summary generations.

Needs matplotlib (``pip install 'ctx-langgraph[eval]'``), imported only when a figure is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ctx_langgraph.eval._readings import (
    category_entry,
    category_label,
    is_number,
    number,
    question_categories,
    strategy_entries,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DRIFT_PLOT",
    "category_figure",
    "drift_curve",
    "drift_figure",
    "has_drift",
    "input_tokens_figure",
    "plots_available",
]

DRIFT_PLOT = "drift.png"
"""The file name of :func:`drift_figure` in an output directory."""


def _color(index: int) -> str:
    return f"C{index % 10}"


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def input_tokens_figure(
    metrics: dict[str, Any], series: dict[str, Any], conversation: str
) -> Figure:
    """Input tokens of every model call of one conversation, one line per strategy.

    Calls right after a compaction are marked on the line, the window is a dashed horizontal
    line, and the usable window (``settings["usable"]``, when given) a dotted one. Every strategy of ``metrics`` is in the legend, with ``(no calls)`` when
    ``series`` has nothing for it. Needs matplotlib (raises ``ImportError`` without it).
    """
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    figure = _new_figure(11, 5.5)
    axes = figure.add_subplot()
    per_strategy: Mapping[str, Any] = series.get(conversation) or {}
    window = metrics.get("window")
    # the window, not a strategy that outgrows it many times over, sets the scale
    ceiling = 2.5 * float(window) if is_number(window) else None
    any_compaction = False
    for index, name in enumerate(strategy_entries(metrics)):
        data: Mapping[str, Any] = per_strategy.get(name) or {}
        tokens = [int(value) for value in data.get("input_tokens") or []]
        label = name if tokens else f"{name} (no calls)"
        if ceiling is not None and tokens and max(tokens) > ceiling:
            label = f"{name} (off the scale, up to {max(tokens):,})"
        marks = sorted(
            {int(call) for call in data.get("compaction_calls") or [] if 0 <= call < len(tokens)}
        )
        any_compaction = any_compaction or bool(marks)
        axes.plot(
            range(1, len(tokens) + 1),
            tokens,
            color=_color(index),
            linewidth=1.2,
            marker="o" if marks else "",
            markevery=marks if marks else None,
            markersize=5,
            label=label,
        )
    handles, _ = axes.get_legend_handles_labels()
    if ceiling is not None:
        axes.set_ylim(0, ceiling)
    handles += _reference_lines(axes, metrics, any_compaction)
    axes.set_title(f"Input tokens per model call, conversation {conversation}")
    axes.set_xlabel("model call")
    axes.set_ylabel("input tokens")
    axes.set_ylim(bottom=0)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    axes.grid(True, alpha=0.3)
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    return figure


def _reference_lines(axes: Any, metrics: dict[str, Any], any_compaction: bool) -> list[Any]:
    """The window (dashed), the usable window (dotted) and the compaction marker's legend."""
    from matplotlib.lines import Line2D

    window = metrics.get("window")
    handles: list[Any] = []
    if is_number(window):
        handles.append(
            axes.axhline(
                window,
                color="black",
                linestyle="--",
                linewidth=1,
                label=f"window ({round(window):,} tokens)",
            )
        )
    settings: Mapping[str, Any] = metrics.get("settings") or {}
    usable = settings.get("usable")
    if is_number(usable) and usable != window:
        handles.append(
            axes.axhline(
                usable,
                color="black",
                linestyle=":",
                linewidth=1,
                label=f"usable ({round(usable):,} tokens)",
            )
        )
    if any_compaction:
        handles.append(
            Line2D(
                [],
                [],
                color="grey",
                marker="o",
                linestyle="none",
                label="call right after a compaction",
            )
        )
    return handles


def category_figure(metrics: dict[str, Any]) -> Figure:
    """Grouped bars per question category, one bar per strategy.

    Top panel: evidence available (lenient); bottom panel: answer in context. A missing value
    draws no bar. Needs matplotlib (raises ``ImportError`` without it).
    """
    from matplotlib.ticker import PercentFormatter

    strategies = strategy_entries(metrics)
    categories = question_categories(strategies)
    figure = _new_figure(max(8.0, 1.2 * len(categories) + 4), 7.5)
    top, bottom = figure.subplots(2, 1, sharex=True)
    count = max(len(strategies), 1)
    width = 0.8 / count
    positions = range(len(categories))
    panels = [
        (top, "evidence_available_lenient", "evidence available (lenient)"),
        (bottom, "answer_in_context", "answer in context"),
    ]
    for axes, key, title in panels:
        for index, (name, entry) in enumerate(strategies.items()):
            offset = (index - (count - 1) / 2) * width
            values = [
                number((category_entry(entry, category) or {}).get(key)) for category in categories
            ]
            axes.bar(
                [position + offset for position in positions],
                values,
                width,
                color=_color(index),
                label=name,
            )
        axes.set_title(title)
        axes.set_ylim(0, 1)
        axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        axes.grid(True, axis="y", alpha=0.3)
    if categories:
        bottom.set_xticks(list(positions), [category_label(c) for c in categories])
    else:
        top.text(0.5, 0.5, "no question categories", ha="center", va="center")
    bottom.set_xlabel("question category")
    handles, _ = top.get_legend_handles_labels()
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    return figure


def has_drift(series: Mapping[str, Any]) -> bool:
    """Whether some run of ``series`` has a summary generation to plot."""
    return any(
        (data or {}).get("drift") for runs in series.values() for data in (runs or {}).values()
    )


def drift_curve(series: Mapping[str, Any], strategy: str) -> list[float | None]:
    """The share of covered facts kept by each summary generation of ``strategy``, pooled
    over every conversation (facts kept / facts covered by the conversations' generation
    ``n``); ``None`` where no generation ``n`` covers a fact yet. Late generations pool only
    the conversations that summarized that often.

    Examples:
        >>> series = {"a": {"s": {"drift": [{"facts": 0, "kept": 0}, {"facts": 2, "kept": 1}]}},
        ...           "b": {"s": {"drift": [{"facts": 1, "kept": 1}]}}}
        >>> drift_curve(series, "s")
        [1.0, 0.5]
    """
    facts: list[int] = []
    kept: list[int] = []
    for runs in series.values():
        for index, check in enumerate(((runs or {}).get(strategy) or {}).get("drift") or []):
            if index == len(facts):
                facts.append(0)
                kept.append(0)
            facts[index] += int(check.get("facts") or 0)
            kept[index] += int(check.get("kept") or 0)
    return [k / f if f else None for k, f in zip(kept, facts, strict=True)]


def drift_figure(metrics: dict[str, Any], series: Mapping[str, Any]) -> Figure:
    """The share of covered facts each summary generation still states correctly, one line
    per strategy (:func:`drift_curve`); a strategy without summaries is in the legend as
    ``(no summary)``. Needs matplotlib (raises ``ImportError`` without it)."""
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    figure = _new_figure(11, 5.5)
    axes = figure.add_subplot()
    for index, name in enumerate(strategy_entries(metrics)):
        curve = drift_curve(series, name)
        points = [(n + 1, share) for n, share in enumerate(curve) if share is not None]
        label = name if curve else f"{name} (no summary)"
        axes.plot(
            [n for n, _ in points],
            [share for _, share in points],
            color=_color(index),
            linewidth=1.2,
            marker="o" if len(points) < 40 else "",
            markersize=3,
            label=label,
        )
    axes.set_title("Long-term drift: covered facts still stated correctly in the summary")
    axes.set_xlabel("summary generation")
    axes.set_ylabel("facts kept / facts covered")
    axes.set_ylim(-0.02, 1.02)
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.grid(True, alpha=0.3)
    handles, _ = axes.get_legend_handles_labels()
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    return figure


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends import backend_agg  # noqa: F401
    except ImportError:
        return False
    return True
