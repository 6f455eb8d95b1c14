"""What a plain turn costs the store and the state: two transactions, a request measured by its
new messages, a context that does not grow; and the operations that make it so, on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import ContextConfig, create_context_agent
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.budget.prefix import request_shape
from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.history import HistoryStore, SQLiteHistoryStore
from ctx_langgraph.storage.runner import Database
from ctx_langgraph.storage.statements import Stmt
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.usage import NormalizedUsage, UsageLedger

COUNTER = TiktokenCounter("gpt-4o")


def human(n: int) -> HumanMessage:
    return HumanMessage(f"message number {n}", id=f"m{n}")


# ----------------------------------------------------------------------------- the operations


async def test_append_after_appends_and_reads_the_branch_in_one_write(api):
    first = await api.append_after("t", [human(1), human(2)], after=None)
    assert [(r.seq, r.status) for r in first.results] == [(1, "appended"), (2, "appended")]
    assert not first.diverged and first.head.head_seq == 2
    second = await api.append_after("t", [human(3)], after="m2")
    info = await api.branch_info("t")
    assert second.head == info  # the branch as a read after the write sees it
    # a replay of what is recorded: duplicates, and the head where it was
    again = await api.append_after("t", [human(3)], after="m2")
    assert not again.diverged and [r.status for r in again.results] == ["duplicate"]
    assert again.head == info


async def test_append_after_writes_nothing_when_the_branch_went_on(api):
    await api.append("t", [human(1), human(2), human(3)])
    edits = (await api.branch_info("t")).edit_version
    outcome = await api.append_after("t", [HumanMessage("other timeline", id="x4")], after="m1")
    assert outcome.diverged and outcome.results == [] and outcome.head is None
    assert [e.event_id for e in await api.read_events("t")] == ["m1", "m2", "m3"]
    assert (await api.branch_info("t")).edit_version == edits
    # an id the branch never held is no reason to refuse
    unknown = await api.append_after("t", [human(4)], after="never-recorded")
    assert [r.seq for r in unknown.results] == [4]


async def test_append_after_reports_the_edit_version_its_revision_moved(api):
    await api.append("t", [human(1), human(2)])
    outcome = await api.append_after("t", [HumanMessage("changed", id="m2")], after="m2")
    assert [r.status for r in outcome.results] == ["revised"]
    assert outcome.head.edit_version == (await api.branch_info("t")).edit_version == 1


async def test_append_then_writes_both_or_neither(api, store):
    ledger = UsageLedger(store)
    usage = NormalizedUsage(input_total=120, output=8, provider="openai", response_id="r1")
    booking = ledger.booking("openai:r1", usage, scope="t")
    results, booked = await api.append_then("t", [AIMessage("ok", id="a1")], booking)
    assert results[0].status == "appended" and booked.reason == "new"
    assert ledger.get("openai:r1").usage.input_total == 120

    def failing() -> Any:
        yield Stmt("SELECT 1", (), "one")
        raise HistoryStoreError("the booking failed")

    with pytest.raises(HistoryStoreError, match="the booking failed"):
        await api.append_then("t", [AIMessage("lost", id="a2")], failing())
    assert [e.event_id for e in await api.read_events("t")] == ["a1"]  # rolled back together


# ----------------------------------------------------------------------------- a plain turn


@contextmanager
def counted() -> Iterator[list[str]]:
    """The name of every operation run in a transaction of any history store's database."""
    names: list[str] = []
    sync, asynchronous = Database.run, Database.arun

    def run(self: Database, op: Any, *, write: bool = False) -> Any:
        names.append(op.__name__)
        return sync(self, op, write=write)

    async def arun(self: Database, op: Any, *, write: bool = False) -> Any:
        names.append(op.__name__)
        return await asynchronous(self, op, write=write)

    Database.run, Database.arun = run, arun  # type: ignore[method-assign]
    try:
        yield names
    finally:
        Database.run, Database.arun = sync, asynchronous  # type: ignore[method-assign]


def agent(store: HistoryStore, **config: Any) -> Any:
    model = MeteringChatModel(replies=["noted, " * 20])
    window = ContextConfig(context_window=config.pop("window", 60_000), output_reserve=1_000)
    return create_context_agent(
        model, store=store, config=window, counter=COUNTER, lookup_tool=False, **config
    ).compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_plain_turn_is_two_transactions(backend, mode):
    store = backend.make()
    store.setup()
    graph = agent(store)
    thread = {"configurable": {"thread_id": "plain"}}

    def turn(n: int) -> None:
        inputs = {"messages": [HumanMessage(f"turn {n}: " + "words " * 30, id=f"h{n}")]}
        if mode == "sync":
            graph.invoke(inputs, thread)
        else:
            asyncio.run(graph.ainvoke(inputs, thread))

    for n in range(3):
        turn(n)
    with counted() as names:
        for n in range(3, 8):
            turn(n)
    # per turn: the user's message with the branch read back; the reply with its usage (each a
    # compare-and-swap on the branch's head)
    assert names == ["_after_then", "_after_then"] * 5
    assert [e.event_id for e in store.read_events("plain")][-2:] == ["h7", graph.get_state(
        thread).values["messages"][-1].id]  # fmt: skip


def test_the_context_channel_does_not_grow_with_the_thread():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    graph = agent(store, window=400_000)
    thread = {"configurable": {"thread_id": "long"}}
    serde = InMemorySaver().serde
    sizes = {}
    for n in range(160):
        graph.invoke({"messages": [HumanMessage(f"turn {n} " + "so " * 40, id=f"h{n}")]}, thread)
        if n in (10, 159):
            values = graph.get_state(thread).values
            sizes[n] = (len(values["messages"]), len(serde.dumps_typed(values["context"])[1]))
    assert sizes[159][0] > 10 * sizes[10][0]  # nothing was compacted: the view grew
    assert sizes[159][1] < sizes[10][1] + 64, sizes  # the context did not


# ----------------------------------------------------------------------------- the measure


def test_a_request_measured_by_its_new_messages_is_the_request_measured_whole():
    """Turn after turn, with edits by id, cleared results and compactions between them, the
    report equals a measure of the whole request against the whole previous request."""
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    model = MeteringChatModel(replies=["fine. " * 25])
    config = ContextConfig(
        context_window=6_000, output_reserve=500, keep_recent_tokens=1_200,
        clear_tool_results_keep=2, clear_tool_results_batch=2,
    )  # fmt: skip
    graph = create_context_agent(
        model, store=store, config=config, counter=COUNTER, lookup_tool=False, prompt="Be brief."
    ).compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "m"}}
    moved = []
    for n in range(40):
        call = AIMessage("", id=f"a{n}", tool_calls=[{"name": "get", "args": {}, "id": f"c{n}"}])
        inputs: list[Any] = [HumanMessage(f"step {n} " + "data " * 30, id=f"h{n}")]
        if n % 3 == 0:
            inputs += [call, ToolMessage(f"result {n} " * 40, tool_call_id=f"c{n}", id=f"t{n}")]
        if n == 17:  # an edit by id of a message the thread holds, sent with the input
            inputs.append(HumanMessage("step 16 corrected", id="h16"))
        graph.invoke({"messages": inputs}, thread)
        values = graph.get_state(thread).values
        report, reply = values["context"]["report"]["cache"], values["messages"][-1]
        # the model measures each request whole against the whole request before it
        assert report["prefix_tokens"] == reply.usage_metadata["input_token_details"]["cache_read"]
        moved.append(report["moved_by"])
    assert {"summary", "cleared tool result", "human message"} <= set(moved), moved


def test_a_report_of_an_older_version_is_measured_by_its_digests():
    from ctx_langgraph.budget.node import BudgetNode

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    node = BudgetNode(store, ContextConfig(context_window=8_000, output_reserve=500), counter=COUNTER,
                      compact_node=None)  # fmt: skip
    view = [SystemMessage("Rules.", id="s"), human(1), AIMessage("ok", id="a1"), human(2)]
    old = request_shape(view[:3], COUNTER)
    context = {"cache": {"prefix_tokens": 0, "input_tokens": old.input_tokens,
                         "digests": list(old.digests)}}  # fmt: skip
    update = node.invoke(
        {"messages": view, "context": context}, {"configurable": {"thread_id": "o"}}
    )
    report = update["context"]["report"]["cache"]
    assert report["prefix_tokens"] == old.input_tokens and report["moved_by"] is None
    assert "digests" not in report and report["through"] == "m2" and report["messages"] == 4


# ----------------------------------------------------------------------------- the held answer


def _call(handler: Any, message_id: str, tokens: int, *, tags: list[str] | None = None) -> None:
    import uuid

    from langchain_core.outputs import ChatGeneration, LLMResult

    run_id = uuid.uuid4()
    handler.on_chat_model_start(
        {"kwargs": {"model_name": "gpt-4o"}}, [[human(0)]], run_id=run_id, tags=tags,
        metadata={"thread_id": "t"},
    )  # fmt: skip
    usage = {"input_tokens": tokens, "output_tokens": 5, "total_tokens": tokens + 5}
    reply = AIMessage("ok", id=message_id, usage_metadata=usage)
    handler.on_llm_end(LLMResult(generations=[[ChatGeneration(message=reply)]]), run_id=run_id)


def test_the_answer_is_held_for_ctx_usage_and_nothing_goes_unbooked():
    from ctx_langgraph.history.types import Scope
    from ctx_langgraph.usage.held import HoldingLedgerHandler, answering

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    ledger = UsageLedger(store)
    handler = HoldingLedgerHandler(ledger)
    _call(handler, "outside", 10)  # not the agent's answer: booked when it ends
    with answering():
        _call(handler, "summary", 20, tags=["ctx:summary"])  # another purpose: booked too
        _call(handler, "first", 30)  # held ...
        _call(handler, "second", 40)  # ... and booked when a second answer of the thread comes
    assert sorted(r.usage.input_total for r in ledger.records("t")) == [10, 20, 30]
    held = handler.take(Scope("t"))
    assert held is not None and (held.message_id, held.usage.input_total) == ("second", 40)
    assert handler.take(Scope("t")) is None  # taken once
    with answering():
        _call(handler, "third", 50)
    handler.release(Scope("t"))  # its node failed after the call: booked now
    assert sorted(r.usage.input_total for r in ledger.records("t")) == [10, 20, 30, 50]
    store.close()


def test_a_held_answer_is_booked_once_with_the_reply_through_the_graph():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    ledger = UsageLedger(store)
    graph = agent(store, ledger=ledger)
    thread = {"configurable": {"thread_id": "held"}}
    for n in range(4):
        graph.invoke({"messages": [HumanMessage(f"question {n}", id=f"q{n}")]}, thread)
    answers = [r for r in ledger.records("held") if r.purpose == "answer"]
    assert len(answers) == 4 and all(r.makeup is not None for r in answers)
    # the request's cacheable prefix, as ctx_budget measured it, is booked with the answer
    assert [r.cacheable_prefix for r in answers] == [r.makeup["prefix"] for r in answers]
    assert answers[-1].cacheable_prefix > 0
    [totals] = ledger.totals("held")
    assert totals.calls == 4
    store.close()
