"""End-to-end property test of ctx_compact over generated histories: after each compaction the
message list is provider-valid and coverage is continuous (covered range + tail = all events)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import SystemMessage
from langgraph.graph.message import add_messages
from test_cut import histories

from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.compaction import ExtractiveSummarizer, make_compact_node, pairing_problems
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history import Scope, SQLiteHistoryStore

COUNTER = TiktokenCounter("gpt-4o")


@pytest.fixture(scope="module")
def store():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


@settings(
    max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    history=histories(), keep=st.integers(0, 3_000), window=st.sampled_from([1_500, 4_000, 20_000])
)
def test_every_compaction_leaves_a_valid_view_and_continuous_coverage(store, history, keep, window):
    messages, _ = history
    scope = Scope(f"p-{uuid.uuid4().hex}")
    recorded = [m for m in messages if not m.additional_kwargs.get("ctx_summary")]
    store.append(scope, recorded)
    config = ContextConfig(
        context_window=window,
        output_reserve=500,
        trigger=0.8,
        target=0.5,
        keep_recent_tokens=max(keep, 1),
        summary_max_tokens=400,
        tool_output_cap_tokens=None,
    )
    node = make_compact_node(store, config=config, counter=COUNTER)
    update = node.invoke(
        {"messages": messages, "context": {"budget": {"total": 0}}},
        {"configurable": {"thread_id": scope.thread_id}},
    )
    status = update["context"]["report"]["compaction"]["status"]
    event(status)
    assert status in ("committed", "nothing_to_cover")
    view = add_messages(messages, update["messages"]) if "messages" in update else messages
    assert pairing_problems(view) == []
    if status == "nothing_to_cover":
        return
    active = store.get_active(scope)
    assert active is not None and active.covered_through_seq >= 1
    history_events = [e for e in store.read_events(scope) if e.role != "system"]
    tail = [m.id for m in view if m.type != "system" and not m.additional_kwargs.get("ctx_summary")]
    # covered range + tail = every recorded event, in order, no gap and no overlap
    assert [e.event_id for e in history_events if e.seq > active.covered_through_seq] == tail
    assert len([m for m in view if m.additional_kwargs.get("ctx_summary")]) == 1


@st.composite
def histories_with_rules(draw):
    """Generated histories with system messages anywhere: before the history, between turns,
    inside a tool step (between a call and its results), at the end."""
    messages, _ = draw(histories())
    for number in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(messages)))
        messages.insert(at, SystemMessage(f"rule {number}: RULE-{number}-TEXT", id=f"rule{number}"))
    return messages


class _Recording:
    """The offline summarizer, keeping the requests it got."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.requests: list[Any] = []
        self.id = self.inner.id
        self.window_tokens = None

    def summarize(self, request: Any) -> str:
        self.requests.append(request)
        return self.inner.summarize(request)

    async def asummarize(self, request: Any) -> str:
        return self.summarize(request)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    messages=histories_with_rules(),
    keep=st.integers(0, 3_000),
    window=st.sampled_from([1_500, 4_000, 20_000]),
)
def test_system_messages_anywhere_are_kept_in_the_view_and_never_summarized(
    store, messages, keep, window
):
    scope = Scope(f"r-{uuid.uuid4().hex}")
    store.append(scope, [m for m in messages if not m.additional_kwargs.get("ctx_summary")])
    config = ContextConfig(
        context_window=window,
        output_reserve=500,
        keep_recent_tokens=min(max(keep, 1), window - 600),  # (within the usable window)
        summary_max_tokens=400,
        tool_output_cap_tokens=None,
    )
    summarizer = _Recording()
    node = make_compact_node(store, config=config, counter=COUNTER, summarizer=summarizer)
    update = node.invoke(
        {"messages": messages, "context": {"budget": {"total": 0}}},
        {"configurable": {"thread_id": scope.thread_id}},
    )
    status = update["context"]["report"]["compaction"]["status"]
    assert status in ("committed", "nothing_to_cover")
    view = add_messages(messages, update["messages"]) if "messages" in update else messages
    rules = [m.id for m in messages if m.type == "system"]
    # every rule is still sent, once, in its order; the leading ones still lead
    assert [m.id for m in view if m.type == "system"] == rules
    first_other = next((i for i, m in enumerate(messages) if m.type != "system"), len(messages))
    leading = [m.id for m in messages[:first_other]]
    assert [m.id for m in view[: len(leading)]] == leading
    history = [m for m in view if m.type != "system"]
    assert pairing_problems(history) == []  # the tool protocol holds without the rules too
    # no summarizer saw a rule, and no summary cites one
    for request in summarizer.requests:
        assert all(e.role != "system" for e in request.events)
    if status == "committed":
        active = store.get_active(scope)
        assert active is not None and "RULE-" not in (active.summary_text or "")
        events = store.read_events(scope)
        rule_seqs = {e.seq for e in events if e.role == "system"}
        assert rule_seqs.isdisjoint(f.source_seq for f in active.key_facts)
        # covered history + tail = every recorded non-system event, no gap, no overlap
        tail = [m.id for m in history if not m.additional_kwargs.get("ctx_summary")]
        kept = [
            e.event_id for e in events if e.role != "system" and e.seq > active.covered_through_seq
        ]
        assert kept == tail
