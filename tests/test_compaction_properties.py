"""End-to-end property test of ctx_compact over generated histories: after each compaction the
message list is provider-valid and coverage is continuous (covered range + tail = all events)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langgraph.graph.message import add_messages
from test_cut import histories

from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.compaction import make_compact_node, pairing_problems
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
    status = update["context"]["compaction"]["status"]
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
