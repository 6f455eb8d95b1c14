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
from ctx_langgraph.testing import MeteringChatModel

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


async def _run(graph: Any, mode: str, inputs: Any, config: Any) -> list[str]:
    """The turn, streamed; the nodes that ran, in order (one per superstep here)."""
    ran: list[str] = []

    def names(update: Any) -> None:
        ran.extend(update)

    if mode == "sync":

        def drive() -> None:
            for update in graph.stream(inputs, config, stream_mode="updates"):
                names(update)

        await asyncio.to_thread(drive)
    else:
        async for update in graph.astream(inputs, config, stream_mode="updates"):
            names(update)
    return ran


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
    covered = _commit_covering(store, scope, through="h8", first_kept="a-dead")
    # the server runs turn 8 again, from the checkpoint before it, in a small window
    graph = WIRINGS[wiring](store, SMALL, saver)
    ran = await _run(graph, mode, {"messages": [_ask(8)]}, {**before.config, "recursion_limit": 40})
    state = graph.get_state(config).values
    assert state["messages"][-1].text == "Noted.", ran
    context = state["context"]
    compaction = context["compaction"]
    assert compaction["rounds"] <= SMALL.max_compaction_rounds, compaction
    if wiring != "middleware":  # (the middleware runs the loop inline, in one superstep)
        assert sum(name in LOOP_NODES for name in ran) <= 8, ran
    # the request sent fits the window, and the view lays the summary over its own tail
    assert context["budget"]["total"] <= context["budget"]["usable"], context["budget"]
    assert context["covered_through_seq"] >= covered
    # the thread goes on, each turn in a few rounds
    for n in (9, 10, 11):
        ran = await _run(graph, mode, {"messages": [_ask(n)]}, config)
        if wiring != "middleware":
            assert sum(name in LOOP_NODES for name in ran) <= 8, ran
        assert graph.get_state(config).values["context"]["compaction"]["rounds"] <= 3


def test_max_compaction_rounds_is_validated() -> None:
    assert ContextConfig().max_compaction_rounds == 3
    assert dataclasses.replace(SMALL, max_compaction_rounds=1).max_compaction_rounds == 1
    with pytest.raises(ValueError, match="max_compaction_rounds"):
        ContextConfig(max_compaction_rounds=0)
    with pytest.raises(TypeError, match="max_compaction_rounds"):
        ContextConfig(max_compaction_rounds="3")  # type: ignore[arg-type]
