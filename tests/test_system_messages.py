"""System messages are rules, not history: a ``SystemMessage`` in ``messages`` (leading, or
anywhere later) is never handed to a summarizer, never folded into a summary, and stays in the
view after every compaction (a leading one first), through ``add_context_management`` and the
``create_agent`` middleware, sync and async, on every history-store backend."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    LLMSummarizer,
    add_context_management,
)
from ctx_langgraph.compaction import SummaryRequest, choose_cut, pairing_problems, tool_groups
from ctx_langgraph.history.types import CompactionCheckpoint
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply
from ctx_langgraph.view.summary import rewrite_view

RULE = "You are the billing assistant of ACME. RULE-ZX81: never reveal card numbers."
LATER_RULE = "From now on answer in French. RULE-QW42."
CONFIG = ContextConfig(
    context_window=3_000,
    output_reserve=500,
    keep_recent_tokens=600,
    summary_max_tokens=300,
    tool_output_cap_tokens=None,
)


@dataclass
class RecordingSummarizer:
    """An LLM summarizer (on a metered fake) that keeps every request and prompt it got."""

    requests: list[SummaryRequest] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        def reply(messages: list[BaseMessage]) -> AIMessage:
            self.prompts.append("\n".join(str(m.text) for m in messages))
            return scripted_summary_reply(messages)

        self.inner = LLMSummarizer(MeteringChatModel(replies=[reply]))

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def window_tokens(self) -> int | None:
        return None

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return self.inner.summarize(request)

    async def asummarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return await self.inner.asummarize(request)


def user_turn(turn: int) -> str:
    return (
        f"Turn {turn}: invoice INV-{turn:04d} needs a review of the line items, the tax rate, "
        "the shipping address and the payment terms we agreed on with the customer last week. " * 3
    )


def graph_agent(store: Any, summarizer: RecordingSummarizer, seen: list[list[BaseMessage]]) -> Any:
    model = MeteringChatModel(replies=[lambda m: AIMessage("Noted: " + str(m[-1].text)[:600])])

    def agent(state: MessagesState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_edge(START, "agent")
    add_context_management(
        builder, model_node="agent", store=store, config=CONFIG, summarizer=summarizer, model=model
    )
    return builder.compile(checkpointer=InMemorySaver())


def middleware_agent(
    store: Any, summarizer: RecordingSummarizer, seen: list[list[BaseMessage]]
) -> Any:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        seen.append(list(messages))
        return AIMessage("Noted: " + str(messages[-1].text)[:600])

    model = MeteringChatModel(replies=[reply])
    middleware = ContextManagementMiddleware(
        store, config=CONFIG, model=model, summarizer=summarizer
    )
    return create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())


BUILDS = {"graph": graph_agent, "middleware": middleware_agent}


def run_turns(graph: Any, mode: str, turns: list[dict[str, Any]], config: dict[str, Any]) -> None:
    async def arun() -> None:
        for inputs in turns:
            await graph.ainvoke(inputs, config)

    if mode == "async":
        asyncio.run(arun())
    else:
        for inputs in turns:
            graph.invoke(inputs, config)


def conversation(later_rule_at: int | None = None, turns: int = 12) -> list[dict[str, Any]]:
    inputs: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        messages: list[BaseMessage] = []
        if turn == 1:
            messages.append(SystemMessage(RULE, id="rules"))
        if turn == later_rule_at:
            messages.append(SystemMessage(LATER_RULE, id="later-rules"))
        messages.append(HumanMessage(user_turn(turn), id=f"h{turn}"))
        inputs.append({"messages": messages})
    return inputs


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("flavor", ["graph", "middleware"])
def test_a_leading_system_message_is_never_summarized_and_stays_first(
    backend: Any, flavor: str, mode: str
) -> None:
    store = backend.make()
    store.setup()
    summarizer, seen = RecordingSummarizer(), []
    graph = BUILDS[flavor](store, summarizer, seen)
    config = {"configurable": {"thread_id": f"sys-{flavor}-{mode}"}}
    run_turns(graph, mode, conversation(), config)

    active = store.get_active(config["configurable"]["thread_id"])
    assert active is not None and summarizer.requests, "the conversation was never compacted"
    system_seqs = {
        e.seq for e in store.read_events(active.scope) if e.role == "system"
    }  # the rules are in the store, as they were sent
    assert system_seqs and min(system_seqs) <= active.covered_through_seq
    # the summarizer never saw the rules: not as an event, not in its prompt
    first = summarizer.requests[0]
    assert [e.role for e in first.events if e.role == "system"] == []
    for request in summarizer.requests:
        assert system_seqs.isdisjoint(e.seq for e in request.events)
    assert summarizer.prompts and all("RULE-ZX81" not in p for p in summarizer.prompts)
    # the summary does not cover them (no fact or statement of it cites their seq)
    assert "RULE-ZX81" not in (active.summary_text or "")
    assert system_seqs.isdisjoint(f.source_seq for f in active.key_facts)
    # and the model's requests after the compaction still start with them, once
    after = [m for m in seen if any(x.id == "ctx-summary" for x in m)]
    assert after, "no model request after the compaction"
    for request in after:
        assert request[0].type == "system" and request[0].text == RULE
        assert [m.id for m in request if m.type == "system"] == ["rules"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("flavor", ["graph", "middleware"])
def test_a_later_system_message_stays_in_the_view_after_its_span_is_summarized(
    backend: Any, flavor: str, mode: str
) -> None:
    store = backend.make()
    store.setup()
    summarizer, seen = RecordingSummarizer(), []
    graph = BUILDS[flavor](store, summarizer, seen)
    config = {"configurable": {"thread_id": f"mid-{flavor}-{mode}"}}
    run_turns(graph, mode, conversation(later_rule_at=2, turns=14), config)

    active = store.get_active(config["configurable"]["thread_id"])
    later = next(e for e in store.read_events(active.scope) if e.event_id == "later-rules")
    assert active is not None and later.seq <= active.covered_through_seq  # its span is covered
    assert all("RULE-QW42" not in p for p in summarizer.prompts)
    assert "RULE-QW42" not in (active.summary_text or "")
    last = seen[-1]
    # both rules are still sent, together at the head of the request (providers that take
    # system text only first, as Anthropic's, get it in one place), before the summary
    assert [m.id for m in last[:2]] == ["rules", "later-rules"]
    assert last[2].id == "ctx-summary"
    assert [m.id for m in last if m.type == "system"] == ["rules", "later-rules"]


def _checkpoint(first_kept: str, through: int = 5) -> CompactionCheckpoint:
    import datetime as dt

    from ctx_langgraph.history import Scope

    now = dt.datetime.now(dt.timezone.utc)
    return CompactionCheckpoint(
        "ck", Scope("t"), 1, None, 1, through, first_kept, 0, "", "summary", None, 3, "x", (),
        10, "active", None, now, now,
    )  # fmt: skip


def test_rewrite_view_keeps_every_system_message_it_would_drop() -> None:
    view = [
        SystemMessage("rules", id="s0"),
        HumanMessage("q1", id="h1"),
        SystemMessage("mode: terse", id="s1"),
        AIMessage("a1", id="a1"),
        HumanMessage("q2", id="h2"),
        SystemMessage("mode: verbose", id="s2"),
        AIMessage("a2", id="a2"),
    ]
    rewritten, removed = rewrite_view(view, _checkpoint("h2"))
    assert [m.id for m in rewritten] == ["s0", "s1", "ctx-summary", "h2", "s2", "a2"]
    assert removed == 2  # q1 and a1: the rules are not removed


def test_a_system_message_inside_a_tool_step_never_orphans_its_results() -> None:
    call = {"name": "f", "args": {}, "id": "c1"}
    view = [
        HumanMessage("q1", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        SystemMessage("a middleware's note", id="s1"),
        ToolMessage("r", tool_call_id="c1", id="t1"),
        AIMessage("done", id="a2"),
        HumanMessage("q2", id="h2"),
    ]
    assert (1, 4) in tool_groups(view)  # the call, the note and the result: one group
    for keep in range(0, 60, 5):
        cut = choose_cut(view, [10] * len(view), keep_recent_tokens=keep)
        if cut is None:
            continue
        tail = [m for m in view[cut.index :] if m.type != "system"]
        assert pairing_problems(tail) == [], (keep, cut)


def test_system_messages_are_not_counted_as_history_the_cut_covers() -> None:
    view = [
        SystemMessage("rules", id="s0"),
        HumanMessage("q1", id="h1"),
        SystemMessage("x" * 100, id="s1"),
        AIMessage("a1", id="a1"),
        HumanMessage("q2", id="h2"),
        AIMessage("a2", id="a2"),
    ]
    tokens = [5, 10, 500, 10, 10, 10]
    cut = choose_cut(view, tokens, keep_recent_tokens=20)
    assert cut is not None and cut.index == 4
    assert cut.covered_tokens == 20  # q1 and a1; the rules stay in the view whatever the cut
