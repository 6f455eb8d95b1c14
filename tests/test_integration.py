"""The drop-in: an existing tool-calling graph (as the LangGraph docs write it) gets context
management in one call, and ``create_agent`` gets it as middleware; 300 turns in a 4k window."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    LLMSummarizer,
    PostgresHistoryStore,
    SQLiteHistoryStore,
    add_context_management,
    create_context_agent,
    make_history_lookup_tool,
)
from ctx_langgraph.compaction import pairing_problems
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply, tool_agent_reply
from ctx_langgraph.usage import UsageLedger

WINDOW = ContextConfig(
    context_window=4_000,
    output_reserve=500,
    keep_recent_tokens=800,
    summary_max_tokens=300,
    tool_output_cap_tokens=300,
)
USABLE = 3_500
PLANTED = "LK-88213-Q"
TURNS = 300


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of an order by its id."""
    number = sum(map(ord, order_id))
    lines = [f"Order {order_id}: shipped on day {number % 28 + 1}, carrier Nordpost."]
    if number % 7 == 0:  # now and then a giant output, capped on entry
        lines += [
            f"scan {i}: parcel {order_id} seen at depot {i * number % 97}" for i in range(120)
        ]
    return "\n".join(lines)


def user_turn(turn: int, last: int) -> str:
    if turn == 3:
        return f"Please remember: my locker code is {PLANTED}. I will ask for it much later."
    if turn == last:
        return "Recall locker code"
    if turn % 3 == 0:
        return f"Where is order ORD-{turn:04d}? Please check the status for me."
    return (
        f"Turn {turn}: a note on the migration plan, step {turn}, covering the schema, the "
        "backfill, the read path and the rollback checklist we agreed on last week."
    )


@dataclass(eq=False)
class Meter(BaseCallbackHandler):
    """What every model request looked like: its measured input tokens and its tool pairing."""

    inputs: list[int] = field(default_factory=list)
    problems: list[list[str]] = field(default_factory=list)

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        message = response.generations[0][0].message
        self.inputs.append(message.usage_metadata["input_tokens"])

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.problems.append(pairing_problems(messages))
        return tool_agent_reply(messages)


def docs_style_graph(model: MeteringChatModel, store: Any) -> StateGraph:
    """A tool-calling agent written as in the LangGraph docs (nothing of ours inside)."""
    tools = [get_order_status, make_history_lookup_tool(store)]
    model_with_tools = model.bind_tools(tools)

    def call_model(state: MessagesState):
        return {"messages": [model_with_tools.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", call_model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


def middleware_agent(model: MeteringChatModel, store: Any, saver: Any) -> Any:
    middleware = ContextManagementMiddleware(
        store, config=WINDOW, model=model, tools=[get_order_status]
    )
    return create_agent(
        model, tools=[get_order_status], middleware=[middleware], checkpointer=saver
    )


def graph_agent(model: MeteringChatModel, store: Any, saver: Any) -> Any:
    builder = docs_style_graph(model, store)
    add_context_management(builder, model_node="agent", store=store, config=WINDOW, model=model)
    return builder.compile(checkpointer=saver)


Build = Callable[[MeteringChatModel, Any, Any], Any]


def check(meter: Meter, store: Any, final: dict[str, Any], thread: str) -> None:
    assert len(meter.inputs) >= TURNS
    assert max(meter.inputs) <= USABLE, sorted(meter.inputs)[-5:]
    assert all(p == [] for p in meter.problems), [p for p in meter.problems if p][:3]
    active = store.get_active(thread)
    assert active is not None and active.generation >= 5
    # every message recorded once, on one timeline (a false fork would start a branch)
    assert [b.scope.branch for b in store.list_branches(thread)] == ["main"]
    roles = Counter(e.role for e in store.read_events(thread))
    calls = len(meter.inputs)  # each call ends a turn or makes one tool call
    assert roles == {"human": TURNS, "tool": calls - TURNS, "ai": calls}  # the last reply too
    # booked once per call (the callback handler and ctx_usage agree on the call key)
    (totals,) = UsageLedger(store).totals(thread)
    assert totals.calls == calls and totals.counts["input_total"] == sum(meter.inputs)
    lookups = [
        m for m in final["messages"] if isinstance(m, ToolMessage) and m.name == "history_lookup"
    ]
    assert lookups and PLANTED in lookups[-1].text
    assert final["context"]["report"]["budget"]["decision"] in ("proceed", "compact")
    assert json.loads(json.dumps(final["context"])) == final["context"]  # plain JSON only


def run_sync(build: Build, store: Any, saver: Any, thread: str = "t") -> None:
    meter = Meter()
    graph = build(MeteringChatModel(replies=[meter.reply]), store, saver)
    config = {"configurable": {"thread_id": thread}, "callbacks": [meter], "recursion_limit": 50}
    for turn in range(1, TURNS + 1):
        graph.invoke({"messages": [("user", user_turn(turn, TURNS))]}, config)
    check(meter, store, graph.get_state(config).values, thread)


async def run_async(build: Build, store: Any, saver: Any, stream: bool, thread: str = "t") -> None:
    meter = Meter()
    graph = build(MeteringChatModel(replies=[meter.reply]), store, saver)
    config = {"configurable": {"thread_id": thread}, "callbacks": [meter], "recursion_limit": 50}
    for turn in range(1, TURNS + 1):
        inputs = {"messages": [("user", user_turn(turn, TURNS))]}
        if stream:
            async for _ in graph.astream(inputs, config, stream_mode="updates"):
                pass
        else:
            await graph.ainvoke(inputs, config)
    check(meter, store, (await graph.aget_state(config)).values, thread)


BUILDS = {"graph": graph_agent, "middleware": middleware_agent}


@pytest.mark.parametrize("flavor", ["graph", "middleware"])
def test_300_turns_sqlite_sync(flavor: str, tmp_path: Any) -> None:
    store = SQLiteHistoryStore.from_path(tmp_path / "history.sqlite")
    store.setup()
    with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
        run_sync(BUILDS[flavor], store, saver)
    store.close()


@pytest.mark.parametrize("flavor", ["graph", "middleware"])
@pytest.mark.parametrize("stream", [False, True], ids=["ainvoke", "astream"])
def test_300_turns_sqlite_async(flavor: str, stream: bool, tmp_path: Any) -> None:
    async def main() -> None:
        store = SQLiteHistoryStore.from_path(tmp_path / "history.sqlite")
        await store.asetup()
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
            await run_async(BUILDS[flavor], store, saver, stream)
        await store.aclose()

    asyncio.run(main())


@pytest.mark.postgres
@pytest.mark.parametrize("flavor", ["graph", "middleware"])
def test_300_turns_postgres_sync(flavor: str, pg_dsn: str) -> None:
    store = PostgresHistoryStore.from_conn_string(pg_dsn)
    store.setup()
    with PostgresSaver.from_conn_string(pg_dsn) as saver:
        saver.setup()
        run_sync(BUILDS[flavor], store, saver)
    store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("flavor", ["graph", "middleware"])
@pytest.mark.parametrize("stream", [False, True], ids=["ainvoke", "astream"])
def test_300_turns_postgres_async(flavor: str, stream: bool, pg_dsn: str) -> None:
    async def main() -> None:
        store = PostgresHistoryStore.from_conn_string(pg_dsn)
        await store.asetup()
        async with AsyncPostgresSaver.from_conn_string(pg_dsn) as saver:
            await saver.setup()
            await run_async(BUILDS[flavor], store, saver, stream)
        await store.aclose()

    asyncio.run(main())


# ---------------------------------------------------------------------- wiring and errors


@pytest.fixture
def memory_store() -> Any:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


def test_the_wiring_moves_edges_not_nodes(memory_store: Any) -> None:
    model = MeteringChatModel(replies=["ok"])
    builder = docs_style_graph(model, memory_store)
    user_nodes = {name: spec.runnable for name, spec in builder.nodes.items()}
    add_context_management(builder, model_node="agent", store=memory_store, config=WINDOW)
    assert {n: builder.nodes[n].runnable for n in ("tools",)} == {"tools": user_nodes["tools"]}
    edges = builder.compile().get_graph().edges
    pairs = {(e.source, e.target) for e in edges}
    assert {
        ("__start__", "ctx_budget"),
        ("ctx_budget", "agent"),
        ("ctx_budget", "ctx_compact"),
        ("ctx_budget", "__end__"),  # a requested compaction with nothing to answer
        ("ctx_compact", "ctx_budget"),
        ("agent", "ctx_usage"),
        ("ctx_usage", "tools"),
        ("ctx_usage", "__end__"),
        ("tools", "ctx_budget"),
    } == pairs


def test_drop_in_graph_matches_its_mermaid_snapshot(memory_store: Any) -> None:
    builder = docs_style_graph(MeteringChatModel(replies=["ok"]), memory_store)
    add_context_management(builder, model_node="agent", store=memory_store, config=WINDOW)
    mermaid = builder.compile().get_graph().draw_mermaid()
    snapshot = Path(__file__).parent / "snapshots" / "drop_in_docs_graph.mmd"
    assert mermaid == snapshot.read_text(), f"the wiring changed; update {snapshot} if intended"


def test_clear_errors_on_misuse(memory_store: Any) -> None:
    builder = docs_style_graph(MeteringChatModel(replies=["ok"]), memory_store)
    builder.compile()  # drawn or run before: fine, the next compile has the new wiring
    with pytest.raises(ValueError, match="not a node"):
        add_context_management(builder, model_node="llm", store=memory_store, config=WINDOW)
    with pytest.raises(ValueError, match="not a ToolNode"):
        add_context_management(
            builder, model_node="agent", store=memory_store, config=WINDOW, tools_node="agent"
        )
    add_context_management(builder, model_node="agent", store=memory_store, config=WINDOW)
    assert "ctx_budget" in builder.compile().get_graph().nodes
    with pytest.raises(ValueError, match="added once already"):
        add_context_management(builder, model_node="agent", store=memory_store, config=WINDOW)
    with pytest.raises(TypeError, match="StateGraph"):
        add_context_management(object(), model_node="agent", store=memory_store)  # type: ignore[arg-type]


def concat(a: str, b: str) -> str:
    return a + b


class OwnContextState(TypedDict):
    messages: Annotated[list, add_messages]
    context: Annotated[str, concat]


def test_a_user_context_key_of_another_type_is_refused(memory_store: Any) -> None:
    builder = StateGraph(OwnContextState)
    builder.add_node("agent", lambda s: {})
    builder.add_edge(START, "agent")
    with pytest.raises(ValueError, match="'context'"):
        add_context_management(builder, model_node="agent", store=memory_store, config=WINDOW)


def test_create_context_agent_answers_through_its_tools(memory_store: Any) -> None:
    model = MeteringChatModel(replies=[tool_agent_reply])
    graph = create_context_agent(
        model, [get_order_status], store=memory_store, config=WINDOW, prompt="You are terse."
    ).compile()
    config = {"configurable": {"thread_id": "p"}}
    state = graph.invoke({"messages": [("user", "Where is ORD-0042?")]}, config)
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert json.loads(json.dumps(state["context"]))["baseline"]["measured_input_tokens"] > 0
    # the last reply is recorded when the turn ends (ctx_usage), not by the next turn
    assert [e.role for e in memory_store.read_events("p")] == ["human", "ai", "tool", "ai"]


def test_estimate_of_the_first_request_includes_prompt_and_tools(memory_store: Any) -> None:
    meter = Meter()
    model = MeteringChatModel(replies=[meter.reply])
    graph = create_context_agent(
        model, [get_order_status], store=memory_store, config=WINDOW, prompt="Be terse. " * 40
    ).compile()
    config = {"configurable": {"thread_id": "e"}, "callbacks": [meter]}
    state = graph.invoke({"messages": [("user", "hello there")]}, config)
    estimate = state["context"]["request"]["estimate"]
    assert abs(estimate - meter.inputs[0]) <= 3, (estimate, meter.inputs[0])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_summarizer_calls_are_booked_as_summary_in_sync_and_async_runs(mode: str) -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    summarizer = LLMSummarizer(MeteringChatModel(replies=[scripted_summary_reply]))
    model = MeteringChatModel(replies=[tool_agent_reply])
    graph = create_context_agent(
        model, [get_order_status], store=store, config=WINDOW, summarizer=summarizer
    ).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "s"}, "recursion_limit": 50}

    async def run() -> None:
        for turn in range(1, 40):
            inputs = {"messages": [("user", user_turn(turn, 0))]}
            if mode == "sync":
                graph.invoke(inputs, config)
            else:
                await graph.ainvoke(inputs, config)

    asyncio.run(run())
    ledger = UsageLedger(store)
    summaries = ledger.records("s", purpose="summary")
    active = store.get_active("s")
    assert active is not None and active.summarizer_id == "llm:gpt-4o"
    # every summary call of the run is booked once, as a summary (not as an answer)
    assert len(summaries) >= active.generation >= 2
    answers = ledger.records("s", purpose="answer")
    assert all(r.usage.input_total for r in summaries + answers)
    assert {r.call_key for r in summaries}.isdisjoint(r.call_key for r in answers)
    store.close()


def test_lookup_pages_are_not_capped_and_not_summarized(memory_store: Any) -> None:
    config = ContextConfig(
        context_window=4_000,
        output_reserve=500,
        keep_recent_tokens=300,
        summary_max_tokens=300,
        tool_output_cap_tokens=100,  # far below a lookup page
    )
    model = MeteringChatModel(replies=[tool_agent_reply])
    graph = create_context_agent(model, store=memory_store, config=config).compile(
        checkpointer=InMemorySaver()
    )
    run = {"configurable": {"thread_id": "L"}, "recursion_limit": 50}
    graph.invoke({"messages": [("user", f"My locker code is {PLANTED}.")]}, run)
    for n in range(40):  # enough that the early notes leave the view (lookups skip the view)
        graph.invoke({"messages": [("user", f"locker code note {n}: " + "words " * 30)]}, run)
    state = graph.invoke({"messages": [("user", "Recall locker code")]}, run)
    page = state["messages"][-2]
    assert page.name == "history_lookup" and page.artifact == {"ctx_lookup": True}
    assert "ctx_capped" not in page.additional_kwargs
    assert len(json.loads(page.text)["records"]) > 3  # the whole page, well over 100 tokens
    # compact over the lookup page: its quoted records add no key facts of their own
    page_seq = memory_store.get_event("L", page.id).seq
    for n in range(40):
        state = graph.invoke({"messages": [("user", f"after note {n}: " + "words " * 30)]}, run)
        if memory_store.get_active("L").covered_through_seq > page_seq:
            break
    active = memory_store.get_active("L")
    assert active.covered_through_seq > page_seq
    sources = {fact.text: fact.source_seq for fact in active.key_facts}
    assert sources.get(PLANTED) == 1  # from the user's message, not from the lookup's copy
    assert not any(len(text) == 36 and text.count("-") == 4 for text in sources)  # no event uuids


def test_the_wiring_reroutes_joins_mapped_branches_and_branches_by_node_name(
    memory_store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    model = MeteringChatModel(replies=["ok"])

    def replies(state: MessagesState) -> int:
        return sum(m.type == "ai" for m in state["messages"])

    builder = StateGraph(MessagesState)
    builder.add_node("a", lambda state: {})
    builder.add_node("b", lambda state: {})
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("after", lambda state: {})
    builder.add_node("jump", lambda state: Command(goto="agent"), destinations=("agent",))
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], "agent")  # a join into the model node
    builder.add_conditional_edges(  # a mapped branch out of it, back into it
        "agent",
        lambda state: "again" if replies(state) < 2 else "done",
        {"again": "agent", "done": "after"},
    )
    builder.add_conditional_edges(  # a branch that names the model node
        "after", lambda state: "agent" if replies(state) < 3 else END
    )
    with caplog.at_level("WARNING", logger="ctx_langgraph.integration"):
        add_context_management(builder, model_node="agent", store=memory_store, config=WINDOW)
    assert "'jump' can send Command(goto='agent')" in caplog.text
    assert (("a", "b"), "ctx_budget") in builder.waiting_edges
    assert "agent" not in builder.branches and "ctx_usage" in builder.branches
    graph = builder.compile()
    config = {"configurable": {"thread_id": "w"}}
    steps = [
        name for update in graph.stream({"messages": [("user", "hi")]}, config) for name in update
    ]
    ours = [name for name in steps if name in ("ctx_budget", "agent", "ctx_usage", "after")]
    turn = ["ctx_budget", "agent", "ctx_usage"]
    assert ours == [*turn, *turn, "after", *turn, "after"]
    assert [e.role for e in memory_store.read_events("w")] == ["human", "ai", "ai", "ai"]
