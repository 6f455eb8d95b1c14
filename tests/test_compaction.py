"""ctx_compact in a graph: rolling summaries with continuous coverage, valid tool protocol,
bounded failure handling, and reconciliation with a commit made elsewhere."""

from __future__ import annotations

import itertools
import time

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from ctx_langgraph.budget import TiktokenCounter, make_budget_node, make_budget_router
from ctx_langgraph.compaction import ExtractiveSummarizer, SummaryDocument, pairing_problems
from ctx_langgraph.compaction.node import SUMMARY_MESSAGE_ID, make_compact_node
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.errors import CompactionFailed, ContextBudgetExceeded
from ctx_langgraph.history import Scope, SQLiteHistoryStore
from ctx_langgraph.state import ContextState
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.usage.node import make_usage_node

COUNTER = TiktokenCounter("gpt-4o")
WINDOW = ContextConfig(
    context_window=3_000,
    output_reserve=500,
    trigger=0.8,
    target=0.5,
    keep_recent_tokens=400,
    summary_max_tokens=600,
    tool_output_cap_tokens=None,
    compaction_attempts=3,
    compaction_timeout_s=5,
)


@pytest.fixture
def store():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


CALL_IDS = itertools.count()


def reply_for(messages):
    last = messages[-1]
    turn = sum(
        isinstance(m, HumanMessage) and not m.additional_kwargs.get("ctx_summary") for m in messages
    )
    if isinstance(last, HumanMessage) and turn % 2 == 0:
        n = next(CALL_IDS)  # unique ids, as LangGraph's are
        return AIMessage(
            "",
            tool_calls=[
                {"name": "lookup", "args": {"q": f"order {turn}"}, "id": f"c{n}a"},
                {"name": "lookup", "args": {"q": f"invoice {turn}"}, "id": f"c{n}b"},
            ],
        )
    return AIMessage(
        f"Answer {turn}: the order ORD-{turn:04d} is confirmed and ships on day {turn}."
    )


def build(store, summarizer=None, config=WINDOW):
    model = MeteringChatModel(replies=[reply_for])

    def call_model(state):
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state):
        return {
            "messages": [
                ToolMessage(
                    f"result for {c['args']['q']}: status ok, ref REF-{c['id'].upper()}",
                    tool_call_id=c["id"],
                    name="lookup",
                    id=f"r-{c['id']}",
                )
                for c in state["messages"][-1].tool_calls
            ]
        }

    builder = StateGraph(ContextState)
    builder.add_node("ctx_budget", make_budget_node(store, config=config, counter=COUNTER))
    builder.add_node(
        "ctx_compact",
        make_compact_node(store, config=config, counter=COUNTER, summarizer=summarizer),
    )
    builder.add_node("model", call_model)
    builder.add_node("ctx_usage", make_usage_node(UsageLedger(store)))
    builder.add_node("tools", tools)
    builder.add_edge(START, "ctx_budget")
    builder.add_conditional_edges(
        "ctx_budget", make_budget_router("model"), ["ctx_compact", "model"]
    )
    builder.add_edge("ctx_compact", "ctx_budget")
    builder.add_edge("model", "ctx_usage")
    builder.add_conditional_edges(
        "ctx_usage", lambda s: "tools" if s["messages"][-1].tool_calls else END
    )
    builder.add_edge("tools", "ctx_budget")
    return builder.compile(checkpointer=InMemorySaver())


def check_invariants(store, state, thread="t"):
    messages = state["messages"]
    summaries = [m for m in messages if m.additional_kwargs.get("ctx_summary")]
    assert len(summaries) <= 1 and all(m.id == SUMMARY_MESSAGE_ID for m in summaries)
    assert pairing_problems(messages) == []
    active = store.get_active(thread)
    events = store.read_events(thread)
    tail_ids = [m.id for m in messages if not m.additional_kwargs.get("ctx_summary")]
    covered = active.covered_through_seq if active else 0
    # coverage is continuous: the summary covers 1..N and the tail is exactly N+1..head, plus the
    # last reply, which ctx_budget records before the next model call
    recorded = [e.event_id for e in events if e.seq > covered]
    assert tail_ids[: len(recorded)] == recorded
    assert len(tail_ids) - len(recorded) <= 1 and isinstance(messages[-1], AIMessage)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return active


def test_rolling_compaction_keeps_coverage_continuous_and_the_protocol_valid(store):
    graph = build(store)
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    generations = set()
    for turn in range(70):
        state = graph.invoke(
            {
                "messages": [
                    HumanMessage(f"Question {turn}: where is order ORD-{turn:04d}?", id=f"q{turn}")
                ]
            },
            run,
        )
        active = check_invariants(store, state)
        if active:
            generations.add(active.generation)
            assert COUNTER.count_text(active.summary_text) <= 600
    assert len(generations) >= 3  # compaction really happened, several times
    assert state["context"]["compaction"]["status"] == "committed"
    # every request fit the window: the metering model saw at most the usable window
    assert all(v.status in ("active", "superseded") for v in store.list_versions("t"))


def test_key_facts_of_the_first_span_survive_25_compactions(store):
    graph = build(store)
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    graph.invoke(
        {
            "messages": [
                HumanMessage(
                    "My account is ACC-77341 and the budget is $12,500.00; "
                    "deploy config lives at /etc/shop/deploy.yaml",
                    id="first",
                )
            ]
        },
        run,
    )
    turn = 0
    while (store.get_active("t").generation if store.get_active("t") else 0) < 25:
        turn += 1
        assert turn < 400
        state = graph.invoke(
            {
                "messages": [
                    HumanMessage(
                        f"Next question {turn} about shipping details, please.", id=f"n{turn}"
                    )
                ]
            },
            run,
        )
        check_invariants(store, state)
    facts = {f.text for f in store.get_active("t").key_facts}
    assert all(f.source_event_id for f in store.get_active("t").key_facts)
    assert {"ACC-77341", "$12,500.00", "/etc/shop/deploy.yaml"} <= facts
    summary_messages = [m for m in state["messages"] if m.additional_kwargs.get("ctx_summary")]
    assert len(summary_messages) == 1
    doc = SummaryDocument.parse(store.get_active("t").summary_text)
    assert any(f.source_seq == 1 for f in doc.key_facts)


class FailingSummarizer:
    """Raises, hangs, or answers garbage, as configured."""

    id = "failing"
    window_tokens = None

    def __init__(self, mode):
        self.mode = mode
        self.calls = 0

    def summarize(self, request):
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("model overloaded")
        if self.mode == "hang":
            time.sleep(3)
            return ""
        if self.mode == "empty":
            return ""
        if self.mode == "sectionless":
            return "Everything went fine, nothing to report."
        if self.mode == "oversize":
            return ExtractiveSummarizer().summarize(request) + "\n" + "padding " * 2_000
        raise AssertionError(self.mode)

    async def asummarize(self, request):
        return self.summarize(request)


@pytest.mark.parametrize("mode", ["raise", "hang", "empty", "sectionless", "oversize"])
def test_a_failing_summarizer_leaves_everything_in_place(store, mode):
    config = ContextConfig(
        context_window=3_000,
        output_reserve=500,
        trigger=0.8,
        target=0.5,
        keep_recent_tokens=400,
        summary_max_tokens=600,
        tool_output_cap_tokens=None,
        compaction_attempts=3,
        compaction_timeout_s=1 if mode == "hang" else 10,
    )
    summarizer = FailingSummarizer(mode)
    graph = build(store, summarizer=summarizer, config=config)
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    seen = 0
    # retried on every new turn while the request fits; then a typed error with the numbers
    with pytest.raises((CompactionFailed, ContextBudgetExceeded)) as info:
        for turn in range(60):
            state = graph.invoke(
                {
                    "messages": [
                        HumanMessage(f"Question {turn} about order ORD-{turn:04d}", id=f"q{turn}")
                    ]
                },
                run,
            )
            seen = len(state["messages"])
            if state["context"].get("compaction", {}).get("status") == "failed":
                assert store.get_active("t") is None  # no summary committed
                assert not any(m.additional_kwargs.get("ctx_summary") for m in state["messages"])
    # the turn that no longer fits: a typed error with the numbers, nothing removed before it
    assert info.value.usable == 2_500
    assert summarizer.calls >= 1
    assert 1 <= summarizer.calls <= 3 * 60
    snapshot = graph.get_state(run).values
    assert (
        len(snapshot["messages"]) >= seen
    )  # history was never replaced by an error or placeholder
    assert not any(
        "error" in str(m.content).lower()
        for m in snapshot["messages"]
        if isinstance(m, HumanMessage)
    )
    assert store.get_active("t") is None


def test_reconciles_with_a_summary_committed_by_another_worker(store):
    graph = build(store)
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"Question {turn}", id=f"q{turn}")]}, run)
    # another worker compacts the same thread first
    head = store.branch_info("t").head_seq
    snapshot = store.snapshot(Scope("t"), head - 1)
    text = ExtractiveSummarizer().summarize(
        __import__("ctx_langgraph.compaction", fromlist=["SummaryRequest"]).SummaryRequest(
            previous=None,
            events=snapshot.events,
            covered_through_seq=snapshot.covered_through_seq,
            cap_tokens=600,
            counter=COUNTER,
        )
    )
    store.commit_candidate(
        store.create_candidate(
            snapshot, summary_text=text, first_kept_event_id=store.read_events("t")[-1].event_id
        )
    )
    # our next compaction finds the store ahead and takes the winner's summary instead of committing
    node = make_compact_node(store, config=WINDOW, counter=COUNTER)
    state = graph.get_state(run).values
    update = node.invoke(state, run)
    assert update["context"]["compaction"]["status"] in ("reconciled", "committed")
    assert store.get_active("t").generation >= 1
