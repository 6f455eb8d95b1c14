"""Evaluation report: what each strategy is, its question-phase tokens, and calls over the window."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ctx_langgraph.datasets import synthetic_conversation
from ctx_langgraph.eval import report as report_module
from ctx_langgraph.eval import run_eval
from ctx_langgraph.eval.report import summary_table, write_report
from ctx_langgraph.eval.strategies import (
    STRATEGIES,
    STRATEGY_METHODS,
    describe_strategy,
)


def _entry(name: str, replay: int, questions: int, calls: int, **extra: Any) -> dict[str, Any]:
    return {
        **describe_strategy(
            name,
            tools=["search_orders", "history_lookup"]
            if name == "summary_tail_lookup"
            else ["search_orders"],
            reader="scripted",
            retrieval_tokens=700,
        ),
        "questions": 4,
        "evidence_available_strict": 0.5,
        "evidence_available_lenient": 0.75,
        "answer_in_context": 0.5,
        "input_tokens_total": replay,
        "input_tokens_max": 900,
        "model_calls": 40,
        "over_window_calls": 0,
        "question_input_tokens_total": questions,
        "question_model_calls": calls,
        "question_over_window_calls": 0,
        "summarizer_calls": 0,
        "compactions": 0,
        "coverage_gaps": 0,
        "coverage_overlaps": 0,
        "orphan_tool_messages": 0,
        "max_summaries_in_prompt": 0,
        "wall_seconds": 1.0,
        **extra,
    }


@pytest.fixture
def metrics() -> dict[str, Any]:
    return {
        "dataset": "sessions",
        "window": 4096,
        "conversations": ["c1"],
        "settings": {"retrieval_tokens": 700, "usable": 3584, "reader": "scripted"},
        "strategies": {
            "full": _entry("full", 120_000, 9_000, 4),
            "summary_tail": _entry("summary_tail", 40_000, 2_500, 4),
            "summary_tail_lookup": _entry("summary_tail_lookup", 41_000, 6_100, 8),
            "langchain": _entry("langchain", 39_000, 2_400, 4),
        },
    }


@pytest.fixture
def no_plots(monkeypatch):
    """report.md only: these tests read its tables, not the figures."""
    monkeypatch.setattr(report_module, "plots_available", lambda: False)


def _rows(table: str) -> list[dict[str, str]]:
    lines = table.split("\n\n", 1)[0].splitlines()
    header = [cell.strip() for cell in lines[0].split("|")]
    return [
        dict(zip(header, (c.strip() for c in line.split("|")), strict=True)) for line in lines[2:]
    ]


def _markdown_section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _markdown_rows(section: str) -> list[dict[str, str]]:
    lines = [line for line in section.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]
    return [dict(zip(split[0], row, strict=True)) for row in split[2:]]


def test_every_strategy_has_a_context_method():
    assert set(STRATEGY_METHODS) == set(STRATEGIES)
    assert all(text and "\n" not in text for text in STRATEGY_METHODS.values())


def test_the_lookup_strategy_reads_one_page_of_the_configured_size_per_question():
    lookup = describe_strategy(
        "summary_tail_lookup", tools=["history_lookup"], reader="scripted", retrieval_tokens=1500
    )
    assert lookup["tools"] == ["history_lookup"]
    assert "one scripted history_lookup call per question" in lookup["question_phase"]
    assert "query: the question text" in lookup["question_phase"]
    assert "at most 1,500 tokens" in lookup["question_phase"]
    plain = describe_strategy("summary_tail", tools=[], reader="openai:gpt-4o", retrieval_tokens=1)
    assert plain["question_phase"] == "openai:gpt-4o answers from the input as built; no tool call"


def test_report_has_a_strategy_table_with_method_tools_and_reader(metrics, tmp_path, no_plots):
    write_report(metrics, {}, tmp_path)
    text = (tmp_path / "report.md").read_text()
    rows = {row["strategy"]: row for row in _markdown_rows(_markdown_section(text, "Strategies"))}
    assert list(rows) == list(metrics["strategies"])
    for name, row in rows.items():
        assert row["context method"] == STRATEGY_METHODS[name]
    lookup = rows["summary_tail_lookup"]
    assert lookup["tools"] == "`search_orders`, `history_lookup`"
    assert lookup["question phase"] == (
        "one scripted history_lookup call per question (query: the question text; a page of "
        "at most 700 tokens), then the scripted reader answers with a placeholder"
    )
    assert lookup["question calls"] == "8 (2.0 per question)"
    assert rows["full"]["tools"] == "`search_orders`"
    assert "no tool call" in rows["full"]["question phase"]
    assert rows["full"]["question calls"] == "4 (1.0 per question)"


def test_question_phase_tokens_show_next_to_the_replay_tokens_with_their_sum(
    metrics, tmp_path, no_plots
):
    rows = {row["strategy"]: row for row in _rows(summary_table(metrics))}
    header = list(rows["full"])
    at = header.index("input tokens total")
    assert header[at + 1 : at + 3] == ["question tokens", "replay + question"]
    expected = {
        "full": ("120,000", "9,000", "129,000"),
        "summary_tail": ("40,000", "2,500", "42,500"),
        "summary_tail_lookup": ("41,000", "6,100", "47,100"),
        "langchain": ("39,000", "2,400", "41,400"),
    }
    for name, numbers in expected.items():
        row = rows[name]
        assert (row["input tokens total"], row["question tokens"], row["replay + question"]) == (
            numbers
        )
    write_report(metrics, {}, tmp_path)
    summary = _markdown_section((tmp_path / "report.md").read_text(), "Summary")
    markdown = {row["strategy"]: row for row in _markdown_rows(summary)}
    assert markdown["summary_tail_lookup"]["question tokens"] == "6,100"
    assert markdown["summary_tail_lookup"]["replay + question"] == "47,100"


def test_calls_over_the_window_are_counted_and_flagged(metrics, tmp_path, no_plots):
    table = summary_table(metrics)
    assert "over window" not in table and "Over the window" not in table
    metrics["strategies"]["full"]["over_window_calls"] = 17
    metrics["strategies"]["full"]["question_over_window_calls"] = 4
    table = summary_table(metrics)
    rows = {row["strategy"]: row for row in _rows(table)}
    assert rows["full"]["over window"] == "17"
    assert rows["full"]["question over window"] == "4"
    assert rows["summary_tail"]["over window"] == "0"
    note = table.split("\n\n", 1)[1]
    assert note.startswith("Over the window: full made 17 replay calls and 4 question calls")
    assert "usable window (3,584 tokens" in note and "summary_tail" not in note
    write_report(metrics, {}, tmp_path)
    summary = _markdown_section((tmp_path / "report.md").read_text(), "Summary")
    assert re.search(r"^\*\*Over the window: full made 17 replay calls", summary, flags=re.M)
    assert _markdown_rows(summary)[0]["question over window"] == "4"


def test_the_harness_records_descriptions_question_calls_and_over_window_calls():
    conversation = synthetic_conversation(seed=1, sessions=4, turns_per_session=30)
    metrics, _ = run_eval(
        [conversation], ["full", "summary_tail_lookup"], window=2048, retrieval_tokens=600
    )
    full = metrics["strategies"]["full"]
    lookup = metrics["strategies"]["summary_tail_lookup"]
    assert full["method"] == STRATEGY_METHODS["full"] and full["tools"] == []
    assert lookup["tools"] == ["history_lookup"]
    assert "at most 600 tokens" in lookup["question_phase"]
    questions = len(conversation.questions)
    assert full["question_model_calls"] == questions
    assert lookup["question_model_calls"] == 2 * questions
    assert full["question_input_tokens_total"] > 0
    assert full["over_window_calls"] > 0  # a small window: sending everything stops fitting
    assert full["question_over_window_calls"] == questions
    assert lookup["over_window_calls"] == lookup["question_over_window_calls"] == 0
    per_conversation = full["conversations"][conversation.name]
    assert per_conversation["question_over_window_calls"] == questions
