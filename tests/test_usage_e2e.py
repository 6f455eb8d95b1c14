"""End to end: the real ChatOpenAI / ChatAnthropic clients against a loopback server replaying
provider wire format; the ledger's totals must equal the provider's truth."""

from __future__ import annotations

import asyncio

import fake_providers as fp
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.state import ContextState
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.usage.callbacks import AsyncLedgerCallbackHandler, LedgerCallbackHandler
from ctx_langgraph.usage.node import make_usage_node

ANTHROPIC_USAGE = {
    "input_tokens": 50,
    "cache_read_input_tokens": 18_000,
    "cache_creation_input_tokens": 1_200,
}


@pytest.fixture
def server():
    with fp.serve() as replay:
        yield replay


@pytest.fixture
def ledger():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield UsageLedger(store)
    store.close()


def agent(model, ledger, call_model=None):
    """model -> ctx_usage; ``call_model`` replaces the default model node."""
    if call_model is None:

        def call_model(state):
            return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(ContextState)
    builder.add_node("model", call_model)
    builder.add_node("ctx_usage", make_usage_node(ledger))
    builder.add_edge(START, "model")
    builder.add_edge("model", "ctx_usage")
    builder.add_edge("ctx_usage", END)
    return builder.compile()


def anthropic(server, **kw):
    return ChatAnthropic(
        model="claude-sonnet-4-5", base_url=server.url, api_key="test-key", max_retries=0, **kw
    )


def openai(server, **kw):
    return ChatOpenAI(
        model="gpt-4o-2024-08-06",
        base_url=server.url + "/v1",
        api_key="test-key",
        max_retries=0,
        **kw,
    )


def run(graph, ledger, thread="t1"):
    config = {"configurable": {"thread_id": thread}, "callbacks": [LedgerCallbackHandler(ledger)]}
    return graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)


def only_total(ledger, thread="t1"):
    [totals] = ledger.totals(thread)
    return totals


def test_anthropic_non_streaming_with_cache_read_and_write(server, ledger):
    server.json(
        "/v1/messages", fp.anthropic_message("msg_01", {**ANTHROPIC_USAGE, "output_tokens": 120})
    )
    state = run(agent(anthropic(server), ledger), ledger)
    totals = only_total(ledger)
    assert totals.calls == 1
    assert totals.counts == {
        "input_total": 19_250,
        "input_uncached": 50,
        "cache_read": 18_000,
        "cache_write": 1_200,
        "output": 120,
        "reasoning": 0,
    }
    assert ledger.get("anthropic:msg_01").status == "complete"
    baseline = state["context"]["baseline"]
    assert (
        baseline["measured_input_tokens"] == 19_250 and baseline["input_through_message_id"] == "h1"
    )
    # sonnet 4: 50 * 3 + 18,000 * 0.30 + 1,200 * 3.75 + 120 * 15 per million
    assert totals.cost == pytest.approx((50 * 3 + 18_000 * 0.30 + 1_200 * 3.75 + 120 * 15) / 1e6)


def test_anthropic_stream_with_several_cumulative_message_deltas(server, ledger):
    deltas = [{**ANTHROPIC_USAGE, "output_tokens": n} for n in (30, 80, 120)]
    server.sse(
        "/v1/messages",
        fp.anthropic_stream("msg_02", {**ANTHROPIC_USAGE, "output_tokens": 1}, deltas),
    )
    state = run(agent(anthropic(server, streaming=True), ledger), ledger)
    totals = only_total(ledger)
    assert totals.calls == 1
    assert totals.counts["input_total"] == 19_250
    assert totals.counts["output"] == 120  # the last cumulative value, not 30 + 80 + 120
    assert state["context"]["baseline"]["measured_input_tokens"] == 19_250
    assert (
        state["context"]["report"]["last_usage"]["booked"] == "duplicate"
    )  # the handler booked it first


async def test_anthropic_stream_async(server, ledger):
    deltas = [{**ANTHROPIC_USAGE, "output_tokens": n} for n in (10, 64)]
    server.sse(
        "/v1/messages",
        fp.anthropic_stream("msg_03", {**ANTHROPIC_USAGE, "output_tokens": 1}, deltas),
    )
    graph = agent(anthropic(server, streaming=True), ledger)
    config = {
        "configurable": {"thread_id": "t1"},
        "callbacks": [AsyncLedgerCallbackHandler(ledger)],
    }
    state = await graph.ainvoke({"messages": [HumanMessage("hello", id="h1")]}, config)
    totals = (await ledger.atotals("t1"))[0]
    assert (totals.calls, totals.counts["input_total"], totals.counts["output"]) == (1, 19_250, 64)
    assert state["context"]["baseline"]["measured_input_tokens"] == 19_250


def test_anthropic_gateway_stream_reporting_zero_input_is_unknown_not_zero(server, ledger):
    start = {"input_tokens": 0, "output_tokens": 1}
    deltas = [{"input_tokens": 0, "output_tokens": 40}]
    server.sse("/v1/messages", fp.anthropic_stream("msg_04", start, deltas))
    state = run(agent(anthropic(server, streaming=True), ledger), ledger)
    [record] = [ledger.get(state["context"]["report"]["last_usage"]["call_key"])]
    assert record.usage.input_total is None and record.usage.output == 40
    assert record.status == "partial"
    assert "baseline" not in state["context"]  # an unknown input never becomes a capacity baseline


def test_openai_chat_completions_non_streaming(server, ledger):
    usage = {
        "prompt_tokens": 10_000,
        "completion_tokens": 20,
        "total_tokens": 10_020,
        "prompt_tokens_details": {"cached_tokens": 8_000},
    }
    server.json("/v1/chat/completions", fp.chat_completion("chatcmpl-1", usage))
    state = run(agent(openai(server), ledger), ledger)
    totals = only_total(ledger)
    assert totals.counts == {
        "input_total": 10_000,
        "input_uncached": 2_000,
        "cache_read": 8_000,
        "cache_write": 0,
        "output": 20,
        "reasoning": 0,
    }
    assert ledger.get("openai:chatcmpl-1") is not None
    assert state["context"]["baseline"]["measured_input_tokens"] == 10_000


def test_openai_chat_completions_streaming_with_include_usage(server, ledger):
    usage = {
        "prompt_tokens": 4_000,
        "completion_tokens": 7,
        "total_tokens": 4_007,
        "prompt_tokens_details": {"cached_tokens": 3_072},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    server.sse("/v1/chat/completions", fp.chat_completion_stream("chatcmpl-2", usage))
    state = run(agent(openai(server, streaming=True, stream_usage=True), ledger), ledger)
    assert server.requests[-1][1]["stream_options"] == {"include_usage": True}
    totals = only_total(ledger)
    assert (
        totals.calls,
        totals.counts["input_total"],
        totals.counts["cache_read"],
        totals.counts["output"],
    ) == (1, 4_000, 3_072, 7)
    assert state["context"]["baseline"]["measured_input_tokens"] == 4_000


@pytest.mark.parametrize("streaming", [False, True])
def test_openai_responses_api(server, ledger, streaming):
    usage = {
        "input_tokens": 3_000,
        "input_tokens_details": {"cached_tokens": 1_000},
        "output_tokens": 500,
        "output_tokens_details": {"reasoning_tokens": 200},
        "total_tokens": 3_500,
    }
    if streaming:
        server.sse("/v1/responses", fp.responses_stream("resp_1", usage))
    else:
        server.json("/v1/responses", fp.responses_body("resp_1", usage))
    model = openai(server, use_responses_api=True, streaming=streaming)
    state = run(agent(model, ledger), ledger)
    assert server.requests[-1][0] == "/v1/responses"
    totals = only_total(ledger)
    assert totals.calls == 1
    assert totals.counts == {
        "input_total": 3_000,
        "input_uncached": 2_000,
        "cache_read": 1_000,
        "cache_write": 0,
        "output": 500,
        "reasoning": 200,
    }
    assert state["context"]["baseline"]["measured_input_tokens"] == 3_000


def test_summarizer_calls_go_to_the_ledger_never_to_the_baseline(server, ledger):
    server.json(
        "/v1/messages", fp.anthropic_message("msg_10", {**ANTHROPIC_USAGE, "output_tokens": 100})
    )
    server.json(
        "/v1/messages", fp.anthropic_message("msg_11", {"input_tokens": 900, "output_tokens": 300})
    )
    model = anthropic(server)
    handler = LedgerCallbackHandler(ledger)

    def call_model(state):
        reply = model.invoke(state["messages"])
        model.invoke([HumanMessage("summarize")], {"tags": ["ctx:summary"]})  # e.g. a summarizer
        return {"messages": [reply]}

    state = agent(model, ledger, call_model).invoke(
        {"messages": [HumanMessage("hi", id="h1")]},
        {"configurable": {"thread_id": "t1"}, "callbacks": [handler]},
    )
    by_purpose = {t.key["purpose"]: t for t in ledger.totals("t1", by=["purpose"])}
    assert by_purpose["answer"].counts["input_total"] == 19_250
    assert by_purpose["summary"].counts["input_total"] == 900
    assert state["context"]["baseline"]["measured_input_tokens"] == 19_250


def test_node_alone_books_from_the_message(server, ledger):
    server.json(
        "/v1/messages", fp.anthropic_message("msg_20", {**ANTHROPIC_USAGE, "output_tokens": 7})
    )
    graph = agent(anthropic(server), ledger)
    graph.invoke(
        {"messages": [HumanMessage("hello", id="h1")]}, {"configurable": {"thread_id": "t9"}}
    )
    totals = only_total(ledger, "t9")
    assert (totals.calls, totals.counts["input_total"], totals.counts["output"]) == (1, 19_250, 7)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_create_agent_middleware_books_a_stream_once_with_cumulative_usage(server, ledger, mode):
    from langchain.agents import create_agent

    from ctx_langgraph import ContextConfig, ContextManagementMiddleware

    deltas = [{**ANTHROPIC_USAGE, "output_tokens": n} for n in (30, 80, 120)]
    server.sse(
        "/v1/messages",
        fp.anthropic_stream("msg_30", {**ANTHROPIC_USAGE, "output_tokens": 1}, deltas),
    )
    model = anthropic(server, streaming=True)
    middleware = ContextManagementMiddleware(
        ledger.store,
        model=model,
        ledger=ledger,
        config=ContextConfig(context_window=200_000, output_reserve=8_000),
        lookup_tool=False,
    )
    graph = create_agent(model, tools=[], middleware=[middleware])
    inputs = {"messages": [HumanMessage("hello", id="h1")]}
    config = {"configurable": {"thread_id": "t1"}}  # no handler of the caller's: ours books it
    state = (
        graph.invoke(inputs, config)
        if mode == "sync"
        else asyncio.run(graph.ainvoke(inputs, config))
    )
    totals = only_total(ledger)
    assert totals.calls == 1
    assert (totals.counts["input_total"], totals.counts["output"]) == (19_250, 120)
    # the handler held the usage it folded from the stream; after_model booked it, once, in the
    # transaction that recorded the reply
    assert state["context"]["report"]["last_usage"]["booked"] == "new"
    assert state["context"]["baseline"]["measured_input_tokens"] == 19_250
