"""What each strategy is and what it could not send: the report's strategy table and the note on
model calls over the window.

Both read ``metrics.json`` as the harness writes it: each strategy's ``method``, ``tools`` and
``question_phase`` (:func:`~ctx_langgraph.eval.strategies.describe_strategy`), its question-phase
call count, and its ``over_window_calls`` / ``question_over_window_calls``. A value a file does
not have shows as ``n/a``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctx_langgraph.eval._readings import is_number, strategy_entries

__all__ = ["STRATEGY_HEADERS", "over_window_counts", "over_window_note", "strategy_table"]

STRATEGY_HEADERS = ["strategy", "context method", "tools", "question phase", "question calls"]
"""The strategy table's columns; all but the last hold text."""

_MISSING = "n/a"


def _count(value: object) -> str:
    return f"{round(value):,}" if is_number(value) else _MISSING


def _tools(value: object) -> str:
    if not isinstance(value, list):
        return _MISSING
    return ", ".join(f"`{tool}`" for tool in value) or "none"


def _question_calls(entry: Mapping[str, Any]) -> str:
    calls, questions = entry.get("question_model_calls"), entry.get("questions")
    if not is_number(calls):
        return _MISSING
    if not is_number(questions) or not questions:
        return _count(calls)
    return f"{_count(calls)} ({calls / questions:.1f} per question)"


def strategy_table(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the strategy table: one row per strategy in ``metrics`` order, with
    its context method, its agent's tools, what the reader does at question time and how many
    model calls the question phase made.

    Examples:
        >>> headers, rows = strategy_table({"strategies": {"summary_tail_lookup": {
        ...     "method": "ours: the summary, the recent tail and the history lookup tool",
        ...     "tools": ["history_lookup"], "question_phase": "one lookup per question",
        ...     "questions": 6, "question_model_calls": 12}}})
        >>> dict(zip(headers, rows[0]))["tools"], rows[0][-1]
        ('`history_lookup`', '12 (2.0 per question)')
    """
    rows = [
        [
            name,
            str(entry.get("method") or _MISSING),
            _tools(entry.get("tools")),
            str(entry.get("question_phase") or _MISSING),
            _question_calls(entry),
        ]
        for name, entry in strategy_entries(metrics).items()
    ]
    return list(STRATEGY_HEADERS), rows


def over_window_counts(metrics: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """``{strategy: (replay calls, question calls)}`` over the usable window, for each strategy
    with at least one."""
    out: dict[str, tuple[int, int]] = {}
    for name, entry in strategy_entries(metrics).items():
        counts = tuple(
            round(value) if is_number(value) else 0
            for value in (entry.get("over_window_calls"), entry.get("question_over_window_calls"))
        )
        if any(counts):
            out[name] = (counts[0], counts[1])
    return out


def over_window_note(metrics: Mapping[str, Any]) -> str | None:
    """The note under the summary table when some model call's input was larger than the usable
    window (``None`` when none was).

    Examples:
        >>> over_window_note({"settings": {"usable": 3584}, "strategies": {
        ...     "full": {"over_window_calls": 17, "question_over_window_calls": 3},
        ...     "last_n": {"over_window_calls": 0}}})  # doctest: +NORMALIZE_WHITESPACE
        'Over the window: full made 17 replay calls and 3 question calls whose input was larger
        than the usable window (3,584 tokens: the window minus the output reserve). A provider
        would refuse such a request: their tokens and what they held are counted above, but
        they could not have been sent.'
    """
    counts = over_window_counts(metrics)
    if not counts:
        return None
    parts = []
    for name, (replay, asked) in counts.items():
        made = [
            f"{_count(number)} {phase} call{'s' if number != 1 else ''}"
            for number, phase in ((replay, "replay"), (asked, "question"))
            if number
        ]
        parts.append(f"{name} made {' and '.join(made)}")
    settings: Mapping[str, Any] = metrics.get("settings") or {}
    usable = settings.get("usable")
    size = f"{_count(usable)} tokens: " if is_number(usable) else ""
    return (
        f"Over the window: {'; '.join(parts)} whose input was larger than the usable window "
        f"({size}the window minus the output reserve). A provider would refuse such a request: "
        "their tokens and what they held are counted above, but they could not have been sent."
    )
