"""The evaluation harness on tiny hand-made conversations whose right answers are known."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctx_langgraph.budget.counters import default_counter
from ctx_langgraph.cli import main
from ctx_langgraph.datasets import Conversation, load_locomo
from ctx_langgraph.errors import DatasetError
from ctx_langgraph.eval.harness import run_conversation, run_eval
from ctx_langgraph.eval.metrics import context_text, coverage, orphan_tool_messages
from ctx_langgraph.eval.replay import ExtractiveChatModel, replay_turns
from ctx_langgraph.eval.strategies import STRATEGIES

COUNTER = default_counter("gpt-4o")
PLANTED = "My locker code at the climbing gym is 4471-QX, do not forget it."
FILLER = (
    "We talked about the weather again, the rain kept going all week and the garden is a mess "
    "now, with puddles everywhere and the tomatoes drowning in the mud near the old fence."
)


def locomo_file(path: Path, sessions: int = 6, turns: int = 16) -> Path:
    """A LoCoMo-format conversation: a code planted in the first turn, then filler; one question
    about the code, one adversarial question, one with an evidence id written the odd way."""
    data: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for s in range(1, sessions + 1):
        data[f"session_{s}_date_time"] = f"1:{10 + s} pm on {s} May, 2023"
        data[f"session_{s}"] = [
            {
                "speaker": "Ana" if t % 2 else "Ben",
                "dia_id": f"D{s}:{t}",
                "text": PLANTED if (s, t) == (1, 1) else f"{FILLER} ({s}.{t})",
            }
            for t in range(1, turns + 1)
        ]
    data["qa"] = [
        {
            "question": "What is Ana's locker code at the climbing gym?",
            "answer": "4471-QX",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "What is Ben's locker code?",
            "adversarial_answer": "4471-QX",
            "evidence": ["D1:01"],
            "category": 5,
        },
    ]
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Conversation:
    return load_locomo(locomo_file(tmp_path_factory.mktemp("locomo") / "tiny.json"))


@pytest.fixture(scope="module")
def results(conversation: Conversation) -> dict[str, Any]:
    metrics, series = run_eval([conversation], STRATEGIES, window=2048)
    return {"metrics": metrics, "series": series}


def test_full_sees_everything_and_last_n_loses_the_early_evidence(results):
    strategies = results["metrics"]["strategies"]
    full, last_n = strategies["full"], strategies["last_n"]
    assert full["evidence_available_strict"] == 1.0
    assert full["answer_in_context"] == 1.0
    assert full["over_window_calls"] > 0  # it stopped fitting the window
    assert last_n["evidence_available_lenient"] == 0.0
    assert last_n["answer_in_context"] == 0.0
    assert last_n["coverage_gaps"] > 0  # trimming drops messages nothing covers
    assert last_n["over_window_calls"] == 0


def test_ours_keeps_coverage_whole_and_the_lookup_finds_the_evidence(results):
    strategies = results["metrics"]["strategies"]
    for name in ("summary_only", "summary_tail", "summary_tail_lookup"):
        ours = strategies[name]
        assert ours["compactions"] > 0, name
        assert ours["summarizer_calls"] >= ours["compactions"] > 0
        assert ours["coverage_gaps"] == ours["coverage_overlaps"] == 0, name
        assert ours["orphan_tool_messages"] == 0
        assert ours["max_summaries_in_prompt"] == 1
        assert ours["over_window_calls"] == 0
    lookup = strategies["summary_tail_lookup"]
    assert lookup["evidence_available_strict"] == 1.0
    assert lookup["answer_in_context"] == 1.0
    assert lookup["input_tokens_total"] < strategies["full"]["input_tokens_total"]
    # the adversarial question counts for evidence, never for answers
    assert lookup["by_category"]["5"]["answer_in_context"] is None
    assert lookup["by_category"]["5"]["evidence_available_strict"] == 1.0  # 'D1:01' is D1:1


def test_peers_run_with_the_same_summarizer_and_are_measured(results):
    strategies = results["metrics"]["strategies"]
    for name in ("langmem", "langchain"):
        assert strategies[name]["summarizer_calls"] > 0, name
        assert strategies[name]["max_summaries_in_prompt"] == 1
        assert strategies[name]["summarizer_input_tokens"] > 0


def test_series_have_one_point_per_model_call(results):
    metrics, series = results["metrics"], results["series"]
    for name, entry in series["tiny"].items():
        calls = metrics["strategies"][name]["model_calls"]
        assert len(entry["input_tokens"]) == len(entry["turn"]) == calls
        assert sum(entry["input_tokens"]) == metrics["strategies"][name]["input_tokens_total"]
        assert len(entry["compaction_calls"]) == metrics["strategies"][name]["compactions"]


def test_metrics_follow_the_documented_schema(results):
    metrics = results["metrics"]
    assert set(metrics) >= {"dataset", "window", "versions", "strategies", "settings"}
    assert metrics["window"] == 2048
    keys = {
        "evidence_available_strict",
        "evidence_available_lenient",
        "answer_in_context",
        "by_category",
        "input_tokens_total",
        "input_tokens_max",
        "summarizer_calls",
        "compactions",
        "coverage_gaps",
        "coverage_overlaps",
        "orphan_tool_messages",
        "max_summaries_in_prompt",
        "wall_seconds",
    }
    for name in STRATEGIES:
        assert keys <= set(metrics["strategies"][name]), name


def test_every_strategy_reports_its_cacheable_prefix_and_cost(results):
    from ctx_langgraph.eval.pricing import eval_price, replay_costs

    metrics, series = results["metrics"], results["series"]
    assert metrics["settings"]["prices"] == {
        "model": "gpt-4o",
        "input": 2.5,
        "cached_input": 1.25,
        "output": 10.0,
    }
    for name in STRATEGIES:  # the peers included
        entry = metrics["strategies"][name]
        prefix, total = entry["cacheable_prefix_tokens"], entry["input_tokens_total"]
        assert entry["cacheable_prefix_ratio"] == round(prefix / total, 4), name
        assert 0 < entry["cacheable_prefix_ratio"] < 1, name
        assert sum(series["tiny"][name]["cacheable_prefix"]) == prefix
        assert entry["cost_usd"] < entry["cost_usd_uncached"], name
        assert entry["cost_usd"] == pytest.approx(replay_costs(entry, eval_price())["cost_usd"])
    # appending to a stable prefix: everything but the newest messages is cacheable
    assert metrics["strategies"]["full"]["cacheable_prefix_ratio"] > 0.9
    # trimming from the front moves the prefix on nearly every call
    assert (
        metrics["strategies"]["last_n"]["cacheable_prefix_ratio"]
        < metrics["strategies"]["summary_tail_lookup"]["cacheable_prefix_ratio"]
    )


def test_a_strategy_that_loses_messages_is_caught(conversation):
    """The harness measures, it does not trust: a summary that claims less than it replaced is
    a coverage gap, and a tool result without its call is an orphan."""
    history = ["m1", "m2", "m3", "m4"]
    assert coverage({"m4"}, frozenset({"m1"}), history, 1) == (True, False)
    assert coverage({"m3", "m4"}, frozenset({"m1", "m2"}), history, 2) == (False, True)
    call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    assert orphan_tool_messages([call, ToolMessage("x", tool_call_id="c2")]) == 2


def test_lookup_pages_are_read_as_the_model_reads_them():
    page = {"notice": "n", "records": [{"text": 'She said "hi"\nthen left'}], "next_cursor": None}
    message = ToolMessage(json.dumps(page), tool_call_id="c1", name="history_lookup")
    assert 'she said "hi" then left' in context_text([message])


def test_replay_turns_merge_assistant_texts_and_pair_tool_results():
    call = {"name": "lookup_order", "args": {"id": "7"}, "id": "c1", "type": "tool_call"}
    messages = [
        HumanMessage("hi", id="h1"),
        AIMessage("one", id="a1"),
        AIMessage("two", id="a2"),
        HumanMessage("order 7?", id="h2"),
        AIMessage("", tool_calls=[call], id="a3"),
        ToolMessage("shipped", tool_call_id="c1", id="t1"),
        AIMessage("It shipped.", id="a4"),
        HumanMessage("thanks", id="h3"),
    ]
    turns = replay_turns(Conversation("c", messages, [], []))
    assert [[m.id for m in t.messages] for t in turns] == [
        ["h1", "a1"],
        ["h2", "a3", "t1", "a4"],
        ["h3", "h3-reply"],
    ]
    assert turns[0].steps[0].text == "one\n\ntwo"
    orphan = [HumanMessage("x", id="h"), ToolMessage("r", tool_call_id="nope", id="t")]
    with pytest.raises(DatasetError, match="no earlier assistant message calls"):
        replay_turns(Conversation("c", orphan, [], []))


def test_the_peers_summarizer_reads_both_peer_prompt_formats():
    model = ExtractiveChatModel(counter=COUNTER, cap_tokens=300)
    xml = (
        "Summarize.\n<messages>\nMessages to summarize:\n"
        '<message type="human">Refund order ORD-1042 for Ann Lee</message>\n'
        '<message type="ai">Done, $40.00 refunded.</message>\n</messages>'
    )
    summary = model.invoke([HumanMessage(xml)]).text
    assert "ORD-1042" in summary and "$40.00" in summary
    langmem = [
        HumanMessage("Ship to /srv/data/out.csv"),
        HumanMessage("Create a summary of the conversation above:"),
    ]
    again = model.invoke(langmem).text
    assert "/srv/data/out.csv" in again and "Create a summary" not in again
    extended = model.invoke(
        [
            HumanMessage("Also invoice INV-2023-0042"),
            HumanMessage(
                f"This is summary of the conversation so far: {again}\n\nExtend this summary by "
                "taking into account the new messages above:"
            ),
        ]
    ).text
    assert "/srv/data/out.csv" in extended and "INV-2023-0042" in extended  # merged, not lost
    assert model.stats.calls == 3


def test_a_real_reader_is_scored_by_f1(conversation):
    from langchain_core.language_models import GenericFakeChatModel

    reader = GenericFakeChatModel(messages=iter([AIMessage("The code is 4471-QX.")] * 4))
    small = Conversation(
        conversation.name,
        conversation.messages,
        conversation.created_at,
        conversation.questions[:1],
    )
    run = run_conversation(
        small, "summary_tail_lookup", window=2048, counter=COUNTER, reader=reader
    )
    assert run.metrics["answer_f1"] == pytest.approx(2 / 3, abs=0.01)  # 'code' and 'is' are extra


def test_a_real_summarizing_model_is_used_by_every_strategy_alike(conversation):
    from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply

    model = MeteringChatModel(replies=[scripted_summary_reply])
    metrics, _ = run_eval(
        [conversation], ["summary_tail_lookup", "langchain"], window=2048, summary_model=model
    )
    assert metrics["settings"]["summarizer"] == "MeteringChatModel:gpt-4o"
    for name in ("summary_tail_lookup", "langchain"):
        assert metrics["strategies"][name]["summarizer_calls"] > 0, name
    ours = metrics["strategies"]["summary_tail_lookup"]
    assert ours["coverage_gaps"] == ours["coverage_overlaps"] == 0
    assert ours["evidence_available_strict"] == 1.0


def test_eval_command_writes_metrics_report_and_plots(tmp_path, capsys):
    dataset = locomo_file(tmp_path / "tiny.json", sessions=4, turns=12)
    out = tmp_path / "out"
    status = main(
        [
            "eval",
            "--dataset",
            str(dataset),
            "--strategies",
            "last_n,summary_tail_lookup",
            "--window",
            "2048",
            "--out",
            str(out),
            "--reader",
            "offline",
            "--quiet",
        ]
    )
    assert status == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["strategies"]) == ["last_n", "summary_tail_lookup"]
    assert metrics["format"] == "locomo"
    report = (out / "report.md").read_text()
    assert "summary_tail_lookup" in report and "last_n" in report
    plots = sorted(p.name for p in out.glob("*.png"))
    assert plots == ["drift.png", "input_tokens_tiny.png", "recall_by_category.png"]
    assert (out / "input_tokens_tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "summary_tail_lookup" in printed


def test_eval_command_refuses_bad_input_clearly(tmp_path, capsys):
    assert main(["eval", "--dataset", str(tmp_path / "missing.json"), "--quiet"]) == 2
    assert "no such file" in capsys.readouterr().err
    dataset = locomo_file(tmp_path / "tiny.json", sessions=2, turns=4)
    assert main(["eval", "--dataset", str(dataset), "--strategies", "magic", "--quiet"]) == 2
    assert "unknown strategies ['magic']" in capsys.readouterr().err


def test_demo_runs_the_agent_then_compares_every_strategy(tmp_path):
    from ctx_langgraph.eval.demo import run_demo

    out = tmp_path / "report"
    printed_to = io.StringIO()
    status = run_demo(
        db=tmp_path / "h.sqlite",
        out_dir=out,
        turns=40,
        compare="all",
        out=printed_to,
        progress_stream=io.StringIO(),
    )
    assert status == 0
    printed = printed_to.getvalue()
    assert "summary generation 1 covers seq 1-" in printed  # compactions shown as they happen
    assert "covered_through_seq" in printed
    for name in STRATEGIES:
        assert name in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["strategies"]) == list(STRATEGIES)
    assert metrics["format"] == "synthetic"
    ours = metrics["strategies"]["summary_tail_lookup"]
    assert ours["coverage_gaps"] == ours["coverage_overlaps"] == ours["orphan_tool_messages"] == 0
    assert (tmp_path / "h.sqlite").exists()  # the history it kept


def test_generated_sessions_are_saved_as_traces_and_replay_the_same(tmp_path, capsys):
    saved, first, again = tmp_path / "sessions", tmp_path / "first", tmp_path / "again"
    common = ["--strategies", "summary_tail_lookup", "--window", "4096", "--reader", "offline"]
    generate = ["eval", "--format", "synthetic", "--sessions", "1", "--turns", "30"]
    assert main([*generate, "--dataset", str(saved), "--out", str(first), *common, "--quiet"]) == 0
    [trace] = sorted(saved.glob("*.jsonl"))
    assert main(["eval", "--dataset", str(trace), "--out", str(again), *common, "--quiet"]) == 0
    capsys.readouterr()
    made, replayed = (json.loads((d / "metrics.json").read_text()) for d in (first, again))
    assert (made["format"], replayed["format"]) == ("synthetic", "trace")
    keys = ("evidence_available_strict", "answer_in_context", "input_tokens_total", "questions")
    ours, theirs = (
        made["strategies"]["summary_tail_lookup"],
        replayed["strategies"]["summary_tail_lookup"],
    )
    assert {k: ours[k] for k in keys} == {k: theirs[k] for k in keys}
    assert ours["questions"] > 0
