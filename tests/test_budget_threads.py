"""One compiled graph serves many threads: what one thread's usage teaches the approximate
counter stays in that thread's state, so threads never move each other's estimates."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from ctx_langgraph.budget import ApproximateCounter
from ctx_langgraph.budget.node import make_budget_node
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.state import ContextState
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.usage.node import make_usage_node

# what each thread's provider measures, against what the approximate counter estimated
MEASURED_OVER_ESTIMATE = {"dense": 1.6, "sparse": 0.7}


def model(state, config):
    """A model whose provider measures the request at a fixed ratio of our estimate."""
    thread = config["configurable"]["thread_id"].split("-")[0]
    estimate = state["context"]["report"]["budget"]["input_tokens"]
    measured = round(estimate * MEASURED_OVER_ESTIMATE[thread])
    turn = len(state["messages"])
    reply = AIMessage(
        "Noted, the shipment is on its way.",
        id=f"{config['configurable']['thread_id']}-a{turn}",
        usage_metadata={"input_tokens": measured, "output_tokens": 9, "total_tokens": measured + 9},
        response_metadata={"model_name": "claude-sonnet-4-5", "id": f"r-{thread}-{turn}"},
    )
    return {"messages": [reply]}


def compiled(store):
    builder = StateGraph(ContextState)
    config = ContextConfig(context_window=200_000, output_reserve=4_096)
    counter = ApproximateCounter("claude-sonnet-4-5")
    builder.add_node(
        "ctx_budget", make_budget_node(store, config=config, counter=counter, compact_node=None)
    )
    builder.add_node("model", model)
    builder.add_node("ctx_usage", make_usage_node(UsageLedger(store), store=store))
    builder.add_edge(START, "ctx_budget")
    builder.add_edge("ctx_budget", "model")
    builder.add_edge("model", "ctx_usage")
    builder.add_edge("ctx_usage", END)
    return builder.compile(checkpointer=InMemorySaver())


def ask(graph, thread_id, turn):
    question = f"Where is order ORD-{1040 + turn}? The customer asked about it this morning."
    config = {"configurable": {"thread_id": thread_id}}
    state = graph.invoke({"messages": [HumanMessage(question, id=f"{thread_id}-q{turn}")]}, config)
    return state["context"]["report"]["budget"]["input_tokens"], state["context"]["calibration"]


@pytest.fixture
def store():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


def test_each_thread_keeps_its_own_calibration_on_a_shared_graph(store):
    alone = compiled(store)
    expected = [ask(alone, "dense-alone", turn) for turn in range(4)]
    shared = compiled(store)
    seen = []
    for turn in range(4):
        seen.append(ask(shared, "dense-shared", turn))
        ask(shared, "sparse-shared", turn)  # calibrates the other way in between
    assert seen == expected
    # the two threads did learn different ratios
    _, sparse = ask(shared, "sparse-shared", 4)
    assert sparse["chars_per_token"] > expected[-1][1]["chars_per_token"]


def test_concurrent_threads_on_a_shared_graph_get_their_own_estimates(store):
    alone = compiled(store)
    expected = {
        thread: [ask(alone, f"{thread}-alone", turn)[0] for turn in range(3)]
        for thread in MEASURED_OVER_ESTIMATE
    }
    shared = compiled(store)

    async def thread_run(thread):
        config = {"configurable": {"thread_id": f"{thread}-together"}}
        estimates = []
        for turn in range(3):
            question = (
                f"Where is order ORD-{1040 + turn}? The customer asked about it this morning."
            )
            message = HumanMessage(question, id=f"{thread}-together-q{turn}")
            state = await shared.ainvoke({"messages": [message]}, config)
            estimates.append(state["context"]["report"]["budget"]["input_tokens"])
            await asyncio.sleep(0)
        return thread, estimates

    async def both():
        return dict(await asyncio.gather(*map(thread_run, MEASURED_OVER_ESTIMATE)))

    assert asyncio.run(both()) == expected
