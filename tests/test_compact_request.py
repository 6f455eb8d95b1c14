"""Compaction on request: the model's ``compact_context`` tool, ``compact_thread`` (graph and
store, sync and async, SQLite and PostgreSQL), the ``ctx-langgraph compact`` command and the
state input Studio sends. Each makes exactly one committed summary version carrying the
instructions; a failing summarizer keeps the old one; a malformed request never kills a thread."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    ExtractiveSummarizer,
    SQLiteHistoryStore,
    create_context_agent,
)
from ctx_langgraph.cli import main
from ctx_langgraph.compaction import (
    COMPACT_TOOL_NAME,
    SummaryRequest,
    acompact_thread,
    compact_thread,
    make_compact_tool,
)
from ctx_langgraph.core.compact_request import MAX_INSTRUCTIONS_CHARS, read_request
from ctx_langgraph.errors import CompactRequestError
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.view.summary import SUMMARY_MESSAGE_ID

CONFIG = ContextConfig(context_window=8_000, output_reserve=1_000, keep_recent_tokens=60)
THREAD: Any = {"configurable": {"thread_id": "t"}}
FOCUS = "keep the vault paths"
TURNS = [
    f"Step {n}: the deploy key of service {n} is in vault path /vault/ops/deploy-{n}."
    for n in range(5)
]


class Recording(ExtractiveSummarizer):
    """The extractive summarizer, keeping every request it got."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:  # (asummarize calls it)
        self.requests.append(request)
        return super().summarize(request)


class Failing:
    """A summarizer that always fails."""

    id = "failing"

    def summarize(self, request: SummaryRequest) -> str:
        raise RuntimeError("summarizer is down")

    async def asummarize(self, request: SummaryRequest) -> str:
        raise RuntimeError("summarizer is down")


def _agent(store: HistoryStore, summarizer: Any = None, **kwargs: Any) -> tuple[Any, Any]:
    model = MeteringChatModel(replies=["Noted."])
    builder = create_context_agent(
        model, store=store, config=CONFIG, summarizer=summarizer, **kwargs
    )
    return builder.compile(checkpointer=InMemorySaver()), model


def _talk(graph: Any, turns: list[str] = TURNS, thread: Any = THREAD) -> None:
    for text in turns:
        graph.invoke({"messages": [HumanMessage(text)]}, thread)


def _committed(store: HistoryStore, thread: str = "t") -> list[Any]:
    return [v for v in store.list_versions(thread) if v.status in ("active", "superseded")]


def _request_of(version: Any) -> dict[str, Any]:
    """What the version recorded of the request it was made for."""
    return {k: v for k, v in version.metadata.items() if k in ("requested_by", "instructions")}


def _calls(model: MeteringChatModel) -> int:
    return model._calls


# --------------------------------------------------------------------------- the request itself


@pytest.mark.parametrize(
    "value, problem",
    [
        ({"instructions": 42}, "instructions must be text, got int"),
        ({"instructions": "x" * (MAX_INSTRUCTIONS_CHARS + 1)}, "more than"),
        ({"requested_by": "robot"}, "requested_by must be one of"),
        ({"keep_recent_tokens": -1}, "keep_recent_tokens must be >= 0"),
        ({"keep_recent_tokens": "10"}, "keep_recent_tokens must be an integer"),
        ({"focus": "x"}, "unknown field(s) focus"),
        (3.5, "a compaction request is true, text or a mapping"),
    ],
)
def test_a_malformed_request_is_read_as_its_problem(value: Any, problem: str) -> None:
    request, found = read_request(value)
    assert request is None and found is not None and problem in found


def test_a_malformed_request_in_the_state_is_refused_and_the_thread_goes_on() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    graph, _model = _agent(store)
    _talk(graph)
    out = graph.invoke(
        {"messages": [HumanMessage("And now?")], "context": {"compact": {"instructions": 42}}},
        THREAD,
    )
    report = out["context"]["report"]["compaction"]
    assert report["status"] == "refused" and "instructions must be text" in report["request_error"]
    assert out["context"]["compact"] is None
    assert out["messages"][-1].content == "Noted."  # the turn was answered all the same
    assert _committed(store) == []
    _talk(graph, ["One more."])  # and later turns are fine
    assert graph.get_state(THREAD).values["messages"][-1].content == "Noted."


# --------------------------------------------------------------------------- the model asks


def _asks_for_compaction(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage) and "tidy up" in last.text:
        call = {"name": COMPACT_TOOL_NAME, "args": {"focus": FOCUS}, "id": "call_c1"}
        return AIMessage("", tool_calls=[{**call, "type": "tool_call"}])
    seen = [m for m in messages if m.id == SUMMARY_MESSAGE_ID]
    return AIMessage("Compacted." if seen else "Noted.")


def test_the_model_compacts_with_the_compact_context_tool() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    summarizer = Recording()
    model = MeteringChatModel(replies=[_asks_for_compaction])
    graph = create_context_agent(
        model, store=store, config=CONFIG, summarizer=summarizer, compact_tool=True
    ).compile(checkpointer=InMemorySaver())
    _talk(graph)
    assert _committed(store) == []  # far below the trigger: nothing compacted on its own
    out = graph.invoke({"messages": [HumanMessage("Please tidy up the context.")]}, THREAD)

    [version] = _committed(store)
    assert _request_of(version) == {"requested_by": "model", "instructions": FOCUS}
    assert [r.instructions for r in summarizer.requests] == [FOCUS]
    # compacted at the end of the step: the model's next call saw the summary, then answered
    assert out["messages"][-1].content == "Compacted."
    tool = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert tool.name == COMPACT_TOOL_NAME and FOCUS in tool.text
    assert out["context"]["report"]["compaction"]["requested"]["requested_by"] == "model"
    assert out["context"]["compact"] is None  # served once


def test_the_model_compacts_through_the_middleware_too() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    model = MeteringChatModel(replies=[_asks_for_compaction])
    middleware = ContextManagementMiddleware(
        store, model=model, config=CONFIG, compact_tool=True, lookup_tool=False
    )
    agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    for text in [*TURNS, "Please tidy up the context."]:
        out = agent.invoke({"messages": [HumanMessage(text)]}, THREAD)
    [version] = _committed(store)
    assert _request_of(version) == {"requested_by": "model", "instructions": FOCUS}
    assert out["messages"][-1].content == "Compacted."


def test_the_tool_refuses_a_focus_too_long_without_asking() -> None:
    call = {
        "name": COMPACT_TOOL_NAME,
        "args": {"focus": "x" * (MAX_INSTRUCTIONS_CHARS + 1)},
        "id": "c",
        "type": "tool_call",
    }
    command = make_compact_tool().invoke(call)
    [message] = command.update["messages"]
    assert message.status == "error" and "context" not in command.update


# --------------------------------------------------------------------------- the app asks


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_compact_thread_on_a_graph(store: HistoryStore, mode: str) -> None:
    summarizer = Recording()
    graph, model = _agent(store, summarizer)
    _talk(graph)
    calls = _calls(model)
    if mode == "sync":
        report = compact_thread(graph, THREAD, FOCUS)
    else:
        report = await acompact_thread(graph, THREAD, FOCUS)

    assert report["status"] == "committed"
    assert report["requested"] == {"instructions": FOCUS, "requested_by": "app"}
    [version] = _committed(store)
    assert _request_of(version) == {"requested_by": "app", "instructions": FOCUS}
    assert [r.instructions for r in summarizer.requests] == [FOCUS]
    assert _calls(model) == calls  # nothing to answer: the run ended without a model call
    values = graph.get_state(THREAD).values
    assert values["messages"][0].id == SUMMARY_MESSAGE_ID
    assert values["context"]["compact"] is None
    _talk(graph, ["Next question."])  # the thread goes on from the compacted view
    assert graph.get_state(THREAD).values["messages"][-1].content == "Noted."


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_compact_thread_on_the_store(store: HistoryStore, mode: str) -> None:
    graph, _model = _agent(store)
    _talk(graph)
    summarizer = Recording()
    kwargs: dict[str, Any] = {"summarizer": summarizer, "context_config": CONFIG}
    if mode == "sync":
        report = compact_thread(store, THREAD, FOCUS, requested_by="user", **kwargs)
    else:
        report = await acompact_thread(store, THREAD, FOCUS, requested_by="user", **kwargs)

    assert report["status"] == "committed"
    [version] = _committed(store)
    assert _request_of(version) == {"requested_by": "user", "instructions": FOCUS}
    assert [r.instructions for r in summarizer.requests] == [FOCUS]
    # the graph applies the store's summary at its next turn
    _talk(graph, ["Next question."])
    values = graph.get_state(THREAD).values
    assert values["messages"][0].id == SUMMARY_MESSAGE_ID
    assert values["context"]["summary"]["generation"] == version.generation


async def test_a_failing_summarizer_keeps_the_old_summary(store: HistoryStore) -> None:
    graph, _model = _agent(store)
    _talk(graph)
    first = compact_thread(graph, THREAD, "first")
    assert first["status"] == "committed"
    _talk(graph, [f"Later step {n}: nothing new." for n in range(4)])

    report = compact_thread(store, THREAD, "second", summarizer=Failing(), context_config=CONFIG)
    assert report["status"] == "failed"
    assert any("summarizer is down" in p for p in report["problems"])
    [version] = _committed(store)
    assert store.get_active("t").id == version.id and version.metadata["instructions"] == "first"

    failing, _ = _agent(store, Failing())
    other = {"configurable": {"thread_id": "u"}}
    _talk(failing, thread=other)  # another thread, of a graph whose summarizer fails
    report = compact_thread(failing, other, "third")
    assert report["status"] == "failed" and _committed(store, "u") == []
    state = failing.get_state(other).values
    assert state["context"]["compact"] is None  # served (and failed) once: no retry loop
    assert state["messages"][0].id != SUMMARY_MESSAGE_ID  # nothing removed
    _talk(failing, ["Still there?"], thread=other)
    assert failing.get_state(other).values["messages"][-1].content == "Noted."


def test_compact_thread_refuses_what_it_cannot_serve() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    graph, _ = _agent(store)
    with pytest.raises(CompactRequestError, match="more than"):
        compact_thread(graph, THREAD, "x" * (MAX_INSTRUCTIONS_CHARS + 1))
    plain = StateGraph(MessagesState)
    plain.add_node("model", lambda state: {"messages": [AIMessage("hi")]})
    plain.add_edge(START, "model")
    with pytest.raises(CompactRequestError, match="no context channel"):
        compact_thread(plain.compile(checkpointer=InMemorySaver()), THREAD)
    without = create_context_agent(MeteringChatModel(replies=["x"]), store=store, config=CONFIG)
    with pytest.raises(CompactRequestError, match="no checkpointer"):
        compact_thread(without.compile(), THREAD)
    with pytest.raises(CompactRequestError, match="thread_id"):
        compact_thread(graph, {"configurable": {}})


def test_a_request_with_a_message_compacts_then_answers() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    graph, model = _agent(store)
    _talk(graph)
    calls = _calls(model)
    out = graph.invoke(
        {"messages": [HumanMessage("What next?")], "context": {"compact": FOCUS}}, THREAD
    )
    assert _calls(model) == calls + 1 and out["messages"][-1].content == "Noted."
    [version] = _committed(store)
    assert _request_of(version) == {"requested_by": "user", "instructions": FOCUS}


# --------------------------------------------------------------------------- the command line


def test_the_compact_command(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.sqlite"
    with SQLiteHistoryStore.from_path(path) as store:
        store.setup()
        graph, _ = _agent(store)
        _talk(graph)
    args = ["compact", "--sqlite", str(path), "--thread", "t", "--keep-recent-tokens", "60"]
    assert main([*args, "--instructions", FOCUS]) == 0
    assert f"instructions: {FOCUS!r}" in capsys.readouterr().out
    with SQLiteHistoryStore.from_path(path) as store:
        [version] = _committed(store)
        assert _request_of(version) == {"requested_by": "user", "instructions": FOCUS}

    # again until everything is within the kept tail: then nothing is committed, exit 1
    codes = [main([*args, "--json"]) for _ in range(4)]
    assert codes[-1] == 1 and 0 not in codes[codes.index(1) :]
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["status"] == "nothing_to_cover"
    assert main(["compact", "--sqlite", str(tmp_path / "no.sqlite"), "--thread", "t"]) == 2
    too_long = "x" * (MAX_INSTRUCTIONS_CHARS + 1)
    assert main([*args, "--instructions", too_long]) == 2
    assert "more than" in capsys.readouterr().err


async def test_compact_thread_on_a_create_agent_graph() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    model = MeteringChatModel(replies=["Noted."])
    middleware = ContextManagementMiddleware(store, model=model, config=CONFIG)
    agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    for text in TURNS:
        agent.invoke({"messages": [HumanMessage(text)]}, THREAD)
    calls = _calls(model)
    report = await acompact_thread(agent, THREAD, FOCUS)
    assert report["status"] == "committed" and _calls(model) == calls  # jumped to the end
    [version] = _committed(store)
    assert _request_of(version) == {"requested_by": "app", "instructions": FOCUS}
    out = agent.invoke({"messages": [HumanMessage("Go on.")]}, THREAD)
    assert out["messages"][0].id == SUMMARY_MESSAGE_ID and out["messages"][-1].content == "Noted."


async def test_two_workers_asking_at_once_commit_in_turn(store: HistoryStore) -> None:
    """Two compactions asked for at the same moment (two processes, two tabs of Studio): the
    compare-and-swap lets one commit first; the other covers more or reconciles. No error,
    no lost message, each committed version carries its own request."""
    graph, _ = _agent(store)
    _talk(graph, [*TURNS, *(f"More step {n}: /vault/more-{n}." for n in range(6))])
    kwargs: dict[str, Any] = {"context_config": CONFIG}
    first, second = await asyncio.gather(
        acompact_thread(store, THREAD, "first worker", **kwargs),
        acompact_thread(store, THREAD, "second worker", **kwargs),
    )
    assert {first["status"], second["status"]} <= {"committed", "reconciled", "nothing_to_cover"}
    assert "committed" in (first["status"], second["status"])
    versions = sorted(_committed(store), key=lambda v: v.generation)
    assert [v.generation for v in versions] == list(range(1, len(versions) + 1))
    assert all(v.metadata["instructions"] in ("first worker", "second worker") for v in versions)
    covered = [v.covered_through_seq for v in versions]
    assert covered == sorted(covered)
    # the thread goes on, and every recorded message is still in the store
    _talk(graph, ["Next question."])
    assert len(store.read_events("t")) == 2 * (len(TURNS) + 6 + 1)
