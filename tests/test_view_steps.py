"""The view's and the budget steps' internal helpers (their examples, moved out of the docstrings)."""

from __future__ import annotations

import datetime as dt

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctx_langgraph.budget.counters import ApproximateCounter, thread_counter
from ctx_langgraph.budget.measure import step_in_progress
from ctx_langgraph.budget.trim import due_results, shares
from ctx_langgraph.config import ToolClearing
from ctx_langgraph.history import Scope
from ctx_langgraph.history.types import CompactionCheckpoint
from ctx_langgraph.view.markers import SUMMARY_FLAG, is_flagged, is_summary, is_synthetic
from ctx_langgraph.view.pinned import pin
from ctx_langgraph.view.provider_items import (
    chain_broken,
    compaction_iterations,
    provider_block,
    unchained,
)
from ctx_langgraph.view.repair import ViewRepairs, repair_tool_pairs
from ctx_langgraph.view.summary import rewrite_view
from ctx_langgraph.view.tool_results import capped, cleared, cleared_inputs


def test_a_summary_is_synthetic_and_flagged():
    summary = SystemMessage("so far...", additional_kwargs={SUMMARY_FLAG: True})
    assert (is_summary(summary), is_synthetic(summary), is_flagged(summary)) == (True, True, True)


def test_pinned_rules_go_first_once():
    view, changed = pin([HumanMessage("hi", id="h1")], "Answer in French.")
    assert ([m.id for m in view], changed) == (["ctx-pinned-rules", "h1"], True)
    assert pin(view, "Answer in French.")[1] is False
    assert [m.id for m in pin(view, None)[0]] == ["h1"]


def test_cleared_and_capped_tool_results():
    result = ToolMessage("x" * 5_000, tool_call_id="c1", id="t1")
    placeholder = cleared(result, tokens=1_250, seq=7)
    assert placeholder.text == (
        "[tool result cleared to save context: 1,250 tokens; kept as history:t1 (seq 7); "
        'read it again by calling history_lookup with handle="history:t1"]'
    )
    short = capped(result, result.text, original_tokens=1_250, cap=100, seq=7)
    assert short.additional_kwargs["ctx_capped"] == {
        "handle": "history:t1",
        "seq": 7,
        "original_tokens": 1250,
        "characters": 5000,
    }
    assert len(short.text) < 500
    assert capped(short, short.text, cap=100, seq=7) == short  # capped again to its cap


def test_cleared_inputs_keep_the_call_ids():
    call = AIMessage("", id="a1", tool_calls=[{"name": "read", "args": {"path": "x"}, "id": "c1"}])
    copy = cleared_inputs(call, ["c1"])
    assert copy.tool_calls[0]["args"] == {} and copy.tool_calls[0]["id"] == "c1"
    assert copy.additional_kwargs["ctx_inputs_cleared"] == ["c1"]


def test_repair_answers_a_dangling_call_and_drops_a_stray_result():
    call = {"name": "search", "args": {}, "id": "c1"}
    view = [
        HumanMessage("q", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        HumanMessage("never mind", id="h2"),
        ToolMessage("late", tool_call_id="c1", id="t1"),
    ]
    fixed, repairs = repair_tool_pairs(view)
    assert [m.id for m in fixed] == ["h1", "a1", "ctx-missing-result-c1", "h2"]
    assert repairs == ViewRepairs(dangling_tool_calls=1, orphan_tool_results=1)


def test_rewrite_view_keeps_system_messages_of_the_covered_span():
    now = dt.datetime.now(dt.timezone.utc)
    checkpoint = CompactionCheckpoint(
        "c", Scope("t"), 1, None, 1, 3, "h2", 0, "", "...", None, 3, "x", (), 10, "active",
        None, now, now,
    )  # fmt: skip
    view = [
        SystemMessage("rules", id="s"),
        HumanMessage("q1", id="h1"),
        SystemMessage("be terse", id="s1"),
        AIMessage("a1", id="a1"),
        HumanMessage("q2", id="h2"),
    ]
    new_view, removed = rewrite_view(view, checkpoint)
    assert ([m.id for m in new_view], removed) == (["s", "s1", "ctx-summary", "h2"], 2)


def test_provider_block_unwraps_and_drops_stream_keys():
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA=="}
    assert provider_block({"type": "non_standard", "value": item}) == item
    assert provider_block({**item, "index": 0}) == item
    assert provider_block("text") is None


def test_compaction_iterations():
    usage = {
        "input_tokens": 900,
        "output_tokens": 20,
        "iterations": [
            {"type": "compaction", "input_tokens": 61000, "output_tokens": 1400},
            {"type": "message", "input_tokens": 900, "output_tokens": 20},
        ],
    }
    assert compaction_iterations(AIMessage("ok", response_metadata={"usage": usage})) == [
        {"type": "compaction", "input_tokens": 61000, "output_tokens": 1400}
    ]


def test_chain_broken_and_unchained():
    assert chain_broken({"projection_epoch": 2, "baseline": {"projection_epoch": 2}}) is False
    assert chain_broken({"projection_epoch": 3, "baseline": {"projection_epoch": 2}}) is True
    assert chain_broken({}) is True
    reply = AIMessage("ok", response_metadata={"id": "resp_1", "model_name": "gpt-4.1"})
    assert [m.response_metadata for m in unchained([HumanMessage("hi"), reply])] == [
        {},
        {"model_name": "gpt-4.1"},
    ]
    assert reply.response_metadata["id"] == "resp_1"


def test_shares_and_the_step_in_progress():
    assert shares([100, 2_000, 3_000], 10_000) == [None, None, None]
    assert shares([100, 2_000, 3_000, 3_000], 4_000) == [None, 1300, 1300, 1300]
    calls = [{"name": "f", "args": {}, "id": "c1"}, {"name": "g", "args": {}, "id": "c2"}]
    view = [
        HumanMessage("q"),
        AIMessage("", tool_calls=calls),
        ToolMessage("r1", tool_call_id="c1"),
        ToolMessage("r2", tool_call_id="c2"),
    ]
    assert (step_in_progress(view), step_in_progress(view[:1])) == (1, None)


def test_due_results():
    def step(n, tool):
        call = {"name": tool, "args": {}, "id": f"c{n}"}
        return [
            AIMessage("", tool_calls=[call]),
            ToolMessage("r", tool_call_id=f"c{n}", id=f"t{n}"),
        ]

    view = [HumanMessage("go"), *step(0, "search"), *step(1, "read"), *step(2, "read")]
    view += step(3, "read")
    due = due_results(view, ToolClearing(keep=1, exclude_tools=["search"]))
    assert [d.result.id for d in due] == ["t1", "t2"]
    assert [d.result.id for d in due_results(view, ToolClearing(keep=0))] == ["t0", "t1", "t2"]


def test_thread_counter_restores_the_threads_calibration():
    shared = ApproximateCounter("claude-sonnet-4-5")
    counter = thread_counter(shared, {"calibration": {"chars_per_token": 5.0, "count": 2}})
    assert (counter.chars_per_token, shared.chars_per_token) == (5.0, 4.2)
