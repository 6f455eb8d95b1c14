"""ctx_compact in a graph: rolling summaries with continuous coverage, valid tool protocol,
bounded failure handling, and reconciliation with a commit made elsewhere."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import replace

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from ctx_langgraph.budget import TiktokenCounter, make_budget_node, make_budget_router
from ctx_langgraph.compaction import ExtractiveSummarizer, SummaryDocument, pairing_problems
from ctx_langgraph.compaction.node import SUMMARY_MESSAGE_ID, make_compact_node
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history import Scope, SQLiteHistoryStore
from ctx_langgraph.state import ContextState, unpack
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
    builder.add_node("ctx_usage", make_usage_node(UsageLedger(store), store=store))
    builder.add_node("tools", tools)
    builder.add_edge(START, "ctx_budget")
    builder.add_conditional_edges(
        "ctx_budget", make_budget_router("model"), ["ctx_compact", "model"]
    )
    builder.add_edge("ctx_compact", "ctx_budget")
    builder.add_edge("model", "ctx_usage")
    builder.add_conditional_edges(
        "ctx_usage", lambda s: "tools" if getattr(s["messages"][-1], "tool_calls", None) else END
    )
    builder.add_edge("tools", "ctx_budget")
    return builder.compile(checkpointer=InMemorySaver())


def check_invariants(store, state, thread: str | Scope = "t", reply_recorded: bool = True):
    messages = state["messages"]
    summaries = [m for m in messages if m.additional_kwargs.get("ctx_summary")]
    assert len(summaries) <= 1 and all(m.id == SUMMARY_MESSAGE_ID for m in summaries)
    assert pairing_problems(messages) == []
    active = store.get_active(thread)
    events = store.read_events(thread)
    tail_ids = [m.id for m in messages if not m.additional_kwargs.get("ctx_summary")]
    covered = active.covered_through_seq if active else 0
    # coverage is continuous: the summary covers 1..N and the tail is exactly N+1..head (the
    # last reply included where ctx_usage records it when it arrives; a graph without ctx_usage
    # records it with the next turn's ctx_budget)
    recorded = [e.event_id for e in events if e.seq > covered]
    assert tail_ids == (recorded if reply_recorded else [*recorded, messages[-1].id])
    assert isinstance(messages[-1], AIMessage)
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
    assert state["context"]["report"]["compaction"]["status"] == "committed"
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
    # retention: the active version plus the 5 newest superseded ones (ContextConfig default)
    assert [v.status for v in store.list_versions("t")] == ["active"] + ["superseded"] * 5
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
    config = replace(WINDOW, compaction_timeout_s=1 if mode == "hang" else 10)
    summarizer = FailingSummarizer(mode)
    graph = build(store, summarizer=summarizer, config=config)
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    failed = 0
    for turn in range(60):
        state = graph.invoke(
            {
                "messages": [
                    HumanMessage(f"Question {turn} about order ORD-{turn:04d}", id=f"q{turn}")
                ]
            },
            run,
        )
        compaction = state["context"].get("report", {}).get("compaction") or {}
        if compaction.get("status") == "failed":
            failed += 1
            # nothing committed by the failing summarizer, nothing removed
            active = store.get_active("t")
            assert active is None or active.summarizer_id == "extractive-v1"
        # history is never replaced by an error or a placeholder
        assert not any(
            "error" in str(m.content).lower()
            for m in state["messages"]
            if isinstance(m, HumanMessage)
        )
        check_invariants(store, state)
    # the turns that would not fit went on: the offline summarizer covered the span
    assert failed >= 1 and summarizer.calls >= 1
    active = store.get_active("t")
    assert active is not None and active.summarizer_id == "extractive-v1"
    versions = store.list_versions("t")
    assert all(v.summarizer_id == "extractive-v1" for v in versions if v.summary_text is not None)
    # each compaction that failed is kept as a failed version of its span, without a summary
    tries = [v for v in versions if v.summary_text is None]
    assert 1 <= len(tries) <= failed  # (the report says "failed" until the next compaction)
    assert all(v.status == "failed" and v.summarizer_id == "failing" and v.error for v in tries)
    assert state["context"]["backoff"]["summarizer"]["failures"] >= 1


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
    assert update["context"]["report"]["compaction"]["status"] in ("reconciled", "committed")
    assert store.get_active("t").generation >= 1


# ----------------------------------------------------------------------------- the peers' failures


def compact_once(store, messages, *, keep=60, summarizer=None, window=3_000):
    """Record ``messages``, then run ctx_compact on them directly; returns (update, new view)."""
    from langgraph.graph.message import add_messages

    store.append("t", [m for m in messages if not m.additional_kwargs.get("ctx_summary")])
    config = ContextConfig(
        context_window=window,
        output_reserve=500,
        trigger=0.8,
        target=0.5,
        keep_recent_tokens=keep,
        summary_max_tokens=600,
        tool_output_cap_tokens=None,
    )
    node = make_compact_node(store, config=config, counter=COUNTER, summarizer=summarizer)
    state = {"messages": messages, "context": {"budget": {"total": 100}}}
    update = node.invoke(state, {"configurable": {"thread_id": "t"}})
    view = add_messages(messages, update["messages"]) if "messages" in update else messages
    return update, view


def parallel_calls(n, width=3, prefix="p"):
    calls = [{"name": "fetch", "args": {"i": k}, "id": f"{prefix}{n}-{k}"} for k in range(width)]
    return [
        AIMessage("", id=f"{prefix}a{n}", tool_calls=calls),
        *[
            ToolMessage(f"result {k} of batch {n}", tool_call_id=c["id"], id=f"{prefix}r{n}-{k}")
            for k, c in enumerate(calls)
        ],
    ]


def test_langmem_126_parallel_tool_results_are_never_orphaned(store):
    messages = [HumanMessage("run the batch jobs", id="h0")]
    for n in range(6):
        messages += parallel_calls(n)
    messages += [AIMessage("all batches done", id="done"), HumanMessage("thanks", id="h1")]
    for keep in (5, 20, 40, 80, 200):
        store = SQLiteHistoryStore.from_path(":memory:")
        store.setup()
        _, view = compact_once(store, messages, keep=keep)
        assert pairing_problems(view) == [], (keep, [m.id for m in view])


def test_langchain_38352_34282_no_orphaned_tool_call_at_the_boundary(store):
    messages = [
        HumanMessage("q", id="h0"),
        AIMessage("thinking out loud " * 30, id="a0"),
        *parallel_calls(1, width=2),
        HumanMessage("and now?", id="h1"),
        *parallel_calls(2, width=1),
    ]
    update, view = compact_once(store, messages, keep=30)
    assert update["context"]["report"]["compaction"]["status"] == "committed"
    assert pairing_problems(view) == []
    assert not isinstance(view[1], ToolMessage)  # after the summary, never a bare tool result


def test_langchain_38867_39261_no_human_message_in_the_tail_never_means_a_placeholder(store):
    # a long autonomous run: after the first question, only tool calls and results
    messages = [HumanMessage("migrate the database", id="h0")]
    for n in range(8):
        messages += parallel_calls(n, width=1)
    update, view = compact_once(store, messages, keep=40)
    assert update["context"]["report"]["compaction"]["status"] == "committed"
    assert pairing_problems(view) == []
    kept = [m for m in view if not m.additional_kwargs.get("ctx_summary")]
    assert kept and all(m.id.startswith("p") for m in kept)  # real messages, not a placeholder
    assert "migrate the database" in view[0].content  # the goal is in the summary


def test_langchain_38867_a_failing_summarizer_never_replaces_history(store):
    messages = [HumanMessage(f"q{n} " * 40, id=f"h{n}") for n in range(10)]
    update, view = compact_once(store, messages, keep=30, summarizer=FailingSummarizer("raise"))
    assert update["context"]["report"]["compaction"]["status"] == "failed"
    assert "messages" not in update and view == messages


class SmallWindowSummarizer(ExtractiveSummarizer):
    window_tokens = 700


def test_a_long_span_is_summarized_in_batches_without_dropping_the_old_summary(store):
    """LangChain drops the previous summary once the span is long; we roll it through batches
    (the old summary's corrected values outrank the span's 120 new ids, so they must survive)."""
    first = [
        HumanMessage(
            "Correction: the account is ACC-1001, not ACC-1000, and the budget is $9,900.00, "
            "not $9,000.00",
            id="f0",
        ),
        AIMessage("noted", id="f1"),
        HumanMessage("ok", id="f2"),
    ]
    _, view = compact_once(store, first, keep=5, summarizer=SmallWindowSummarizer())
    assert store.get_active("t").generation == 1
    long_span = [
        HumanMessage(f"step {n}: shipped ORD-{n:04d} to warehouse W{n % 7}", id=f"s{n}")
        for n in range(120)
    ]
    summarizer = SmallWindowSummarizer()
    update, view = compact_once(store, [*view, *long_span], keep=20, summarizer=summarizer)
    assert update["context"]["report"]["compaction"]["status"] == "committed"
    facts = {f.text for f in store.get_active("t").key_facts}
    assert {"ACC-1001", "$9,900.00"} <= facts  # the old summary's facts survived the long span
    assert not {"ACC-1000", "$9,000.00"} & facts
    assert any(t.startswith("ORD-") for t in facts)


# ----------------------------------------------------------------------------- crash recovery


@pytest.mark.parametrize("kill_at", ["after_candidate", "after_commit", "after_state"])
def test_a_crash_at_each_step_of_the_commit_protocol_recovers(tmp_path, kill_at):
    import subprocess
    import sys
    from pathlib import Path

    from langgraph.checkpoint.sqlite import SqliteSaver

    agent = str(Path(__file__).with_name("crash_agent.py"))
    crashed = subprocess.run(
        [sys.executable, agent, str(tmp_path), kill_at, "0", "60"], timeout=120
    )
    assert crashed.returncode == -9  # it died inside the protocol
    resumed = subprocess.run(
        [sys.executable, agent, str(tmp_path), "none", "60", "100"], timeout=120
    )
    assert resumed.returncode == 0
    store = SQLiteHistoryStore.from_path(tmp_path / "history.sqlite")
    with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
        state = saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["channel_values"]
    active = check_invariants(store, state, reply_recorded=False)  # (no ctx_usage there)
    assert active is not None and active.generation >= 2
    # the state caught up with the store
    assert state["context"]["summary"]["generation"] == active.generation
    # nothing lost or doubled
    ids = [e.event_id for e in store.read_events("t")]
    assert len(ids) == len(set(ids))
    assert {f"q{n}" for n in range(100)} - set(ids) == {
        f"q{n}" for n in range(60) if f"q{n}" not in ids
    }
    store.close()


# ----------------------------------------------------------------------------- two workers on PostgreSQL

_COMPACTOR = """
import json, sys
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.compaction.node import make_compact_node
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history import PostgresHistoryStore
from ctx_langgraph.state import unpack
dsn = sys.argv[1]
config = ContextConfig(context_window=3_000, output_reserve=500, keep_recent_tokens=200, summary_max_tokens=600,
                       tool_output_cap_tokens=None)
with PostgresHistoryStore.from_conn_string(dsn) as store:
    messages = [event.message for event in store.read_events("t")]
    node = make_compact_node(store, config=config, counter=TiktokenCounter("gpt-4o"))
    update = node.invoke({"messages": messages, "context": {"budget": {"total": 2_000}}},
                         {"configurable": {"thread_id": "t"}})
    print(json.dumps(update["context"]["report"]["compaction"]))
"""


def test_a_summary_committed_by_another_worker_mid_compaction_is_adopted(store, monkeypatch):
    """Another worker commits between this compaction reading the active summary and taking its
    snapshot: the span is covered already, so the newer summary is adopted, not an error."""
    from ctx_langgraph.compaction.node import make_compact_node

    messages = [
        HumanMessage(f"turn {n}: order ORD-{n:04d} is late " * 3, id=f"h{n}") for n in range(60)
    ]
    store.append("t", messages)
    config = ContextConfig(
        context_window=3_000, output_reserve=500, keep_recent_tokens=200, summary_max_tokens=600
    )
    original = store.snapshot

    def other_worker_first(scope, through_seq):
        snap = original(scope, through_seq)
        store.commit_candidate(store.create_candidate(snap, summary_text="the other worker's"))
        return original(scope, through_seq)  # now already covered

    monkeypatch.setattr(store, "snapshot", other_worker_first)
    node = make_compact_node(store, config=config)
    update = node.invoke({"messages": messages}, {"configurable": {"thread_id": "t"}})
    assert update["context"]["report"]["compaction"]["status"] == "reconciled"
    assert store.get_active("t").summary_text == "the other worker's"
    assert update["messages"][1].id == "ctx-summary"


@pytest.mark.postgres
def test_two_processes_compacting_the_same_thread_commit_once(pg_dsn):
    import json
    import subprocess
    import sys

    from ctx_langgraph.history import PostgresHistoryStore

    with PostgresHistoryStore.from_conn_string(pg_dsn) as store:
        store.setup()
        store.append(
            "t",
            [
                HumanMessage(f"turn {n}: order ORD-{n:04d} is late " * 3, id=f"h{n}")
                for n in range(60)
            ],
        )
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _COMPACTOR, pg_dsn], stdout=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        outcomes = [
            json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs
        ]
        statuses = sorted(o["status"] for o in outcomes)
        # the loser adopts the winner's summary, or (when it saw the winner's candidate before
        # the winner committed it) commits that same candidate: one summary either way
        assert statuses in (
            ["committed", "reconciled"],
            ["committed", "committed"],
            ["committed", "committed_precomputed"],
        ), outcomes
        versions = store.list_versions("t")
        active = [v for v in versions if v.status == "active"]
        assert len(active) == 1
        generations = [v.generation for v in versions if v.status in ("active", "superseded")]
        assert len(generations) == len(set(generations))  # exactly one commit per generation
        assert [e.event_id for e in store.read_events("t")] == [
            f"h{n}" for n in range(60)
        ]  # nothing lost


# ----------------------------------------------------------------------------- time travel


def test_a_resumed_run_whose_store_got_ahead_is_not_a_fork(store):
    """A run died after ctx_budget recorded part of a turn but before its checkpoint said so:
    the state resumes behind the store, with the same messages plus new ones."""
    from ctx_langgraph.budget import make_budget_node

    config = ContextConfig(context_window=8_000, output_reserve=1_000)
    node = make_budget_node(store, config=config, compact_node=None)
    run = {"configurable": {"thread_id": "t"}}
    first = [HumanMessage("q1", id="q1"), AIMessage("a1", id="a1")]
    update = node.invoke({"messages": first}, run)
    behind = update["context"]  # recorded through a1
    store.append("t", [HumanMessage("q2", id="q2")])  # recorded by the run that died
    resumed = [
        *first,
        HumanMessage("q2", id="q2"),
        AIMessage("a2", id="a2"),
        HumanMessage("q3", id="q3"),
    ]
    update = node.invoke({"messages": resumed, "context": behind}, run)
    assert update["context"]["branch"] == "main"
    assert "fork" not in update["context"]["report"]["budget"]["epoch_bumped_for"]
    assert [e.event_id for e in store.read_events("t")] == ["q1", "a1", "q2", "a2", "q3"]
    different = [*first, HumanMessage("another q2", id="q2b"), HumanMessage("q3", id="q3")]
    update = node.invoke({"messages": different, "context": behind}, run)
    assert update["context"]["branch"].startswith("main~2-")  # a different timeline still forks


def test_a_fork_from_an_old_checkpoint_becomes_its_own_branch(store):
    graph = build(store)
    thread = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}

    def turn(config, text, message_id):
        graph.invoke({"messages": [HumanMessage(text, id=message_id)]}, config)
        return graph.get_state(thread).config  # the checkpoint this turn ended on

    main = thread
    fork_point = None
    for n in range(60):
        main = turn(main, f"Main question {n}: order MAIN-{n:04d}?", f"q{n}")
        if n == 20:
            fork_point = main
    assert store.get_active("t").generation >= 2  # main compacted before and after the fork point
    # time travel: edit the state at turn 20 and go on from there
    fork = graph.update_state(
        fork_point,
        {"messages": [HumanMessage("Fork: cancel everything, order FRK-0001", id="f-start")]},
    )
    for n in range(30):
        fork = turn(fork, f"Fork question {n}: order FRK-{n:04d}?", f"f{n}")
    for n in range(60, 90):
        main = turn(main, f"Main question {n}: order MAIN-{n:04d}?", f"q{n}")

    main_state = graph.get_state(main).values
    fork_state = graph.get_state(fork).values
    fork_branch = fork_state["context"]["branch"]
    assert main_state["context"]["branch"] == "main" and fork_branch.startswith("main~")
    # each prompt holds only its own timeline
    assert not any(
        str(m.id).startswith("f")
        for m in main_state["messages"]
        if not m.additional_kwargs.get("ctx_summary")
    )
    assert not any(m.id in {f"q{n}" for n in range(21, 90)} for m in fork_state["messages"])
    # each branch's summary covers only its own history
    fork_scope = Scope("t", branch=fork_branch)
    fork_facts = (
        {f.text for f in store.get_active(fork_scope).key_facts}
        if store.get_active(fork_scope)
        else set()
    )
    assert not any(t in fork_facts for t in (f"MAIN-{n:04d}" for n in range(21, 90)))
    assert "FRK-0001" in fork_facts or any(m.id == "f-start" for m in fork_state["messages"])
    main_facts = {f.text for f in store.get_active("t").key_facts}
    assert not any(t.startswith("FRK-") for t in main_facts)
    # lookups see only their own branch after the fork point; coverage continuous on both
    assert not store.search(fork_scope, "Main question 40").hits
    assert not store.search("t", "Fork question").hits
    check_invariants(store, main_state, "t")
    check_invariants(store, fork_state, fork_scope)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_runs_from_one_checkpoint_reuse_a_summary_and_never_compact_in_a_loop(store, mode):
    """Several questions asked from the same checkpoint, each too big for the room left: the
    first compacts on the thread's branch, keeping only itself; the others fork from the same
    state, inherit that summary (it covers only what they share) although its first kept
    message is not theirs, drop what it covers, and finish."""
    graph = build(store)
    thread = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    for n in range(30):
        graph.invoke(
            {"messages": [HumanMessage(f"Question {n}: order ORD-{n:04d}?", id=f"q{n}")]}, thread
        )
    final = graph.get_state(thread).config
    big = "please check every shipment of this order once more " * 110  # most of the room
    for k in range(3):
        ask = {"messages": [HumanMessage(f"Ask {k}: {big}", id=f"ask{k}")]}
        run = {**final, "recursion_limit": 25}  # a loop of compactions would hit it
        state = await graph.ainvoke(ask, run) if mode == "async" else graph.invoke(ask, run)
        context = unpack(state["context"])
        scope = Scope("t", branch=context["branch"])
        active = store.get_active(scope)
        assert active is not None and context["covered_through_seq"] == active.covered_through_seq
        history = [m for m in state["messages"] if not m.additional_kwargs.get("ctx_summary")]
        seqs = [store.get_event(scope, str(m.id)).seq for m in history]
        assert min(seqs) == active.covered_through_seq + 1  # nothing covered is left in view
        check_invariants(store, state, scope)


# ----------------------------------------------------------------------------- pre-compaction


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_background_candidate_is_committed_by_a_later_turn(store, mode):
    config = replace(WINDOW, precompact_at=0.6)
    graph = build(store, config=config)
    run = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    statuses = []
    for turn in range(60):
        question = {
            "messages": [HumanMessage(f"Question {turn} about order ORD-{turn:04d}", id=f"q{turn}")]
        }
        state = (
            await graph.ainvoke(question, run) if mode == "async" else graph.invoke(question, run)
        )
        if mode == "async":
            await asyncio.sleep(0.05)  # let the background task run between turns
        else:
            time.sleep(0.05)
        statuses.append((state["context"].get("report", {}).get("compaction") or {}).get("status"))
        check_invariants(store, state)
    assert "committed_precomputed" in statuses  # the summarizer ran ahead, off the critical path


# ----------------------------------------------------------------------------- the kept tail


def _turn(messages, estimate):
    from ctx_langgraph.compaction.span import CompactionPass

    return CompactionPass(messages, {}, Scope("t"), 0, estimate, False, False, None)


def test_compaction_keeps_every_message_the_target_affords_beside_a_summary_at_its_cap():
    from langchain_core.messages import SystemMessage

    from ctx_langgraph.budget.counters import CountCache
    from ctx_langgraph.compaction.span import choose_span_cut

    budget = WINDOW.resolve()  # target 1,250, keep_recent_tokens 400
    messages = [SystemMessage("You are a shop assistant.", id="sys")]
    for n in range(60):
        messages.append(HumanMessage(f"question {n}: " + "about the order " * 6, id=f"h{n}"))
        messages.append(AIMessage(f"answer {n}: " + "it ships soon " * 6, id=f"a{n}"))
    counts = [COUNTER.count_message(m) for m in messages]
    tools = 150  # tool schemas and margin: in the estimate, not in the messages
    estimate = sum(counts) + tools
    cap = 300

    filled = choose_span_cut(
        _turn(messages, estimate), budget, COUNTER, CountCache(), summary_cap=cap
    )
    fixed = counts[0] + tools
    room = budget.target - fixed - cap
    assert room > budget.keep_recent_tokens
    assert filled is not None and room - 2 * max(counts) < filled.tail_tokens <= room
    assert fixed + cap + filled.tail_tokens <= budget.target  # it lands at the target, not above

    # without the cap to plan for, or with an estimate that is not of this view: the setting
    for cut in (
        choose_span_cut(_turn(messages, estimate), budget, COUNTER, CountCache()),
        choose_span_cut(_turn(messages, 100), budget, COUNTER, CountCache(), summary_cap=cap),
    ):
        assert cut is not None and cut.tail_tokens <= budget.keep_recent_tokens
    # a small target: never less than keep_recent_tokens
    tight = replace(budget, target=400)
    cut = choose_span_cut(_turn(messages, estimate), tight, COUNTER, CountCache(), summary_cap=cap)
    assert cut is not None and budget.keep_recent_tokens - 2 * max(counts) < cut.tail_tokens


@pytest.mark.parametrize("fills", [True, False])
def test_tail_fills_target_false_keeps_exactly_keep_recent_tokens(store, fills):
    from langgraph.graph.message import add_messages

    config = replace(
        WINDOW, keep_recent_tokens=100, summary_max_tokens=300, tail_fills_target=fills
    )
    messages = []
    for n in range(45):  # over the trigger (2,000), within the usable window (2,500)
        messages.append(HumanMessage(f"question {n}: " + "about the order " * 6, id=f"h{n}"))
        messages.append(AIMessage(f"answer {n}: " + "it ships soon " * 6, id=f"a{n}"))
    store.append("t", messages)
    estimate = sum(COUNTER.count_message(m) for m in messages)
    assert WINDOW.resolve().trigger < estimate < WINDOW.resolve().usable
    node = make_compact_node(store, config=config, counter=COUNTER)
    state = {"messages": messages, "context": {"budget": {"total": estimate}}}
    update = node.invoke(state, {"configurable": {"thread_id": "t"}})
    assert update["context"]["report"]["compaction"]["status"] == "committed"
    view = add_messages(messages, update["messages"])
    tail = sum(COUNTER.count_message(m) for m in view if not m.additional_kwargs.get("ctx_summary"))
    if fills:  # the target (1,250) less a summary at its cap (300; no trail reported yet)
        assert 1_250 - 300 - 2 * 40 < tail <= 1_250 - 300
    else:
        assert tail <= 100
