"""Usage normalization, stream accumulation, the ledger's booking rules, the ctx_usage node."""

from __future__ import annotations

import random
import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from ctx_langgraph.errors import UsageParseError
from ctx_langgraph.history import Scope, SQLiteHistoryStore
from ctx_langgraph.threads import delete_thread, export_thread, import_thread
from ctx_langgraph.usage import (
    NormalizedUsage,
    PriceTable,
    UsageAccumulator,
    UsageLedger,
    normalize_usage,
)
from ctx_langgraph.usage.node import make_usage_node

# ----------------------------------------------------------------------------- normalize_usage


def counts(u: NormalizedUsage):
    return (u.input_total, u.input_uncached, u.cache_read, u.cache_write, u.output, u.reasoning)


def test_openai_responses_response_and_bare_usage():
    usage = {
        "input_tokens": 10_000,
        "input_tokens_details": {"cached_tokens": 8_000},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 120},
        "total_tokens": 10_300,
    }
    bare = normalize_usage(usage)
    assert counts(bare) == (10_000, 2_000, 8_000, None, 300, 120) and bare.provider == "openai"
    full = normalize_usage(
        {
            "id": "resp_1",
            "object": "response",
            "model": "gpt-4.1",
            "status": "completed",
            "output": [],
            "usage": usage,
        }
    )
    assert (full.response_id, full.model, full.complete) == ("resp_1", "gpt-4.1", True)
    assert counts(full) == counts(bare)
    in_flight = normalize_usage(
        {"id": "resp_2", "object": "response", "status": "in_progress", "usage": None}
    )
    assert not in_flight.known and in_flight.status == "unknown"


def test_chat_completions_response_and_usage():
    usage = {
        "prompt_tokens": 1_000,
        "completion_tokens": 50,
        "total_tokens": 1_050,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 10},
    }
    u = normalize_usage(
        {"id": "chatcmpl-9", "object": "chat.completion", "model": "gpt-4o", "usage": usage}
    )
    assert counts(u) == (1_000, 1_000, 0, None, 50, 10)
    assert (u.provider, u.response_id, u.status) == ("openai", "chatcmpl-9", "complete")


def test_anthropic_fields_are_disjoint_and_added():
    u = normalize_usage(
        {
            "id": "msg_1",
            "type": "message",
            "model": "claude-sonnet-4-5",
            "usage": {
                "input_tokens": 50,
                "cache_read_input_tokens": 18_000,
                "cache_creation_input_tokens": 1_200,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": 1_000,
                    "ephemeral_1h_input_tokens": 200,
                },
                "output_tokens": 120,
            },
        }
    )
    assert counts(u) == (19_250, 50, 18_000, 1_200, 120, None)
    assert u.provider == "anthropic" and u.response_id == "msg_1"


def test_anthropic_zero_input_is_unknown_but_zero_with_cache_is_known():
    gateway = normalize_usage({"input_tokens": 0, "output_tokens": 9}, provider="anthropic")
    assert gateway.input_total is None and gateway.output == 9 and gateway.status == "partial"
    cached = normalize_usage(
        {"input_tokens": 0, "cache_read_input_tokens": 500, "output_tokens": 9}
    )
    assert cached.input_total == 500


def test_gemini_usage_metadata_snake_and_camel():
    snake = normalize_usage(
        {
            "usage_metadata": {
                "prompt_token_count": 2_000,
                "cached_content_token_count": 1_500,
                "candidates_token_count": 100,
                "thoughts_token_count": 40,
                "total_token_count": 2_140,
            },
            "model_version": "gemini-2.5-pro",
        }
    )
    camel = normalize_usage(
        {
            "promptTokenCount": 2_000,
            "cachedContentTokenCount": 1_500,
            "candidatesTokenCount": 100,
            "thoughtsTokenCount": 40,
        }
    )
    assert counts(snake) == counts(camel) == (2_000, 500, 1_500, None, 140, 40)
    assert snake.provider == "google" and snake.model == "gemini-2.5-pro"


def test_langchain_usage_metadata_with_tier_and_ttl_keys():
    u = normalize_usage(
        {
            "input_tokens": 1_000,
            "output_tokens": 60,
            "total_tokens": 1_060,
            "input_token_details": {"priority_cache_read": 600, "priority": 400},
            "output_token_details": {"priority_reasoning": 20},
        }
    )
    assert counts(u) == (1_000, 400, 600, None, 60, 20)
    ttl = normalize_usage(
        {
            "input_tokens": 1_450,
            "output_tokens": 5,
            "total_tokens": 1_455,
            "input_token_details": {
                "cache_read": 200,
                "cache_creation": 0,
                "ephemeral_5m_input_tokens": 1_000,
                "ephemeral_1h_input_tokens": 200,
            },
        }
    )
    assert counts(ttl)[:4] == (
        1_450,
        50,
        200,
        1_200,
    )  # the TTL breakdown is the write, counted once


def test_langchain_ai_message_prefers_the_provider_payload():
    message = AIMessage(
        "ok",
        id="a1",
        usage_metadata={"input_tokens": 19_250, "output_tokens": 1, "total_tokens": 19_251},
        response_metadata={
            "id": "msg_7",
            "model": "claude-sonnet-4-5",
            "model_provider": "anthropic",
            "usage": {"input_tokens": 50, "cache_read_input_tokens": 19_200, "output_tokens": 1},
        },
    )
    u = normalize_usage(message)
    assert counts(u)[:3] == (19_250, 50, 19_200) and (u.response_id, u.model) == (
        "msg_7",
        "claude-sonnet-4-5",
    )
    plain = normalize_usage(
        AIMessage("ok", usage_metadata={"input_tokens": 7, "output_tokens": 2, "total_tokens": 9})
    )
    assert counts(plain)[:1] == (7,) and plain.provider == "langchain"
    assert not normalize_usage(AIMessage("no usage")).known


def test_sdk_objects_are_accepted():
    from anthropic.types import Usage

    u = normalize_usage(Usage(input_tokens=5, output_tokens=6, cache_read_input_tokens=10))
    assert counts(u)[:3] == (15, 5, 10)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"prompt_tokens": "12", "completion_tokens": 1}, "prompt_tokens"),
        ({"prompt_tokens": -1, "completion_tokens": 1}, "prompt_tokens"),
        ({"prompt_tokens": 1.5, "completion_tokens": 1}, "prompt_tokens"),
        ({"prompt_tokens": True, "completion_tokens": 1}, "prompt_tokens"),
        ({"prompt_tokens": 9.2e18, "completion_tokens": 1}, "prompt_tokens"),
        (
            {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 11}},
            "prompt_tokens_details.cached_tokens",
        ),
        ({"prompt_tokens": 10, "prompt_tokens_details": [1]}, "prompt_tokens_details"),
        ({"input_tokens": 3, "output_tokens": 1}, "usage"),  # ambiguous without provider=
        (
            {"object": "chat.completion", "usage": {"prompt_tokens": float("nan")}},
            "usage.prompt_tokens",
        ),
    ],
)
def test_malformed_payloads_name_the_field(payload, field):
    with pytest.raises(UsageParseError) as info:
        normalize_usage(payload)
    assert info.value.field.endswith(field)
    assert field.split(".")[-1] in str(info.value)


def test_unknown_provider_and_unreadable_source():
    with pytest.raises(UsageParseError, match="unknown provider 'mistralai'"):
        normalize_usage({"input_tokens": 1}, provider="mistralai")
    with pytest.raises(UsageParseError, match="cannot read usage from a int"):
        normalize_usage(42)


# ----------------------------------------------------------------------------- UsageAccumulator


def test_accumulator_openai_responses_events_and_stale_rejection():
    acc = UsageAccumulator()
    base = {"id": "resp_1", "object": "response", "model": "gpt-4.1", "output": []}
    assert acc.add(
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {**base, "status": "in_progress", "usage": None},
        }
    )
    assert acc.add({"type": "response.output_text.delta", "sequence_number": 1, "delta": "hi"})
    assert not acc.add(
        {"type": "response.output_text.delta", "sequence_number": 1, "delta": "dup"}
    )  # stale
    assert acc.usage.response_id == "resp_1" and not acc.final
    usage = {
        "input_tokens": 900,
        "input_tokens_details": {"cached_tokens": 100},
        "output_tokens": 40,
    }
    assert acc.add(
        {
            "type": "response.completed",
            "sequence_number": 5,
            "response": {**base, "status": "completed", "usage": usage},
        }
    )
    assert acc.final and counts(acc.usage)[:3] == (900, 800, 100) and acc.usage.complete
    assert not acc.add(
        {"type": "response.completed", "sequence_number": 6, "response": {**base, "usage": usage}}
    )


def test_accumulator_anthropic_missing_fields_are_not_zeroed():
    acc = UsageAccumulator()
    acc.add(
        {
            "type": "message_start",
            "message": {"id": "m", "usage": {"input_tokens": 70, "output_tokens": 1}},
        }
    )
    acc.add({"type": "message_delta", "usage": {"output_tokens": 30}})
    acc.add(
        {"type": "message_delta", "usage": {"input_tokens": 0, "output_tokens": 55}}
    )  # gateway zero
    assert (acc.usage.input_total, acc.usage.output, acc.usage.complete) == (70, 55, False)
    acc.add({"type": "message_stop"})
    assert acc.final and acc.usage.complete and acc.usage.status == "complete"


def test_accumulator_chat_chunks_and_langchain_deltas():
    acc = UsageAccumulator()
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {}}],
    }
    acc.add({**chunk, "usage": None})
    acc.add({**chunk, "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
    assert acc.final and counts(acc.usage)[:1] == (12,) and acc.usage.output == 3

    lc = UsageAccumulator()
    lc.add(
        AIMessageChunk(
            "a", usage_metadata={"input_tokens": 12, "output_tokens": 0, "total_tokens": 12}
        )
    )
    lc.add(
        AIMessageChunk(
            "b", usage_metadata={"input_tokens": 0, "output_tokens": 4, "total_tokens": 4}
        )
    )
    lc.add(
        AIMessageChunk(
            "",
            usage_metadata={"input_tokens": 0, "output_tokens": 3, "total_tokens": 3},
            chunk_position="last",
        )
    )
    assert lc.final and (lc.usage.input_total, lc.usage.output) == (12, 7)  # deltas add


def test_accumulator_langchain_anthropic_chunks_are_cumulative():
    acc = UsageAccumulator()
    for output in (30, 80, 120):
        acc.add(
            AIMessageChunk(
                "",
                response_metadata={"model_provider": "anthropic"},
                usage_metadata={"input_tokens": 19_250, "output_tokens": output, "total_tokens": 0},
            )
        )
    assert (acc.usage.input_total, acc.usage.output) == (19_250, 120)


# ----------------------------------------------------------------------------- the ledger


@pytest.fixture(scope="module")
def memory_ledger():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield UsageLedger(store)
    store.close()


def usage_of(inp: int, out: int, cached: int = 0, model: str = "gpt-4o") -> NormalizedUsage:
    return normalize_usage(
        {
            "id": "x",
            "object": "chat.completion",
            "model": model,
            "usage": {
                "prompt_tokens": inp,
                "completion_tokens": out,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
    )


def test_booking_rules(memory_ledger):
    scope = Scope(f"t-{uuid.uuid4().hex}")
    first = memory_ledger.record("k1", usage_of(100, 10), scope=scope, status="partial", version=1)
    assert first.reason == "new" and first.deltas["input_total"] == 100
    final = memory_ledger.record("k1", usage_of(100, 40), scope=scope, version=2)
    assert (
        final.reason == "update"
        and final.deltas["output"] == 30
        and final.deltas["input_total"] == 0
    )
    assert (
        memory_ledger.record("k1", usage_of(100, 40), scope=scope, version=2).reason == "duplicate"
    )
    assert memory_ledger.record("k1", usage_of(1, 1), scope=scope, version=1).reason == "stale"
    correction = memory_ledger.record("k1", usage_of(90, 40), scope=scope, version=3)
    assert (
        correction.deltas["input_total"] == -10
    )  # a billing correction books a negative difference
    partial = memory_ledger.record(
        "k1", NormalizedUsage(output=45, provider="openai"), scope=scope, version=4
    )
    assert partial.record.usage.input_total == 90  # an unknown count keeps its booked value
    [totals] = memory_ledger.totals(scope)
    assert (totals.calls, totals.counts["input_total"], totals.counts["output"]) == (1, 90, 45)
    assert memory_ledger.get("k1").version == 4 and memory_ledger.get("missing") is None


def test_totals_grouping_cost_and_unknowns(memory_ledger):
    scope = Scope(f"t-{uuid.uuid4().hex}")
    memory_ledger.record("a", usage_of(1_000_000, 0), scope=scope, purpose="answer")
    memory_ledger.record(
        "b", usage_of(1_000_000, 0, cached=1_000_000), scope=scope, purpose="summary"
    )
    memory_ledger.record("c", usage_of(10, 1, model="house-model"), scope=scope, purpose="summary")
    memory_ledger.record("d", NormalizedUsage(complete=False), scope=scope, purpose="retry")
    by = {t.key["purpose"]: t for t in memory_ledger.totals(scope, by=["purpose"])}
    assert by["answer"].cost == pytest.approx(2.50) and by["answer"].cost_unknown_calls == 0
    assert by["summary"].cost == pytest.approx(1.25) and by["summary"].cost_unknown_calls == 1
    assert by["retry"].unknown_calls == 1 and by["retry"].counts["input_total"] == 0
    [whole] = memory_ledger.totals(scope)
    assert whole.calls == 4
    with pytest.raises(ValueError, match="cannot group usage totals by"):
        memory_ledger.totals(scope, by=["cost; DROP TABLE ctx_usage_calls"])
    custom = UsageLedger(memory_ledger.store, prices=PriceTable({}))
    assert custom.record("e", usage_of(5, 5), scope=scope).record.cost is None


def test_moving_a_call_to_another_model_moves_its_totals(memory_ledger):
    scope = Scope(f"t-{uuid.uuid4().hex}")
    memory_ledger.record(
        "m",
        NormalizedUsage(input_total=10, input_uncached=10, output=1, provider="openai"),
        scope=scope,
        version=1,
    )
    memory_ledger.record("m", usage_of(10, 2, model="gpt-4o"), scope=scope, version=2)
    rows = {t.key["model"]: t for t in memory_ledger.totals(scope, by=["model"])}
    assert rows["gpt-4o"].calls == 1 and rows["gpt-4o"].counts["output"] == 2
    assert rows.get("") is None or rows[""].calls == 0


calls_strategy = st.lists(
    st.lists(
        st.tuples(st.integers(0, 5_000), st.integers(0, 500), st.integers(0, 100)),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=calls_strategy, seed=st.integers(0, 2**32 - 1))
def test_ledger_totals_are_exact_under_duplication_and_reordering(memory_ledger, calls, seed):
    """Each call has versions 1..k (provisional, final, corrections). Whatever order and however
    often they arrive, the totals equal the sum of each call's highest version."""
    rng = random.Random(seed)
    scope = Scope(f"prop-{uuid.uuid4().hex}")
    events = []
    for c, versions in enumerate(calls):
        for v, (inp, out, cached) in enumerate(versions, start=1):
            event = (f"{scope.thread_id}-{c}", v, usage_of(inp + cached, out, cached))
            events.extend([event] * rng.randint(1, 3))
    rng.shuffle(events)
    for key, version, usage in events:
        memory_ledger.record(key, usage, scope=scope, version=version)
    [totals] = memory_ledger.totals(scope)
    finals = [versions[-1] for versions in calls]
    assert totals.calls == len(calls)
    assert totals.counts["input_total"] == sum(inp + cached for inp, _, cached in finals)
    assert totals.counts["cache_read"] == sum(cached for _, _, cached in finals)
    assert totals.counts["output"] == sum(out for _, out, _ in finals)


junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10**7)
    | st.floats(allow_nan=True)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
usage_keys = st.sampled_from(
    [
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "prompt_tokens",
        "completion_tokens",
        "prompt_tokens_details",
        "input_tokens_details",
        "total_tokens",
    ]
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(usage={"cache_read_input_tokens": 9.2e18}, provider="anthropic")  # once overflowed SQLite
@given(
    usage=st.dictionaries(usage_keys, junk, max_size=5) | junk,
    provider=st.sampled_from(["anthropic", "openai", None, "x"]),
)
def test_fuzzed_usage_never_stops_ctx_usage(memory_ledger, usage, provider):
    node = make_usage_node(memory_ledger)
    meta = {"usage": usage, "id": f"r-{uuid.uuid4().hex}"}
    if provider:
        meta["model_provider"] = provider
    reply = AIMessage("ok", id=f"a-{uuid.uuid4().hex}", response_metadata=meta)
    update = node.invoke(
        {"messages": [HumanMessage("q", id="h"), reply]}, {"configurable": {"thread_id": "fuzz"}}
    )
    record = memory_ledger.get(update["context"]["report"]["last_usage"]["call_key"])
    assert record is not None
    assert record.status in ("unknown", "partial", "complete")
    if "error" in record.usage.raw:
        assert record.status == "unknown"


# ----------------------------------------------------------------------------- the ctx_usage node


def test_stale_response_is_booked_but_does_not_move_the_baseline(memory_ledger):
    node = make_usage_node(memory_ledger)
    reply = AIMessage(
        "late",
        id="late-1",
        usage_metadata={"input_tokens": 50_000, "output_tokens": 3, "total_tokens": 50_003},
    )
    context = {
        "projection_epoch": 3,
        "request": {"epoch": 2, "input_through_message_id": "h0"},
        "baseline": {"measured_input_tokens": 8_000, "projection_epoch": 3},
    }
    update = node.invoke(
        {"messages": [HumanMessage("q", id="h0"), reply], "context": context},
        {"configurable": {"thread_id": "stale"}},
    )
    assert (
        "baseline" not in update["context"]
        and update["context"]["report"]["last_usage"]["stale"] is True
    )
    assert memory_ledger.get("msg:late-1").usage.input_total == 50_000
    # the same reply seen again (a resumed run) is not booked twice
    again = {
        "messages": [HumanMessage("q", id="h0"), reply],
        "context": {**context, **update["context"]},
    }
    assert node.invoke(again, {"configurable": {"thread_id": "stale"}}) == {}


async def test_node_async_and_no_ai_message(memory_ledger):
    node = make_usage_node(memory_ledger)
    assert (
        await node.ainvoke({"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": "x"}})
        == {}
    )
    reply = AIMessage(
        "a", id="async-1", usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
    )
    update = await node.ainvoke(
        {
            "messages": [HumanMessage("q", id="q1"), reply],
            "context": {"request": {"epoch": 0, "input_through_message_id": "q1"}},
        },
        {"configurable": {"thread_id": "x"}},
    )
    assert update["context"]["baseline"] == {
        "measured_input_tokens": 5,
        "input_through_message_id": "q1",
        "projection_epoch": 0,
        "model": None,
        "response_id": None,
        "reply_message_id": "async-1",
    }


# ----------------------------------------------------------------------------- concurrency on PostgreSQL

_BOOKER = """
import sys
from ctx_langgraph.history import PostgresHistoryStore
from ctx_langgraph.usage import UsageLedger, normalize_usage
dsn = sys.argv[1]
start = {"input_tokens": 50, "cache_read_input_tokens": 18000, "cache_creation_input_tokens": 1200}
with PostgresHistoryStore.from_conn_string(dsn) as store:
    ledger = UsageLedger(store)
    for round in range(40):
        key = f"anthropic:msg_{round}"
        ledger.record(key, normalize_usage({**start, "output_tokens": 30}), scope="race", status="partial", version=1)
        ledger.record(key, normalize_usage({**start, "output_tokens": 120}), scope="race", version=2)
        ledger.record(key, normalize_usage({**start, "output_tokens": 120}), scope="race", version=2)
"""


@pytest.mark.postgres
def test_two_processes_booking_the_same_calls_book_each_once(pg_dsn):
    from ctx_langgraph.history import PostgresHistoryStore

    with PostgresHistoryStore.from_conn_string(pg_dsn) as store:
        store.setup()
        procs = [subprocess.Popen([sys.executable, "-c", _BOOKER, pg_dsn]) for _ in range(2)]
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
        [totals] = UsageLedger(store).totals("race")
        assert totals.calls == 40
        assert totals.counts["input_total"] == 40 * 19_250
        assert totals.counts["output"] == 40 * 120


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_records_list_a_threads_calls_on_every_backend(store, mode):
    from conftest import Api

    ledger = Api(UsageLedger(store), mode)  # type: ignore[arg-type]
    for n, (thread, purpose) in enumerate(
        [("a", "answer"), ("a", "summary"), ("b", "answer"), ("a", "answer")]
    ):
        await ledger.record(f"k{n}", usage_of(100 + n, 5), scope=thread, purpose=purpose)
    await ledger.record("k0", usage_of(100, 5), scope="a", purpose="answer")  # a duplicate
    records = await ledger.records("a")
    assert [(r.call_key, r.purpose, r.usage.input_total) for r in records] == [
        ("k0", "answer", 100),
        ("k1", "summary", 101),
        ("k3", "answer", 103),
    ]
    assert [r.call_key for r in await ledger.records("a", purpose="answer", limit=1)] == ["k0"]
    assert await ledger.records(Scope("a", tenant="other")) == []
    with pytest.raises(ValueError, match="limit"):
        await ledger.records("a", limit=0)


async def test_the_provider_payload_is_stored_for_incomplete_records_only(store):
    """A partial or unknown record keeps what the provider said (to re-derive its counts); a
    complete one keeps its counts and no payload, in the record, the export and an import."""
    store.append("pay", [HumanMessage("q", id="h")])  # a thread to export
    ledger = UsageLedger(store)
    streamed = {"type": "message_delta", "usage": {"output_tokens": 30}}
    partial = NormalizedUsage(input_total=50, output=30, complete=False, raw=streamed)
    final = NormalizedUsage(input_total=50, output=120, raw={"output_tokens": 120, "tier": "x"})
    failed = NormalizedUsage(complete=False, raw={"error": "usage: expected an object"})

    booked = ledger.record("call-1", partial, scope="pay", version=1)
    assert booked.record.status == "partial" and booked.record.usage.raw == streamed
    assert ledger.get("call-1").usage.raw == streamed
    booked = ledger.record("call-1", final, scope="pay", version=2)
    assert booked.record.status == "complete" and booked.record.usage.raw == {}
    assert ledger.get("call-1").usage.raw == {}
    assert ledger.get("call-1").usage.output == 120 and booked.deltas["output"] == 90
    ledger.record("call-2", failed, scope="pay")
    assert ledger.get("call-2").status == "unknown"
    assert ledger.get("call-2").usage.raw == {"error": "usage: expected an object"}
    ledger.record("call-3", final, scope="pay", status="partial")  # a caller's own status
    assert ledger.get("call-3").usage.raw == final.raw

    document = export_thread(store, "pay")
    stored = {call["call_key"]: call["raw"] for call in document["ledger"]["calls"]}
    assert stored == {
        "call-1": "{}",
        "call-2": '{"error": "usage: expected an object"}',
        "call-3": '{"output_tokens": 120, "tier": "x"}',
    }
    before = [(r, dict(r.usage.raw)) for r in ledger.records("pay")]  # raw: compare=False
    delete_thread(store, "pay", ledger=True)
    import_thread(store, document)
    assert [(r, dict(r.usage.raw)) for r in ledger.records("pay")] == before
