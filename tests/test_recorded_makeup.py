"""What an inspector reads besides the history: each answer call's request make-up in the usage
ledger (its tokens by part, summing exactly to the budget's estimate), each summary version's
``metadata["compaction"]``, and a compaction that failed kept as a ``failed`` version of its
span. On every backend, through the graph and the middleware, sync and async; carried by an
export, and added to a store written before schema version 9."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import ContextConfig, ContextManagementMiddleware, create_context_agent
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.compaction import ExtractiveSummarizer
from ctx_langgraph.errors import DocumentError
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.makeup import HELD_KEYS, MAKEUP_KEYS, MAKEUP_PARTS, makeup_problem
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply
from ctx_langgraph.threads import delete_thread, export_thread, import_thread
from ctx_langgraph.usage import NormalizedUsage, UsageLedger
from ctx_langgraph.usage.booking import LedgerRecord
from ctx_langgraph.view.markers import is_summary
from tests.conftest import Backend

COUNTER = TiktokenCounter("gpt-4o")
CONFIG = ContextConfig(
    context_window=3_000,
    output_reserve=500,
    trigger=0.8,
    target=0.5,
    keep_recent_tokens=500,
    summary_max_tokens=600,
    tool_output_cap_tokens=None,
    compaction_attempts=2,
    compaction_timeout_s=5,
)
PROMPT = "You are the order desk's assistant. Answer briefly and cite order ids."
RULES = PinnedRules(text="Never promise a delivery date.\nAlways name the order id.")
COMPACTION_KEYS = {"duration_ms", "attempts", "fallback", "cut", "trigger", "estimate_before"}


@tool
def get_order_status(order_id: str) -> str:
    """The status of an order."""
    return f"{order_id}: packed at /srv/warehouse/bay-7/{order_id.lower()}.json, ships Friday"


def turns(count: int) -> list[str]:
    """What the user says: orders to look up (tool calls), a fact to remember, filler that
    grows the thread past the trigger, and a recall that calls the history lookup."""
    said = ["My locker code is LK-88213-Q, please keep it in mind."]
    for n in range(count):
        said.append(f"Where is ORD-{1040 + n}?")
        said.append(
            f"Note {n}: the customer in case {n} asked about gift wrapping, invoices and the "
            "return window for a blender, a kettle and a toaster bought in March. " * 3
        )
    said.append("Recall my locker code.")
    return said


def answers(ledger: UsageLedger, thread: str = "t") -> list[LedgerRecord]:
    return ledger.records(thread, purpose="answer")


def check_sums(records: list[LedgerRecord]) -> None:
    """Every answer call has a make-up, every key an int, the parts summing to the estimate."""
    assert records
    for record in records:
        makeup = record.makeup
        assert makeup is not None, record.call_key
        assert list(makeup) == [*MAKEUP_KEYS, *HELD_KEYS]
        assert makeup["generation"] >= 0 and makeup["covered_through"] >= 0
        assert (makeup["generation"] == 0) == (makeup["summary"] == 0 == makeup["trail"])
        assert makeup_problem(makeup) is None
        parts = sum(makeup[key] for key in MAKEUP_PARTS)
        assert parts + makeup["adjustment"] == makeup["estimate"]
        assert makeup["window"] == CONFIG.context_window
        assert makeup["reserve"] == CONFIG.output_reserve
        assert 0 <= makeup["prefix"] <= parts


def check_last_call(state: dict[str, Any], record: LedgerRecord) -> None:
    """The last answer call's make-up, recounted from the request it answered (the state's
    view before the reply) with the same counter."""
    makeup = record.makeup
    assert makeup is not None
    request = state["context"]["request"]
    assert makeup == request["makeup"] and makeup["estimate"] == request["estimate"]
    assert makeup["prefix"] == state["context"]["report"]["cache"]["prefix_tokens"]
    view = state["messages"][:-1]
    summary = [m for m in view if is_summary(m)]
    lookups = [m for m in view if isinstance(m, ToolMessage) and m.name == "history_lookup"]
    if summary:
        text = summary[0].text
        at = text.rfind("\n## Artifact trail\n")
        trail = COUNTER.count_text(text[at + 1 :]) if at >= 0 else 0
        assert makeup["trail"] == trail
        assert makeup["summary"] + makeup["trail"] == COUNTER.count_message(summary[0])
    assert makeup["lookup"] == sum(COUNTER.count_message(m) for m in lookups)
    assert makeup["pinned"] == sum(
        COUNTER.count_message(m) for m in view if m.additional_kwargs.get("ctx_pinned")
    )


def graph_of(store: HistoryStore, **kwargs: Any) -> Any:
    model = MeteringChatModel(replies=[tool_agent_reply])
    builder = create_context_agent(
        model,
        [get_order_status],
        store=store,
        config=kwargs.pop("config", CONFIG),
        prompt=PROMPT,
        pinned_rules=RULES,
        **kwargs,
    )
    return builder.compile(checkpointer=InMemorySaver())


def run_turns(graph: Any, said: list[str], mode: str, thread: str = "t") -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 100}

    async def all_async() -> dict[str, Any]:
        state: dict[str, Any] = {}
        for text in said:
            state = await graph.ainvoke({"messages": [HumanMessage(text)]}, config)
        return state

    if mode == "async":
        return asyncio.run(all_async())
    state: dict[str, Any] = {}
    for text in said:
        state = graph.invoke({"messages": [HumanMessage(text)]}, config)
    return state


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_graph_books_each_answer_call_with_its_makeup(backend: Backend, mode: str):
    store = backend.make()
    store.setup()
    ledger = UsageLedger(store)
    state = run_turns(graph_of(store), turns(9), mode)
    records = answers(ledger)
    check_sums(records)
    check_last_call(state, records[-1])
    assert store.get_active("t") is not None  # it compacted
    assert any(r.makeup["summary"] > 0 for r in records)  # type: ignore[index]
    assert any(r.makeup["trail"] > 0 for r in records)  # type: ignore[index]
    assert records[-1].makeup["lookup"] > 0  # type: ignore[index]  # the recall's lookup result
    for record in records:
        makeup = record.makeup
        assert makeup is not None
        assert makeup["system"] > 0 and makeup["tools"] > 0 and makeup["pinned"] > 0
        assert makeup["tail"] > 0 and makeup["memory"] == 0
        # the metering model's input is the same count plus the reply priming
        assert 0 <= makeup["adjustment"] <= 3
    # each answer call's make-up is of its own request: the estimates differ call to call
    assert len({r.makeup["estimate"] for r in records}) > len(records) // 2  # type: ignore[index]
    # the summary versions say how each came about
    versions = store.list_versions("t")
    assert versions and all(set(v.metadata["compaction"]) == COMPACTION_KEYS for v in versions)
    for version in versions:
        outcome = version.metadata["compaction"]
        assert outcome["trigger"] == "budget" and outcome["fallback"] is False
        assert outcome["attempts"] == 1 and outcome["duration_ms"] >= 0
        assert outcome["cut"] in ("user_turn", "assistant_boundary", "last_group")
        assert outcome["estimate_before"] > CONFIG.trigger * (3_000 - 500) * 0.9
    store.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_middleware_books_each_answer_call_with_its_makeup(backend: Backend, mode: str):
    store = backend.make()
    store.setup()
    ledger = UsageLedger(store)
    model = MeteringChatModel(replies=[tool_agent_reply])
    middleware = ContextManagementMiddleware(
        store,
        model=model,
        config=CONFIG,
        tools=[get_order_status],
        system_prompt=PROMPT,
        pinned_rules=RULES,
    )
    agent = create_agent(
        model,
        tools=[get_order_status],
        system_prompt=PROMPT,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    state = run_turns(agent, turns(9), mode)
    records = answers(ledger)
    check_sums(records)  # the handler booked each call first: the make-up filled it in
    check_last_call(state, records[-1])
    assert store.get_active("t") is not None
    assert any(r.makeup["summary"] > 0 for r in records)  # type: ignore[index]
    assert records[-1].makeup["lookup"] > 0  # type: ignore[index]
    assert all(0 <= r.makeup["adjustment"] <= 3 for r in records)  # type: ignore[index]
    store.close()


def makeup_of(estimate: int = 120) -> dict[str, int]:
    return {
        **dict.fromkeys(MAKEUP_PARTS, 0),
        "tail": estimate - 3,
        "adjustment": 3,
        "estimate": estimate,
        "reserve": 50,
        "window": 1_000,
        "prefix": 0,
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_makeup_survives_any_order_of_bookings(store: HistoryStore, mode: str):
    ledger = UsageLedger(store)
    usage = NormalizedUsage(provider="openai", model="gpt-4o", input_total=120, output=5)

    async def record(key: str, version: int, **kwargs: Any) -> Any:
        if mode == "sync":
            return ledger.record(key, usage, scope="t", version=version, **kwargs)
        return await ledger.arecord(key, usage, scope="t", version=version, **kwargs)

    async def scenario() -> None:
        # the handler books first; ctx_usage's duplicate brings the make-up
        await record("a", 2, cacheable_prefix=40)
        filled = await record("a", 2, makeup=makeup_of())
        assert filled.reason == "duplicate" and filled.deltas["input_total"] == 0
        assert filled.record.makeup == makeup_of()
        assert ledger.get("a").makeup == makeup_of()  # type: ignore[union-attr]
        assert ledger.get("a").cacheable_prefix == 40  # type: ignore[union-attr]
        # a later booking without one keeps it; a duplicate with another does not replace it
        await record("a", 3)
        await record("a", 3, makeup=makeup_of(200))
        assert ledger.get("a").makeup == makeup_of()  # type: ignore[union-attr]
        # ctx_usage first, the handler after: kept too
        await record("b", 2, makeup=makeup_of(90))
        await record("b", 2, cacheable_prefix=12)
        assert ledger.get("b").makeup == makeup_of(90)  # type: ignore[union-attr]
        [totals] = ledger.totals("t")
        assert totals.calls == 2 and totals.counts["input_total"] == 240
        with pytest.raises(ValueError, match="makeup"):
            await record("c", 1, makeup={**makeup_of(), "tail": 1})

    asyncio.run(scenario())


class FailingSummarizer:
    """Every summary request fails."""

    id = "failing"
    window_tokens = None

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: Any) -> str:
        self.calls += 1
        raise RuntimeError("model overloaded")

    async def asummarize(self, request: Any) -> str:
        return self.summarize(request)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failed_compaction_is_kept_as_a_failed_version(backend: Backend, mode: str):
    store = backend.make()
    store.setup()
    summarizer = FailingSummarizer()
    graph = graph_of(store, summarizer=summarizer)
    said = turns(30)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    first_failure: dict[str, Any] | None = None
    for text in said:
        if mode == "sync":
            state = graph.invoke({"messages": [HumanMessage(text)]}, config)
        else:
            state = asyncio.run(graph.ainvoke({"messages": [HumanMessage(text)]}, config))
        compaction = state["context"].get("report", {}).get("compaction") or {}
        if compaction.get("status") == "failed" and first_failure is None:
            first_failure = compaction
            [failed] = store.list_versions("t")
            # the span that was attempted, without a summary, and nothing else changed
            assert failed.status == "failed" and failed.summary_text is None
            assert failed.first_seq == 1 and failed.generation == 1
            assert failed.covered_through_seq < store.branch_info("t").head_seq  # type: ignore[union-attr]
            assert failed.key_facts == () and failed.provider_state is None
            assert "model overloaded" in (failed.error or "")
            assert failed.summarizer_id == "failing"
            outcome = failed.metadata["compaction"]
            assert set(outcome) == COMPACTION_KEYS
            assert outcome["attempts"] == CONFIG.compaction_attempts
            assert outcome["fallback"] is False and outcome["trigger"] == "budget"
            assert compaction["duration_ms"] == outcome["duration_ms"]
            assert store.get_active("t") is None
            assert store.branch_info("t").active_generation == 0  # type: ignore[union-attr]
            assert not any(is_summary(m) for m in state["messages"])
    assert first_failure is not None and summarizer.calls >= CONFIG.compaction_attempts
    assert state["messages"][-1].content  # the thread went on
    # the request that could not wait was covered by the offline fallback, and says so
    versions = store.list_versions("t")
    written = [v for v in versions if v.summary_text is not None]
    assert written and all(v.summarizer_id == "extractive-v1" for v in written)
    assert all(v.metadata["compaction"]["fallback"] is True for v in written)
    active = store.get_active("t")
    assert active is not None and active.generation == max(v.generation for v in written)
    tries = [v for v in versions if v.summary_text is None]
    assert tries and all(v.status == "failed" for v in tries)
    # the lookup and the export do not trip over the failed versions
    document = export_thread(store, "t")
    assert {s["status"] for s in document["summaries"]} >= {"failed", "active"}
    delete_thread(store, "t", ledger=True)
    import_thread(store, json.loads(json.dumps(document)))
    assert [v.to_json() for v in store.list_versions("t")] == [v.to_json() for v in versions]
    store.close()


def test_pruning_keeps_failed_tries_apart_from_summaries(store: HistoryStore):
    store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(12)])
    for through in (2, 4, 6):
        store.commit_candidate(
            store.create_candidate(store.snapshot("t", through), summary_text=f"to {through}")
        )
    for _ in range(3):
        store.record_failed(store.snapshot("t", 9), error="timed out", metadata={"x": 1})
    assert [v.status for v in store.list_versions("t")].count("failed") == 3
    assert store.prune_versions("t", keep=1) == 1 + 2  # one superseded, two failed tries
    statuses = sorted(v.status for v in store.list_versions("t"))
    assert statuses == ["active", "failed", "superseded"]
    assert store.get_active("t").covered_through_seq == 6  # type: ignore[union-attr]
    assert store.branch_info("t").active_generation == 3  # type: ignore[union-attr]
    # a commit after failed tries takes the next generation of the active summary
    committed = store.commit_candidate(
        store.create_candidate(store.snapshot("t", 9), summary_text="to 9")
    )
    assert committed.generation == 4


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_export_carries_the_makeup_and_the_compaction_metadata(backend: Backend, mode: str):
    store = backend.make()
    store.setup()
    ledger = UsageLedger(store)
    run_turns(graph_of(store), turns(9), mode)
    calls = {r.call_key: r.makeup for r in ledger.records("t")}
    versions = [v.to_json() for v in store.list_versions("t")]
    assert any(calls.values()) and versions
    document = json.loads(json.dumps(export_thread(store, "t")))
    exported = document["ledger"]["calls"]
    assert all(
        row["makeup"] is None or json.loads(row["makeup"]) == calls[row["call_key"]]
        for row in exported
    )
    older = copy.deepcopy(document)  # made before the make-up was recorded
    for row in older["ledger"]["calls"]:
        del row["makeup"]
    forged = copy.deepcopy(document)
    index = next(i for i, row in enumerate(exported) if row["makeup"])
    bad = json.loads(exported[index]["makeup"])
    forged["ledger"]["calls"][index]["makeup"] = json.dumps({**bad, "tail": bad["tail"] + 1})

    delete_thread(store, "t", ledger=True)
    with pytest.raises(DocumentError, match=rf"ledger\.calls\[{index}\]\.makeup"):
        import_thread(store, forged)
    import_thread(store, document)
    assert {r.call_key: r.makeup for r in ledger.records("t")} == calls
    assert [v.to_json() for v in store.list_versions("t")] == versions
    assert all(v["metadata"]["compaction"]["trigger"] == "budget" for v in versions)
    delete_thread(store, "t", ledger=True)
    import_thread(store, older)
    assert all(r.makeup is None for r in ledger.records("t"))
    store.close()


@pytest.mark.parametrize(
    "backend", ["sqlite_file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_version_8_store_upgrades_and_books_makeups(backend: Backend, monkeypatch):
    from ctx_langgraph.storage import migrations
    from ctx_langgraph.storage import runner as base
    from ctx_langgraph.storage.statements import Stmt

    def insert_v8_call() -> Any:  # a call as the ledger wrote it before the make-up
        yield Stmt(
            "INSERT INTO ctx_usage_calls (call_key, tenant, thread_id, branch, purpose, "
            "provider, model, status, version, input_total, output, raw, created_at, "
            "updated_at) VALUES (?, 'default', 't', 'main', 'answer', 'openai', 'gpt-4o', "
            "'complete', 2, 120, 5, '{}', ?, ?)",
            ("old", store.db.dialect.ts(store.clock()), store.db.dialect.ts(store.clock())),
        )

    with monkeypatch.context() as patch:  # the schema as it was at version 8
        patch.setattr(migrations, "SCHEMA_VERSION", 8)
        patch.setattr(base, "SCHEMA_VERSION", 8)
        store = backend.make()
        assert store.setup() == 8
        store.append("t", [HumanMessage("hello", id="h1"), AIMessage("hi", id="a1")])
        store.db.run(insert_v8_call(), write=True)
        store.close()
    store = backend.make()
    assert store.setup() == base.SCHEMA_VERSION >= 9
    ledger = UsageLedger(store)
    old = ledger.get("old")
    assert old is not None and old.makeup is None and old.usage.input_total == 120
    usage = NormalizedUsage(provider="openai", model="gpt-4o", input_total=120, output=5)
    assert ledger.record("old", usage, scope="t", version=2, makeup=makeup_of()).reason == (
        "duplicate"
    )
    assert ledger.get("old").makeup == makeup_of()  # type: ignore[union-attr]
    # a compaction on the upgraded store records its outcome and its failures
    snapshot = store.snapshot("t", 1)
    failed = store.record_failed(snapshot, error="timed out", metadata={"compaction": {}})
    assert store.get_checkpoint(failed.id).status == "failed"  # type: ignore[union-attr]
    document = export_thread(store, "t")
    assert json.loads(document["ledger"]["calls"][0]["makeup"]) == makeup_of()
    store.close()


def test_the_default_summarizer_is_not_the_fallback(store: HistoryStore):
    """A thread whose configured summarizer is the extractive one records ``fallback: False``:
    the flag says the offline fallback stood in, not which summarizer kind wrote it."""
    graph = graph_of(store, summarizer=ExtractiveSummarizer())
    run_turns(graph, turns(9), "sync")
    versions = store.list_versions("t")
    assert versions and all(v.metadata["compaction"]["fallback"] is False for v in versions)


def test_a_reply_gets_the_makeup_of_the_request_it_answers_only(store: HistoryStore):
    """``ctx_usage`` books the make-up only with a reply to that request: not after the epoch
    moved, not after another last message, not for the compacted retry after an overflow."""
    from ctx_langgraph.usage.node import make_usage_node

    ledger = UsageLedger(store)
    node = make_usage_node(ledger)
    usage = {"input_tokens": 120, "output_tokens": 5, "total_tokens": 125}
    request = {"epoch": 2, "input_through_message_id": "h1", "makeup": makeup_of()}
    cases = {
        "answers": ({"projection_epoch": 2}, "h1", True),
        "other epoch": ({"projection_epoch": 3}, "h1", False),
        "other message": ({"projection_epoch": 2}, "h0", False),
        "retried after an overflow": (
            {"projection_epoch": 2, "overflow": {"at_message_id": "h1", "retry_epoch": 3}},
            "h1",
            False,
        ),
        "an overflow of an earlier turn": (
            {"projection_epoch": 2, "overflow": {"at_message_id": "h0", "retry_epoch": 1}},
            "h1",
            True,
        ),
        "a broken make-up": (
            {"projection_epoch": 2, "request": {**request, "makeup": {}}},
            "h1",
            False,
        ),
    }
    for n, (name, (context, before, booked)) in enumerate(cases.items()):
        reply = AIMessage("ok", id=f"a{n}", usage_metadata=usage)  # type: ignore[arg-type]
        state = {
            "messages": [HumanMessage("hi", id=before), reply],
            "context": {"request": request, **context},
        }
        node.invoke(state, {"configurable": {"thread_id": "t"}})
        makeup = ledger.get(f"msg:a{n}").makeup  # type: ignore[union-attr]
        assert (makeup == makeup_of()) is booked, name
