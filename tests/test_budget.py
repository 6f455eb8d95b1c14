"""The budget check: the incremental estimate, epoch invalidation, capping, never-fit errors,
and estimate accuracy over a long tool-heavy replay with the metering model."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

from ctx_langgraph.budget import ApproximateCounter, TiktokenCounter
from ctx_langgraph.budget.node import make_budget_node, make_budget_router
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.errors import ContextBudgetExceeded
from ctx_langgraph.history import Scope, SQLiteHistoryStore
from ctx_langgraph.state import ContextState
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.usage.node import make_usage_node

CONFIG = {"configurable": {"thread_id": "t"}}


@pytest.fixture
def store():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


def budget_node(store, window=100_000, **kw):
    config = ContextConfig(
        context_window=window, output_reserve=kw.pop("reserve", 1_000), **kw.pop("cfg", {})
    )
    return make_budget_node(store, config=config, counter=TiktokenCounter("gpt-4o"), **kw)


def step(node, state):
    update = node.invoke(state, CONFIG)
    merged = dict(state)
    merged["context"] = {**state.get("context", {}), **update["context"]}
    if "messages" in update:
        replaced = {m.id: m for m in update["messages"]}
        merged["messages"] = [replaced.get(m.id, m) for m in state["messages"]]
    return merged, update


def test_no_baseline_recounts_then_baseline_plus_appended(store):
    counter = TiktokenCounter("gpt-4o")
    node = budget_node(store, compact_node=None)
    history = [SystemMessage("Be brief.", id="s"), HumanMessage("What is 2+2?", id="h1")]
    state, _ = step(node, {"messages": history})
    first = state["context"]["report"]["budget"]
    assert first["method"] == "recount"
    assert first["input_tokens"] == counter.count_request(history)
    # the model answered; ctx_usage measured 1,000 input tokens for the request through h1
    reply = AIMessage("4", id="a1")
    state["messages"] = [*history, reply, HumanMessage("And 3+3?", id="h2")]
    state["context"]["baseline"] = {
        "measured_input_tokens": 1_000,
        "input_through_message_id": "h1",
        "projection_epoch": 0,
    }
    state, _ = step(node, state)
    second = state["context"]["report"]["budget"]
    assert second["method"] == "baseline" and second["measured_baseline"] == 1_000
    assert second["appended"] == counter.count_message(reply) + counter.count_message(
        state["messages"][-1]
    )
    assert second["counted_messages"] == 2  # cost does not depend on the history length
    assert [e.event_id for e in store.read_events("t")] == ["s", "h1", "a1", "h2"]


def test_edit_bumps_the_epoch_and_recounts(store):
    node = budget_node(store, compact_node=None)
    state, _ = step(node, {"messages": [HumanMessage("draft", id="h1")]})
    state["messages"] = [HumanMessage("draft, edited", id="h1"), AIMessage("ok", id="a1")]
    state["context"]["baseline"] = {
        "measured_input_tokens": 50,
        "input_through_message_id": "h1",
        "projection_epoch": 0,
    }
    state["context"]["recorded"]["through_id"] = None  # the edited message is seen again
    state, _ = step(node, state)
    assert state["context"]["view"]["epoch"] == 1
    assert state["context"]["report"]["budget"]["method"] == "recount"
    assert "edited message" in state["context"]["report"]["budget"]["epoch_bumped_for"]
    assert store.get_event("t", "h1").revision == 2


def test_compaction_epoch_and_stale_late_usage(store):
    """After compaction (epoch 2) a late usage report from an epoch-1 request is booked but the
    baseline it would have set is ignored by the estimate."""
    ledger = UsageLedger(store)
    usage_node = make_usage_node(ledger)
    late = AIMessage(
        "late",
        id="late",
        usage_metadata={"input_tokens": 90_000, "output_tokens": 1, "total_tokens": 90_001},
    )
    context = {"projection_epoch": 2, "request": {"epoch": 1, "input_through_message_id": "h1"}}
    update = usage_node.invoke(
        {"messages": [HumanMessage("q", id="h1"), late], "context": context}, CONFIG
    )
    assert "baseline" not in update["context"] and ledger.get("msg:late") is not None
    node = budget_node(store, compact_node=None)
    stale_baseline = {
        "measured_input_tokens": 90_000,
        "input_through_message_id": "h1",
        "projection_epoch": 1,
    }
    state, _ = step(
        node,
        {
            "messages": [HumanMessage("q", id="h1"), late],
            "context": {"projection_epoch": 2, "baseline": stale_baseline},
        },
    )
    assert (
        state["context"]["report"]["budget"]["method"] == "recount"
        and state["context"]["report"]["budget"]["input_tokens"] < 100
    )


def test_system_prompt_or_tools_change_bumps_the_epoch(store):
    node = budget_node(store, compact_node=None)
    state, _ = step(node, {"messages": [SystemMessage("v1", id="s"), HumanMessage("hi", id="h1")]})
    assert state["context"]["view"]["epoch"] == 0
    state["messages"][0] = SystemMessage("v2: a new rule", id="s2")
    state, _ = step(node, state)
    assert state["context"]["view"]["epoch"] == 1
    assert (
        "system prompt, tools or model changed"
        in state["context"]["report"]["budget"]["epoch_bumped_for"]
    )


def test_giant_tool_output_is_capped_and_the_original_kept(store):
    node = budget_node(store, compact_node=None, cfg={"tool_output_cap_tokens": 200})
    log = "\n".join(
        f"line {n}: status=ok latency={n % 97}ms request_id=req-{n:06d}" for n in range(3_000)
    )
    call = AIMessage("", id="a1", tool_calls=[{"name": "fetch_logs", "args": {}, "id": "c1"}])
    result = ToolMessage(log, tool_call_id="c1", name="fetch_logs", id="t1")
    state, update = step(node, {"messages": [HumanMessage("show logs", id="h1"), call, result]})
    [preview] = update["messages"]
    assert preview.id == "t1" and preview.additional_kwargs["ctx_capped"]["handle"] == "history:t1"
    assert "line 0: status=ok" in preview.content and "request_id=req-002999" in preview.content
    assert "tool output capped" in preview.content
    assert TiktokenCounter("gpt-4o").count_text(preview.content) < 1_000
    original = store.get_event("t", "t1")
    assert original.message.content == log and original.revision == 1
    assert state["context"]["report"]["budget"]["input_tokens"] < 1_200
    # next turn: the preview in state is not recorded as a revision of the original
    state["messages"].append(HumanMessage("thanks", id="h2"))
    step(node, state)
    assert store.get_event("t", "t1").revision == 1


def test_old_tool_results_are_cleared_and_stay_cleared(store):
    cfg = {"clear_tool_results_keep": 1, "clear_tool_results_batch": 1}
    node = budget_node(store, compact_node=None, cfg=cfg)
    messages = []
    for n in range(3):
        messages += [
            AIMessage(
                "", id=f"a{n}", tool_calls=[{"name": "get", "args": {"n": n}, "id": f"c{n}"}]
            ),
            ToolMessage(f"result number {n} " * 50, tool_call_id=f"c{n}", id=f"t{n}"),
        ]
    state, update = step(node, {"messages": [HumanMessage("go", id="h"), *messages]})
    assert sorted(m.id for m in update["messages"]) == ["t0", "t1"]
    assert all(m.additional_kwargs["ctx_cleared"] for m in update["messages"])
    assert "tool results cleared" in state["context"]["report"]["budget"]["epoch_bumped_for"]
    state, update = step(node, state)  # stable: nothing new to clear, no new epoch
    assert (
        "messages" not in update and state["context"]["report"]["budget"]["epoch_bumped_for"] == []
    )
    assert store.get_event("t", "t0").message.content.startswith("result number 0")


def test_a_message_that_can_never_fit_raises_with_numbers(store):
    node = budget_node(store, window=2_000, reserve=500, compact_node="ctx_compact")
    huge = HumanMessage("word " * 5_000, id="h1")
    with pytest.raises(ContextBudgetExceeded) as info:
        node.invoke(
            {"messages": [HumanMessage("hi", id="h0"), AIMessage("hello", id="a0"), huge]}, CONFIG
        )
    error = info.value
    assert error.usable == 1_500 and error.window == 2_000 and error.largest > 5_000
    assert "no cut can make this request fit" in str(error).lower()
    assert "shorten the newest message" in str(error).lower()
    assert store.get_event("t", "h1") is not None  # recorded before refusing: nothing is lost


def test_over_trigger_routes_to_compaction(store):
    node = budget_node(store, window=2_000, reserve=500)
    messages = [HumanMessage(f"turn {n} " * 60, id=f"h{n}") for n in range(10)]
    update = node.invoke({"messages": messages}, CONFIG)
    assert update["context"]["report"]["budget"]["decision"] == "compact"
    route = make_budget_router("model")
    assert route({"context": update["context"]}) == "ctx_compact"
    assert route({"context": {"budget": {"decision": "proceed"}}}) == "model"


def test_images_and_content_blocks_count_in_the_estimate(store):
    node = budget_node(store, compact_node=None)
    text_only, _ = step(node, {"messages": [HumanMessage("what is this?", id="h1")]})
    with_image, _ = step(
        budget_node(store, compact_node=None),
        {
            "messages": [
                HumanMessage(
                    content=[
                        {"type": "text", "text": "what is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                    id="h2",
                )
            ]
        },
    )
    assert (
        with_image["context"]["report"]["budget"]["input_tokens"]
        - text_only["context"]["report"]["budget"]["input_tokens"]
        == 765
    )


async def test_async_node(store):
    node = budget_node(store, compact_node=None)
    update = await node.ainvoke({"messages": [HumanMessage("hi", id="h1")]}, CONFIG)
    assert update["context"]["report"]["budget"]["method"] == "recount"
    assert (await store.aget_event("t", "h1")) is not None


# ----------------------------------------------------------------------------- accuracy replay


@tool
def search_orders(customer: str, status: str = "open") -> str:
    """Search a customer's orders by status."""
    return ""


@tool
def get_invoice(invoice_id: str) -> str:
    """Fetch one invoice with its line items."""
    return ""


TOOLS = [search_orders, get_invoice]


def scripted_agent(messages):
    """Every user turn: a tool call (sometimes two in parallel), then an answer."""
    last = messages[-1]
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    if isinstance(last, HumanMessage):
        calls = [
            {
                "name": "search_orders",
                "args": {"customer": f"cust-{turn}", "status": "open"},
                "id": f"s{turn}",
            }
        ]
        if turn % 3 == 0:
            calls.append(
                {"name": "get_invoice", "args": {"invoice_id": f"INV-{turn:05d}"}, "id": f"i{turn}"}
            )
        return AIMessage("", tool_calls=calls)
    return AIMessage(
        f"Turn {turn}: customer cust-{turn} has {turn % 7} open orders; invoice INV-{turn:05d} totals "
        f"{turn * 13.37:.2f} EUR."
    )


def tool_results(state):
    call = state["messages"][-1]
    out = []
    for tc in call.tool_calls:
        size = 40 if tc["name"] == "search_orders" else 400
        rows = [
            {"order": f"ORD-{tc['id']}-{k}", "amount": k * 3.5, "sku": f"SKU-{k:04d}"}
            for k in range(size // 10)
        ]
        out.append(
            ToolMessage(
                json.dumps(rows), tool_call_id=tc["id"], name=tc["name"], id=f"r-{tc['id']}"
            )
        )
    return {"messages": out}


def replay(store, counter, turns):
    model = MeteringChatModel(replies=[scripted_agent]).bind_tools(TOOLS)
    config = ContextConfig(
        context_window=10_000_000, output_reserve=4_096, tool_output_cap_tokens=None
    )
    samples = []

    def call_model(state):
        reply = model.invoke(state["messages"])
        budget = state["context"]["report"]["budget"]
        samples.append(
            (
                budget["input_tokens"],
                budget["total"],
                reply.usage_metadata["input_tokens"],
                budget["method"],
            )
        )
        return {"messages": [reply]}

    builder = StateGraph(ContextState)
    builder.add_node(
        "ctx_budget",
        make_budget_node(store, config=config, counter=counter, tools=TOOLS, compact_node=None),
    )
    builder.add_node("model", call_model)
    builder.add_node("ctx_usage", make_usage_node(UsageLedger(store), store=store))
    builder.add_node("tools", tool_results)
    builder.add_edge(START, "ctx_budget")
    builder.add_edge("ctx_budget", "model")
    builder.add_edge("model", "ctx_usage")
    builder.add_conditional_edges(
        "ctx_usage", lambda s: "tools" if s["messages"][-1].tool_calls else END
    )
    builder.add_edge("tools", "ctx_budget")
    graph = builder.compile()
    state = {"messages": [], "context": {}}
    for turn in range(turns):
        state = graph.invoke(
            {
                "messages": [
                    *state["messages"],
                    HumanMessage(f"Customer question {turn}", id=f"q{turn}"),
                ],
                "context": state["context"],
            },
            {"configurable": {"thread_id": "replay"}, "recursion_limit": 50},
        )
    return samples


def test_tiktoken_estimate_is_within_two_percent_over_a_500_turn_replay(store):
    samples = replay(store, TiktokenCounter("gpt-4o"), turns=500)
    assert len(samples) == 1_000
    worst = max(abs(est - measured) / measured for est, _, measured, _ in samples)
    assert worst <= 0.02
    assert all(
        total >= measured for _, total, measured, _ in samples
    )  # never under by more than the margin
    assert sum(method == "baseline" for *_, method in samples) >= 999


def test_calibrated_approximate_counter_is_within_five_percent_after_three_calls(store):
    samples = replay(store, ApproximateCounter("claude-sonnet-4-5"), turns=60)
    errors = [abs(est - measured) / measured for est, _, measured, _ in samples]
    assert max(errors[3:]) <= 0.05, errors[:10]
    assert all(total >= measured * 0.95 for _, total, measured, _ in samples[3:])


class StubCount:
    """A provider count hook double: answers a fixed count, or fails like a provider outage."""

    id = "stub"

    def __init__(self, answer=None):
        self.answer = answer
        self.calls = 0

    def _count(self):
        from ctx_langgraph.errors import ProviderCountError

        self.calls += 1
        if self.answer is None:
            raise ProviderCountError("stub", "HTTP 529 overloaded")
        return self.answer

    def count_request(self, messages, tools=()):
        return self._count()

    async def acount_request(self, messages, tools=()):
        return self._count()


def test_provider_count_is_asked_only_near_the_limit_and_failures_fall_back(store):
    messages = [HumanMessage("word " * 1_380, id="h1")]
    far = StubCount(answer=123)
    node = make_budget_node(
        store,
        config=ContextConfig(context_window=100_000, output_reserve=1_000),
        counter=TiktokenCounter("gpt-4o"),
        compact_node=None,
        provider_count=far,
    )
    node.invoke({"messages": messages}, CONFIG)
    assert far.calls == 0  # far from the limit: the local count is enough
    near = StubCount(answer=1_234)
    config = ContextConfig(context_window=2_000, output_reserve=500, trigger=0.99, target=0.5)
    node = make_budget_node(
        store,
        config=config,
        counter=TiktokenCounter("gpt-4o"),
        compact_node=None,
        provider_count=near,
    )
    update = node.invoke({"messages": messages}, CONFIG)
    assert near.calls == 1 and update["context"]["report"]["budget"]["method"] == "provider"
    assert update["context"]["report"]["budget"]["input_tokens"] == 1_234
    down = StubCount(answer=None)
    node = make_budget_node(
        store,
        config=config,
        counter=TiktokenCounter("gpt-4o"),
        compact_node=None,
        provider_count=down,
    )
    update = node.invoke({"messages": messages}, CONFIG)
    assert down.calls == 1 and update["context"]["report"]["budget"]["method"] == "recount"


def test_recount_breakdown_separates_system_summary_retrieved_and_tail(store):
    counter = TiktokenCounter("gpt-4o")
    messages = [
        SystemMessage("Rules.", id="s"),
        SystemMessage("Summary of turns 1-40.", id="sum", additional_kwargs={"ctx_summary": True}),
        HumanMessage(
            "From history: order A-1042 shipped.", id="r", additional_kwargs={"ctx_retrieved": True}
        ),
        HumanMessage("Where is my order?", id="h"),
    ]
    state, _ = step(budget_node(store, compact_node=None), {"messages": messages})
    budget = state["context"]["report"]["budget"]
    parts = [counter.count_message(m) for m in messages]
    assert (budget["system"], budget["summary"], budget["retrieved"], budget["tail"]) == tuple(
        parts
    )
    assert budget["input_tokens"] == budget["overhead"] + sum(parts)
    # the summary and retrieved snippets are projections of history, never new raw events
    assert [e.event_id for e in store.read_events("t")] == ["s", "h"]


def test_branch_switch_bumps_the_epoch(store):
    node = budget_node(store, compact_node=None)
    state, _ = step(node, {"messages": [HumanMessage("hi", id="h1")]})
    assert state["context"]["branch"] == "main"
    store.create_branch(Scope("t", branch="retry"), "main", 1)
    update = node.invoke(
        {**state, "messages": [*state["messages"], HumanMessage("on the branch", id="b1")]},
        {"configurable": {"thread_id": "t", "ctx_branch": "retry"}},
    )
    assert update["context"]["branch"] == "retry" and update["context"]["view"]["epoch"] == 1
    assert "branch switch" in update["context"]["report"]["budget"]["epoch_bumped_for"]
    assert [e.event_id for e in store.read_events(Scope("t", branch="retry"))] == ["h1", "b1"]
