"""Tool results that arrive together share the window: a step whose parallel results are each
under the per-result cap but together over the usable window is shortened in the budget step
(the originals stay in the store, reachable by the lookup), turn after turn, never raising; and
the budget error, when nothing can make a request fit, says what to do whether compaction is
wired or not."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    HistoryStore,
    add_context_management,
    create_context_agent,
)
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.budget.node import make_budget_node
from ctx_langgraph.errors import ContextBudgetExceeded
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.testing import MeteringChatModel

COUNTER = TiktokenCounter("gpt-4o")
PARALLEL = 5


def source(path: str, tokens: int) -> str:
    """Code-like text (about 2 characters a token: denser than prose), unique per path."""
    rng = random.Random(path)
    lines = [f"# {path}"]
    for n in range(tokens // 20):
        lines.append(
            f"    x_{n} = compute(a[{n}], b={rng.randrange(1000)}) + 0x{rng.getrandbits(16):04x}"
        )
    return "\n".join(lines)


class Recorder(MeteringChatModel):
    """A metering model (its usage is the exact count of the request) that keeps every request's
    measured input."""

    measured: list[int]

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        result = super()._generate(messages, *args, **kwargs)
        self.measured.append(result.generations[0].message.usage_metadata["input_tokens"])
        return result


def reads_five_files(messages: list[BaseMessage]) -> AIMessage:
    """After a user message: five ``read_file`` calls at once; after their results: an answer."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("I read the five files; the compute calls all take a and b.")
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    calls = [
        {"name": "read_file", "args": {"path": f"src/t{turn}_f{n}.py"}, "id": f"call_{turn}_{n}"}
        for n in range(PARALLEL)
    ]
    return AIMessage("", tool_calls=calls)


def read_file_tool(tokens: int) -> Any:
    @tool
    def read_file(path: str) -> str:
        """Read a source file."""
        return source(path, tokens)

    return read_file


def user_graph(model: Any, read_file: Any, store: HistoryStore, config: ContextConfig) -> Any:
    """A user's own StateGraph with a ToolNode, wired by add_context_management."""
    bound = model.bind_tools([read_file])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableCallable(agent, aagent, name="agent"))
    builder.add_node("tools", ToolNode([read_file]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_context_management(builder, model_node="agent", store=store, config=config, model=model)
    return builder.compile(checkpointer=InMemorySaver())


def build(
    flavor: str, model: Any, read_file: Any, store: HistoryStore, config: ContextConfig
) -> Any:
    if flavor == "graph":
        return user_graph(model, read_file, store, config)
    if flavor == "agent":
        builder = create_context_agent(model, [read_file], store=store, config=config)
        return builder.compile(checkpointer=InMemorySaver())
    middleware = ContextManagementMiddleware(store, model=model, tools=[read_file], config=config)
    return create_agent(
        model, tools=[read_file], middleware=[middleware], checkpointer=InMemorySaver()
    )


async def call(graph: Any, mode: str, value: Any, config: Any) -> Any:
    if mode == "sync":
        return await asyncio.to_thread(graph.invoke, value, config)
    return await graph.ainvoke(value, config)


def read_whole(store: HistoryStore, thread: str, handle: str) -> str:
    """A record's text paged through by its handle with the history lookup tool."""
    lookup = make_history_lookup_tool(store)
    run = {"configurable": {"thread_id": thread}}
    text, args = "", {"handle": handle}
    for _ in range(500):
        page = json.loads(lookup.invoke(args, config=run))
        [record] = page["records"]
        text += record["text"]
        if not page["next_cursor"]:
            return text
        args = {"cursor": page["next_cursor"]}
    raise AssertionError("the record did not end")


SIZES = {
    # window 6,000 (usable 4,500): five results of 2,000 tokens, each capped to a quarter
    "6k": ({"context_window": 6_000}, 2_000, 4),
    # window 128k, five results of 40k tokens; per-result cap off, or above what five can share
    "128k-uncapped": ({"context_window": 128_000, "tool_output_cap_tokens": None}, 40_000, 2),
    "128k-cap-30k": ({"context_window": 128_000, "tool_output_cap_tokens": 30_000}, 40_000, 2),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("flavor", ["graph", "agent", "middleware"])
@pytest.mark.parametrize("size", ["6k"])
async def test_parallel_results_that_overflow_together_are_shortened_and_every_turn_completes(
    store: HistoryStore, flavor: str, mode: str, size: str
) -> None:
    await five_results_every_turn(store, flavor, mode, size)


# At 128k the counting dominates: one store of each kind (a SQLite file reads and writes as the
# in-memory one does), every wiring, both modes.
@pytest.mark.parametrize(
    "backend",
    ["sqlite_memory", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("flavor", ["graph", "agent", "middleware"])
@pytest.mark.parametrize("size", ["128k-uncapped", "128k-cap-30k"])
async def test_five_results_of_40k_tokens_fit_a_128k_window_every_turn(
    store: HistoryStore, flavor: str, mode: str, size: str
) -> None:
    await five_results_every_turn(store, flavor, mode, size)


async def five_results_every_turn(store: HistoryStore, flavor: str, mode: str, size: str) -> None:
    settings, tokens, turns = SIZES[size]
    config = ContextConfig(**settings)
    usable = config.resolve().usable
    model = Recorder(replies=[reads_five_files], measured=[])
    graph = build(flavor, model, read_file_tool(tokens), store, config)
    thread = f"parallel-{flavor}-{mode}-{size}"
    run = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
    for turn in range(turns):
        out = await call(graph, mode, {"messages": [("user", f"read five files ({turn})")]}, run)
        assert out["messages"][-1].content.startswith("I read the five files")
    # every request the model received fitted the usable window (measured, not estimated)
    assert len(model.measured) == 2 * turns
    assert max(model.measured) <= usable, (model.measured, usable)
    # the originals are in the store, whole, and the lookup reads them back by handle
    results = [e for e in store.read_events(thread) if e.role == "tool"]
    assert len(results) == PARALLEL * turns
    for event in results:
        path = event.message.content.splitlines()[0][2:]
        assert event.message.content == source(path, tokens)
    last = results[-1]
    assert read_whole(store, thread, f"history:{last.event_id}") == last.message.content


# --------------------------------------------------------------------------- the budget step alone


def budget_node(store: HistoryStore, **settings: Any) -> Any:
    config = ContextConfig(**{"context_window": 6_000, **settings})
    return make_budget_node(store, config=config, counter=COUNTER, compact_node="ctx_compact")


def step_in_progress(tokens: int, count: int = PARALLEL) -> list[BaseMessage]:
    calls = [{"name": "read_file", "args": {"path": f"f{n}"}, "id": f"c{n}"} for n in range(count)]
    return [
        HumanMessage("read the files", id="h1"),
        AIMessage("", tool_calls=calls, id="a1"),
        *[
            ToolMessage(source(f"f{n}", tokens), tool_call_id=f"c{n}", name="read_file", id=f"t{n}")
            for n in range(count)
        ],
    ]


def test_a_preview_stays_within_its_cap_on_dense_text(store: HistoryStore) -> None:
    node = budget_node(store, tool_output_cap_tokens=300)
    messages = step_in_progress(3_000, count=1)
    update = node.invoke({"messages": messages}, {"configurable": {"thread_id": "t"}})
    [preview] = [m for m in update["messages"] if m.id == "t0"]
    assert preview.additional_kwargs["ctx_capped"]["handle"] == "history:t0"
    assert COUNTER.count_message(preview) <= 300


def test_the_results_of_one_step_share_the_room_left_by_what_stays(store: HistoryStore) -> None:
    node = budget_node(store)
    messages = step_in_progress(2_000)
    update = node.invoke({"messages": messages}, {"configurable": {"thread_id": "t"}})
    previews = {m.id: m for m in update["messages"] if isinstance(m, ToolMessage)}
    assert sorted(previews) == [f"t{n}" for n in range(PARALLEL)]
    budget = update["context"]["report"]["budget"]
    # the request as it goes to the model, once the earlier conversation is compacted, fits
    assert budget["total"] <= budget["usable"], budget
    # shared evenly: no result was shortened more than the others
    sizes = [COUNTER.count_message(m) for m in previews.values()]
    assert max(sizes) - min(sizes) < 60, sizes
    for n in range(PARALLEL):
        assert store.get_event("t", f"t{n}").message.content == source(f"f{n}", 2_000)
    assert "tool results of one step shortened" not in budget["epoch_bumped_for"]


def test_small_results_beside_a_large_one_stay_whole(store: HistoryStore) -> None:
    node = budget_node(store, tool_output_cap_tokens=None)
    messages = step_in_progress(200, count=4)
    messages.append(ToolMessage(source("big", 9_000), tool_call_id="c9", name="read_file", id="t9"))
    messages[1] = AIMessage(
        "",
        tool_calls=[*messages[1].tool_calls, {"name": "read_file", "args": {}, "id": "c9"}],
        id="a1",
    )
    update = node.invoke({"messages": messages}, {"configurable": {"thread_id": "t"}})
    changed = {m.id for m in update["messages"] if isinstance(m, ToolMessage)}
    assert changed == {"t9"}  # the four small ones fit beside the shortened large one
    assert (
        update["context"]["report"]["budget"]["total"]
        <= update["context"]["report"]["budget"]["usable"]
    )


# --------------------------------------------------------------------------- the error's advice


def test_the_budget_error_keeps_its_advice_when_compaction_is_wired(store: HistoryStore) -> None:
    # a newest message larger than the window: no compaction can help
    node = budget_node(store)
    messages = [HumanMessage("hi", id="h0"), AIMessage("hello", id="a0")]
    huge = HumanMessage("word " * 8_000, id="h1")
    with pytest.raises(ContextBudgetExceeded) as raised:
        node.invoke({"messages": [*messages, huge]}, {"configurable": {"thread_id": "t"}})
    error = raised.value
    big = COUNTER.count_message(huge)
    assert str(error) == (
        f"the next request needs about {error.estimate:,} input tokens but only 4,500 fit "
        f"(window 6,000 - output reserve 1,500); the largest message that must stay verbatim has "
        f"{big:,} tokens. No cut can make this request fit: even with all history compacted, the "
        "system prompt, the tool schemas and the newest message or step (a tool call with its "
        "results) are over the usable window. Shorten the newest message or the system prompt, "
        "lower tool_output_cap_tokens, or use a model with a larger window."
    )


def test_the_budget_error_after_a_failed_compaction_says_what_happened_and_what_to_do(
    store: HistoryStore,
) -> None:
    node = budget_node(store)
    messages = [HumanMessage(f"turn {n} " + "word " * 400, id=f"h{n}") for n in range(12)]
    context = {
        "compaction": {
            "epoch": 0,
            "at_message_id": "h11",
            "status": "failed",
            "problems": ["summarizer timed out after 120 s"],
        }
    }
    with pytest.raises(ContextBudgetExceeded) as raised:
        node.invoke(
            {"messages": messages, "context": context}, {"configurable": {"thread_id": "t"}}
        )
    error = raised.value
    assert str(error) == (
        f"the next request needs about {error.estimate:,} input tokens but only 4,500 fit "
        f"(window 6,000 - output reserve 1,500); the largest message that must stay verbatim has "
        f"{error.largest:,} tokens. No cut can make this request fit (last compaction: failed, "
        "summarizer timed out after 120 s): lower keep_recent_tokens or tool_output_cap_tokens, "
        "or use a model with a larger window."
    )


def test_the_budget_error_without_compaction_says_so_and_what_to_do() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    config = ContextConfig(context_window=6_000)
    node = make_budget_node(store, config=config, counter=COUNTER, compact_node=None)
    messages = [HumanMessage(f"turn {n} " + "word " * 400, id=f"h{n}") for n in range(12)]
    with pytest.raises(ContextBudgetExceeded) as raised:
        node.invoke({"messages": messages}, {"configurable": {"thread_id": "t"}})
    error = raised.value
    assert str(error) == (
        f"the next request needs about {error.estimate:,} input tokens but only 4,500 fit "
        f"(window 6,000 - output reserve 1,500); the largest message that must stay verbatim has "
        f"{error.largest:,} tokens. Compaction is not wired (compact_node=None) (last compaction: "
        "not tried, no problem noted): lower keep_recent_tokens or tool_output_cap_tokens, "
        "or use a model with a larger window."
    )
    store.close()


def test_results_that_cannot_shrink_further_are_left_as_they_are_on_later_passes(
    store: HistoryStore,
) -> None:
    """Twenty-five results share a room smaller than their shortest previews: they are
    shortened once, and later passes leave them (no rewrite, no new epoch, no loop)."""
    node = budget_node(store)
    state: dict[str, Any] = {"messages": step_in_progress(2_000, count=25)}
    run = {"configurable": {"thread_id": "t"}}
    epochs = []
    for _ in range(3):
        update = node.invoke(state, run)
        replaced = {m.id: m for m in update.get("messages") or []}
        state = {
            "messages": [replaced.get(m.id, m) for m in state["messages"]],
            "context": {**state.get("context", {}), **update["context"]},
        }
        epochs.append(update["context"].get("view", {}).get("epoch", 0))
        if len(epochs) > 1:
            assert "messages" not in update, sorted(replaced)
    assert epochs[1] == epochs[2], epochs
    budget = state["context"]["report"]["budget"]
    assert budget["total"] <= budget["usable"], budget
