"""Recall by meaning: the history store's vector index, on every backend, sync and async.

A real sentence-embedding model (the ``embeddings`` extra's MiniLM, offline) where meaning
matters; langchain_core's deterministic fake embeddings where only exact vectors do.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import ContextConfig, ContextManagementMiddleware, create_context_agent
from ctx_langgraph.embeddings import MiniLMEmbeddings
from ctx_langgraph.errors import EmbeddingError
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.history.index import vector_index
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.storage.statements import Stmt
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply
from ctx_langgraph.usage import UsageLedger
from tests.thread_api import threads_of

MINILM = MiniLMEmbeddings()
INDEX: dict[str, Any] = {"embed": MINILM, "dims": 384}
SECRET = "The vault combination is 7731, keep it between us."
TALK = [
    ("Caroline", "I went to the LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "That's great! They were stoked for the dinosaur exhibit at the museum."),
    ("Caroline", "My car broke down on the highway this morning."),
    ("Melanie", SECRET),
    ("Caroline", "We painted a sunset together at the lake last weekend."),
]


def _messages() -> list[HumanMessage]:
    return [HumanMessage(text, id=f"m{n}", name=name) for n, (name, text) in enumerate(TALK)]


def _count_vectors() -> Any:
    row = yield Stmt("SELECT count(*) FROM ctx_event_vectors", (), "one")
    return int(row[0])


async def _vectors(api: Any) -> int:
    db = api.store.db  # the store's database runs a raw operation
    return int(db.run(_count_vectors()) if api.mode == "sync" else await db.arun(_count_vectors()))


async def _semantic(api: Any, query: str) -> list[str]:
    hits = await api.rank("t", query, mode="semantic", limit=3)
    return [hit.event.event_id for hit in hits]


class Failing(Embeddings):
    """An embedding model whose provider is down."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise ConnectionError("provider unreachable")

    def embed_query(self, text: str) -> list[float]:
        raise ConnectionError("provider unreachable")


class Slow(DeterministicFakeEmbedding):
    """An embedding model that answers after two seconds."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        time.sleep(2)
        return super().embed_documents(texts)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(2)
        return super().embed_documents(texts)


class Garbage(Embeddings):
    """An embedding model that returns vectors of the wrong size, or none at all."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[0.5, float("nan")] for _ in texts[1:]]

    def embed_query(self, text: str) -> list[float]:
        return [1.0]


async def test_canary_a_deleted_secret_is_not_found_by_meaning(api: Any) -> None:
    api.store.use_index(INDEX)
    await api.append("t", _messages())
    report = await api.embed_pending("t")
    assert (report.embedded, report.pending, report.error) == (5, 0, None)
    assert report.tokens > 0
    assert (await _semantic(api, "what is the safe's secret number?"))[0] == "m3"
    # words miss it: the question shares no word with the secret
    assert await api.rank("t", "what is the safe's secret number?", mode="keyword") == []
    assert await api.delete_events("t", ["m3"]) == 1
    assert await _vectors(api) == 4  # gone in the same transaction as the event
    assert "m3" not in await _semantic(api, "what is the safe's secret number?")
    assert "m3" not in [h.event.event_id for h in await api.rank("t", "vault combination")]
    # hidden: its vector goes; shown again: embedded again
    await api.hide_events("t", ["m1"])
    assert await _vectors(api) == 3
    assert "m1" not in await _semantic(api, "children museum fossils")
    await api.show_events("t", ["m1"])
    assert (await api.embed_pending("t")).embedded == 1
    assert (await _semantic(api, "children museum fossils"))[0] == "m1"
    # revised: the old text's vector goes with the old text
    await api.append("t", [HumanMessage("My kids adore the aquarium sharks now.", id="m1")])
    assert await _vectors(api) == 3
    assert (await api.embed_pending("t")).embedded == 1
    assert (await _semantic(api, "children love sharks and fish"))[0] == "m1"


async def test_modes_and_their_ranking(api: Any) -> None:
    with pytest.raises(ValueError, match="needs a vector index"):
        await api.rank("t", "dinosaur", mode="semantic")
    api.store.use_index(INDEX)
    with pytest.raises(ValueError, match="mode must be one of"):
        await api.rank("t", "dinosaur", mode="fuzzy")
    await api.append("t", _messages())
    question = "What do Melanie's kids like?"
    assert [h.event.seq for h in await api.rank("t", question, mode="keyword")] == []
    pending = await api.rank("t", question)  # hybrid by default, nothing embedded yet
    assert (pending.mode, pending.unembedded) == ("hybrid", 5)
    await api.embed_pending("t")
    hybrid = await api.rank("t", question, limit=2)
    assert (hybrid.mode, hybrid.unembedded, hybrid.problem) == ("hybrid", 0, None)
    assert "m1" in [h.event.event_id for h in hybrid]
    only_hosts = await api.rank("t", question, mode="semantic", roles="ai")
    assert list(only_hosts) == []  # the filters hold in every mode
    later = await api.rank("t", question, mode="semantic", min_seq=3)
    assert all(h.event.seq >= 3 for h in later)


async def test_a_failing_or_garbage_model_loses_nothing(api: Any) -> None:
    await api.append("t", _messages())
    api.store.use_index({"embed": Failing(), "dims": 8, "model": "remote-embed"})
    report = await api.embed_pending("t")
    assert report.embedded == 0 and report.pending == 5
    assert "provider unreachable" in (report.error or "")
    fallback = await api.rank("t", "dinosaur exhibit")
    assert fallback.mode == "keyword" and "provider unreachable" in (fallback.problem or "")
    assert [h.event.event_id for h in fallback] == ["m1"]
    api.store.use_index({"embed": Garbage(), "dims": 8})
    report = await api.embed_pending("t")
    assert report.embedded == 0 and "vectors for" in (report.error or "")
    api.store.use_index({"embed": DeterministicFakeEmbedding(size=8), "dims": 8})
    assert (await api.embed_pending("t")).embedded == 5  # the backlog, later


async def test_a_slow_model_times_out_and_stays_pending(api: Any) -> None:
    await api.append("t", _messages()[:2])
    api.store.use_index({"embed": Slow(size=8), "dims": 8, "timeout_s": 0.2})
    started = time.monotonic()
    report = await api.embed_pending("t")
    assert time.monotonic() - started < 1.5
    assert report.pending == 2 and "took over 0.2 s" in (report.error or "")


def test_sync_model_calls_reuse_their_threads_until_one_times_out() -> None:
    """A sync call runs on a kept thread (none started per call); a call that outlives its
    timeout gives that pool up, and the next call gets a new one and works."""
    from ctx_langgraph.history.index import vector_index

    threads: list[threading.Thread] = []

    class Noted(DeterministicFakeEmbedding):
        slow: bool = False

        def embed_query(self, text: str) -> list[float]:
            threads.append(threading.current_thread())
            if self.slow:
                time.sleep(1)
            return super().embed_query(text)

    model = Noted(size=8)
    index = vector_index({"embed": model, "dims": 8, "timeout_s": 0.3})
    assert index is not None
    for n in range(5):
        index.embed_query(f"q{n}")
    assert len(set(threads)) == 1 and threads[0] is not threading.current_thread()
    model.slow = True
    with pytest.raises(EmbeddingError, match=r"took over 0\.3 s"):
        index.embed_query("slow")
    model.slow = False
    assert len(index.embed_query("after")) == 8
    assert threads[-1] is not threads[0]  # the stuck one's pool was given up


async def test_a_new_model_re_embeds_rather_than_mixing_spaces(api: Any) -> None:
    await api.append("t", _messages())
    api.store.use_index({"embed": DeterministicFakeEmbedding(size=16), "dims": 16})
    assert (await api.embed_pending("t")).embedded == 5
    api.store.use_index({"embed": DeterministicFakeEmbedding(size=8), "dims": 8})
    stale = await api.rank("t", "dinosaur exhibit", mode="semantic")
    assert list(stale) == [] and stale.unembedded == 5  # the 16-dim vectors are never compared
    assert (await api.embed_pending("t")).embedded == 5
    assert await _vectors(api) == 5  # replaced, not added beside
    fresh = await api.rank("t", "dinosaur exhibit", mode="semantic")
    assert len(fresh) == 5 and fresh.unembedded == 0


async def test_export_import_and_delete_thread(api: Any) -> None:
    api.store.use_index(INDEX)
    await api.append("t", _messages())
    await api.embed_pending("t")
    threads = threads_of(api)
    exported = await threads.export_thread("t")
    await threads.delete_thread("t", ledger=True)
    assert await _vectors(api) == 0
    await threads.import_thread(exported, into="t2")
    imported = await api.rank("t2", "the safe's secret number", mode="semantic")
    assert imported.unembedded == 5  # vectors are derived data: made again by this index
    assert (await api.embed_pending("t2")).embedded == 5
    assert (await _semantic_in(api, "t2", "the safe's secret number"))[0] == "m3"


async def _semantic_in(api: Any, thread: str, query: str) -> list[str]:
    return [h.event.event_id for h in await api.rank(thread, query, mode="semantic")]


async def test_embedding_calls_are_booked(api: Any) -> None:
    api.store.use_index(INDEX)
    await api.append("t", _messages())
    ledger = UsageLedger(api.store)
    report = await api.embed_pending("t", ledger=ledger)
    again = await api.embed_pending("t", ledger=ledger)
    assert again.embedded == 0
    records = [r for r in ledger.records("t") if r.purpose == "embedding"]
    assert len(records) == 1
    assert records[0].usage.input_total == report.tokens
    assert records[0].usage.model == "all-MiniLM-L6-v2-int8"


def test_the_index_config_is_checked() -> None:
    fake = DeterministicFakeEmbedding(size=4)
    with pytest.raises(ValueError, match="needs 'embed'"):
        vector_index({"dims": 4})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="unknown fields"):
        vector_index({"embed": fake, "dims": 4, "fields": ["text"]})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(TypeError, match="Embeddings"):
        vector_index({"embed": 42, "dims": 4})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="positive"):
        vector_index({"embed": fake, "dims": 0})
    index = vector_index({"embed": fake, "dims": 4, "model": "my embed/v2"})
    assert index is not None and index.key == "my-embed/v2@4"
    with pytest.raises(EmbeddingError, match="dimensions"):
        index.checked([[1.0, 2.0]], 1)


def _lookup_page(tool: Any, query: str) -> dict[str, Any]:
    result = tool.invoke({"query": query}, config={"configurable": {"thread_id": "t"}})
    return dict(json.loads(result))


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_the_lookup_tool_modes(mode: str) -> None:
    with SQLiteHistoryStore.from_path(":memory:", index=INDEX) as store:
        store.setup()
        store.append("t", _messages())
        tool = make_history_lookup_tool(store, mode=mode)  # type: ignore[arg-type]
        page = _lookup_page(tool, "What do Melanie's kids like?")
        hits = [r["seq"] for r in page["records"] if r.get("hit")]
        if mode == "keyword":  # "like" and "kids" are not in any record
            assert hits == []
        else:  # the first page embedded the thread first (catch-up), then searched by meaning
            assert 2 in hits and "searched" not in page


def test_the_lookup_says_what_was_searched_by_words_only() -> None:
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        store.append("t", _messages())
        with pytest.raises(ValueError, match="needs a vector index"):
            make_history_lookup_tool(store, mode="semantic")
        store.use_index({"embed": Failing(), "dims": 8})
        page = _lookup_page(make_history_lookup_tool(store), "dinosaur exhibit")
        assert "by words only" in page["searched"]
        assert [r["seq"] for r in page["records"] if r.get("hit")] == [2]


def test_mini_lm_is_the_pinned_model() -> None:
    kids, fossils, car = MINILM.embed_documents(
        ["My kids love dinosaurs.", "They were stoked for the fossil exhibit!", "My car broke."]
    )
    assert len(kids) == 384

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(kids, fossils) > cos(kids, car) + 0.1
    assert MINILM.embed_query("My kids love dinosaurs.") == pytest.approx(kids, abs=1e-5)
    assert MINILM.count_tokens(["Hello world", ""]) == [4, 2]


def test_an_ai_message_and_tool_calls_are_embedded() -> None:
    with SQLiteHistoryStore.from_path(":memory:", index=INDEX) as store:
        store.setup()
        call = {"name": "book_flight", "args": {"to": "Lisbon"}, "id": "c1"}
        store.append(
            "t", [HumanMessage("plan my trip", id="h"), AIMessage("", id="a", tool_calls=[call])]
        )
        assert store.embed_pending("t").embedded == 2
        hits = store.rank("t", "airplane ticket to Portugal", mode="semantic")
        assert hits[0].event.event_id == "a"


def _graph(wiring: str, store: SQLiteHistoryStore, config: ContextConfig) -> Any:
    """An agent whose store has the index: ours, or ``create_agent`` with the middleware."""
    model = MeteringChatModel(replies=[tool_agent_reply])
    lookup = make_history_lookup_tool(store)
    if wiring == "create_context_agent":
        builder = create_context_agent(model, [], store=store, config=config, lookup_tool=lookup)
        return builder.compile(checkpointer=InMemorySaver())
    middleware = ContextManagementMiddleware(store, config=config, model=model)
    return create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )


GRAPH_CONFIG = ContextConfig(context_window=8_000, output_reserve=500)


@pytest.mark.parametrize("wiring", ["create_context_agent", "middleware"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_graph_with_the_index_embeds_after_each_turn(
    wiring: str, mode: str, tmp_path: Any
) -> None:
    with SQLiteHistoryStore.from_path(tmp_path / "h.sqlite", index=INDEX) as store:
        store.setup()
        graph = _graph(wiring, store, GRAPH_CONFIG)
        run = {"configurable": {"thread_id": "t"}}
        turns = [text for _, text in TALK] + ["look up: what do Melanie's kids like?"]
        for text in turns:
            message = {"messages": [HumanMessage(text)]}
            state = (
                graph.invoke(message, run) if mode == "sync" else await graph.ainvoke(message, run)
            )
        report = state["context"]["report"]["index"]
        assert report["error"] is None and report["pending"] == 0 and report["embedded"] >= 1
        assert store.embed_pending("t").embedded == 0  # every turn embedded what it added
        lookup = next(m for m in state["messages"] if m.type == "tool")
        page = json.loads(str(lookup.content))
        assert "dinosaur exhibit" in json.dumps(page["records"])  # found by meaning
        booked = {t.key["purpose"]: t for t in UsageLedger(store).totals("t", by=["purpose"])}
        assert booked["embedding"].counts["input_total"] > 0


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_failing_or_slow_model_never_stops_a_turn(mode: str) -> None:
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        store.use_index({"embed": Slow(size=8), "dims": 8, "timeout_s": 0.3})
        graph = _graph("create_context_agent", store, GRAPH_CONFIG)
        run = {"configurable": {"thread_id": "t"}}
        message = {"messages": [HumanMessage("hello there")]}
        state = graph.invoke(message, run) if mode == "sync" else await graph.ainvoke(message, run)
        assert "took over 0.3 s" in state["context"]["report"]["index"]["error"]
        assert state["messages"][-1].type == "ai"
        store.use_index({"embed": Failing(), "dims": 8})
        state = graph.invoke(message, run) if mode == "sync" else await graph.ainvoke(message, run)
        assert "provider unreachable" in state["context"]["report"]["index"]["error"]
        assert state["context"]["report"]["index"]["pending"] == len(store.read_events("t"))
        store.use_index({"embed": DeterministicFakeEmbedding(size=8), "dims": 8})
        state = graph.invoke(message, run) if mode == "sync" else await graph.ainvoke(message, run)
        report = state["context"]["report"]["index"]  # the backlog of the two turns before, too
        assert report["embedded"] == len(store.read_events("t")) and report["pending"] == 0


async def test_with_precompact_at_embedding_runs_in_the_background(tmp_path: Any) -> None:
    config = ContextConfig(context_window=8_000, output_reserve=500, precompact_at=0.5)
    with SQLiteHistoryStore.from_path(tmp_path / "h.sqlite", index=INDEX) as store:
        store.setup()
        graph = _graph("create_context_agent", store, config)
        run = {"configurable": {"thread_id": "t"}}
        state = await graph.ainvoke({"messages": [HumanMessage(TALK[1][1])]}, run)
        assert state["context"]["report"]["index"] == {"background": True}
        for _ in range(100):  # the task ends soon after the turn
            if (
                store.embed_pending("t", limit=1).pending == 0
                and not store.rank("t", "dinosaur", mode="semantic").unembedded
            ):
                break
            await asyncio.sleep(0.05)
        assert store.rank("t", "kids like", mode="semantic").unembedded == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_memory_recall_uses_the_langgraph_stores_own_index(mode: str) -> None:
    from langgraph.store.memory import InMemoryStore

    from ctx_langgraph import LongTermMemory
    from ctx_langgraph.memory import MemoryCandidate, MemoryScopes

    facts = [
        "The user prefers answers by email.",
        "The user's car is a blue hatchback.",
        "The user works night shifts at the hospital.",
        "The user's daughter is crazy about dinosaurs and fossils.",
    ]
    me = MemoryScopes("default", "t", user_id="u")
    results = {}
    for indexed in (False, True):
        store = InMemoryStore(index={"embed": MINILM, "dims": 384}) if indexed else InMemoryStore()
        memory = LongTermMemory(store, max_records=1)
        memory.remember(me, [MemoryCandidate(text) for text in facts])
        question = "what does my kid like?"
        recalled = (
            memory.recall(me, question) if mode == "sync" else await memory.arecall(me, question)
        )
        results[indexed] = recalled[0].content
    assert results[True] == facts[-1]  # meaning: no word of the question is in it
    assert results[False] != facts[-1]  # words alone: none matches, so another comes first


async def test_a_search_after_a_turn_reads_only_the_new_vectors(api: Any, monkeypatch: Any) -> None:
    """The thread's cached vectors are refreshed with what the turn embedded, not read whole;
    a deletion is taken out of them the same way."""
    from ctx_langgraph.history import vector_cache

    api.store.use_index({"embed": DeterministicFakeEmbedding(size=8), "dims": 8})
    await api.append("t", [HumanMessage(f"note {n}", id=f"n{n}") for n in range(40)])
    await api.embed_pending("t")
    assert len(await api.rank("t", "note 3", mode="semantic", limit=100)) == 40
    built: list[int] = []
    original = vector_cache.ThreadVectors.build.__func__  # type: ignore[attr-defined]

    def counting(cls: Any, incarnation: str, version: int, rows: Any, dims: int) -> Any:
        built.append(len(rows))
        return original(cls, incarnation, version, rows, dims)

    monkeypatch.setattr(vector_cache.ThreadVectors, "build", classmethod(counting))
    await api.append("t", [HumanMessage("the new one", id="new")])
    await api.embed_pending("t")
    await api.delete_events("t", ["n5"])
    hits = await api.rank("t", "the new one", mode="semantic", limit=100)
    assert built == [1]  # only the new event's vectors were read
    assert hits[0].event.event_id == "new" and len(hits) == 40
    assert "n5" not in {hit.event.event_id for hit in hits}


def test_a_lookup_page_is_indexed_as_nothing() -> None:
    """A history lookup's page is a copy of older events: it gets no vector, so a search finds
    the events themselves, and it does not wait to be embedded."""
    from langchain_core.messages import ToolMessage

    from ctx_langgraph.history.vectors import LOOKUP_PAGE_MARK
    from ctx_langgraph.view.markers import LOOKUP_MARK

    assert LOOKUP_PAGE_MARK == LOOKUP_MARK

    with SQLiteHistoryStore.from_path(":memory:", index=INDEX) as store:
        store.setup()
        store.append("t", _messages())
        page = ToolMessage(
            json.dumps({"records": [{"text": TALK[1][1]}]}),
            tool_call_id="c1",
            name="history_lookup",
            id="page",
            artifact={"ctx_lookup": True},
        )
        store.append("t", [page])
        report = store.embed_pending("t")
        assert (report.embedded, report.pending) == (6, 0)
        hits = store.rank("t", "dinosaur exhibit at the museum", mode="semantic")
        assert hits.unembedded == 0 and "page" not in [h.event.event_id for h in hits]
        assert hits[0].event.event_id == "m1"
