"""Deleting history: a secret said once and deleted never comes back, and the thread goes on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import ContextConfig, create_context_agent
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.threads import delete_thread, export_thread

SECRET = "vault code 7319-XK-Quetzal"
CONFIG = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=400
)
FILLER = "Let us go over the migration plan again, step by step, with the rollback notes. " * 3


def recording_reply(inputs: list[list[BaseMessage]]) -> Any:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        inputs.append(list(messages))
        last = messages[-1].text if messages else ""
        return AIMessage(f"Noted ({len(last)} characters): {last[:60]}")

    return reply


def holds_secret(messages: list[BaseMessage]) -> bool:
    return any(SECRET in m.text or SECRET in json.dumps(m.additional_kwargs) for m in messages)


def test_a_deleted_secret_never_comes_back_and_the_summary_is_rebuilt(store: HistoryStore):
    inputs: list[list[BaseMessage]] = []
    model = MeteringChatModel(replies=[recording_reply(inputs)])
    graph = create_context_agent(model, store=store, config=CONFIG).compile(
        checkpointer=InMemorySaver()
    )
    run: Any = {"configurable": {"thread_id": "canary"}}
    say = [f"turn {n}: {FILLER}" for n in range(1, 41)]
    say[4] = f"turn 5: my {SECRET}, please keep it for later."
    for n, text in enumerate(say[:25], 1):
        graph.invoke({"messages": [HumanMessage(text, id=f"u{n}")]}, run)

    # before: the secret is in the raw history, a committed summary and the model's inputs
    before = store.get_active("canary")
    assert before is not None and before.covered_through_seq > 10
    assert SECRET in (before.summary_text or "")
    assert any(holds_secret(request) for request in inputs)
    hits = store.search("canary", "7319 Quetzal").hits
    assert {hit.event_id for hit in hits} >= {"u5"}

    # the user deletes what said it (their message and the reply that echoed it)
    assert store.delete_events("canary", [hit.event_id for hit in hits]) == len(hits)
    inputs.clear()
    for n, text in enumerate(say[25:], 26):
        out = graph.invoke({"messages": [HumanMessage(text, id=f"u{n}")]}, run)
    assert out["messages"][-1].text.startswith("Noted")  # the thread goes on

    assert inputs and not any(holds_secret(request) for request in inputs)
    assert not holds_secret(graph.get_state(run).values["messages"])
    assert not store.search("canary", "7319 Quetzal").hits
    lookup = make_history_lookup_tool(store)
    page = json.loads(lookup.invoke({"query": "vault code Quetzal"}, config=run))
    assert SECRET not in json.dumps(page)
    for version in store.list_versions("canary"):
        assert SECRET not in (version.summary_text or "")
        assert all("7319" not in fact.text for fact in version.key_facts)
    after = store.get_active("canary")
    assert after is not None and after.generation > before.generation
    assert after.first_seq == 1 or after.parent_id is not None  # rebuilt from the raw history
    assert not any(e.event_id == "u5" for e in store.read_events("canary"))


def test_a_revised_or_hidden_message_reaches_the_view_and_the_summary_right_away(
    store: HistoryStore,
):
    inputs: list[list[BaseMessage]] = []
    model = MeteringChatModel(replies=[recording_reply(inputs)])
    graph = create_context_agent(model, store=store, config=CONFIG).compile(
        checkpointer=InMemorySaver()
    )
    run: Any = {"configurable": {"thread_id": "edits"}}
    for n in range(1, 26):
        text = (
            f"turn 5: my {SECRET}, please keep it for later." if n == 5 else f"turn {n}: {FILLER}"
        )
        graph.invoke({"messages": [HumanMessage(text, id=f"u{n}")]}, run)
    before = store.get_active("edits")
    assert SECRET in (before.summary_text or "")
    in_view = "u25"  # recorded (a reply is recorded when the next turn starts)
    assert any(m.id == in_view for m in graph.get_state(run).values["messages"])
    store.append("edits", [HumanMessage("turn 5: my code is redacted.", id="u5")])  # a revision
    assert store.hide_events("edits", [in_view]) == 1  # and a message still in the view
    inputs.clear()
    out = graph.invoke({"messages": [HumanMessage("turn 26: short one", id="u26")]}, run)

    assert out["context"]["report"]["compaction"]["status"] == "committed"  # rebuilt at once
    assert not any(m.id == in_view for m in out["messages"])
    [request] = inputs
    assert not holds_secret(request)
    active = store.get_active("edits")
    assert SECRET not in (active.summary_text or "") and active.covered_through_seq >= 5
    assert active.generation > before.generation


def test_a_view_too_short_to_cut_still_gets_its_history_summarized_again(store: HistoryStore):
    from ctx_langgraph.compaction import make_compact_node

    history = [
        HumanMessage(f"note {n}: order ORD-{1000 + n} shipped", id=f"n{n}") for n in range(20)
    ]
    store.append("short", history)
    node = make_compact_node(store, config=CONFIG)
    state = {"messages": history[-1:], "context": {"rebuild": True, "projection_epoch": 3}}
    out = node.invoke(state, {"configurable": {"thread_id": "short"}})

    active = store.get_active("short")
    assert out["context"]["report"]["compaction"]["status"] == "committed"
    assert out["context"]["summary"]["rebuild"] is False
    assert (active.first_seq, active.covered_through_seq) == (1, 19)  # all before the view
    assert active.first_kept_event_id == "n19"
    assert [m.id for m in out["messages"][1:]] == ["ctx-summary", "n19"]
    assert "ORD-1000" in (active.summary_text or "")  # from the store, not from the view
    # without the rebuild mark, a view this short has nothing to cover
    state["context"] = {"projection_epoch": 4}
    assert (
        node.invoke(state, {"configurable": {"thread_id": "short"}})["context"]["report"][
            "compaction"
        ]["status"]
        == "nothing_to_cover"
    )


def test_nothing_of_one_tenant_is_reachable_from_another(store: HistoryStore):
    from ctx_langgraph.errors import ScopeError
    from ctx_langgraph.history import Scope

    a, b = Scope("shared-id", tenant="a"), Scope("shared-id", tenant="b")
    store.append(a, [HumanMessage(f"tenant a says {SECRET}", id="a1")])
    store.append(b, [HumanMessage("tenant b says hello", id="b1")])
    assert [e.event_id for e in store.read_events(b)] == ["b1"]
    assert not store.search(b, "Quetzal").hits
    lookup = make_history_lookup_tool(store)
    as_b = {"configurable": {"thread_id": "shared-id", "ctx_tenant": "b"}}
    assert SECRET not in lookup.invoke({"query": "Quetzal"}, config=as_b)
    exported = json.dumps(export_thread(store, b))
    assert SECRET not in exported and "b1" in exported
    delete_thread(store, b)
    with pytest.raises(ScopeError):
        export_thread(store, b)
    assert [e.event_id for e in store.read_events(a)] == ["a1"]  # b's deletion left a alone


def test_an_edit_turn_reads_the_view_in_one_range_not_one_lookup_per_message(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch
):
    graph = create_context_agent(
        MeteringChatModel(replies=["ok"]),
        store=store,
        config=ContextConfig(context_window=100_000, output_reserve=1_000),
        lookup_tool=False,
    ).compile(checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "range"}}
    for n in range(30):
        graph.invoke({"messages": [HumanMessage(f"note {n}", id=f"r{n}")]}, run)
    store.delete_events("range", ["r3"])
    store.hide_events("range", ["r7"])
    store.append("range", [HumanMessage("note 9, revised", id="r9")])
    lookups: list[str] = []
    original = store.get_event

    def counting(*args: Any, **kwargs: Any) -> Any:
        lookups.append(str(args[1]))
        return original(*args, **kwargs)

    monkeypatch.setattr(store, "get_event", counting)
    out = graph.invoke({"messages": [HumanMessage("next", id="r30")]}, run)
    texts = [m.text for m in out["messages"]]
    assert "note 3" not in texts and "note 7" not in texts and "note 9, revised" in texts
    assert len(lookups) <= 4, lookups  # the fork check, the range start and the deleted one
