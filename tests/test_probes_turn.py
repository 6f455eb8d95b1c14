"""The per-turn loop under hostile conditions: summarizers that fail in every way, messages edited
by id, malformed tool-call sequences, odd content, streaming; on every history backend, sync and
async. A thread never dies: every turn completes (or raises only for a request no cut can make
fit), and the store keeps every message."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    ExtractiveSummarizer,
    HistoryStore,
    LLMSummarizer,
    LongTermMemory,
    create_context_agent,
)
from ctx_langgraph.compaction import SummaryRequest, pairing_problems
from ctx_langgraph.errors import ContextBudgetExceeded
from ctx_langgraph.memory.extract import ChatModelExtractor
from ctx_langgraph.state import unpack
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply

WORDS = (  # noqa: SIM905
    "order invoice shipping Lisbon Denver refund plan warranty carrier Nordpost customer "
    "address parcel tracking delayed weekend express standard priority support ticket"
).split()
SMALL = {
    "context_window": 2_000,
    "output_reserve": 300,
    "keep_recent_tokens": 600,
    "summary_max_tokens": 300,
    "compaction_attempts": 2,
    "compaction_timeout_s": 0.5,
}


def words(turn: int, count: int = 50) -> str:
    return " ".join(WORDS[(turn * 7 + i * 3) % len(WORDS)] for i in range(count)) + f" #{turn}"


class Recorder(MeteringChatModel):
    """A metering model that also keeps every request it received."""

    requests: list[list[BaseMessage]]

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def reply_model(count: int = 40) -> Recorder:
    return Recorder(replies=[words(i, count) for i in range(97)], requests=[])


async def call(graph: Any, mode: str, value: Any, config: Any) -> Any:
    if mode == "sync":
        return await asyncio.to_thread(graph.invoke, value, config)
    return await graph.ainvoke(value, config)


def agent(store: HistoryStore, model: Any = None, summarizer: Any = None, **config: Any) -> Any:
    builder = create_context_agent(
        model or reply_model(),
        store=store,
        summarizer=summarizer,
        config=ContextConfig(**{**SMALL, **config}),
        lookup_tool=False,
    )
    return builder.compile(checkpointer=InMemorySaver())


def middleware_agent(store: HistoryStore, model: Any, summarizer: Any = None) -> Any:
    middleware = ContextManagementMiddleware(
        store,
        model=model,
        summarizer=summarizer,
        config=ContextConfig(**SMALL),
        lookup_tool=False,
    )
    return create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())


# --------------------------------------------------------------------------- failing summarizers


class Failing:
    """A summarizer that fails in one way: for its first ``fail_first`` calls, or always."""

    def __init__(self, kind: str, fail_first: int | None = None) -> None:
        self.kind = kind
        self.fail_first = fail_first
        self.calls = 0
        self.inner = ExtractiveSummarizer()

    @property
    def id(self) -> str:
        return f"failing-{self.kind}"

    def _failing(self) -> bool:
        self.calls += 1
        return self.fail_first is None or self.calls <= self.fail_first

    def _bad(self, request: SummaryRequest) -> Any:
        if self.kind == "raises":
            raise RuntimeError("summarizer service unavailable")
        if self.kind == "empty":
            return ""
        if self.kind == "garbage":
            return "lol " * 20
        if self.kind == "over_cap":
            return self.inner.summarize(request) + "\n" + "padding " * 3_000
        if self.kind == "not_text":
            return {"summary": 42}
        if self.kind == "none":
            return None
        raise AssertionError(self.kind)

    def summarize(self, request: SummaryRequest) -> Any:
        if not self._failing():
            return self.inner.summarize(request)
        if self.kind == "hangs":
            time.sleep(1.0)
            return self.inner.summarize(request)
        return self._bad(request)

    async def asummarize(self, request: SummaryRequest) -> Any:
        if not self._failing():
            return self.inner.summarize(request)
        if self.kind == "hangs":
            await asyncio.sleep(1.0)
            return self.inner.summarize(request)
        return self._bad(request)


def llm_failing(kind: str) -> LLMSummarizer:
    def answer(messages: list[BaseMessage]) -> AIMessage:
        if kind == "llm_raises":
            raise RuntimeError("HTTP 503 from the summary model")
        return AIMessage("I cannot help with that.")  # llm_garbage: not the structured format

    return LLMSummarizer(MeteringChatModel(replies=[answer], model_name="summary-model"))


KINDS = ["raises", "empty", "garbage", "over_cap", "not_text", "none", "hangs"]
TURNS = 20


def assert_every_message_kept(store: HistoryStore, thread: str, turns: int) -> None:
    roles = Counter(e.role for e in store.read_events(thread))
    assert roles == {"human": turns, "ai": turns}, roles
    seqs = [e.seq for e in store.read_events(thread)]
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.fixture
def memory_store() -> Any:
    from ctx_langgraph import SQLiteHistoryStore

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_summarizer_that_always_fails_never_stops_the_thread(
    memory_store: HistoryStore, mode: str, kind: str
) -> None:
    await always_failing(memory_store, mode, kind)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["raises", "garbage"])
async def test_a_failing_summarizer_never_stops_the_thread_on_any_backend(
    store: HistoryStore, mode: str, kind: str
) -> None:
    await always_failing(store, mode, kind)


async def always_failing(store: HistoryStore, mode: str, kind: str) -> None:
    graph = agent(store, summarizer=Failing(kind))
    run = {"configurable": {"thread_id": f"fail-{kind}"}}
    statuses: Counter[tuple[Any, Any]] = Counter()
    for turn in range(TURNS):
        out = await call(graph, mode, {"messages": [("user", words(turn))]}, run)
        compaction = out["context"].get("report", {}).get("compaction") or {}
        statuses[compaction.get("status"), compaction.get("fallback")] += 1
    # the extractive summarizer covered what the failing one could not; every turn went on
    assert statuses["committed", "extractive-v1"] >= 1, statuses
    assert store.get_active(f"fail-{kind}") is not None
    assert_every_message_kept(store, f"fail-{kind}", TURNS)
    backoff = out["context"].get("backoff", {}).get("summarizer") or {}
    assert backoff.get("failures", 0) >= 1 and "retry_at" in backoff


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["raises", "garbage"])
async def test_a_summarizer_that_recovers_is_used_again(
    store: HistoryStore, mode: str, kind: str
) -> None:
    # fails twice (both attempts of one compaction), then works: the failure is not sticky
    summarizer = Failing(kind, fail_first=2)
    graph = agent(store, summarizer=summarizer, compaction_backoff_s=0.0)
    run = {"configurable": {"thread_id": "recovers"}}
    used: Counter[Any] = Counter()
    for turn in range(TURNS + 10):
        out = await call(graph, mode, {"messages": [("user", words(turn))]}, run)
        compaction = out["context"].get("report", {}).get("compaction") or {}
        if compaction.get("status") == "committed":
            used[compaction.get("summarizer")] += 1
    assert used[summarizer.id] >= 2, used  # back to the configured summarizer after its failures
    assert out["context"].get("backoff", {}).get("summarizer") is None
    assert_every_message_kept(store, "recovers", TURNS + 10)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["llm_raises", "llm_garbage"])
async def test_a_failing_llm_summarizer_falls_back(
    store: HistoryStore, mode: str, kind: str
) -> None:
    graph = agent(store, summarizer=llm_failing(kind))
    run = {"configurable": {"thread_id": kind}}
    for turn in range(TURNS):
        await call(graph, mode, {"messages": [("user", words(turn))]}, run)
    active = store.get_active(kind)
    assert active is not None and active.summarizer_id == "extractive-v1"
    assert_every_message_kept(store, kind, TURNS)


@pytest.mark.parametrize("kind", ["raises", "garbage"])
def test_the_middleware_survives_a_failing_summarizer(store: HistoryStore, kind: str) -> None:
    model = reply_model()
    graph = middleware_agent(store, model, Failing(kind))
    run = {"configurable": {"thread_id": "mw"}}
    for turn in range(TURNS):
        graph.invoke({"messages": [("user", words(turn))]}, run)
    assert store.get_active("mw") is not None
    assert_every_message_kept(store, "mw", TURNS)
    assert all(pairing_problems(request) == [] for request in model.requests)


def test_backoff_skips_the_failing_summarizer_while_the_request_fits(store: HistoryStore) -> None:
    summarizer = Failing("raises")
    graph = agent(store, summarizer=summarizer, compaction_backoff_s=3_600.0)
    run = {"configurable": {"thread_id": "backoff"}}
    for turn in range(TURNS):
        graph.invoke({"messages": [("user", words(turn))]}, run)
    # one compaction tried it (2 attempts); during the hour-long backoff only the fallback ran
    assert summarizer.calls == 2
    state = unpack(graph.get_state(run).values["context"])
    assert state["summarizer_backoff"]["failures"] == 1
    assert state["summarizer_backoff"]["retry_at"] > time.time() + 3_000


def test_only_a_message_larger_than_the_window_raises_and_the_thread_recovers(
    store: HistoryStore,
) -> None:
    graph = agent(store, summarizer=Failing("raises"))
    run = {"configurable": {"thread_id": "giant"}}
    graph.invoke({"messages": [("user", words(0))]}, run)
    with pytest.raises(ContextBudgetExceeded, match="No cut can make this request fit"):
        graph.invoke({"messages": [("user", words(1, 3_000))]}, run)
    # the giant message is history now: a cut covers it and the thread goes on
    out = graph.invoke({"messages": [("user", words(2))]}, run)
    assert out["messages"][-1].type == "ai"
    roles = [e.role for e in store.read_events("giant")]
    assert roles == ["human", "ai", "human", "human", "ai"]  # the giant one is recorded too
    assert store.get_active("giant") is not None


# --------------------------------------------------------------------------- edits by id


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("edited", ["human", "ai"])
@pytest.mark.parametrize("flavor", ["graph", "middleware"])
async def test_a_message_edited_by_id_is_a_revision(
    store: HistoryStore, mode: str, edited: str, flavor: str
) -> None:
    graph = (
        agent(store, context_window=16_000, output_reserve=1_000)
        if flavor == "graph"
        else middleware_agent(store, reply_model())
    )
    run = {"configurable": {"thread_id": "edit"}}
    out = await call(graph, mode, {"messages": [HumanMessage("first text", id="d1")]}, run)
    reply_id = out["messages"][-1].id
    new = (
        HumanMessage("second text", id="d1")
        if edited == "human"
        else AIMessage("a corrected answer", id=reply_id)
    )
    await call(graph, mode, {"messages": [new]}, run)
    target = "d1" if edited == "human" else reply_id
    event = store.get_event("edit", target)
    assert event is not None and event.text == new.text and event.revision == 2
    assert [revision for revision, _record in store.event_revisions("edit", target)] == [1]
    assert [e.seq for e in store.search("edit", new.text.split()[-1]).hits] == [event.seq]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_edit_of_a_summarized_message_invalidates_the_summary(
    store: HistoryStore, mode: str
) -> None:
    graph = agent(store)
    run = {"configurable": {"thread_id": "covered"}}
    ids = []
    for turn in range(TURNS):
        message = HumanMessage(words(turn), id=f"h{turn}")
        ids.append(message.id)
        await call(graph, mode, {"messages": [message]}, run)
    active = store.get_active("covered")
    assert active is not None
    first = store.get_event("covered", "h0")
    assert first is not None and first.seq <= active.covered_through_seq
    # the covered message, re-sent with its id and new content: a revision of seq 1
    await call(graph, mode, {"messages": [HumanMessage("the address is Porto", id="h0")]}, run)
    assert store.get_event("covered", "h0").text == "the address is Porto"  # type: ignore[union-attr]
    assert store.get_checkpoint(active.id).status == "invalid"  # type: ignore[union-attr]
    rebuilt = store.get_active("covered")
    assert rebuilt is None or rebuilt.id != active.id


# --------------------------------------------------------------------------- malformed sequences


def call_(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"name": name, "args": {"q": call_id}, "id": call_id, "type": "tool_call"}


def ai_calls(*ids: str, msg_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[call_(i) for i in ids], id=msg_id)


def result(call_id: str, msg_id: str) -> ToolMessage:
    return ToolMessage(f"result of {call_id}", tool_call_id=call_id, id=msg_id)


# each shape: the messages sent, and the (dangling calls, stray results) the view repairs
SHAPES: dict[str, Callable[[], list[BaseMessage]]] = {
    "dangling_call_then_user": lambda: [ai_calls("c1", msg_id="a1"), HumanMessage("next", id="h")],
    "dangling_call_last": lambda: [HumanMessage("q", id="h"), ai_calls("c1", msg_id="a1")],
    "orphan_result_first": lambda: [result("zz", "t1"), HumanMessage("q", id="h")],
    "orphan_result_after_user": lambda: [HumanMessage("q", id="h"), result("zz", "t1")],
    "parallel_half_answered": lambda: [
        ai_calls("c1", "c2", "c3", msg_id="a1"),
        result("c2", "t2"),
        HumanMessage("q", id="h"),
    ],
    "duplicate_result": lambda: [
        ai_calls("c1", msg_id="a1"),
        result("c1", "t1"),
        result("c1", "t1b"),
        HumanMessage("q", id="h"),
    ],
    "late_result": lambda: [
        ai_calls("c1", msg_id="a1"),
        HumanMessage("meanwhile", id="h0"),
        result("c1", "t1"),
        HumanMessage("q", id="h"),
    ],
    "result_for_other_turn": lambda: [
        ai_calls("c1", msg_id="a1"),
        result("c1", "t1"),
        ai_calls("c2", msg_id="a2"),
        result("c1", "t1b"),
        HumanMessage("q", id="h"),
    ],
    "two_dangling_turns": lambda: [
        ai_calls("c1", msg_id="a1"),
        ai_calls("c2", "c3", msg_id="a2"),
        HumanMessage("q", id="h"),
    ],
    "answered_in_reverse_order": lambda: [
        ai_calls("c1", "c2", msg_id="a1"),
        result("c2", "t2"),
        result("c1", "t1"),
        HumanMessage("q", id="h"),
    ],
    "only_tool_results": lambda: [result("x1", "t1"), result("x2", "t2")],
    "invalid_call_unanswered": lambda: [
        AIMessage(
            "",
            invalid_tool_calls=[
                {"name": "lookup", "args": "{not json", "id": "bad1", "error": "bad JSON"}
            ],
            id="a1",
        ),
        HumanMessage("q", id="h"),
    ],
}
REPAIRS = {
    "dangling_call_then_user": (1, 0),
    "dangling_call_last": (1, 0),
    "orphan_result_first": (0, 1),
    "orphan_result_after_user": (0, 1),
    "parallel_half_answered": (2, 0),
    "duplicate_result": (0, 1),
    "late_result": (1, 1),
    "result_for_other_turn": (1, 1),
    "two_dangling_turns": (3, 0),
    "answered_in_reverse_order": (0, 0),
    "only_tool_results": (0, 2),
    "invalid_call_unanswered": (1, 0),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_the_model_never_sees_a_malformed_tool_sequence(
    store: HistoryStore, mode: str, shape: str
) -> None:
    model = reply_model()
    graph = agent(store, model=model, context_window=16_000, output_reserve=1_000)
    run = {"configurable": {"thread_id": shape}}
    sent = SHAPES[shape]()
    out = await call(graph, mode, {"messages": sent}, run)
    await call(graph, mode, {"messages": [("user", "and again")]}, run)
    assert model.requests and all(pairing_problems(r) == [] for r in model.requests)
    # the raw history keeps what happened: every message sent, nothing synthetic
    stored = {e.event_id for e in store.read_events(shape)}
    assert {m.id for m in sent} <= stored
    assert not any(i.startswith("ctx-missing-result") for i in stored)
    repairs = out["context"].get("report", {}).get("repairs") or {}
    counted = (repairs.get("dangling_tool_calls", 0), repairs.get("orphan_tool_results", 0))
    assert counted == REPAIRS[shape]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_middleware_repairs_the_same_sequences(store: HistoryStore, shape: str) -> None:
    model = reply_model()
    graph = middleware_agent(store, model)
    graph.invoke({"messages": SHAPES[shape]()}, {"configurable": {"thread_id": shape}})
    assert model.requests and all(pairing_problems(r) == [] for r in model.requests)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_repair_is_stable_and_idempotent(shape: str) -> None:
    from ctx_langgraph.view.repair import ViewRepairs, repair_tool_pairs

    fixed, repairs = repair_tool_pairs(SHAPES[shape]())
    assert (repairs.dangling_tool_calls, repairs.orphan_tool_results) == REPAIRS[shape]
    assert pairing_problems(fixed) == []
    again, second = repair_tool_pairs(fixed)
    assert second == ViewRepairs() and [m.id for m in again] == [m.id for m in fixed]


# --------------------------------------------------------------------------- odd content


CONTENTS: dict[str, Any] = {
    "empty_string": "",
    "empty_list": [],
    "image_block": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ],
    "unknown_block": [{"type": "mystery", "payload": {"deep": [1, {"x": None}]}}],
    "block_without_type": [{"text": "no type here"}],
    "text_block_with_number": [{"type": "text", "text": 12345}],
    "mixed_strings_and_blocks": ["plain", {"type": "text", "text": "block"}],
    "reasoning_block": [{"type": "reasoning", "reasoning": "thinking..."}],
    "emoji_cjk_rtl": "🎉 你好世界 مرحبا עברית",
    "very_long_word": "x" * 20_000,
    "nul_byte": "a\x00b",
    "lone_surrogate": "bad \ud800 text",
    "nul_and_surrogate_in_a_block": [{"type": "text", "text": "x\x00y \udfff z"}],
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", sorted(CONTENTS))
async def test_odd_content_goes_through_a_turn_and_is_kept(
    store: HistoryStore, mode: str, name: str
) -> None:
    graph = agent(store, context_window=16_000, output_reserve=1_000)
    run = {"configurable": {"thread_id": name}}
    sent = HumanMessage(CONTENTS[name], id="odd")
    out = await call(graph, mode, {"messages": [sent]}, run)
    await call(graph, mode, {"messages": [("user", "and again")]}, run)
    assert out["messages"][-1].type == "ai"
    event = store.get_event(name, "odd")
    assert event is not None and event.message.content == sent.content


# --------------------------------------------------------------------------- the last reply


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("flavor", ["graph", "middleware"])
async def test_the_last_reply_is_recorded_when_the_turn_ends(
    store: HistoryStore, mode: str, flavor: str
) -> None:
    model = reply_model()
    graph = (
        agent(store, model=model, context_window=16_000, output_reserve=1_000)
        if flavor == "graph"
        else middleware_agent(store, model)
    )
    out = await call(
        graph, mode, {"messages": [("user", "hello")]}, {"configurable": {"thread_id": "r"}}
    )
    events = store.read_events("r")
    assert [e.role for e in events] == ["human", "ai"]
    assert events[-1].event_id == out["messages"][-1].id
    assert store.search("r", out["messages"][-1].text.split()[0]).hits


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_summaries_and_extraction_are_not_streamed(mode: str, tmp_path: Any) -> None:
    from ctx_langgraph import SQLiteHistoryStore

    store = SQLiteHistoryStore.from_path(tmp_path / "h.sqlite")
    store.setup()
    summaries = MeteringChatModel(replies=[scripted_summary_reply], model_name="summary-model")
    extractor = MeteringChatModel(replies=["[]"], model_name="extractor-model")
    memory = LongTermMemory(InMemoryStore(), extractor=ChatModelExtractor(extractor))
    builder = create_context_agent(
        reply_model(),
        store=store,
        summarizer=LLMSummarizer(summaries),
        memory=memory,
        config=ContextConfig(**{**SMALL, "context_window": 2_000, "compaction_timeout_s": 30.0}),
        lookup_tool=False,
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "s", "user_id": "u"}}
    chunks: list[tuple[Any, dict[str, Any]]] = []

    async def stream_async(value: Any) -> None:
        async for item in graph.astream(value, run, stream_mode="messages"):
            chunks.append(item)

    for turn in range(40):
        value = {"messages": [("user", f"my name is Ann. {words(turn)}")]}
        if mode == "sync":
            chunks.extend(graph.stream(value, run, stream_mode="messages"))
        else:
            asyncio.run(stream_async(value))
    active = store.get_active("s")
    assert active is not None and active.generation >= 3 and summaries._calls >= 3
    assert extractor._calls >= 40
    models = Counter(meta.get("ls_model_name") for _chunk, meta in chunks)
    assert models["gpt-4o"] >= 40
    assert not models["summary-model"] and not models["extractor-model"], models
    # no model token streamed carries the summary's text (only the agent's replies do)
    opening = active.summary_text.strip().splitlines()[0]
    streamed = [chunk for chunk, _ in chunks if isinstance(chunk, AIMessage | AIMessageChunk)]
    assert streamed and not any(opening in str(chunk.content) for chunk in streamed)
    # they are still booked in the ledger
    from ctx_langgraph import UsageLedger

    purposes = Counter(r.purpose for r in UsageLedger(store).records("s"))
    assert purposes["summary"] >= 3 and purposes["memory"] >= 40


# --------------------------------------------------------------------------- the database goes away


class Proxy:
    """A TCP proxy to the PostgreSQL server that can be taken down and brought back."""

    def __init__(self, host: str, port: int) -> None:
        import socket
        import threading

        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = True
        self.sockets: list[Any] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            server = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.close()

    def down(self) -> None:
        import socket

        self.up = False
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self.sockets = []

    def close(self) -> None:
        self.down()
        self.listener.close()


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_database_that_goes_away_fails_a_turn_and_loses_nothing(
    pg_dsn: str, mode: str
) -> None:
    import psycopg

    from ctx_langgraph import PostgresHistoryStore
    from ctx_langgraph.errors import HistoryStoreError

    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    proxy = Proxy(str(info["host"]), int(info["port"]))
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, host="127.0.0.1", port=proxy.port)
    store = PostgresHistoryStore.from_conn_string(dsn, max_size=4)
    store.setup()
    try:
        graph = agent(store)
        run = {"configurable": {"thread_id": "outage"}}
        for turn in range(8):
            await call(graph, mode, {"messages": [HumanMessage(words(turn), id=f"h{turn}")]}, run)
        proxy.down()
        with pytest.raises(HistoryStoreError):
            await call(graph, mode, {"messages": [HumanMessage(words(8), id="h8")]}, run)
        proxy.up = True  # back: the next turn records what the failed one could not
        for turn in range(9, TURNS):
            await call(graph, mode, {"messages": [HumanMessage(words(turn), id=f"h{turn}")]}, run)
        ids = [e.event_id for e in store.read_events("outage")]
        assert {f"h{n}" for n in range(TURNS)} <= set(ids)
        assert len(ids) == len(set(ids))
        assert Counter(e.role for e in store.read_events("outage"))["ai"] == TURNS - 1
    finally:
        await store.aclose()
        proxy.close()


# --------------------------------------------------------------------------- replies the checkpointer cannot store


HUGE_ARGS = [
    {"min_seq": 2**63},
    {"max_seq": -(10**30)},
    {"query": "order", "min_seq": 10**40, "max_seq": -(2**70)},
    {"query": "order", "limit": [10**30, {"deep": -(10**25)}]},
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("flavor", ["graph", "middleware"])
@pytest.mark.parametrize("args", HUGE_ARGS, ids=lambda a: "-".join(sorted(a)))
async def test_a_reply_with_integers_beyond_64_bits_does_not_end_the_run(
    store: HistoryStore, mode: str, flavor: str, args: dict[str, Any]
) -> None:
    lookup = {"name": "history_lookup", "args": args, "id": "big-1", "type": "tool_call"}
    model = Recorder(replies=[AIMessage("", tool_calls=[lookup]), "done"], requests=[])
    if flavor == "graph":
        graph = create_context_agent(
            model, store=store, config=ContextConfig(context_window=16_000, output_reserve=1_000)
        ).compile(checkpointer=InMemorySaver())
    else:
        middleware = ContextManagementMiddleware(
            store, model=model, config=ContextConfig(context_window=16_000, output_reserve=1_000)
        )
        graph = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "big"}}
    out = await call(graph, mode, {"messages": [("user", "find my order")]}, run)
    assert out["messages"][-1].text == "done"
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert answer.tool_call_id == "big-1" and answer.text
    # the next turn goes on from the checkpoint
    out = await call(graph, mode, {"messages": [("user", "thanks")]}, run)
    assert out["messages"][-1].type == "ai"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_tool_result_with_a_nul_byte_does_not_block_the_thread(
    store: HistoryStore, mode: str
) -> None:
    from langchain_core.tools import tool

    @tool
    def read_header(path: str) -> str:
        """Read a file's header."""
        return f"header\x00 payload of {path} \ud800"

    def script(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "read_header", "args": {"path": "a.bin"}, "id": f"c{len(messages)}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage("read it")

    model = Recorder(replies=[script], requests=[])
    graph = create_context_agent(
        model,
        [read_header],
        store=store,
        config=ContextConfig(context_window=16_000, output_reserve=1_000),
        lookup_tool=False,
    ).compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "nul"}}
    for turn in range(3):
        out = await call(graph, mode, {"messages": [("user", f"read a.bin, take {turn}")]}, run)
        assert out["messages"][-1].text == "read it"
    results = [e for e in store.read_events("nul") if e.role == "tool"]
    assert len(results) == 3
    assert all(e.text == "header\x00 payload of a.bin \ud800" for e in results)
    assert [e.seq for e in store.search("nul", "payload").hits] == [e.seq for e in results]


@st.composite
def tool_views(draw: st.DrawFn) -> list[BaseMessage]:
    """Random sequences of user turns, assistant calls (some invalid), results (some stray,
    some answering an earlier call, some ours from an earlier repair)."""
    calls = [f"c{n}" for n in range(4)]
    view: list[BaseMessage] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["human", "ai", "call", "result", "repair"]))
        if kind == "human":
            view.append(HumanMessage("q", id=f"h{n}"))
        elif kind == "ai":
            view.append(AIMessage("a", id=f"a{n}"))
        elif kind == "call":
            ids = draw(st.lists(st.sampled_from(calls), min_size=1, max_size=2, unique=True))
            good = [{"name": "t", "args": {}, "id": i} for i in ids[:1]]
            bad = [{"name": "t", "args": "{", "id": i, "error": "bad"} for i in ids[1:]]
            view.append(AIMessage("", id=f"a{n}", tool_calls=good, invalid_tool_calls=bad))
        else:
            call = draw(st.sampled_from(calls))
            extra = {"ctx_repair": {"tool_call_id": call}} if kind == "repair" else {}
            view.append(ToolMessage("r", tool_call_id=call, id=f"t{n}", additional_kwargs=extra))
    return view


@given(tool_views())
def test_the_quick_check_agrees_with_the_repair(view: list[BaseMessage]) -> None:
    from ctx_langgraph.view.repair import repair_tool_pairs

    fixed, repairs = repair_tool_pairs(view)
    assert pairing_problems(fixed) == []
    if not repairs:  # nothing to fix: the same messages, and the view was already valid
        assert [m.id for m in fixed] == [m.id for m in view]
        assert pairing_problems(view) == []  # (a stand-in answering its call is a result)
