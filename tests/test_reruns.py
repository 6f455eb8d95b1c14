"""Exactly once under retries: a turn run again from an older checkpoint (a LangGraph server
re-running a run whose worker died, a client resuming from its last checkpoint, time travel)
leaves the thread's branch in the store equal to what the run's state holds, and every model
call booked once, however late. Every write that extends a branch is a compare-and-swap on its
head: the same messages again are duplicates, other ones fork the branch at the last event both
timelines share, and the fork is the thread's branch from then on.

Every wiring (``create_context_agent``, ``add_context_management`` on a graph of one's own,
``create_agent`` with the middleware), sync and async, on every history-store backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    add_context_management,
    create_context_agent,
)
from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.history import HistoryStore, Scope
from ctx_langgraph.state import unpack
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply
from ctx_langgraph.usage import NormalizedUsage, UsageLedger
from ctx_langgraph.view.markers import is_synthetic

WINDOW = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=300
)
NOTE = "A note on the migration plan: the schema, the backfill, the read path, the rollback. "


def human(n: int) -> HumanMessage:
    return HumanMessage(f"message number {n}", id=f"m{n}")


# ----------------------------------------------------------------------------- the store's CAS


async def test_the_same_messages_after_the_same_event_are_a_replay(api) -> None:
    await api.append("t", [human(1), human(2), human(3)])
    again = await api.append_after("t", [human(2), human(3)], after="m1")
    assert not again.diverged and again.forked_from is None
    assert [r.status for r in again.results] == ["duplicate", "duplicate"]
    # a run that died after recording part of a turn: the rest goes on after it
    more = await api.append_after("t", [human(2), human(3), human(4)], after="m1")
    assert [(r.seq, r.status) for r in more.results] == [
        (2, "duplicate"),
        (3, "duplicate"),
        (4, "appended"),
    ]
    assert more.head.head_seq == 4 and more.head.scope.branch == "main"


async def test_other_messages_after_the_same_event_fork_at_the_last_shared_one(api) -> None:
    await api.append("t", [human(1), human(2), human(3), human(4)])
    refused = await api.append_after("t", [human(2), HumanMessage("other", id="x3")], after="m1")
    assert refused.diverged and refused.results == [] and refused.head is None
    outcome = await api.append_after(
        "t", [human(2), HumanMessage("other", id="x3")], after="m1", fork=True
    )
    fork = outcome.head.scope
    assert outcome.forked_from == "main" and fork.branch.startswith("main~2-")
    assert [(r.seq, r.status) for r in outcome.results] == [(2, "duplicate"), (3, "appended")]
    assert [e.event_id for e in await api.read_events(fork)] == ["m1", "m2", "x3"]
    assert [e.event_id for e in await api.read_events("t")] == ["m1", "m2", "m3", "m4"]
    # the fork goes on as any branch: its own head is checked from now on
    nxt = await api.append_after(fork, [HumanMessage("next", id="x4")], after="x3", fork=True)
    assert nxt.forked_from is None and nxt.head.scope == fork and nxt.results[0].seq == 4


async def test_a_branch_behind_its_head_forks_with_no_message_to_write(api) -> None:
    await api.append("t", [human(1), human(2), human(3)])
    outcome = await api.append_after("t", [], after="m2", fork=True)
    assert outcome.forked_from == "main" and outcome.head.head_seq == 2
    assert [e.event_id for e in await api.read_events(outcome.head.scope)] == ["m1", "m2"]


async def _commit_through(api, scope: Any, through: int) -> Any:
    snap = await api.snapshot(scope, through)
    return await api.commit_candidate(
        await api.create_candidate(snap, summary_text=f"to {through}")
    )


async def test_a_fork_starts_with_the_summary_its_state_shows_and_no_other(api) -> None:
    await api.append("t", [human(n) for n in range(1, 11)])
    older = await _commit_through(api, "t", 3)
    newer = await _commit_through(api, "t", 6)  # the other timeline's, covering shared events
    latest = await _commit_through(api, "t", 9)
    assert (await api.branch_info("t")).active_checkpoint_id == latest.id
    x = [HumanMessage("other", id="x8")]
    kept = await api.append_after("t", x, after="m7", fork=True, active=older.id)
    assert kept.head.active_checkpoint_id == older.id
    assert kept.head.active_generation == older.generation
    assert (await api.get_active(kept.head.scope)).id == older.id
    # a state that shows no summary: its fork has none, though one covers shared events
    none = await api.append_after("t", x, after="m7", fork=True, active=None)
    assert none.head.active_checkpoint_id is None and await api.get_active(none.head.scope) is None
    # a summary covering events the fork does not share is not the fork's
    beyond = await api.append_after("t", x, after="m7", fork=True, active=latest.id)
    assert beyond.head.active_checkpoint_id is None
    assert newer.id not in {kept.head.active_checkpoint_id, none.head.active_checkpoint_id}


async def test_what_follows_the_append_is_written_only_with_it(api, store) -> None:
    ledger = UsageLedger(store)
    await api.append("t", [human(1), human(2)])
    usage = NormalizedUsage(input_total=50, output=5, provider="openai", response_id="r1")
    refused = await api.append_after(
        "t",
        [AIMessage("late", id="a1")],
        after="m1",
        then=ledger.booking("openai:r1", usage, scope="t"),
    )
    assert refused.diverged and refused.value is None and ledger.get("openai:r1") is None
    written = await api.append_after(
        "t",
        [AIMessage("ok", id="a1")],
        after="m2",
        then=ledger.booking("openai:r1", usage, scope="t"),
    )
    assert written.value.reason == "new" and ledger.get("openai:r1") is not None


# ----------------------------------------------------------------------------- whole turns


def _model(replies: list[Any] | None = None) -> tuple[MeteringChatModel, list[int]]:
    calls: list[int] = []

    def reply(messages: list[BaseMessage]) -> AIMessage:
        calls.append(1)
        asked = [m for m in messages if isinstance(m, HumanMessage)]
        return AIMessage(f"Noted ({len(calls)}): {str(asked[-1].text)[:30] if asked else ''}")

    return MeteringChatModel(replies=replies or [reply]), calls


def _agent(store: HistoryStore, model: MeteringChatModel, **compile: Any) -> Any:
    builder = create_context_agent(model, store=store, config=WINDOW)
    return builder.compile(checkpointer=InMemorySaver(), **compile)


def _middleware(store: HistoryStore, model: MeteringChatModel, **compile: Any) -> Any:
    middleware = ContextManagementMiddleware(store, model=model, config=WINDOW)
    return create_agent(
        model, tools=[], middleware=[middleware], checkpointer=InMemorySaver(), **compile
    )


def _drop_in(store: HistoryStore, model: MeteringChatModel, **compile: Any) -> Any:
    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    add_context_management(builder, model_node="model", store=store, config=WINDOW, model=model)
    return builder.compile(checkpointer=InMemorySaver(), **compile)


WIRINGS: dict[str, Callable[..., Any]] = {
    "agent": _agent,
    "drop_in": _drop_in,
    "middleware": _middleware,
}


async def _invoke(graph: Any, mode: str, inputs: Any, config: Any) -> Any:
    if mode == "sync":
        return await asyncio.to_thread(graph.invoke, inputs, config)
    return await graph.ainvoke(inputs, config)


def _ask(n: int) -> HumanMessage:
    return HumanMessage(f"Turn {n}. " + NOTE * 12, id=f"h{n}")


def _asked(snapshot: Any) -> str | None:
    """The id of the last user message in a checkpoint's state."""
    asked = [m for m in snapshot.values.get("messages", []) if isinstance(m, HumanMessage)]
    return str(asked[-1].id) if asked else None


def _branch_equals_state(store: HistoryStore, graph: Any, config: Any) -> Scope:
    """The branch the state names holds the state's messages, in order, and nothing after
    them; its active summary is the state's; no event is on it twice."""
    values = graph.get_state(config).values
    context = unpack(values["context"])
    scope = Scope(config["configurable"]["thread_id"], branch=context.get("branch") or "main")
    events = store.read_events(scope, include_hidden=True)
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids)), f"an event twice on {scope}: {ids}"
    recorded = [str(m.id) for m in values["messages"] if m.id and not is_synthetic(m)]
    assert recorded, values["messages"]
    start = ids.index(recorded[0])
    assert ids[start:] == recorded, (scope, ids[start:], recorded)
    info = store.branch_info(scope)
    assert info is not None and info.head_seq == events[-1].seq
    assert info.active_checkpoint_id == context.get("active_checkpoint_id"), (info, context)
    shown = [
        m.additional_kwargs["ctx_summary"]["checkpoint_id"]
        for m in values["messages"]
        if isinstance(m.additional_kwargs.get("ctx_summary"), dict)
    ]
    assert shown == ([info.active_checkpoint_id] if info.active_checkpoint_id else []), shown
    # no gap between what the summary covers and the view's first message
    active = store.get_active(scope)
    covered = active.covered_through_seq if active is not None else 0
    first = events[start].seq
    assert [e.seq for e in events if covered < e.seq < first and e.visible] == [], (covered, first)
    return scope


def _answers_booked_once(store: HistoryStore, thread: str, calls: list[int]) -> None:
    records = UsageLedger(store).records(thread, purpose="answer")
    assert len(records) == len(calls), [r.call_key for r in records]
    total = UsageLedger(store).totals(thread)[0]
    assert total.calls == len(UsageLedger(store).records(thread))
    booked = UsageLedger(store).records(thread)
    assert total.counts["input_total"] == sum(r.usage.input_total or 0 for r in booked)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wiring", list(WIRINGS))
async def test_a_completed_turn_run_again_leaves_the_branch_equal_to_the_state(
    store: HistoryStore, wiring: str, mode: str
) -> None:
    model, calls = _model()
    graph = WIRINGS[wiring](store, model)
    config: Any = {"configurable": {"thread_id": "t"}}
    for n in range(1, 13):
        await _invoke(graph, mode, {"messages": [_ask(n)]}, config)
    compacted = graph.get_state(config).values["context"].get("summary", {}).get("generation", 0)
    assert compacted, "the thread should have compacted before the re-run"
    before = next(s for s in graph.get_state_history(config) if _asked(s) == "h9" and not s.next)
    # the server runs turn 10 again: the same input, from the checkpoint before it
    await _invoke(graph, mode, {"messages": [_ask(10)]}, before.config)
    scope = _branch_equals_state(store, graph, config)
    assert scope.branch.startswith("main~")
    answers = [m.text for m in graph.get_state(config).values["messages"] if m.type == "ai"]
    assert answers[-1].startswith(f"Noted ({len(calls)})")
    # the thread goes on from the re-run's timeline
    for n in (11, 12, 13):
        await _invoke(graph, mode, {"messages": [_ask(n)]}, config)
        _branch_equals_state(store, graph, config)
    _answers_booked_once(store, "t", calls)
    # the first timeline is kept, whole, on the branch it was on
    assert [e.event_id for e in store.read_events("t")][-2:] == [
        "h12",
        store.read_events("t")[-1].event_id,
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wiring", list(WIRINGS))
async def test_a_run_again_from_a_state_whose_summary_the_store_pruned_since_converges(
    store: HistoryStore, wiring: str, mode: str
) -> None:
    """The summary the old checkpoint shows is gone from the store (pruned after the turns
    that came after it, or invalidated): the fork starts without one, the view drops it and
    the history before the view is summarized again; no gap, no second timeline."""
    model, calls = _model()
    graph = WIRINGS[wiring](store, model)
    config: Any = {"configurable": {"thread_id": "t"}}
    for n in range(1, 9):
        await _invoke(graph, mode, {"messages": [_ask(n)]}, config)
    before = graph.get_state(config)
    shown = before.values["context"].get("summary", {}).get("checkpoint_id")
    assert shown is not None, "the thread should have compacted"
    for n in range(9, 15):
        await _invoke(graph, mode, {"messages": [_ask(n)]}, config)
    assert store.get_active("t").id != shown
    store.prune_versions("t", keep=0)  # the old checkpoint's summary is gone from the store
    await _invoke(graph, mode, {"messages": [_ask(9)]}, before.config)
    _branch_equals_state(store, graph, config)
    for n in (10, 11):
        await _invoke(graph, mode, {"messages": [_ask(n)]}, config)
        _branch_equals_state(store, graph, config)
    _answers_booked_once(store, "t", calls)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wiring", ["agent", "middleware"])
async def test_a_run_that_died_after_recording_its_input_is_a_replay_not_a_fork(
    store: HistoryStore, wiring: str, mode: str
) -> None:
    model, calls = _model()
    config: Any = {"configurable": {"thread_id": "t"}}
    graph = WIRINGS[wiring](store, model)
    for n in range(1, 4):
        await _invoke(graph, mode, {"messages": [_ask(n)]}, config)
    before = graph.get_state(config)
    # the run of turn 4 recorded its input, then its worker died before any checkpoint
    store.append_after(Scope("t"), [_ask(4)], after=str(before.values["messages"][-1].id))
    await _invoke(graph, mode, {"messages": [_ask(4)]}, before.config)
    scope = _branch_equals_state(store, graph, config)
    assert scope.branch == "main" and len(store.list_branches("t")) == 1
    _answers_booked_once(store, "t", calls)


@tool
def get_order_status(order_id: str) -> str:
    """The status of an order."""
    return f"Order {order_id}: shipped, tracking {order_id}-TRK. " + "scan " * 20


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_run_resumed_after_its_tools_leaves_the_branch_equal_to_the_state(
    store: HistoryStore, mode: str
) -> None:
    model = MeteringChatModel(replies=[tool_agent_reply])
    graph = create_context_agent(model, [get_order_status], store=store, config=WINDOW).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 40}
    for n in range(1, 9):
        ask = HumanMessage(f"Where is ORD-{1000 + n}? " + NOTE * 3, id=f"h{n}")
        await _invoke(graph, mode, {"messages": [ask]}, config)
    after_tools = next(
        s
        for s in graph.get_state_history(config)
        if s.next and isinstance(s.values["messages"][-1], ToolMessage) and _asked(s) == "h5"
    )
    await _invoke(graph, mode, None, {**after_tools.config, "recursion_limit": 40})
    _branch_equals_state(store, graph, config)
    await _invoke(graph, mode, {"messages": [HumanMessage("Where is ORD-1042?", id="hx")]}, config)
    _branch_equals_state(store, graph, config)


# ----------------------------------------------------------------------------- booked once, late


class _Outage:
    """The store's database down while ``down`` is set (every statement fails, as a stopped
    PostgreSQL or a locked file would)."""

    def __init__(self, store: HistoryStore) -> None:
        self.down = False
        run, arun = store.db.run, store.db.arun

        def failing(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise HistoryStoreError("the database is down (test outage)")
            return run(*args, **kwargs)

        async def afailing(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise HistoryStoreError("the database is down (test outage)")
            return await arun(*args, **kwargs)

        store.db.run = failing  # type: ignore[method-assign]
        store.db.arun = afailing  # type: ignore[method-assign]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wiring", list(WIRINGS))
async def test_a_reply_the_store_could_not_take_is_recorded_and_booked_once_later(
    store: HistoryStore, wiring: str, mode: str
) -> None:
    outage = _Outage(store)
    calls: list[int] = []

    def reply(messages: list[BaseMessage]) -> AIMessage:
        calls.append(1)
        outage.down = len(calls) == 2  # the database goes down right after the second answer
        return AIMessage(f"Answer {len(calls)}")

    graph = WIRINGS[wiring](store, MeteringChatModel(replies=[reply]))
    config: Any = {"configurable": {"thread_id": "t"}}
    await _invoke(graph, mode, {"messages": [_ask(1)]}, config)
    await _invoke(graph, mode, {"messages": [_ask(2)]}, config)  # the turn still answers
    state = graph.get_state(config).values
    assert state["messages"][-1].text == "Answer 2"
    assert state["context"]["report"]["last_usage"]["status"] == "deferred"
    outage.down = False
    for n in (3, 4):
        await _invoke(graph, mode, {"messages": [_ask(n)]}, config)
    _branch_equals_state(store, graph, config)
    _answers_booked_once(store, "t", calls)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("then", ["new input", "resumed"])
async def test_an_answer_whose_usage_step_never_ran_is_booked_once(
    store: HistoryStore, mode: str, then: str
) -> None:
    """The process died between the model call and ``ctx_usage`` (the checkpoint after the
    model node was written; what the process held in memory is gone): the next input records
    the answer and books it; a resume runs ``ctx_usage``, which books it (once)."""
    model, calls = _model()
    saver = InMemorySaver()
    dying = create_context_agent(model, store=store, config=WINDOW).compile(
        checkpointer=saver, interrupt_before=["ctx_usage"]
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    await _invoke(dying, mode, {"messages": [_ask(1)]}, config)
    assert dying.get_state(config).next == ("ctx_usage",)
    # a new process: the same checkpoints and store, nothing held in memory
    graph = create_context_agent(model, store=store, config=WINDOW).compile(checkpointer=saver)
    if then == "resumed":
        await _invoke(graph, mode, None, config)
    await _invoke(graph, mode, {"messages": [_ask(2)]}, config)
    _answers_booked_once(store, "t", calls)
    _branch_equals_state(store, graph, config)
