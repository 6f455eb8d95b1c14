"""Streamed usage from OpenAI-compatible endpoints: a real ``ChatOpenAI(streaming=True,
base_url=...)`` against a loopback server that, like a real one, sends a usage chunk only when
the request asks for it (``stream_options.include_usage``).

Where the package holds the model (the middleware's model call, ``create_context_agent``, the
LLM summarizer, a model-backed memory extractor) a streamed call asks for usage and is booked
with the server's exact counts, under the run's tenant and branch; where it does not (the model
node of a graph of one's own), one clear warning per process says why the usage is unknown and
how to fix it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import fake_providers as fp
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
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
from ctx_langgraph.core import stream_usage
from ctx_langgraph.history import HistoryStore, Scope
from ctx_langgraph.memory import ChatModelExtractor, LongTermMemory
from ctx_langgraph.usage import UsageLedger

WINDOW = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=300
)
NOTE = "A note on the migration plan: the schema, the backfill, the read path, the rollback. "
RUN: Any = {"configurable": {"thread_id": "t", "ctx_tenant": "acme", "user_id": "u"}}


def reply(body: dict[str, Any]) -> str:
    """A memory extractor's request gets an empty list, any other one a short answer."""
    last = str((body.get("messages") or [{}])[-1].get("content"))
    return "[]" if last.startswith("Existing memories:") else "Noted."


@pytest.fixture
def server() -> Iterator[fp.ProviderReplay]:
    with fp.serve() as replay:
        replay.meter("/v1/chat/completions", reply)
        yield replay


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: nothing said yet."""
    monkeypatch.setattr(stream_usage, "_WARNED", set())


def compatible(server: fp.ProviderReplay, **kw: Any) -> ChatOpenAI:
    """ChatOpenAI against an OpenAI-compatible server: LangChain leaves stream_usage unset."""
    return ChatOpenAI(
        model="gpt-4o-2024-08-06",
        base_url=server.url + "/v1",
        api_key="test-key",
        max_retries=0,
        streaming=True,
        **kw,
    )


async def turns(graph: Any, mode: str, n: int, config: Any = RUN) -> None:
    for turn in range(n):
        inputs = {"messages": [HumanMessage(f"Turn {turn}. " + NOTE * 16, id=f"h{turn}")]}
        if mode == "sync":
            await asyncio.to_thread(graph.invoke, inputs, config)
        else:
            await graph.ainvoke(inputs, config)


def served(server: fp.ProviderReplay) -> list[tuple[int, bool]]:
    """Each chat-completions request: its input tokens as the server counted them, and whether
    it asked for streamed usage."""
    asked = [
        bool((body.get("stream_options") or {}).get("include_usage"))
        for path, body in server.requests
        if path == "/v1/chat/completions"
    ]
    return [(u["input"], a) for u, a in zip(server.usages, asked, strict=True)]


def booked(store: HistoryStore) -> list[Any]:
    return UsageLedger(store).records(Scope("t", tenant="acme"))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wiring", ["middleware", "agent"])
async def test_streamed_calls_of_a_compatible_endpoint_are_booked_with_the_servers_usage(
    store: HistoryStore,
    server: fp.ProviderReplay,
    wiring: str,
    mode: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = compatible(server)
    summarizer = LLMSummarizer(compatible(server))
    memory = LongTermMemory(InMemoryStore(), extractor=ChatModelExtractor(compatible(server)))
    parts: dict[str, Any] = {"config": WINDOW, "summarizer": summarizer, "memory": memory}
    if wiring == "middleware":
        middleware = ContextManagementMiddleware(store, model=model, lookup_tool=False, **parts)
        graph = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    else:
        builder = create_context_agent(model, store=store, lookup_tool=False, **parts)
        graph = builder.compile(checkpointer=InMemorySaver())
    with caplog.at_level(logging.WARNING, logger="ctx_langgraph"):
        await turns(graph, mode, 7)
    assert all(asked for _, asked in served(server)), served(server)
    records = booked(store)
    by_purpose = {
        p: [r for r in records if r.purpose == p] for p in ("answer", "summary", "memory")
    }
    assert len(by_purpose["answer"]) == 7 and by_purpose["summary"] and by_purpose["memory"]
    assert all(r.status == "complete" for r in records), [(r.purpose, r.status) for r in records]
    # the server's own counts, call by call (the ledger books in call order)
    assert sorted(r.usage.input_total for r in records) == sorted(i for i, _ in served(server))
    assert UsageLedger(store).totals(None, by=("tenant",))[0].key == {"tenant": "acme"}
    assert "reported no usage" not in caplog.text
    assert model.stream_usage is None  # the user's model is not changed


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_model_node_of_ones_own_that_cannot_be_asked_gets_one_clear_warning(
    store: HistoryStore, server: fp.ProviderReplay, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = compatible(server)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def acall_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model if mode == "sync" else acall_model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    add_context_management(builder, model_node="model", store=store, config=WINDOW, model=model)
    graph = builder.compile(checkpointer=InMemorySaver())
    with caplog.at_level(logging.WARNING, logger="ctx_langgraph"):
        await turns(graph, mode, 3)
    records = booked(store)
    assert [r.status for r in records] == ["unknown"] * 3
    said = [r.getMessage() for r in caplog.records if "reported no usage" in r.getMessage()]
    assert len(said) == 1, said
    assert "stream_usage=True" in said[0] and server.url + "/v1" in said[0]
    assert model.stream_usage is None


async def test_the_same_node_with_stream_usage_asked_is_booked_exactly(
    store: HistoryStore, server: fp.ProviderReplay, caplog: pytest.LogCaptureFixture
) -> None:
    """The fix the warning names works: ``stream_usage=True`` on the user's model."""
    model = compatible(server, stream_usage=True)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    add_context_management(builder, model_node="model", store=store, config=WINDOW, model=model)
    graph = builder.compile(checkpointer=InMemorySaver())
    with caplog.at_level(logging.WARNING, logger="ctx_langgraph"):
        await turns(graph, "sync", 2)
    records = booked(store)
    assert [(r.status, r.usage.input_total) for r in records] == [
        ("complete", i) for i, _ in served(server)
    ]
    assert "reported no usage" not in caplog.text


def test_a_model_told_not_to_stream_usage_is_left_as_told() -> None:
    told = ChatOpenAI(model="m", base_url="http://127.0.0.1:9/v1", api_key="x", stream_usage=False)
    assert stream_usage.asks_stream_usage(told) is told
    optioned = ChatOpenAI(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        api_key="x",
        model_kwargs={"stream_options": {"include_usage": False}},
    )
    assert stream_usage.asks_stream_usage(optioned) is optioned
    unset = ChatOpenAI(model="m", base_url="http://127.0.0.1:9/v1", api_key="x")
    copy = stream_usage.asks_stream_usage(unset)
    assert (copy.stream_usage, unset.stream_usage, copy.openai_api_base) == (
        True,
        None,
        "http://127.0.0.1:9/v1",
    )
    assert stream_usage.asks_stream_usage("openai:gpt-4o") == "openai:gpt-4o"


def test_the_inspector_tells_no_usage_reported_from_no_known_price(store: HistoryStore) -> None:
    """Calls booked without usage are 'no usage reported' (with the fix), not 'without a known
    price', and the input-token plot does not show them as if measured."""
    from ctx_langgraph.inspect import thread_html
    from ctx_langgraph.usage import NormalizedUsage

    store.append("t", [HumanMessage("hello", id="h1")])
    ledger = UsageLedger(store)
    for n in range(3):
        ledger.record(f"unknown-{n}", NormalizedUsage(complete=False), scope="t")
    html = thread_html(store, "t")
    assert 'id="no-usage" data-count="3"' in html and "stream_usage=True" in html
    assert "known price" not in html
    assert "(max 0)" not in html and "input tokens (no usage reported)" in html
    ledger.record(
        "priced-not", NormalizedUsage(input_total=100, output=5, model="house-model"), scope="t"
    )
    html = thread_html(store, "t")
    assert 'id="no-usage" data-count="3"' in html and 'id="unpriced" data-count="1"' in html
    assert "max 100; 3 calls with no usage reported" in html
