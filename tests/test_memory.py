"""Long-term memory: the store operations on every LangGraph store (sync and async), the
extractors, and the memory in a running agent (correction, expiry, budget, canary, tenants)."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from ctx_langgraph import ContextConfig, create_context_agent
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.errors import MemoryExtractionError, MemoryStoreError
from ctx_langgraph.history import HistoryStore, Scope
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.memory import (
    ChatModelExtractor,
    LangmemExtractor,
    LongTermMemory,
    MemoryCandidate,
    MemoryRecord,
    MemoryScopes,
    RuleExtractor,
    is_memory_message,
)
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.threads import aexport_thread, aimport_thread, export_thread

T0 = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.timezone.utc)
ME = MemoryScopes("default", "t1", user_id="u-7")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(seconds=1)
        return self.now


# ----------------------------------------------------------------------------- store backends


class Mem:
    """Calls ``memory.NAME`` (sync) or ``await memory.aNAME`` (async) behind one awaitable."""

    def __init__(self, memory: LongTermMemory, mode: str) -> None:
        self.memory = memory
        self.mode = mode

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.memory, name if self.mode == "sync" else "a" + name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            return await result if self.mode == "async" else result

        return call


@pytest.fixture(
    params=[
        "inmemory-sync",
        "inmemory-async",
        "sqlite-sync",
        "sqlite-async",
        pytest.param("postgres-sync", marks=pytest.mark.postgres),
        pytest.param("postgres-async", marks=pytest.mark.postgres),
    ]
)
async def lts(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BaseStore]:
    """A LangGraph store of each kind, in the mode its id names (``request.param``)."""
    kind, mode = request.param.split("-")
    if kind == "inmemory":
        yield InMemoryStore()
    elif kind == "sqlite" and mode == "sync":
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(tmp_path / "m.sqlite", check_same_thread=False, isolation_level=None)
        store = SqliteStore(conn)
        store.setup()
        yield store
        conn.close()
    elif kind == "sqlite":
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        async with AsyncSqliteStore.from_conn_string(str(tmp_path / "m.sqlite")) as astore:
            await astore.setup()
            yield astore
    else:
        from langgraph.store.postgres import PostgresStore

        dsn = request.getfixturevalue("pg_dsn")
        with PostgresStore.from_conn_string(dsn) as pstore:
            pstore.setup()
            yield pstore


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(request: pytest.FixtureRequest, lts: BaseStore, clock: Clock) -> Mem:
    mode = request.node.callspec.params["lts"].split("-")[1]
    return Mem(LongTermMemory(lts, clock=clock), mode)


def cand(content: str, key: str | None = None, **kwargs: Any) -> MemoryCandidate:
    return MemoryCandidate(content, key=key, **kwargs)


async def test_a_new_value_for_a_key_supersedes_the_old_record(mem: Mem):
    [first] = await mem.remember(ME, [cand("Order id is A-1172.", "order id")], seqs={})
    assert first.action == "added"
    [again] = await mem.remember(
        ME, [cand("Order id is A-1172.", "order id", source_event_ids=("m3",))], seqs={"m3": 3}
    )
    assert again.action == "refreshed" and again.record.id == first.record.id
    assert again.record.source_seqs == (3,)
    [fix] = await mem.remember(ME, [cand("Order id is B-2291.", "order id")])
    assert fix.action == "superseded" and fix.superseded == (first.record.id,)
    assert fix.record.replaces == first.record.id
    records = {r.id: r for r in await mem.records(ME)}
    assert records[first.record.id].status == "superseded"
    assert records[first.record.id].superseded_by == fix.record.id
    assert [r.content for r in await mem.recall(ME, "order")] == ["Order id is B-2291."]


async def test_a_correction_naming_the_old_value_supersedes_a_record_without_a_key(mem: Mem):
    await mem.remember(ME, [cand("Ship to 12 Rua Augusta.")])
    await mem.remember(ME, [cand("Ship to 40 Rua Nova.", replaces_value="12 Rua Augusta")])
    assert [r.content for r in await mem.recall(ME)] == ["Ship to 40 Rua Nova."]


async def test_expired_records_are_never_recalled(mem: Mem, clock: Clock):
    soon = T0 + dt.timedelta(hours=1)
    await mem.remember(ME, [cand("Temporary code is 4411.", "temp code", expires_at=soon)])
    await mem.remember(ME, [cand("Prefers metric units.")])
    assert len(await mem.recall(ME)) == 2
    clock.now = soon + dt.timedelta(seconds=5)
    assert [r.content for r in await mem.recall(ME)] == ["Prefers metric units."]


async def test_scopes_follow_the_user_across_threads_and_stay_inside_their_tenant(mem: Mem):
    await mem.remember(ME, [cand("Lives in Lisbon.", "lives in")])
    await mem.remember(ME, [cand("This thread is about invoices.", scope="thread")])
    other_thread = MemoryScopes("default", "t2", user_id="u-7")
    assert [r.content for r in await mem.recall(other_thread)] == ["Lives in Lisbon."]
    other_tenant = MemoryScopes("acme", "t1", user_id="u-7")
    assert await mem.recall(other_tenant) == []
    assert await mem.records(other_tenant) == []
    no_user = MemoryScopes("default", "t1")  # no user: only the thread's own records
    assert [r.content for r in await mem.recall(no_user)] == ["This thread is about invoices."]


async def test_relevance_orders_and_max_records_bounds_what_is_recalled(
    lts: BaseStore, clock: Clock
):
    memory = LongTermMemory(lts, clock=clock, max_records=2)
    items = [cand(f"Fact number {n} about gardening.") for n in range(4)]
    items.append(cand("Allergic to peanuts.", "allergy"))
    await memory.aremember(ME, items)
    recalled = await memory.arecall(ME, "any peanuts allergy in the recipe?")
    assert len(recalled) == 2 and recalled[0].content == "Allergic to peanuts."
    top = (await memory.arecall(ME, "gardening"))[0]
    assert top.content.startswith("Fact number")


async def test_racing_writers_on_one_key_present_only_the_newest_value(lts: BaseStore):
    from langgraph.store.base import PutOp

    clock = Clock()
    a, b = LongTermMemory(lts, clock=clock), LongTermMemory(lts, clock=clock)

    async def serve(effect: Any) -> Any:
        batch = effect.args[0]  # the flow yields call(store, "batch", ops)
        try:
            return await lts.abatch(batch)
        except NotImplementedError:  # a sync-only store
            return lts.batch(batch)

    async def until_write(ops: Any) -> Any:
        """Serve the reads of a remember flow; return its first write, not yet sent."""
        request = next(ops)
        while not any(isinstance(op, PutOp) for op in request.args[0]):
            request = ops.send(await serve(request))
        return request

    # both read the slot empty, then both write: two active records for one key
    ops_a = a._remember(ME, [cand("Team is Blue.", "team")], {}, clock())
    ops_b = b._remember(ME, [cand("Team is Red.", "team")], {}, clock())
    write_a, write_b = await until_write(ops_a), await until_write(ops_b)
    for ops, write in ((ops_a, write_a), (ops_b, write_b)):
        with pytest.raises(StopIteration):
            ops.send(await serve(write))
    assert sum(r.status == "active" for r in await a.arecords(ME)) == 2
    assert [r.content for r in await a.arecall(ME)] == ["Team is Red."]
    assert [r.content for r in await b.arecall(ME)] == ["Team is Red."]


async def test_invalidating_source_events_purges_what_they_taught(mem: Mem):
    [kept] = await mem.remember(ME, [cand("Likes tea.", source_event_ids=("m1",))], seqs={"m1": 1})
    [gone] = await mem.remember(
        ME, [cand("Vault code is 7319.", "vault code", source_event_ids=("m2",))], seqs={"m2": 2}
    )
    assert await mem.invalidate_events(Scope("t1"), ["m2"]) == 1
    records = {r.id: r for r in await mem.records(ME)}
    assert records[gone.record.id].status == "invalid"
    assert records[gone.record.id].content == "" and records[gone.record.id].key is None
    assert records[kept.record.id].status == "active"
    assert await mem.invalidate_events(Scope("t1"), seqs=[1]) == 1  # by seq too
    assert await mem.recall(ME) == []
    # another thread with the same event id is not this thread
    assert await mem.invalidate_events(Scope("t9"), ["m1"]) == 0


async def test_delete_thread_removes_its_records_and_purges_what_it_taught_the_user(mem: Mem):
    await mem.remember(ME, [cand("Thread note.", scope="thread")])
    await mem.remember(ME, [cand("Lives in Porto.", "lives in")])
    other = MemoryScopes("default", "t2", user_id="u-7")
    await mem.remember(other, [cand("Has a cat.", "pet")])
    assert await mem.delete_thread(Scope("t1")) == {"deleted": 1, "invalidated": 1}
    assert [r.content for r in await mem.recall(other)] == ["Has a cat."]
    assert [r.status for r in await mem.records(ME)] == ["invalid", "active"]


async def test_export_and_import_reproduce_the_records(mem: Mem, lts: BaseStore, clock: Clock):
    await mem.remember(ME, [cand("Order id is A-1172.", "order id", source_event_ids=("m1",))])
    await mem.remember(ME, [cand("Order id is B-2291.", "order id", source_event_ids=("m4",))])
    await mem.remember(ME, [cand("Thread note.", scope="thread")])
    exported = json.loads(json.dumps(await mem.export_thread(Scope("t1"))))
    assert [r["status"] for r in exported] == ["superseded", "active", "active"]
    fresh = Mem(LongTermMemory(InMemoryStore(), clock=clock), "sync")
    assert await fresh.import_records(exported) == 3
    assert await fresh.recall(ME) == await mem.recall(ME)
    moved = await fresh.import_records(exported, into=Scope("t5", tenant="acme"))
    assert moved == 3
    acme = MemoryScopes("acme", "t5", user_id="u-7")
    assert sorted(r.content for r in await fresh.recall(acme)) == [
        "Order id is B-2291.",
        "Thread note.",
    ]
    with pytest.raises(ValueError, match="not a memory record"):
        await fresh.import_records([{"content": "no id"}])


async def test_forget_deletes_one_record(mem: Mem):
    [change] = await mem.remember(ME, [cand("Likes jazz.")])
    assert await mem.forget(ME, change.record.id) is True
    assert await mem.forget(ME, change.record.id) is False
    assert await mem.records(ME) == []


async def test_a_sync_only_store_serves_the_async_methods_off_the_loop(tmp_path: Path):
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(tmp_path / "m.sqlite", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    memory = LongTermMemory(store)
    await memory.aremember(ME, [cand("Uses vim.")])
    assert [r.content for r in await memory.arecall(ME)] == ["Uses vim."]
    conn.close()


async def test_a_store_that_fails_raises_a_typed_error():
    class Down(InMemoryStore):
        def batch(self, ops: Any) -> Any:
            raise ConnectionError("connection refused")

        async def abatch(self, ops: Any) -> Any:
            raise ConnectionError("connection refused")

    memory = LongTermMemory(Down())
    with pytest.raises(MemoryStoreError, match="connection refused"):
        memory.recall(ME)
    with pytest.raises(MemoryStoreError, match="connection refused"):
        await memory.aremember(ME, [cand("x")])


def test_a_record_the_store_cannot_read_is_a_typed_error():
    store = InMemoryStore()
    namespace = ("ctx_memory", "default", "user", "u-7")
    store.put(namespace, "bad", {"format": "ctx_memory/v1", "status": "active", "id": "bad"})
    with pytest.raises(MemoryStoreError, match="cannot be read"):
        LongTermMemory(store).recall(ME)


def test_items_others_keep_in_the_namespace_are_left_alone():
    """langmem's memory tools can share the namespace: their items are not our records."""
    store = InMemoryStore()
    namespace = ("ctx_memory", "default", "user", "u-7")
    store.put(namespace, "langmem-1", {"kind": "Memory", "content": {"content": "Likes tea."}})
    memory = LongTermMemory(store)
    memory.remember(ME, [cand("Likes coffee.")])
    assert [r.content for r in memory.records(ME)] == ["Likes coffee."]
    assert memory.delete_thread(Scope("t1")) == {"deleted": 0, "invalidated": 1}
    assert store.get(namespace, "langmem-1") is not None


def test_records_and_candidates_refuse_bad_values():
    with pytest.raises(ValueError, match="scope"):
        MemoryRecord("x", "team", "o", "c")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        MemoryCandidate("c", confidence=2.0)
    with pytest.raises(ValueError, match="content"):
        MemoryCandidate("   ")
    with pytest.raises(ValueError, match="max_tokens"):
        LongTermMemory(InMemoryStore(), max_tokens=4)
    with pytest.raises(ValueError, match="root"):
        LongTermMemory(InMemoryStore(), root="a.b")


def test_ids_with_dots_are_safe_namespace_labels():
    memory = LongTermMemory(InMemoryStore())
    dotted = MemoryScopes("acme.eu", "thread.1", user_id="ann@example.com")
    memory.remember(dotted, [cand("Works at ACME.", "works at")])
    assert [r.owner for r in memory.recall(dotted)] == ["ann@example.com"]


# ----------------------------------------------------------------------------- extractors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my order id is A-1172", [("order id", "The user's order id is A-1172.", None)]),
        (
            "Sorry, my order id is B-2291, not A-1172.",
            [("order id", "The user's order id is B-2291.", "A-1172")],
        ),
        (
            "Actually my email is now ann@example.com.",
            [("email", "The user's email is ann@example.com.", None)],
        ),
        (
            "I live in Lisbon and I work at ACME.",
            [
                ("lives in", "The user lives in Lisbon.", None),
                ("works at", "The user works at ACME.", None),
            ],
        ),
        ("I prefer short answers.", [(None, "The user prefers short answers.", None)]),
        ("Please call me Bea.", [("name", "The user wants to be called Bea.", None)]),
        ("Remember that the staging host is db-2.", [(None, "the staging host is db-2.", None)]),
        ("my bad, let me check", []),
        ("What is my order id?", []),
        ("", []),
    ],
)
def test_the_rule_extractor_reads_first_person_facts(text: str, expected: list[Any]):
    found = RuleExtractor().extract([HumanMessage(text, id="m1")], [])
    assert [(c.key, c.content, c.replaces_value) for c in found] == expected


def test_the_rule_extractor_ignores_what_the_model_said():
    said = AIMessage("My name is Assistant and my favourite color is blue.")
    assert RuleExtractor().extract([said], []) == []


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("Sure! The user likes tea.", "not JSON"),
        ('{"key": "x"}', "not a JSON list"),
        ('[{"key": "x"}]', "no string 'content'"),
        ('[{"content": "x", "confidence": "high"}]', "not a valid memory"),
        ('[{"content": "   "}]', "not a valid memory"),
    ],
)
async def test_a_model_answering_garbage_is_a_typed_error(answer: str, problem: str):
    model = GenericFakeChatModel(messages=iter([AIMessage(answer), AIMessage(answer)]))
    extractor = ChatModelExtractor(model)
    with pytest.raises(MemoryExtractionError, match=problem):
        extractor.extract([HumanMessage("hi", id="m1")], [])
    with pytest.raises(MemoryExtractionError, match=problem):
        await extractor.aextract([HumanMessage("hi", id="m1")], [])


async def test_a_failing_model_is_a_typed_error_and_fenced_json_is_read():
    class Broken(GenericFakeChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise TimeoutError("model timed out")

    with pytest.raises(MemoryExtractionError, match="timed out"):
        ChatModelExtractor(Broken(messages=iter([]))).extract([HumanMessage("x")], [])
    fenced = '```json\n[{"key": "City", "content": "Lives in Oslo.", "supersedes": "r1"}]\n```'
    model = GenericFakeChatModel(messages=iter([AIMessage(fenced)]))
    old = MemoryRecord("r1", "user", "u-7", "Lives in Bergen.", key="city")
    [found] = await ChatModelExtractor(model).aextract([HumanMessage("moved", id="m2")], [old])
    assert (found.key, found.supersedes, found.source_event_ids) == ("city", "r1", ("m2",))


async def test_langmem_updates_supersede_the_record_they_name():
    from ctx_langgraph.memory.extract import _langmem

    ExtractedMemory, Memory = _langmem().ExtractedMemory, _langmem().Memory

    seen: list[Any] = []

    def manager(state: dict[str, Any]) -> list[ExtractedMemory]:
        seen.append(state)
        return [
            ExtractedMemory(id=state["existing"][0][0], content=Memory(content="Lives in Oslo.")),
            ExtractedMemory(id="new-1", content=Memory(content="Has two cats.")),
        ]

    memory = LongTermMemory(InMemoryStore(), extractor=LangmemExtractor(RunnableLambda(manager)))
    [old] = memory.remember(ME, [cand("Lives in Bergen.", "city")])
    changes = memory.observe(ME, [HumanMessage("I moved to Oslo with my two cats", id="m3")])
    assert [c.action for c in changes] == ["superseded", "added"]
    assert changes[0].superseded == (old.record.id,)
    assert sorted(r.content for r in memory.recall(ME)) == ["Has two cats.", "Lives in Oslo."]
    assert seen[0]["existing"][0][1].content == "Lives in Bergen."
    await memory.aobserve(ME, [HumanMessage("again", id="m4")])  # async path, same manager

    def broken(state: dict[str, Any]) -> Any:
        raise RuntimeError("tool call failed")

    with pytest.raises(MemoryExtractionError, match="tool call failed"):
        LangmemExtractor(RunnableLambda(broken)).extract([HumanMessage("x")], [])


# ----------------------------------------------------------------------------- in an agent

CONFIG = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=400
)
FILLER = "Let us go over the migration plan again, step by step, with the rollback notes. " * 3


def recorder(inputs: list[list[BaseMessage]]) -> Callable[[list[BaseMessage]], AIMessage]:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        inputs.append(list(messages))
        return AIMessage(f"Noted ({len(messages)} messages in view).")

    return reply


def agent(
    store: HistoryStore, memory: LongTermMemory, inputs: list[list[BaseMessage]] | None = None
) -> Any:
    """``create_context_agent`` with ``memory``, on a scripted model that records its inputs."""
    model = MeteringChatModel(replies=[recorder(inputs)] if inputs is not None else ["ok"])
    builder = create_context_agent(model, store=store, config=CONFIG, memory=memory)
    return builder.compile(checkpointer=InMemorySaver())


def memory_text(request: list[BaseMessage]) -> str:
    return next((m.text for m in request if is_memory_message(m)), "")


@pytest.fixture
def long_term(backend: Any, tmp_path: Path) -> Iterator[BaseStore]:
    """The long-term store next to a history backend: PostgreSQL with PostgreSQL, SQLite else."""
    if backend.dsn:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(backend.dsn) as pstore:
            pstore.setup()
            yield pstore
        return
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(
        tmp_path / "memory.sqlite", check_same_thread=False, isolation_level=None
    )
    store = SqliteStore(conn)
    store.setup()
    yield store
    conn.close()


def test_a_correction_supersedes_memory_and_key_fact_through_ten_compactions(
    store: HistoryStore, long_term: BaseStore
):
    inputs: list[list[BaseMessage]] = []
    memory = LongTermMemory(long_term)
    graph = agent(store, memory, inputs)
    run: Any = {"configurable": {"thread_id": "orders", "user_id": "u-7"}}
    turn = 0

    def say(text: str) -> dict[str, Any]:
        nonlocal turn
        turn += 1
        out: dict[str, Any] = graph.invoke({"messages": [HumanMessage(text, id=f"u{turn}")]}, run)
        return out

    say("Hello, my order id is A-1172 and it has not arrived.")
    for _ in range(8):
        say(f"{FILLER} (turn {turn + 1})")
    assert "A-1172" in memory_text(inputs[-1])
    say("Sorry, my order id is B-2291, not A-1172.")
    assert "B-2291" in memory_text(inputs[-1]) and "A-1172" not in memory_text(inputs[-1])

    def generation() -> int:
        active = store.get_active("orders")
        return active.generation if active is not None else 0

    start = generation()
    while generation() < start + 10:  # ten more compactions
        say(f"{FILLER} (turn {turn + 1})")
        assert turn < 200

    me = MemoryScopes("default", "orders", user_id="u-7")
    statuses = {r.content: r.status for r in memory.records(me)}
    assert statuses == {
        "The user's order id is A-1172.": "superseded",
        "The user's order id is B-2291.": "active",
    }
    active = store.get_active("orders")
    assert active is not None and active.covered_through_seq > 20
    facts = {fact.text: fact for fact in active.key_facts}
    assert "A-1172" not in facts and facts["B-2291"].replaces == "A-1172"
    # in the last request, the old value only ever appears next to the current one (the
    # summary's goal, constraint and key fact all name the correction)
    last = inputs[-1]
    assert "B-2291" in memory_text(last)
    lines = [line for m in last for line in m.text.splitlines() if "A-1172" in line]
    assert lines and all("B-2291" in line for line in lines)
    # a new thread of the same user starts with the current value
    graph.invoke(
        {"messages": [HumanMessage("Where is my parcel?", id="n1")]},
        {"configurable": {"thread_id": "orders-2", "user_id": "u-7"}},
    )
    assert "B-2291" in memory_text(inputs[-1]) and "A-1172" not in memory_text(inputs[-1])


def test_expired_memories_are_not_loaded_into_the_agent(store: HistoryStore):
    clock = Clock()
    inputs: list[list[BaseMessage]] = []
    memory = LongTermMemory(InMemoryStore(), clock=clock)
    me = MemoryScopes("default", "exp", user_id="u-1")
    memory.remember(
        me,
        [cand("Door code is 1234 this week.", "door code", expires_at=T0 + dt.timedelta(days=7))],
    )
    memory.remember(me, [cand("Prefers mornings.")])
    graph = agent(store, memory, inputs)
    run: Any = {"configurable": {"thread_id": "exp", "user_id": "u-1"}}
    graph.invoke({"messages": [HumanMessage("hi", id="e1")]}, run)
    assert "Door code" in memory_text(inputs[-1])
    clock.now = T0 + dt.timedelta(days=8)
    out = graph.invoke({"messages": [HumanMessage("hi again", id="e2")]}, run)
    assert "Door code" not in memory_text(inputs[-1]) and "mornings" in memory_text(inputs[-1])
    assert out["context"]["report"]["memory"]["loaded"] == 1


@pytest.mark.parametrize("max_tokens", [200, 1_500])
def test_memory_loading_never_pushes_a_request_over_the_budget(
    store: HistoryStore, max_tokens: int
):
    counter = TiktokenCounter("gpt-4o")
    memory = LongTermMemory(InMemoryStore(), max_tokens=max_tokens, max_records=200)
    me = MemoryScopes("default", "full", user_id="u-2")
    memory.remember(
        me,
        [
            cand(f"Fact {n}: the user owns server rack R-{n:03d} in hall {n % 7}.")
            for n in range(150)
        ],
    )
    inputs: list[list[BaseMessage]] = []
    config = ContextConfig(
        context_window=2_000, output_reserve=300, keep_recent_tokens=300, summary_max_tokens=200
    )
    graph = create_context_agent(
        MeteringChatModel(replies=[recorder(inputs)]),
        store=store,
        config=config,
        memory=memory,
        lookup_tool=False,
    ).compile(checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "full", "user_id": "u-2"}}
    loaded = []
    big = (
        "Here is the log excerpt you asked about, verbatim: " + "error at line 12; retrying. " * 45
    )
    for n in range(12):
        out = graph.invoke(
            {"messages": [HumanMessage(big if n % 3 == 2 else f"rack question {n}", id=f"f{n}")]},
            run,
        )
        usable = out["context"]["report"]["budget"]["usable"]
        assert counter.count_request(inputs[-1], []) <= usable
        loaded.append(out["context"]["report"]["memory"]["tokens"])
    assert max(loaded) <= min(max_tokens, usable // 4)
    assert min(loaded) > 0  # memory had room on every turn here, just less of it


def test_a_failing_extractor_loses_nothing_and_the_turn_goes_on(store: HistoryStore, caplog: Any):
    class Garbage:
        def extract(self, messages: Any, existing: Any) -> Any:
            raise MemoryExtractionError("the answer is not JSON: 'lol'")

        async def aextract(self, messages: Any, existing: Any) -> Any:
            return "not a list"

    memory = LongTermMemory(InMemoryStore(), extractor=Garbage())
    graph = agent(store, memory)
    run: Any = {"configurable": {"thread_id": "garbage", "user_id": "u-3"}}
    out = graph.invoke({"messages": [HumanMessage("my name is Ann", id="g1")]}, run)
    assert out["messages"][-1].text == "ok"
    assert "not JSON" in out["context"]["report"]["memory"]["error"]
    assert [e.role for e in store.read_events("garbage")] == ["human", "ai"]
    assert store.read_events("garbage")[0].event_id == "g1"
    assert "long-term memory not updated" in caplog.text


async def test_the_agent_runs_its_memory_async_too(store: HistoryStore):
    inputs: list[list[BaseMessage]] = []
    memory = LongTermMemory(InMemoryStore())
    graph = agent(store, memory, inputs)
    run: Any = {"configurable": {"thread_id": "async", "user_id": "u-4"}}
    await graph.ainvoke({"messages": [HumanMessage("I live in Lisbon.", id="a1")]}, run)
    await graph.ainvoke(
        {"messages": [HumanMessage("Actually I live in Porto, not Lisbon.", id="a2")]}, run
    )
    assert "Porto" in memory_text(inputs[-1]) and "Lisbon" not in memory_text(inputs[-1])


SECRET = "7319-XK-Quetzal"


def holds_secret(value: Any) -> bool:
    return SECRET in json.dumps(value, default=str)


def test_a_deleted_secret_leaves_memory_and_export_on_every_backend(
    store: HistoryStore, long_term: BaseStore
):
    inputs: list[list[BaseMessage]] = []
    memory = LongTermMemory(long_term)
    graph = agent(store, memory, inputs)
    run: Any = {"configurable": {"thread_id": "canary", "user_id": "u-5"}}
    for n in range(1, 13):
        text = f"turn 5: my vault code is {SECRET}." if n == 5 else f"turn {n}: {FILLER}"
        graph.invoke({"messages": [HumanMessage(text, id=f"u{n}")]}, run)
    me = MemoryScopes("default", "canary", user_id="u-5")
    assert any(SECRET in r.content for r in memory.recall(me))
    assert SECRET in memory_text(inputs[-1])

    assert store.delete_events("canary", ["u5"]) == 1  # the wired memory hears of it at once
    assert not holds_secret([r.to_json() for r in memory.records(me)])
    assert not holds_secret(export_thread(store, "canary", memory=memory))
    inputs.clear()
    for n in range(13, 16):
        graph.invoke({"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"u{n}")]}, run)
    graph.invoke(
        {"messages": [HumanMessage("what is my vault code?", id="x1")]},
        {"configurable": {"thread_id": "canary-2", "user_id": "u-5"}},
    )
    assert inputs and not any(holds_secret([m.text for m in request]) for request in inputs)


def test_revising_or_hiding_a_source_message_invalidates_its_memory(store: HistoryStore):
    memory = LongTermMemory(InMemoryStore())
    store.add_edit_listener(memory)
    me = MemoryScopes("default", "rev", user_id="u-6")
    results = store.append(
        "rev", [HumanMessage("my pin is 0042", id="r1"), HumanMessage("my city is Oslo", id="r2")]
    )
    memory.observe(
        me,
        [HumanMessage("my pin is 0042", id="r1"), HumanMessage("my city is Oslo", id="r2")],
        seqs={r.event_id: r.seq for r in results},
    )
    assert len(memory.recall(me)) == 2
    store.append("rev", [HumanMessage("my pin is (removed)", id="r1")])  # a revision
    assert [r.content for r in memory.recall(me)] == ["The user's city is Oslo."]
    store.hide_events("rev", ["r2"])
    assert memory.recall(me) == []
    store.delete_thread("rev")
    assert [(r.status, r.content) for r in memory.records(me)] == [("invalid", "")] * 2


async def test_export_with_memory_then_import_reproduces_lookups_summary_and_memories(
    store: HistoryStore, backend: Any
):
    from ctx_langgraph.history import SQLiteHistoryStore

    memory = LongTermMemory(InMemoryStore())
    graph = agent(store, memory)
    run: Any = {"configurable": {"thread_id": "exp", "user_id": "u-8"}}
    for n in range(1, 15):
        text = "my order id is A-1172" if n == 2 else f"turn {n}: {FILLER}"
        graph.invoke({"messages": [HumanMessage(text, id=f"u{n}")]}, run)
    document = json.loads(json.dumps(await aexport_thread(store, "exp", memory=memory)))
    assert [m["content"] for m in document["memories"]] == ["The user's order id is A-1172."]
    fresh_memory = LongTermMemory(InMemoryStore())
    with SQLiteHistoryStore.from_path(":memory:") as fresh:
        fresh.setup()
        counts = await aimport_thread(fresh, document, memory=fresh_memory)
        assert counts["memories"] == 1
        me = MemoryScopes("default", "exp", user_id="u-8")
        assert fresh_memory.recall(me) == memory.recall(me)
        assert fresh.get_active("exp") == store.get_active("exp")
        lookup_a, lookup_b = make_history_lookup_tool(store), make_history_lookup_tool(fresh)
        query = {"query": "order A-1172"}
        assert lookup_a.invoke(query, config=run) == lookup_b.invoke(query, config=run)


def test_one_tenant_never_sees_another_tenants_memories(store: HistoryStore):
    inputs: list[list[BaseMessage]] = []
    memory = LongTermMemory(InMemoryStore())
    builder = create_context_agent(
        MeteringChatModel(replies=[recorder(inputs)]), store=store, config=CONFIG, memory=memory
    )
    # the same history store and memory; LangGraph's checkpoints are kept apart per tenant
    graph_a = builder.compile(checkpointer=InMemorySaver())
    graph_b = builder.compile(checkpointer=InMemorySaver())
    as_a: Any = {"configurable": {"thread_id": "same", "user_id": "same-user", "ctx_tenant": "a"}}
    as_b: Any = {"configurable": {"thread_id": "same", "user_id": "same-user", "ctx_tenant": "b"}}
    graph_a.invoke({"messages": [HumanMessage(f"my vault code is {SECRET}", id="a1")]}, as_a)
    graph_b.invoke({"messages": [HumanMessage("what is my vault code?", id="b1")]}, as_b)
    assert SECRET in memory_text(inputs[0])
    assert not holds_secret([m.text for m in inputs[1]])
    b = MemoryScopes("b", "same", user_id="same-user")
    assert memory.records(b) == []
    assert not holds_secret(export_thread(store, Scope("same", tenant="b"), memory=memory))
    memory.delete_thread(Scope("same", tenant="b"))
    assert [r.content for r in memory.recall(MemoryScopes("a", "same", user_id="same-user"))]


async def test_edits_made_by_another_store_object_reach_the_memory_on_the_next_turn(
    backend: Any, store: HistoryStore
):
    if not backend.shared:
        pytest.skip("an in-memory SQLite database is reachable through one store object only")
    inputs: list[list[BaseMessage]] = []
    memory = LongTermMemory(InMemoryStore())
    graph = agent(store, memory, inputs)
    run: Any = {"configurable": {"thread_id": "elsewhere", "user_id": "u-9"}}
    await graph.ainvoke({"messages": [HumanMessage(f"my vault code is {SECRET}", id="s1")]}, run)
    await graph.ainvoke({"messages": [HumanMessage("my city is Oslo", id="s2")]}, run)
    me = MemoryScopes("default", "elsewhere", user_id="u-9")
    assert len(memory.recall(me)) == 2
    other = backend.make()  # another process's store object: no memory attached to it
    assert await other.adelete_events("elsewhere", ["s1"]) == 1
    assert len(memory.recall(me)) == 2  # not told yet
    await graph.ainvoke({"messages": [HumanMessage("and now?", id="s3")]}, run)
    assert [r.content for r in memory.recall(me)] == ["The user's city is Oslo."]
    assert not holds_secret([m.text for m in inputs[-1]])
    assert not holds_secret([r.to_json() for r in memory.records(me)])


async def test_a_worker_sees_what_another_worker_wrote_despite_its_cache(mem: Mem, lts: BaseStore):
    other = Mem(LongTermMemory(lts, clock=Clock()), mem.mode)
    await mem.remember(ME, [cand("Speaks Portuguese.")])
    assert len(await mem.recall(ME)) == 1  # cached now
    assert len(await mem.recall(ME)) == 1
    await other.remember(ME, [cand("Speaks Italian.")])
    assert sorted(r.content for r in await mem.recall(ME)) == [
        "Speaks Italian.",
        "Speaks Portuguese.",
    ]
    [record] = [r for r in await mem.recall(ME) if "Italian" in r.content]
    await other.forget(ME, record.id)
    assert [r.content for r in await mem.recall(ME)] == ["Speaks Portuguese."]


def test_langmem_with_a_real_client_learns_and_its_usage_is_booked_as_memory(store: HistoryStore):
    """langmem's own memory manager on ChatOpenAI, against a loopback server speaking the
    Chat Completions wire format; its call is booked in the ledger with purpose ``memory``."""
    from fake_providers import chat_completion, serve
    from langchain_openai import ChatOpenAI

    from ctx_langgraph.usage import UsageLedger

    with serve() as replay:
        usage = {"prompt_tokens": 310, "completion_tokens": 24, "total_tokens": 334}
        body = chat_completion("chatcmpl-mem-1", usage)
        call = {"content": "The user's order id is B-2291."}
        body["choices"][0]["message"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_mem_1",
                    "type": "function",
                    "function": {"name": "Memory", "arguments": json.dumps(call)},
                }
            ],
        }
        body["choices"][0]["finish_reason"] = "tool_calls"
        replay.json("/v1/chat/completions", body)
        extractor_model = ChatOpenAI(
            model="gpt-4o-mini", base_url=replay.url + "/v1", api_key="sk-test", max_retries=0
        )
        memory = LongTermMemory(InMemoryStore(), extractor=LangmemExtractor(extractor_model))
        graph = create_context_agent(
            MeteringChatModel(replies=["ok"]), store=store, config=CONFIG, memory=memory
        ).compile(checkpointer=InMemorySaver())
        run: Any = {"configurable": {"thread_id": "langmem", "user_id": "u-10"}}
        out = graph.invoke({"messages": [HumanMessage("my order id is B-2291", id="l1")]}, run)

    [(path, request)] = replay.requests
    assert path == "/v1/chat/completions" and request["tools"][0]["function"]["name"] == "Memory"
    me = MemoryScopes("default", "langmem", user_id="u-10")
    [record] = memory.recall(me)
    assert (record.content, record.source_event_ids) == ("The user's order id is B-2291.", ("l1",))
    assert "B-2291" in next(m.text for m in out["messages"] if is_memory_message(m))
    [booked] = UsageLedger(store).records("langmem", purpose="memory")
    assert (booked.usage.input_total, booked.usage.output) == (310, 24)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_create_agent_middleware_learns_loads_and_books_memory(mode: str):
    from langchain.agents import create_agent

    from ctx_langgraph import ContextManagementMiddleware, SQLiteHistoryStore
    from ctx_langgraph.usage import UsageLedger

    answer = '[{"key": "city", "content": "The user lives in Oslo.", "confidence": 0.8}]'
    extractor = ChatModelExtractor(MeteringChatModel(replies=[answer, "[]"]))
    memory = LongTermMemory(InMemoryStore(), extractor=extractor)
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        inputs: list[list[BaseMessage]] = []
        model = MeteringChatModel(replies=[recorder(inputs)])
        middleware = ContextManagementMiddleware(
            store, model=model, config=CONFIG, memory=memory, lookup_tool=False
        )
        agent = create_agent(model, tools=[], middleware=[middleware])
        run: Any = {"configurable": {"thread_id": "mw", "user_id": "u-11"}}
        for text in ("I moved to Oslo last year.", "Any tips for the winter?"):
            turn = {"messages": [("user", text)]}
            if mode == "sync":
                agent.invoke(turn, run)
            else:
                await agent.ainvoke(turn, run)
        assert "The user lives in Oslo." in memory_text(inputs[-1])
        booked = UsageLedger(store).records("mw", purpose="memory")
        assert len(booked) == 2 and all(r.usage.input_total for r in booked)


def test_the_memory_message_stays_the_same_while_its_selection_does(store: HistoryStore):
    """Re-ranked every turn, listed in a stable order: no epoch bump, a cacheable prefix."""
    memory = LongTermMemory(InMemoryStore())
    me = MemoryScopes("default", "stable", user_id="u-12")
    memory.remember(me, [cand("Lives in Oslo.", "city")])
    memory.remember(me, [cand("Has a cat named Miso.", "pet")])
    inputs: list[list[BaseMessage]] = []
    graph = agent(store, memory, inputs)
    run: Any = {"configurable": {"thread_id": "stable", "user_id": "u-12"}}
    texts = []
    for n, question in enumerate(["How is Miso the cat?", "Weather in Oslo?", "Any news?"]):
        out = graph.invoke({"messages": [HumanMessage(question, id=f"q{n}")]}, run)
        texts.append(memory_text(inputs[-1]))
        if n:
            assert "memory changed" not in out["context"]["report"]["budget"]["epoch_bumped_for"]
    assert texts[0] == texts[1] == texts[2]
    assert texts[0].index("Oslo") < texts[0].index("Miso")  # oldest first, whatever the query
