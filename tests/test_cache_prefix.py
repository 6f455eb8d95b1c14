"""The cacheable prefix: the pure measure, the ledger's per-call figure (sync and async, every
backend, across a restart), and the fake model's simulated cache reads built on it."""

from __future__ import annotations

import itertools

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.budget.prefix import cacheable_prefix, request_shape, shared_parts
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.usage.callbacks import AsyncLedgerCallbackHandler, LedgerCallbackHandler
from tests.conftest import Backend

COUNTER = TiktokenCounter("gpt-4o")
SYSTEM = SystemMessage("You are a careful assistant. " * 20)


def turns(n: int) -> list[list]:
    """The requests of ``n`` turns of a growing conversation: each the one before plus a reply
    and a new question."""
    messages: list = [SYSTEM, HumanMessage("question 0")]
    requests = [list(messages)]
    for i in range(1, n):
        messages += [AIMessage(f"answer {i - 1}"), HumanMessage(f"question {i}")]
        requests.append(list(messages))
    return requests


def test_prefix_counts_the_shared_leading_parts_only():
    first, second = turns(2)
    a, b = request_shape(first, COUNTER), request_shape(second, COUNTER)
    assert cacheable_prefix(a.digests, b) == a.input_tokens
    # an edit early in the request makes everything after it uncacheable
    edited = [SYSTEM, HumanMessage("question zero"), *second[2:]]
    c = request_shape(edited, COUNTER)
    assert cacheable_prefix(b.digests, c) == b.tokens[0]
    # the tool schemas come first: a changed tool set moves the whole prefix
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    with_tools = request_shape(second, COUNTER, tools=tools)
    assert shared_parts(b.digests, with_tools.digests) == 0
    again = request_shape([*second, AIMessage("x")], COUNTER, tools=tools)
    assert cacheable_prefix(with_tools.digests, again) == with_tools.input_tokens


def test_the_langchain_id_is_not_part_of_the_digest():
    a = request_shape([HumanMessage("hi", id="one")], COUNTER)
    b = request_shape([HumanMessage("hi", id="two")], COUNTER)
    assert a.digests == b.digests


def test_metering_model_reads_the_cacheable_prefix():
    model = MeteringChatModel(replies=["ok"])
    requests = turns(3)
    reads = []
    for request in requests:
        reply = model.invoke(request)
        reads.append(reply.usage_metadata["input_token_details"]["cache_read"])
    shapes = [request_shape(r, COUNTER) for r in requests]
    assert reads == [
        0,
        cacheable_prefix(shapes[0].digests, shapes[1]),
        cacheable_prefix(shapes[1].digests, shapes[2]),
    ]
    assert reads[2] == shapes[1].input_tokens > 0


async def _run_calls(store, mode: str, thread: str, requests, model) -> None:
    ledger = UsageLedger(store)
    config = {"configurable": {"thread_id": thread}}
    if mode == "sync":
        handler = LedgerCallbackHandler(ledger, counter=COUNTER)
        for request in requests:
            model.invoke(
                request, {**config, "metadata": {"thread_id": thread}, "callbacks": [handler]}
            )
    else:
        ahandler = AsyncLedgerCallbackHandler(ledger, counter=COUNTER)
        for request in requests:
            await model.ainvoke(
                request, {**config, "metadata": {"thread_id": thread}, "callbacks": [ahandler]}
            )


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_ledger_books_the_cacheable_prefix_across_a_restart(backend: Backend, mode: str):
    requests = turns(4)
    model = MeteringChatModel(replies=["ok"])
    store = backend.make()
    store.setup()
    await _run_calls(store, mode, "t1", requests[:2], model)
    # a restart: a new store object (the same database unless it is :memory:) and new handlers
    store = backend.make()
    store.setup()
    await _run_calls(store, mode, "t1", requests[2:], model)
    ledger = UsageLedger(store)
    records = ledger.records("t1") if mode == "sync" else await ledger.arecords("t1")
    shapes = [request_shape(r, COUNTER) for r in requests]
    expected = [0] + [
        cacheable_prefix(before.digests, after) for before, after in itertools.pairwise(shapes)
    ]
    assert [r.cacheable_prefix for r in records] == expected
    # the fake's cache reads are the same measure, booked next to it
    assert [r.usage.cache_read for r in records] == expected
    assert all(p > 0 for p in expected[1:])
    [totals] = ledger.totals("t1")
    assert totals.cacheable_prefix == sum(expected)
    # another thread starts from nothing
    await _run_calls(store, mode, "t2", requests[3:], model)
    assert [r.cacheable_prefix for r in ledger.records("t2")] == [0]


def test_a_duplicate_booking_keeps_the_prefix_and_the_totals(tmp_path):
    from ctx_langgraph.history import SQLiteHistoryStore
    from ctx_langgraph.usage import NormalizedUsage

    store = SQLiteHistoryStore.from_path(tmp_path / "h.sqlite")
    store.setup()
    ledger = UsageLedger(store)
    usage = NormalizedUsage(input_total=100, input_uncached=40, cache_read=60, output=5)
    ledger.record("c1", usage, scope="t", version=1, cacheable_prefix=64)
    ledger.record("c1", usage, scope="t", version=1, cacheable_prefix=64)
    ledger.record("c1", usage, scope="t", version=2)  # a later event that did not measure
    assert ledger.get("c1").cacheable_prefix == 64
    assert ledger.totals("t")[0].cacheable_prefix == 64
    with pytest.raises(ValueError, match="cacheable_prefix"):
        ledger.record("c2", usage, scope="t", cacheable_prefix=-1)
    store.close()


# --------------------------------------------------------------------------- context["cache"]


def _agent(tools=(), prompt=None, window=3_000):
    from langgraph.checkpoint.memory import InMemorySaver

    from ctx_langgraph import ContextConfig, create_context_agent
    from ctx_langgraph.history import SQLiteHistoryStore

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    model = MeteringChatModel(replies=[lambda messages: AIMessage("noted: " + "ok " * 40)])
    config = ContextConfig(context_window=window, output_reserve=300, keep_recent_tokens=600)
    graph = create_context_agent(
        model,
        list(tools),
        store=store,
        config=config,
        prompt=prompt,
        lookup_tool=False,
        counter=COUNTER,
    ).compile(checkpointer=InMemorySaver())
    return graph, model


def test_context_cache_reports_the_prefix_the_model_reads():
    graph, _model = _agent()
    thread = {"configurable": {"thread_id": "c1"}}
    reports, reads, generations_seen = [], [], []
    for i in range(30):
        graph.invoke(
            {"messages": [HumanMessage(f"turn {i}: " + "words " * 60, id=f"h{i}")]}, thread
        )
        state = graph.get_state(thread).values
        reports.append(state["context"]["report"]["cache"])
        generations_seen.append(state["context"].get("summary", {}).get("generation", 0))
        reply = state["messages"][-1]
        reads.append(reply.usage_metadata["input_token_details"]["cache_read"])
    assert reports[0]["prefix_tokens"] == 0 and reports[0]["moved_by"] is None
    # the same measure as the model's simulated cache: the same figure, call by call
    assert [r["prefix_tokens"] for r in reports] == reads
    for report in reports:
        assert report["ratio"] == round(report["prefix_tokens"] / report["input_tokens"], 4)
        assert all(len(d) == 12 for d in report["head"]) and report["through"]
    # between compactions nothing moves; a compaction moves it at the summary
    moved = [r["moved_by"] for r in reports[1:]]
    assert set(moved) <= {None, "summary"}
    assert "summary" in moved and moved.count(None) > moved.count("summary")
    # the summary moves the prefix when a compaction commits, never in between
    generations = [g for g in generations_seen]
    assert moved.count("summary") == len(set(generations)) - 1
    steady = [r["ratio"] for r, m in zip(reports[1:], moved, strict=True) if m is None]
    assert max(steady) > 0.8


def test_context_cache_names_a_changed_tool_set_or_prompt():
    from ctx_langgraph.budget.prefix_step import moved_by
    from ctx_langgraph.view.markers import MEMORY_FLAG

    view = [HumanMessage("a"), AIMessage("b")]
    before = request_shape(view, COUNTER, system="tools v1")
    after = request_shape(view, COUNTER, system="tools v2")
    assert moved_by(before.digests, after, view, True) == "tools or system prompt"
    memory = SystemMessage("likes tea", additional_kwargs={MEMORY_FLAG: True})
    changed = [SystemMessage("likes coffee", additional_kwargs={MEMORY_FLAG: True}), *view]
    old = request_shape([memory, *view], COUNTER)
    assert moved_by(old.digests, request_shape(changed, COUNTER), changed, False) == "memory"
    assert moved_by(old.digests, request_shape([memory], COUNTER), [memory], False) == (
        "removed messages"
    )


def test_tool_results_are_cleared_in_batches_so_the_prefix_moves_rarely():
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph

    from ctx_langgraph import ContextConfig
    from ctx_langgraph.budget import make_budget_node
    from ctx_langgraph.history import SQLiteHistoryStore
    from ctx_langgraph.state import ContextState

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    config = ContextConfig(
        context_window=50_000,
        output_reserve=1_000,
        clear_tool_results_keep=2,
        clear_tool_results_batch=3,
    )
    node = make_budget_node(store, config=config, counter=COUNTER, compact_node=None)
    builder = StateGraph(ContextState)
    builder.add_node("ctx_budget", node)
    builder.add_edge(START, "ctx_budget")
    graph = builder.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "tools"}}
    moved = []
    for n in range(12):
        call = AIMessage(
            "", id=f"a{n}", tool_calls=[{"name": "get", "args": {"n": n}, "id": f"c{n}"}]
        )
        result = ToolMessage(f"result {n} " * 80, tool_call_id=f"c{n}", id=f"t{n}")
        graph.invoke({"messages": [HumanMessage(f"go {n}", id=f"h{n}"), call, result]}, thread)
        moved.append(graph.get_state(thread).values["context"]["report"]["cache"]["moved_by"])
    # results 0..2 are due at turn 4 (5 results, keep 2), then three more every three turns
    assert moved == [None] * 4 + ["cleared tool result", None, None] * 2 + [
        "cleared tool result",
        None,
    ]


def test_the_memory_message_holds_its_selection_between_compactions():
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from ctx_langgraph import ContextConfig, create_context_agent
    from ctx_langgraph.history import SQLiteHistoryStore
    from ctx_langgraph.memory import LongTermMemory, MemoryCandidate, MemoryScopes
    from ctx_langgraph.view.markers import is_memory_message

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    memory = LongTermMemory(InMemoryStore(), max_records=2)
    scopes = MemoryScopes("default", "m1")
    topics = ["gardening", "peanuts", "sailing", "taxes"]
    memory.remember(scopes, [MemoryCandidate(f"Likes {t}.", key=t) for t in topics])
    model = MeteringChatModel(replies=["ok " * 30])
    config = ContextConfig(context_window=3_000, output_reserve=300, keep_recent_tokens=500)
    graph = create_context_agent(
        model, store=store, config=config, memory=memory, lookup_tool=False, counter=COUNTER
    ).compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "m1"}}
    seen = []
    for n in range(24):
        topic = topics[n % len(topics)]
        graph.invoke(
            {"messages": [HumanMessage(f"about {topic}: " + "so " * 80, id=f"h{n}")]}, thread
        )
        values = graph.get_state(thread).values
        text = next(m.text for m in values["messages"] if is_memory_message(m))
        seen.append((values["context"].get("summary", {}).get("generation", 0), text))
    # one memory message per summary generation: a new question does not rewrite the prefix
    by_generation: dict[int, set[str]] = {}
    for generation, text in seen:
        by_generation.setdefault(generation, set()).add(text)
    assert all(len(texts) == 1 for texts in by_generation.values())
    assert len(by_generation) > 1  # compactions happened, and each could re-rank


def test_a_thread_export_carries_the_prefix_and_an_older_export_still_imports():
    import copy

    from ctx_langgraph.history import SQLiteHistoryStore
    from ctx_langgraph.threads import delete_thread, export_thread, import_thread
    from ctx_langgraph.usage import NormalizedUsage

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    store.append("x", [HumanMessage("hi", id="h1")])
    ledger = UsageLedger(store)
    usage = NormalizedUsage(input_total=100, input_uncached=40, cache_read=60, output=5)
    ledger.record("c1", usage, scope="x", cacheable_prefix=64)
    ledger.note_request("x", ["a", "b"])
    document = export_thread(store, "x")
    assert document["ledger"]["calls"][0]["cacheable_prefix"] == 64
    assert document["ledger"]["totals"][0]["cacheable_prefix"] == 64
    older = copy.deepcopy(document)
    for row in (*older["ledger"]["calls"], *older["ledger"]["totals"]):
        del row["cacheable_prefix"]
    delete_thread(store, "x", ledger=True)
    assert ledger.note_request("x", ["a"]) is None  # deleting a thread forgets its last request
    delete_thread(store, "x", ledger=True)
    import_thread(store, document)
    assert ledger.get("c1").cacheable_prefix == 64
    delete_thread(store, "x", ledger=True)
    import_thread(store, older)
    assert ledger.get("c1").cacheable_prefix is None
    assert ledger.totals("x")[0].cacheable_prefix == 0
    store.close()
