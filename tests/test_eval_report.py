"""Evaluation report: terminal tables, report.md and the PNG plots."""

from __future__ import annotations

import builtins
import copy
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from ctx_langgraph.eval import report as report_module
from ctx_langgraph.eval.report import (
    METRIC_DEFINITIONS,
    category_figure,
    category_table,
    input_tokens_figure,
    summary_table,
    write_report,
)

STRATEGIES = ["summary_tail", "full", "last_n", "summary_only", "langmem"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _scores(strict: float, lenient: float, answer: float | None, correction: float | None):
    return {
        "questions": 10,
        "evidence_available_strict": strict,
        "evidence_available_lenient": lenient,
        "answer_in_context": answer,
        "correction_respected": correction,
    }


def _strategy(index: int) -> dict[str, Any]:
    base = 0.1 * (index + 1)
    correction = None if index == 1 else round(0.05 * index, 3)
    by_category = {
        "1": _scores(base, base + 0.05, base, None),
        "2": _scores(base / 2, base, base / 2, None),
        "5": _scores(base, base, None, None),
        "identifier": _scores(base, base + 0.1, base + 0.1, None),
        "correction": _scores(base, base, base, correction),
    }
    if index == 4:
        del by_category["identifier"]
    scalars = {
        "questions": 50,
        "evidence_available_strict": round(base, 4),
        "evidence_available_lenient": round(base + 0.05, 4),
        "answer_in_context": round(base - 0.02, 4),
        "correction_respected": correction,
        "answer_f1": None,
        "input_tokens_total": 1_234_567 * (index + 1),
        "input_tokens_max": 4001 + index,
        "model_calls": 812,
        "over_window_calls": 0,
        "summarizer_calls": 31 * index,
        "summarizer_input_tokens": 90_000,
        "summarizer_output_tokens": 15_000,
        "compactions": 30 + index,
        "coverage_gaps": index,
        "coverage_overlaps": 2 * index,
        "orphan_tool_messages": 0,
        "max_summaries_in_prompt": 1,
        "wall_seconds": 12.34 + index,
    }
    conversations = {
        "26": {**scalars, "input_tokens_total": 1000 + index, "evidence_available_lenient": 0.25},
        "30": {**scalars, "input_tokens_total": 2000 + index, "evidence_available_lenient": 0.75},
    }
    return {**scalars, "by_category": by_category, "conversations": conversations}


@pytest.fixture
def metrics() -> dict[str, Any]:
    return {
        "dataset": "../shared/datasets/locomo",
        "format": "locomo",
        "window": 4096,
        "seed": 0,
        "conversations": ["26", "30"],
        "versions": {"ctx_langgraph": "0.1.0", "langgraph": "1.0.0", "python": "3.11.7"},
        "settings": {"retrieval_tokens": 1000, "trigger": 2876, "counter": "o200k_base"},
        "strategies": {name: _strategy(i) for i, name in enumerate(STRATEGIES)},
    }


@pytest.fixture
def series() -> dict[str, Any]:
    def run(step: int, compactions: list[int]) -> dict[str, list[int]]:
        tokens = [min(500 + step * call, 5000) for call in range(40)]
        return {
            "input_tokens": tokens,
            "turn": [call // 2 + 1 for call in range(40)],
            "compaction_calls": compactions,
        }

    data = {
        conversation: {
            name: run(50 + 10 * i, [] if name in ("full", "last_n") else [10, 25])
            for i, name in enumerate(STRATEGIES)
        }
        for conversation in ("26", "30")
    }
    del data["30"]["langmem"]
    return data


def _rows(table: str) -> list[list[str]]:
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line) <= set("-+"))
    return [
        [cell.strip() for cell in line.split("|")]
        for line in [lines[start - 1], *lines[start + 1 :]]
    ]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _legend_texts(figure: Any) -> list[str]:
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


# summary_table


def test_summary_table_has_one_row_per_strategy_in_order_with_formatted_numbers(metrics):
    header, *rows = _rows(summary_table(metrics))
    assert header == [
        "strategy",
        "evidence strict",
        "evidence lenient",
        "answer in ctx",
        "correction",
        "input tokens total",
        "max input",
        "summarizer calls",
        "compactions",
        "gaps",
        "overlaps",
        "orphans",
        "max summaries",
        "seconds",
    ]
    assert [row[0] for row in rows] == STRATEGIES
    full = dict(zip(header, rows[1], strict=True))
    assert full == {
        "strategy": "full",
        "evidence strict": "20.0%",
        "evidence lenient": "25.0%",
        "answer in ctx": "18.0%",
        "correction": "n/a",
        "input tokens total": "2,469,134",
        "max input": "4,002",
        "summarizer calls": "31",
        "compactions": "31",
        "gaps": "1",
        "overlaps": "2",
        "orphans": "0",
        "max summaries": "1",
        "seconds": "13.3",
    }
    assert dict(zip(header, rows[2], strict=True))["correction"] == "10.0%"


def test_summary_table_percentages_keep_one_decimal(metrics):
    metrics["strategies"]["full"]["evidence_available_strict"] = 0.4123
    full = _rows(summary_table(metrics))[2]
    assert full[0] == "full" and full[1] == "41.2%"


def test_summary_table_drops_the_correction_column_when_no_strategy_has_one(metrics):
    for entry in metrics["strategies"].values():
        entry["correction_respected"] = None
    header = _rows(summary_table(metrics))[0]
    assert "correction" not in header
    assert len(header) == 13


def test_summary_table_adds_optional_columns_only_when_they_carry_values(metrics):
    metrics["strategies"]["full"]["over_window_calls"] = 17
    metrics["strategies"]["last_n"]["answer_f1"] = 0.4567
    header, *rows = _rows(summary_table(metrics))
    assert "over window" in header and "answer F1" in header
    full = dict(zip(header, rows[1], strict=True))
    last_n = dict(zip(header, rows[2], strict=True))
    assert full["over window"] == "17" and full["answer F1"] == "n/a"
    assert last_n["answer F1"] == "0.457"


def test_summary_table_right_aligns_numbers(metrics):
    lines = summary_table(metrics).splitlines()
    cells = [line.split(" | ")[5] for line in lines[2:]]
    assert len({len(cell) for cell in cells}) == 1
    assert all(cell == cell.rstrip() for cell in cells)
    assert cells[0].startswith(" ")


# category_table


def test_category_table_labels_locomo_categories_and_keeps_others_verbatim(metrics):
    table = category_table(metrics)
    header, *rows = _rows(table)
    assert header == ["category", "questions", *STRATEGIES]
    assert [row[0] for row in rows] == [
        "1 multi-hop",
        "2 temporal",
        "5 adversarial",
        "identifier",
        "correction",
    ]
    assert "evidence lenient / answer in ctx" in table.splitlines()[0]


def test_category_table_cells_are_lenient_then_answer(metrics):
    header, *rows = _rows(category_table(metrics))
    by_label = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert by_label["2 temporal"]["full"] == "20.0% / 10.0%"
    assert by_label["5 adversarial"]["summary_tail"] == "10.0% / n/a"
    assert by_label["identifier"]["langmem"] == "n/a"
    assert by_label["1 multi-hop"]["questions"] == "10"


def test_category_labels_cover_the_five_locomo_categories():
    table = category_table(
        {
            "strategies": {
                "s": {
                    "by_category": {
                        str(c): {"evidence_available_lenient": 1.0} for c in (4, 3, 2, 1, 5)
                    }
                }
            }
        }
    )
    labels = [row[0] for row in _rows(table)[1:]]
    assert labels == [
        "1 multi-hop",
        "2 temporal",
        "3 open-domain",
        "4 single-hop",
        "5 adversarial",
    ]


# write_report


def test_write_report_writes_markdown_and_valid_pngs(metrics, series, tmp_path):
    out = tmp_path / "run"
    paths = write_report(metrics, series, out)
    names = sorted(path.name for path in paths)
    assert names == [
        "input_tokens_26.png",
        "input_tokens_30.png",
        "recall_by_category.png",
        "report.md",
    ]
    assert all(path.parent == out and path.is_file() for path in paths)
    for path in paths:
        if path.suffix == ".png":
            width, height = _png_size(path)
            assert width > 300 and height > 200
            assert path.stat().st_size > 10_000


def test_report_markdown_names_every_strategy_setting_and_plot(metrics, series, tmp_path):
    write_report(metrics, series, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert text.startswith("# ")
    for name in STRATEGIES:
        assert re.search(rf"^\| {name} \|", text, flags=re.M), name
    for expected in (
        "../shared/datasets/locomo",
        "4,096",
        "langgraph 1.0.0",
        "python 3.11.7",
        "trigger=2876",
        "counter=o200k_base",
        "## How to read",
        "(input_tokens_26.png)",
        "(input_tokens_30.png)",
        "(recall_by_category.png)",
        "| 1 multi-hop |",
        "| correction |",
        "| 2,469,134 |",
    ):
        assert expected in text, expected
    how_to_read = text.split("## How to read", 1)[1]
    for metric, definition in METRIC_DEFINITIONS.items():
        assert re.search(
            rf"^- \*\*({re.escape(metric)}|[^*]+\*\* \(`{re.escape(metric)}`\))\*?\*?: "
            + re.escape(definition + "."),
            how_to_read,
            flags=re.M,
        ), metric
    assert (
        "- **evidence strict** (`evidence_available_strict`): share of questions whose every"
        in how_to_read
    )
    assert "- **gaps** (`coverage_gaps`): model calls where some earlier message" in how_to_read
    assert "pip install" not in text


def test_metric_definitions_say_what_each_metric_counts():
    phrases = {
        "evidence_available_strict": "every evidence message is verbatim in the model input",
        "evidence_available_lenient": "at least one evidence message",
        "answer_in_context": "normalized answer tokens all appear in the model input",
        "correction_respected": "superseded value does not appear after it",
        "input_tokens_total": "one tokenizer for all",
        "coverage_gaps": "neither in the input nor covered by the summary",
        "coverage_overlaps": "covered by two summaries",
        "orphan_tool_messages": "tool results without their call",
    }
    for metric, phrase in phrases.items():
        assert phrase in METRIC_DEFINITIONS[metric], metric
    assert all("\n" not in text for text in METRIC_DEFINITIONS.values())


def test_report_plots_conversations_that_only_the_series_has(metrics, series, tmp_path):
    series["99"] = series["26"]
    names = {path.name for path in write_report(metrics, series, tmp_path)}
    assert "input_tokens_99.png" in names
    assert "(input_tokens_99.png)" in (tmp_path / "report.md").read_text()


def test_report_markdown_tables_are_well_formed(metrics, series, tmp_path):
    write_report(metrics, series, tmp_path)
    lines = (tmp_path / "report.md").read_text().splitlines()
    tables: list[list[str]] = []
    previous = ""
    for line in lines:
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(line)
        previous = line
    assert len(tables) >= 4
    for table in tables:
        widths = {line.count(" | ") for line in table[:1] + table[2:]}
        assert len(widths) == 1, table
        assert set(table[1]) <= set("|-: ")


def test_report_per_conversation_tables_use_each_conversation_numbers(metrics, series, tmp_path):
    write_report(metrics, series, tmp_path)
    text = (tmp_path / "report.md").read_text()
    per_conversation = text.split("## Per conversation", 1)[1].split("## Plots", 1)[0]
    tokens, lenient = per_conversation.split("### Evidence available (lenient)")
    assert "| 26 | 1,000 | 1,001 | 1,002 | 1,003 | 1,004 |" in tokens
    assert "| 30 | 2,000 | 2,001 | 2,002 | 2,003 | 2,004 |" in tokens
    assert "| 26 | 25.0% | 25.0% | 25.0% | 25.0% | 25.0% |" in lenient
    assert "| 30 | 75.0% | 75.0% | 75.0% | 75.0% | 75.0% |" in lenient


def test_report_without_matplotlib_still_writes_markdown_with_a_note(
    metrics, series, tmp_path, monkeypatch
):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    paths = write_report(metrics, series, tmp_path)
    assert paths == [tmp_path / "report.md"]
    text = paths[0].read_text()
    assert "pip install 'ctx-langgraph[eval]'" in text
    assert "matplotlib is not installed" in text
    assert ".png" not in text
    assert not list(tmp_path.glob("*.png"))
    for name in STRATEGIES:
        assert f"| {name} |" in text


def test_plot_file_names_are_safe_and_distinct(metrics, series, tmp_path):
    metrics["conversations"] = ["a/b", "a b"]
    for entry in metrics["strategies"].values():
        entry["conversations"] = {}
    series = {"a/b": series["26"], "a b": series["30"]}
    names = {path.name for path in write_report(metrics, series, tmp_path)}
    assert {"input_tokens_a_b.png", "input_tokens_a_b_2.png"} <= names


# figures


def test_input_tokens_legend_lists_every_strategy_the_window_and_compactions(metrics, series):
    texts = _legend_texts(input_tokens_figure(metrics, series, "30"))
    for name in STRATEGIES[:-1]:
        assert name in texts
    assert "langmem (no calls)" in texts
    assert "window (4,096 tokens)" in texts
    assert "call right after a compaction" in texts


def test_input_tokens_lines_mark_compactions_and_draw_the_window(metrics, series):
    figure = input_tokens_figure(metrics, series, "26")
    [axes] = figure.axes
    lines = {line.get_label(): line for line in axes.get_lines()}
    tail = lines["summary_tail"]
    assert list(tail.get_xdata()) == list(range(1, 41))
    assert list(tail.get_ydata()) == series["26"]["summary_tail"]["input_tokens"]
    assert tail.get_markevery() == [10, 25] and tail.get_marker() == "o"
    assert lines["full"].get_marker() in ("", "None", None)
    window = lines["window (4,096 tokens)"]
    assert window.get_linestyle() == "--"
    assert list(window.get_ydata()) == [4096, 4096]


def test_input_tokens_figure_draws_the_usable_window_when_settings_give_it(metrics, series):
    metrics["settings"]["usable"] = 3840
    figure = input_tokens_figure(metrics, series, "26")
    assert "usable (3,840 tokens)" in _legend_texts(figure)
    [axes] = figure.axes
    usable = next(line for line in axes.get_lines() if line.get_label().startswith("usable"))
    assert usable.get_linestyle() == ":" and list(usable.get_ydata()) == [3840, 3840]


def test_category_figure_has_two_panels_with_a_bar_per_strategy_and_category(metrics):
    figure = category_figure(metrics)
    assert sorted(_legend_texts(figure)) == sorted(STRATEGIES)
    top, bottom = figure.axes
    categories = 5
    assert len(top.patches) == len(bottom.patches) == categories * len(STRATEGIES)
    labels = [tick.get_text() for tick in bottom.get_xticklabels()]
    assert labels == ["1 multi-hop", "2 temporal", "5 adversarial", "identifier", "correction"]
    heights = [patch.get_height() for patch in top.patches[:categories]]
    assert heights == pytest.approx([0.15, 0.1, 0.1, 0.2, 0.1])


def test_figures_change_when_the_strategies_change(metrics, series):
    fewer = copy.deepcopy(metrics)
    del fewer["strategies"]["full"]
    texts = _legend_texts(input_tokens_figure(fewer, series, "26"))
    assert "full" not in texts and "summary_tail" in texts


def test_report_module_does_not_import_matplotlib_at_import_time():
    source = Path(report_module.__file__).read_text()
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not any("matplotlib" in line for line in top_level)
