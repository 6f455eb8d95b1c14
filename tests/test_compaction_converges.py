"""Compaction converges by construction: one request runs ``ctx_budget`` -> ``ctx_compact`` at
most ``ContextConfig.max_compaction_rounds`` times, and a round that makes no progress (the
estimate did not fall and no new history was covered: a "reconciled" that left the view as it
was, nothing to cover, a summarizer that writes as much as it replaces) is the last one. The turn
then goes on with what fits, and ``context["compaction"]`` says why no more rounds ran.

The case from the field: a run resumed (or run again) after another run of the thread committed
a summary that covers the whole view of the resumed checkpoint, its newest message included. Such
a summary cannot be laid over the view (its first kept message is not there); before, the
compaction reported "reconciled", the budget still said "compact", and round it went until
``GraphRecursionError`` (10,007 supersteps on a LangGraph server).

Every wiring (``create_context_agent``, ``add_context_management`` on a graph of one's own,
``create_agent`` with the middleware), sync and async, on every history-store backend."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    add_context_management,
    create_context_agent,
)
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.compaction import ExtractiveSummarizer
from ctx_langgraph.compaction.protocol import SummaryRequest
from ctx_langgraph.history import HistoryStore, Scope
from ctx_langgraph.state import unpack
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply

WIDE = ContextConfig(context_window=40_000, output_reserve=1_000)
"""No compaction: the thread grows past what SMALL holds."""
SMALL = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=300
)
NOTE = "A note on the migration plan: the schema, the backfill, the read path, the rollback. "
LOOP_NODES = ("ctx_budget", "ctx_compact")


def _ask(n: int) -> HumanMessage:
    return HumanMessage(f"Turn {n}. " + NOTE * 12, id=f"h{n}")


def _model() -> MeteringChatModel:
    return MeteringChatModel(replies=[lambda messages: AIMessage("Noted.")])


def _agent(store: HistoryStore, config: ContextConfig, saver: InMemorySaver, **kw: Any) -> Any:
    builder = create_context_agent(_model(), store=store, config=config, **kw)
    return builder.compile(checkpointer=saver)


def _drop_in(store: HistoryStore, config: ContextConfig, saver: InMemorySaver, **kw: Any) -> Any:
    model = _model()

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    add_context_management(
        builder, model_node="model", store=store, config=config, model=model, **kw
    )
    return builder.compile(checkpointer=saver)


def _middleware(store: HistoryStore, config: ContextConfig, saver: InMemorySaver, **kw: Any) -> Any:
    model = _model()
    middleware = ContextManagementMiddleware(store, model=model, config=config, **kw)
    return create_agent(model, tools=[], middleware=[middleware], checkpointer=saver)


WIRINGS: dict[str, Callable[..., Any]] = {
    "agent": _agent,
    "drop_in": _drop_in,
    "middleware": _middleware,
}


async def _updates(graph: Any, mode: str, inputs: Any, config: Any) -> list[tuple[str, Any]]:
    """The turn, streamed: each node that ran (one per superstep here) with its update."""
    ran: list[tuple[str, Any]] = []
    if mode == "sync":

        def drive() -> None:
            for update in graph.stream(inputs, config, stream_mode="updates"):
                ran.extend(update.items())

        await asyncio.to_thread(drive)
    else:
        async for update in graph.astream(inputs, config, stream_mode="updates"):
            ran.extend(update.items())
    return ran


async def _run(graph: Any, mode: str, inputs: Any, config: Any) -> list[str]:
    """The nodes the turn ran, in order."""
    return [name for name, _ in await _updates(graph, mode, inputs, config)]


def _commit_covering(store: HistoryStore, scope: Scope, through: str, first_kept: str) -> int:
    """A summary of the branch through event ``through``, committed as another run of the
    thread would have (keeping ``first_kept`` on): the extractive summarizer writes it."""
    seq = store.get_event(scope, through).seq
    snapshot = store.snapshot(scope, seq)
    request = SummaryRequest(None, snapshot.events, seq, 300, TiktokenCounter("gpt-4o"))
    text = ExtractiveSummarizer().summarize(request)
    candidate = store.create_candidate(
        snapshot, summary_text=text, first_kept_event_id=first_kept, summarizer_id="other-run"
    )
    return store.commit_candidate(candidate).covered_through_seq


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wiring", list(WIRINGS))
async def test_a_run_again_under_a_summary_covering_its_whole_view_terminates(
    store: HistoryStore, wiring: str, mode: str
) -> None:
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}
    wide = WIRINGS[wiring](store, WIDE, saver)
    for n in range(1, 8):
        await _run(wide, mode, {"messages": [_ask(n)]}, config)
    before = wide.get_state(config)
    # the run of turn 8 recorded its input and answer, compacted through the input (keeping
    # the answer), and died before any checkpoint
    scope = Scope("t")
    store.append_after(
        scope,
        [_ask(8), AIMessage("Noted, then died.", id="a-dead")],
        after=str(before.values["messages"][-1].id),
    )
    _commit_covering(store, scope, through="h8", first_kept="a-dead")
    # the server runs turn 8 again, from the checkpoint before it, in a small window
    graph = WIRINGS[wiring](store, SMALL, saver)
    ran = await _run(graph, mode, {"messages": [_ask(8)]}, {**before.config, "recursion_limit": 40})
    state = graph.get_state(config).values
    assert state["messages"][-1].text == "Noted.", ran
    context = unpack(state["context"])
    compaction = context["compaction"]
    assert compaction["rounds"] <= SMALL.max_compaction_rounds, compaction
    if wiring != "middleware":  # (the middleware runs the loop inline, in one superstep)
        assert sum(name in LOOP_NODES for name in ran) <= 8, ran
    # the request sent fits the window, and the view lays the summary over its own tail
    assert context["budget"]["total"] <= context["budget"]["usable"], context["budget"]
    # the re-run forks at the message it answers: the other run's summary, which covers it, is
    # not the fork's; the fork's summary is the one the state shows
    info = store.branch_info(Scope("t", branch=context["branch"]))
    assert context["branch"].startswith("main~") and info is not None
    assert info.active_checkpoint_id == context.get("active_checkpoint_id")
    # the thread goes on, each turn in a few rounds
    for n in (9, 10, 11):
        ran = await _run(graph, mode, {"messages": [_ask(n)]}, config)
        if wiring != "middleware":
            assert sum(name in LOOP_NODES for name in ran) <= 8, ran
        assert graph.get_state(config).values["context"]["report"]["compaction"]["rounds"] <= 3


def test_max_compaction_rounds_is_validated() -> None:
    assert ContextConfig().max_compaction_rounds == 3
    assert dataclasses.replace(SMALL, max_compaction_rounds=1).max_compaction_rounds == 1
    with pytest.raises(ValueError, match="max_compaction_rounds"):
        ContextConfig(max_compaction_rounds=0)
    with pytest.raises(TypeError, match="max_compaction_rounds"):
        ContextConfig(max_compaction_rounds="3")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the bound, the rule


class _Longer:
    """A summarizer that writes as long a summary as its cap allows, however little it covers:
    a summary can take more than what it replaces."""

    id = "longer"
    window_tokens = None

    def summarize(self, request: SummaryRequest) -> str:
        text = ExtractiveSummarizer().summarize(request).rstrip()
        head, done, rest = text.partition("\n## Done\n")
        if not done:  # (an empty section is left out)
            head, done, rest = text, "\n\n## Done\n", ""
        line = "- The migration plan was discussed once more, at length.\n"
        while request.counter.count_text(head + done + line + rest) <= request.cap_tokens * 2 // 3:
            done += line
        return head + done + rest

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


class _Same:
    """A summarizer that writes one summary, then the same text whatever it covers."""

    id = "same"
    window_tokens = None

    def __init__(self) -> None:
        self.text: str | None = None

    def summarize(self, request: SummaryRequest) -> str:
        if self.text is None:
            self.text = ExtractiveSummarizer().summarize(request)
        return self.text

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


@tool
def get_order_status(order_id: str) -> str:
    """The status of an order."""
    return f"Order {order_id}: shipped, tracking {order_id}-TRK. " + "details " * 900


TIGHT = ContextConfig(
    context_window=1_500,
    keep_recent_tokens=800,
    tail_fills_target=False,
    tool_output_cap_tokens=600,
)
"""A kept tail near the trigger: a compacted view can stay over it, and a later round of the
same request finds nothing more to cover."""


def _rounds_per_model_call(ran: list[str]) -> list[int]:
    """How many ``ctx_compact`` rounds ran before each model call (and after the last one)."""
    counts, rounds = [], 0
    for name in ran:
        if name == "ctx_compact":
            rounds += 1
        elif name == "model":
            counts.append(rounds)
            rounds = 0
    return [*counts, rounds]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("limit", [1, 2, 3])
@pytest.mark.parametrize("summarizer", ["extractive", "longer", "same"])
async def test_every_request_runs_at_most_max_compaction_rounds(
    store: HistoryStore, summarizer: str, limit: int, mode: str
) -> None:
    config = dataclasses.replace(TIGHT, max_compaction_rounds=limit)
    writer = {"extractive": ExtractiveSummarizer, "longer": _Longer, "same": _Same}[summarizer]()
    model = MeteringChatModel(replies=[tool_agent_reply])
    graph = create_context_agent(
        model,
        [get_order_status],
        store=store,
        config=config,
        summarizer=writer,
        prompt="Be helpful. " * 50,
    ).compile(checkpointer=InMemorySaver())
    thread: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 60}
    stopped = []
    for n in range(1, 13):
        ask = HumanMessage(f"Where is ORD-{1000 + n}? " + "please " * 50, id=f"h{n}")
        updates = await _updates(graph, mode, {"messages": [ask]}, thread)
        ran = [name for name, _ in updates]
        assert max(_rounds_per_model_call(ran)) <= limit, (n, ran)
        rounds = 0
        for name, update in updates:
            context = unpack((update or {}).get("context"))
            compaction = context.get("compaction") or {}
            assert compaction.get("rounds", 0) <= limit, compaction
            rounds = 0 if name == "model" else rounds + (name == "ctx_compact")
            budget = context.get("budget") or {}
            if name != "ctx_budget" or not rounds or budget["decision"] != "proceed":
                continue
            backing_off = (
                graph.get_state(thread).values["context"].get("backoff", {}).get("summarizer")
            )
            if budget["total"] > budget["trigger"] and not backing_off:
                # a request sent on over the trigger after its rounds says why they stopped
                # (after a failure the summarizer backs off: context["summarizer_backoff"])
                stopped.append(compaction["stopped"])
    assert all(s.startswith(("no progress: ", f"{limit} rounds", "round ")) for s in stopped)
    if summarizer != "same":
        assert stopped, "the kept tail should keep some requests over the trigger"
