"""The segment index: summaries of separate history ranges made as the history grows, searched
by the lookup, invalidated and rebuilt when an event they cover is deleted, hidden or revised,
carried by export/import, pruned with the summary versions; on every backend, sync and async."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import ContextConfig, create_context_agent
from ctx_langgraph.compaction.extractive import ExtractiveSummarizer
from ctx_langgraph.compaction.protocol import SummaryRequest
from ctx_langgraph.compaction.segments import EMPTY_RANGE, segment_ranges
from ctx_langgraph.errors import StaleCandidate
from ctx_langgraph.history import HistoryStore, SQLiteHistoryStore
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.lookup._segments import rank_segments
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.threads import export_thread, import_thread

SECRET = "vault code 7319-XK-Quetzal"
FILLER = "Let us go over the migration plan again, step by step, with the rollback notes. " * 3
CONFIG = ContextConfig(
    context_window=3_000,
    output_reserve=500,
    keep_recent_tokens=400,
    summary_max_tokens=400,
    segment_events=8,
)
TOPICS = ["pottery class", "dinosaur exhibit", "camping trip", "piano lessons", "rollback plan"]


def reply(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(f"Noted: {messages[-1].text[:40]}")


def agent(store: HistoryStore, config: ContextConfig = CONFIG, **kw: Any) -> Any:
    model = MeteringChatModel(replies=[reply])
    return create_context_agent(model, store=store, config=config, **kw).compile(
        checkpointer=InMemorySaver()
    )


def said(n: int) -> str:
    return f"turn {n}: about the {TOPICS[n % len(TOPICS)]}. {FILLER}"


def replay(graph: Any, thread: str, turns: range, secret_at: int | None = None) -> dict[str, Any]:
    run: Any = {"configurable": {"thread_id": thread}}
    out: dict[str, Any] = {}
    for n in turns:
        text = f"turn {n}: my {SECRET}, keep it." if n == secret_at else said(n)
        out = graph.invoke({"messages": [HumanMessage(text, id=f"u{n}")]}, run)
    return out


def every_segment(store: HistoryStore, thread: str) -> list[Any]:
    return store.segments(thread, statuses=("active", "invalid", "superseded"))


def test_segments_are_built_as_history_grows_over_what_the_summary_covers(store: HistoryStore):
    graph = agent(store)
    out = replay(graph, "grow", range(1, 36))
    segments = store.segments("grow")
    active = store.get_active("grow")
    assert active is not None and segments
    assert out["context"]["report"]["compaction"].get("segments", {}).get("failed", 0) == 0
    # separate ranges, in order, without gaps or overlaps, inside what the summary covers
    assert segments[0].first_seq == 1
    for before, after in itertools.pairwise(segments):
        assert after.first_seq == before.last_seq + 1
    assert all(s.last_seq <= active.covered_through_seq for s in segments)
    assert all(s.last_seq - s.first_seq + 1 <= 8 for s in segments)
    first = segments[0]
    assert first.summary_text and "turn 1:" in first.summary_text and first.generation == 1
    assert first.summarizer_id == ExtractiveSummarizer().id
    assert all(first.first_seq <= f.source_seq <= first.last_seq for f in first.key_facts)
    # never in a prompt: the view holds the rolling summary and the tail only
    view = json.dumps([m.text for m in out["messages"]])
    assert "Context summary" in view and view.count("# Context summary") == 1


def test_the_lookup_shows_the_best_segments_and_the_events_they_point_to(store: HistoryStore):
    replay(agent(store), "find", range(1, 36))
    run: Any = {"configurable": {"thread_id": "find"}}
    plain = json.loads(make_history_lookup_tool(store).invoke({"query": "dinosaur"}, config=run))
    assert "segments" not in plain
    lookup = make_history_lookup_tool(store, segments=True)
    page = json.loads(lookup.invoke({"query": "dinosaur exhibit"}, config=run))
    assert page["segments"], page
    for shown in page["segments"]:
        assert shown["range"].startswith("seq ") and shown["generation"] == 1
        assert all("dinosaur" in line.lower() for line in shown["summary"])
    pointed = [r for r in page["records"] if "from_segment" in r]
    assert pointed and all("dinosaur" in r["text"] for r in pointed)
    assert {r["seq"] for r in pointed} <= {s for x in page["segments"] for s in x["points_to"]}
    assert len(lookup.invoke({"query": "dinosaur exhibit"}, config=run)) <= 1_500 * 4
    # a word no segment has: the ranking alone
    page = json.loads(lookup.invoke({"query": "zeppelin"}, config=run))
    assert "segments" not in page


def test_rank_segments_prefers_the_segment_sharing_more_of_the_query():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    store.append("r", [HumanMessage(t, id=f"m{n}") for n, t in enumerate(["a", "b", "c", "d"])])
    one = store.put_segment(store.segment_snapshot("r", 1, 2), summary_text="- the pottery class")
    two = store.put_segment(store.segment_snapshot("r", 3, 4), summary_text="- a hike")
    assert [s.id for s, _ in rank_segments("pottery", [two, one])] == [one.id]
    assert rank_segments("", [one, two]) == []
    store.close()


@pytest.mark.parametrize("edit", ["delete", "hide", "revise"])
def test_an_edited_event_invalidates_its_segment_and_the_range_is_rebuilt(
    store: HistoryStore, edit: str
):
    graph = agent(store)
    replay(graph, "canary", range(1, 30), secret_at=5)
    holders = {s.first_seq: s for s in store.segments("canary") if SECRET in (s.summary_text or "")}
    untouched = [s.id for s in store.segments("canary") if s.first_seq not in holders]
    assert holders and untouched
    said_it = store.search("canary", "7319 Quetzal").hits  # the message and the reply echoing it
    ids = [hit.event_id for hit in said_it]
    if edit == "delete":
        store.delete_events("canary", ids)
    elif edit == "hide":
        store.hide_events("canary", ids)
    else:
        kinds = {"human": HumanMessage, "ai": AIMessage}
        store.append(
            "canary", [kinds[hit.role]("nothing to keep here.", id=hit.event_id) for hit in said_it]
        )
    invalid = store.segments("canary", statuses=("invalid",))
    assert {s.first_seq for s in invalid} == set(holders)
    assert all(s.summary_text is None and not s.key_facts for s in invalid)
    assert all("invalidated" in (s.error or "") for s in invalid)
    assert [s.id for s in store.segments("canary")] == untouched  # the other ranges stay

    replay(graph, "canary", range(30, 42))  # the next compactions rebuild the ranges
    for first_seq, holder in holders.items():
        rebuilt = next(s for s in store.segments("canary") if s.first_seq == first_seq)
        assert rebuilt.generation == holder.generation + 1 and rebuilt.last_seq == holder.last_seq
        if edit == "revise":
            assert "nothing to keep here" in (rebuilt.summary_text or "")
    for segment in every_segment(store, "canary"):
        assert SECRET not in (segment.summary_text or "")
        assert all("7319" not in fact.text for fact in segment.key_facts)
    run: Any = {"configurable": {"thread_id": "canary"}}
    page = make_history_lookup_tool(store, segments=True).invoke(
        {"query": "vault code"}, config=run
    )
    assert "7319" not in page


def test_a_put_after_an_edit_of_its_range_is_refused_and_writes_nothing(store: HistoryStore):
    store.append("race", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(10)])
    snapshot = store.segment_snapshot("race", 1, 5)
    store.hide_events("race", ["m2"])
    with pytest.raises(StaleCandidate, match="changed since the snapshot"):
        store.put_segment(snapshot, summary_text="steps 0-4")
    assert every_segment(store, "race") == []
    with pytest.raises(ValueError, match="not within"):
        store.segment_snapshot("race", 4, 99)


def test_a_range_with_nothing_left_gets_an_empty_segment_not_a_retry_forever(store: HistoryStore):
    graph = agent(store)
    replay(graph, "empty", range(1, 30))
    first = store.segments("empty")[0]
    ids = [
        e.event_id
        for e in store.read_events("empty", from_seq=first.first_seq, to_seq=first.last_seq)
    ]
    store.delete_events("empty", ids)
    replay(graph, "empty", range(30, 40))
    again = next(s for s in store.segments("empty") if s.first_seq == first.first_seq)
    assert again.summary_text == EMPTY_RANGE and again.generation == 2


def test_export_and_import_carry_the_index_and_pruning_drops_replaced_rows(store: HistoryStore):
    graph = agent(store)
    replay(graph, "move", range(1, 30))
    store.hide_events("move", ["u3"])
    replay(graph, "move", range(30, 40))
    rows = every_segment(store, "move")
    assert {s.status for s in rows} == {"active", "superseded"}
    document = export_thread(store, "move")
    assert len(document["segments"]) == len(rows)
    other = SQLiteHistoryStore.from_path(":memory:")
    other.setup()
    counts = import_thread(other, json.loads(json.dumps(document)), into="moved")
    assert counts["segments"] == len(rows)
    copied = every_segment(other, "moved")
    assert [(s.first_seq, s.generation, s.status, s.summary_text) for s in copied] == [
        (s.first_seq, s.generation, s.status, s.summary_text) for s in rows
    ]
    assert all(s.scope.thread_id == "moved" for s in copied)
    bad = json.loads(json.dumps(document))
    bad["segments"][0]["last_seq"] = 10_000
    with pytest.raises(Exception, match="segments"):
        import_thread(other, bad, into="broken")
    assert not other.read_events("broken")  # nothing written
    other.close()
    assert store.prune_versions("move", keep=0) >= 1
    assert {s.status for s in every_segment(store, "move")} == {"active"}
    assert store.delete_thread("move")["ctx_segments"] >= 1


def test_a_failing_summarizer_leaves_the_range_pending_and_the_thread_goes_on(
    store: HistoryStore,
):
    class Flaky(ExtractiveSummarizer):
        failing = True

        def summarize(self, request: SummaryRequest) -> str:
            if self.failing and request.previous is None and request.events[0].seq > 1:
                raise RuntimeError("summarizer down")
            return super().summarize(request)

    flaky = Flaky()
    config = ContextConfig(**{**CONFIG.__dict__, "compaction_attempts": 1})
    graph = agent(store, config, summarizer=flaky)
    out = replay(graph, "flaky", range(1, 30))
    assert out["messages"][-1].text.startswith("Noted")
    failed = [s for s in store.segments("flaky") if s.first_seq > 1]
    assert not failed  # only the first range (whose summary fails nothing) was built
    flaky.failing = False
    replay(graph, "flaky", range(30, 36))
    assert [s.first_seq for s in store.segments("flaky")][:2] == [1, 9]


def test_with_precompact_at_the_index_is_built_after_the_turn(store: HistoryStore):
    config = ContextConfig(**{**CONFIG.__dict__, "precompact_at": 0.6})
    out = replay(agent(store, config), "bg", range(1, 30))
    reports = out["context"]["report"]["compaction"].get("segments")
    assert reports is None or reports.get("background") is True
    deadline = time.monotonic() + 20
    while not store.segments("bg") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.segments("bg")


def test_the_async_graph_builds_the_same_index(store: HistoryStore):
    graph = agent(store)

    async def go() -> None:
        run: Any = {"configurable": {"thread_id": "async"}}
        for n in range(1, 36):
            await graph.ainvoke({"messages": [HumanMessage(said(n), id=f"u{n}")]}, run)

    asyncio.run(go())
    sync_store = SQLiteHistoryStore.from_path(":memory:")
    sync_store.setup()
    replay(agent(sync_store), "async", range(1, 36))
    assert [(s.first_seq, s.last_seq) for s in store.segments("async")] == [
        (s.first_seq, s.last_seq) for s in sync_store.segments("async")
    ]
    sync_store.close()


def test_ranges_close_by_count_or_at_a_pause():
    day = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    for n in range(1, 13):
        at = day + dt.timedelta(hours=n if n < 6 else 48 + n)
        store.append("gap", [HumanMessage(f"m{n}", id=f"m{n}")], created_at=at)
    events = store.read_events("gap")
    assert segment_ranges(events, size=4, gap_s=6 * 3600, min_events=1) == [(1, 4), (5, 5), (6, 9)]
    assert segment_ranges(events, size=4, gap_s=None, min_events=2) == [(1, 4), (5, 8), (9, 12)]
    assert segment_ranges(events, size=100, gap_s=6 * 3600, min_events=2) == [(1, 5)]
    store.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"segment_events": 2}, "segment_events"), ({"segment_gap_s": 0}, "segment_gap_s")],
)
def test_bad_segment_settings_are_refused(kwargs: dict[str, Any], message: str):
    with pytest.raises(ValueError, match=message):
        ContextConfig(context_window=4_000, **kwargs)
