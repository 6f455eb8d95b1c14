"""How the report writes a value and lays out a table, in the terminal and in Markdown."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctx_langgraph.core.table import format_table
from ctx_langgraph.eval._readings import is_number

__all__ = [
    "MISSING",
    "Render",
    "aligned",
    "f1",
    "integer",
    "markdown_table",
    "milliseconds",
    "pct",
    "seconds",
    "usd",
]

MISSING = "n/a"
"""What a value that does not apply, or was not measured, shows as."""

Render = Callable[[object], str]


def pct(value: object) -> str:
    if is_number(value):
        return f"{value * 100:.1f}%"
    return MISSING


def integer(value: object) -> str:
    if is_number(value):
        return f"{round(value):,}"
    return MISSING


def f1(value: object) -> str:
    if is_number(value):
        return f"{value:.3f}"
    return MISSING


def usd(value: object) -> str:
    if is_number(value):
        return f"{value:,.2f}"
    return MISSING


def seconds(value: object) -> str:
    if is_number(value):
        return f"{value:,.1f}"
    return MISSING


def milliseconds(value: object) -> str:
    if is_number(value):
        return f"{value:,.1f}"
    return MISSING


def aligned(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``format_table`` with every column but the first right-aligned, titles included."""
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    padded = [
        [row[0], *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))]
        for row in rows
    ]
    titles = [headers[0], *(h.rjust(w) for h, w in zip(headers[1:], widths[1:], strict=True))]
    return format_table(titles, padded)


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, text_columns: int = 1
) -> str:
    """A Markdown table: the first ``text_columns`` columns left-aligned, the rest right."""
    aligns = [" --- "] * text_columns + [" ---: "] * (len(headers) - text_columns)
    lines = [
        "| " + " | ".join(_markdown_cell(h) for h in headers) + " |",
        "|" + "|".join(aligns) + "|",
    ]
    lines += ["| " + " | ".join(_markdown_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
