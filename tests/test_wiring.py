"""One wiring: the graph wiring, ``create_context_agent`` and the middleware build their steps in
one place (:func:`ctx_langgraph.wiring.context_steps`), and the middleware reads the model, the
tools and the system prompt from ``create_agent``'s model requests."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    add_context_management,
    create_context_agent,
    make_history_lookup_tool,
    wiring,
)
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.state import unpack
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply
from ctx_langgraph.view.markers import is_summary

PROMPT = "You are a shipping assistant. Answer in one sentence."
CONFIG = ContextConfig(context_window=8_000, output_reserve=1_000)


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of an order by its id."""
    return f"Order {order_id}: shipped on day 3, carrier Nordpost."


def _graph(model: MeteringChatModel, store: HistoryStore) -> StateGraph:
    """A tool-calling graph written as in the LangGraph docs, its node adding the prompt."""
    tools = [get_order_status, make_history_lookup_tool(store)]
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke([SystemMessage(PROMPT), *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


def _settings(steps: wiring.ContextSteps) -> dict[str, Any]:
    """What the steps were built with, as every wiring must build them alike."""
    budget = steps.budget.settings
    return {
        "classes": [type(steps.budget), type(steps.compact), type(steps.usage), type(steps.wire)],
        "booking": type(steps.booking),
        "config": steps.budget.config,
        "budget": budget.budget,
        "overhead_tokens": budget.overhead_tokens,
        "system_prompt_tokens": budget.system_prompt_tokens,
        "model": (budget.model_id, budget.provider, steps.counter.id),
        "tools": sorted(str(t.name) for t in steps.budget.tools),
        "lookup_tools": budget.lookup_tools,
        "summary": (steps.compact.cap, steps.compact.summarizer.id, steps.compact.config),
        "usage": (steps.usage.embed_in_background, steps.usage.held is not None),
    }


def test_the_three_wirings_hold_the_steps_one_builder_built(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[wiring.ContextSteps] = []

    class Recorded(wiring.ContextSteps):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            built.append(self)

    monkeypatch.setattr(wiring, "ContextSteps", Recorded)
    model = MeteringChatModel(replies=[tool_agent_reply])
    graph = add_context_management(
        _graph(model, store),
        model_node="agent",
        store=store,
        config=CONFIG,
        model=model,
        system_prompt=PROMPT,
    )
    agent = create_context_agent(
        model, [get_order_status], store=store, config=CONFIG, prompt=PROMPT
    )
    middleware = ContextManagementMiddleware(store, config=CONFIG)
    langchain_agent = create_agent(
        model, [get_order_status], system_prompt=PROMPT, middleware=[middleware]
    )
    assert len(built) == 2  # the middleware builds its steps at its first model request
    run = {"configurable": {"thread_id": "t-mw"}}
    langchain_agent.invoke({"messages": [("user", "Where is order ORD-0042?")]}, run)
    assert len(built) == 3

    first = _settings(built[0])
    assert first["overhead_tokens"] > 0 and first["system_prompt_tokens"] > 0
    assert first["tools"] == ["get_order_status", "history_lookup"]
    assert _settings(built[1]) == first
    assert _settings(built[2]) == first
    # and the graphs run the steps built there
    for builder, steps in ((graph, built[0]), (agent, built[1])):
        assert builder.nodes["ctx_budget"].runnable.func.__self__ is steps.budget
        assert builder.nodes["ctx_compact"].runnable.bound.func.__self__ is steps.compact
        assert builder.nodes["ctx_usage"].runnable.func.__self__ is steps.usage


async def _invoke(agent: Any, request: dict[str, Any], run: Any, mode: str) -> dict[str, Any]:
    if mode == "sync":
        return await asyncio.to_thread(agent.invoke, request, run)
    return await agent.ainvoke(request, run)


async def _turns(
    agent: Any, thread: str, texts: list[str], mode: str
) -> tuple[list[dict[str, Any]], list[BaseMessage]]:
    """The budget report after each turn, and the thread's messages at the end."""
    run = {"configurable": {"thread_id": thread}}
    reports: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    for text in texts:
        out = await _invoke(agent, {"messages": [("user", text)]}, run, mode)
        reports.append(dict(unpack(out["context"])["budget"]))
    return reports, out["messages"]


# the keys of a budget report that do not depend on the random ids of tool calls
STABLE = ("overhead", "system", "method", "decision", "counted_messages", "epoch_bumped_for")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_middleware_counts_the_request_tools_and_prompt_without_being_given_them(
    store: HistoryStore, mode: str
) -> None:
    texts = ["Hello there.", "Where is order ORD-0042?", "Thanks, that is all."]
    reports = {}
    for name in ("request", "given"):
        model = MeteringChatModel(replies=[tool_agent_reply])
        given: dict[str, Any] = {}
        if name == "given":  # as the middleware had to be told before
            given = {"model": model, "tools": [get_order_status], "system_prompt": PROMPT}
        middleware = ContextManagementMiddleware(store, config=CONFIG, **given)
        agent = create_agent(
            model,
            [get_order_status],
            system_prompt=PROMPT,
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        reports[name], messages = await _turns(agent, f"t-{name[0]}-{mode}", texts, mode)
        assert [m.type for m in messages[-3:]] == ["ai", "human", "ai"]
    # the first request already counts the agent's tools and prompt, and later turns go on
    # from the measured baseline as when the middleware was given them (no epoch bump)
    assert reports["request"][0] == reports["given"][0]
    counter = TiktokenCounter("gpt-4o")
    schema = convert_to_openai_tool(get_order_status)
    agents_own = counter.count_tools([schema]) + counter.count_message(SystemMessage(PROMPT))
    assert reports["request"][0]["overhead"] > agents_own  # with the lookup tool's schema
    for asked, given in zip(reports["request"], reports["given"], strict=True):
        assert {k: asked[k] for k in STABLE} == {k: given[k] for k in STABLE}
    assert [r["method"] for r in reports["request"][1:]] == ["baseline", "baseline"]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_first_request_over_the_trigger_is_compacted_with_the_request_model(
    store: HistoryStore, mode: str
) -> None:
    """Before any request showed the model, ``before_model`` cannot budget: the first model
    call does, compacting what is over the trigger before the model sees it."""
    config = ContextConfig(
        context_window=4_000, output_reserve=500, keep_recent_tokens=600, summary_max_tokens=300
    )
    seen: list[list[BaseMessage]] = []

    def reply(messages: list[BaseMessage]) -> AIMessage:
        seen.append(list(messages))
        return tool_agent_reply(messages)

    model = MeteringChatModel(replies=[reply])
    agent = create_agent(
        model,
        [get_order_status],
        system_prompt=PROMPT,
        middleware=[ContextManagementMiddleware(store, config=config)],
        checkpointer=InMemorySaver(),
    )
    filler = "the migration plan covers the schema, the backfill, the read path and rollback. "
    history: list[BaseMessage] = []
    for i in range(24):
        history.append(HumanMessage(f"Note {i}: {filler * 8}", id=f"h{i}"))
        history.append(AIMessage(f"Noted {i}.", id=f"a{i}"))
    request = {"messages": [*history, HumanMessage("What did note 23 cover?", id="last")]}
    run = {"configurable": {"thread_id": f"t-first-{mode}"}}
    out = await _invoke(agent, request, run, mode)

    context = unpack(out["context"])
    assert context["compaction"]["status"] == "committed"
    assert context["budget"]["decision"] == "proceed"
    assert len(seen) == 1 and any(is_summary(m) for m in seen[0])
    assert seen[0][-1].id == "last"
    messages = out["messages"]
    assert is_summary(messages[0]) and len(messages) < len(history)
    assert messages[-2].id == "last" and messages[-1].type == "ai"
    events = store.read_events(f"t-first-{mode}")
    assert [e.event_id for e in events][:2] == ["h0", "a0"] and events[-1].role == "ai"
