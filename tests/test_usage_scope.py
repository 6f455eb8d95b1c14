"""Every model call the package makes or observes is booked under the run's whole scope: the
tenant (``configurable.ctx_tenant``), the thread and the branch (``configurable.ctx_branch``, or
the branch the state moved to), whatever the wiring (``create_agent`` with the middleware,
``create_context_agent``, ``add_context_management`` on a graph of one's own), sync or async,
on every history-store backend."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    add_context_management,
    create_context_agent,
)
from ctx_langgraph.compaction import LLMSummarizer
from ctx_langgraph.core.call_scope import calls_in
from ctx_langgraph.history import HistoryStore, Scope
from ctx_langgraph.memory import ChatModelExtractor, LongTermMemory
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.usage.callbacks import LedgerCallbackHandler

WINDOW = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=300
)
NOTE = "A note on the migration plan: the schema, the backfill, the read path, the rollback. "
RUN: Any = {
    "configurable": {"thread_id": "t", "ctx_tenant": "acme", "ctx_branch": "b2", "user_id": "u"}
}
TURNS = 8


def _branch_b2(store: HistoryStore) -> None:
    """The run's branch ``b2`` of thread ``t`` of tenant ``acme``, forked before any event."""
    store.append(Scope("t", tenant="acme"), [HumanMessage("(the thread's first words)", id="h0")])
    store.create_branch(Scope("t", tenant="acme", branch="b2"), "main", 0)


def _parts() -> tuple[LLMSummarizer, LongTermMemory]:
    summarizer = LLMSummarizer(MeteringChatModel(replies=[scripted_summary_reply]))
    extractor = ChatModelExtractor(MeteringChatModel(replies=["[]"]))
    return summarizer, LongTermMemory(InMemoryStore(), extractor=extractor)


def _middleware_agent(store: HistoryStore) -> Any:
    summarizer, memory = _parts()
    model = MeteringChatModel(replies=["Noted."])
    middleware = ContextManagementMiddleware(
        store, model=model, config=WINDOW, summarizer=summarizer, memory=memory
    )
    return create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())


def _ready_agent(store: HistoryStore) -> Any:
    summarizer, memory = _parts()
    model = MeteringChatModel(replies=["Noted."])
    builder = create_context_agent(
        model, store=store, config=WINDOW, summarizer=summarizer, memory=memory
    )
    return builder.compile(checkpointer=InMemorySaver())


def _drop_in(store: HistoryStore) -> Any:
    summarizer, memory = _parts()
    model = MeteringChatModel(replies=["Noted."])

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    add_context_management(
        builder,
        model_node="model",
        store=store,
        config=WINDOW,
        summarizer=summarizer,
        memory=memory,
        model=model,
    )
    return builder.compile(checkpointer=InMemorySaver())


WIRINGS = {"middleware": _middleware_agent, "agent": _ready_agent, "drop_in": _drop_in}


async def _turns(graph: Any, mode: str, config: Any, turns: int = TURNS) -> None:
    for turn in range(turns):
        inputs = {"messages": [HumanMessage(f"Turn {turn}. " + NOTE * 16, id=f"h{turn}")]}
        if mode == "sync":
            await asyncio.to_thread(graph.invoke, inputs, config)
        else:
            await graph.ainvoke(inputs, config)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wiring", list(WIRINGS))
async def test_summary_memory_and_answer_calls_are_booked_under_the_runs_tenant_and_branch(
    store: HistoryStore, wiring: str, mode: str
) -> None:
    _branch_b2(store)
    graph = WIRINGS[wiring](store)
    await _turns(graph, mode, RUN)
    ledger = UsageLedger(store)
    rows = ledger.totals(None, by=("tenant", "thread_id", "branch", "purpose"))
    where = {(r.key["tenant"], r.key["thread_id"], r.key["branch"]) for r in rows}
    assert where == {("acme", "t", "b2")}, rows
    purposes = {r.key["purpose"]: r.calls for r in rows}
    assert purposes.get("summary", 0) >= 1 and purposes.get("memory", 0) >= 1, purposes
    assert purposes["answer"] == TURNS, purposes  # each answer once, none left held elsewhere
    booked = ledger.records(Scope("t", tenant="acme"), branch="b2")
    assert all(r.usage.input_total for r in booked)


def test_a_handler_on_a_run_of_ones_own_books_under_the_configured_tenant_and_branch(
    store: HistoryStore,
) -> None:
    """No node of ours in the graph: the handler reads the run's scope from ``configurable``
    (LangGraph puts ``thread_id`` in a call's metadata, never ``ctx_tenant`` or ``ctx_branch``)."""
    model = MeteringChatModel(replies=["Hi."])

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    graph = builder.compile()
    _branch_b2(store)
    ledger = UsageLedger(store)
    config = {**RUN, "callbacks": [LedgerCallbackHandler(ledger)]}
    out = graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)
    assert isinstance(out["messages"][-1], AIMessage)
    rows = ledger.totals(None, by=("tenant", "thread_id", "branch"))
    assert [(r.key, r.calls) for r in rows] == [
        ({"tenant": "acme", "thread_id": "t", "branch": "b2"}, 1)
    ]


def test_the_scope_our_steps_name_wins_for_their_thread_only(store: HistoryStore) -> None:
    """Around the calls our nodes make, the branch the state is on (a fork) names the call's
    branch; a call of another thread made there (a graph of its own) keeps its own scope."""
    ledger = UsageLedger(store)
    handler = LedgerCallbackHandler(ledger)
    model = MeteringChatModel(replies=["Hi."])
    fork = Scope("t", tenant="acme", branch="main~3-fork")
    with calls_in(fork):
        model.invoke("hello", {"callbacks": [handler], "metadata": {"thread_id": "t"}})
        model.invoke("hello", {"callbacks": [handler], "metadata": {"thread_id": "other"}})
    rows = ledger.totals(None, by=("tenant", "thread_id", "branch"))
    assert sorted((tuple(r.key.values()), r.calls) for r in rows) == [
        (("acme", "t", "main~3-fork"), 1),
        (("default", "other", "main"), 1),
    ]
