"""The artifact trail: what is read from tool calls, results and messages, how trails merge
across summary versions, its own cap and eviction order, the summary message, the context
report and the history lookup (docs/design.md §6, §8)."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
from dataclasses import replace
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_to_dict,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from ctx_langgraph.budget import TiktokenCounter, make_budget_node, make_budget_router
from ctx_langgraph.compaction import ExtractiveSummarizer, LLMSummarizer, SummaryDocument
from ctx_langgraph.compaction.artifacts import Touch, span_touches
from ctx_langgraph.compaction.node import CompactNode, make_compact_node
from ctx_langgraph.compaction.trail import (
    TRAIL_KEY,
    ArtifactEntry,
    ArtifactTrail,
    next_trail,
    with_trail,
)
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.eval.metrics import normalize
from ctx_langgraph.history import HistoryStore, SQLiteHistoryStore
from ctx_langgraph.history.types import HistoryEvent
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.state import ContextState
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply
from ctx_langgraph.view.summary import SUMMARY_MESSAGE_ID

COUNTER = TiktokenCounter("gpt-4o")
WINDOW = ContextConfig(
    context_window=3_000,
    output_reserve=500,
    keep_recent_tokens=300,
    summary_max_tokens=500,
    tool_output_cap_tokens=None,
    compaction_timeout_s=10,
)
DAY = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)


def events_of(messages: list[BaseMessage]) -> list[HistoryEvent]:
    """The messages as the store would give them back (seq from 1)."""
    out = []
    for seq, message in enumerate(messages, start=1):
        calls = tuple(c["id"] for c in getattr(message, "tool_calls", []) or [])
        if isinstance(message, ToolMessage):
            calls = (message.tool_call_id,)
        out.append(
            HistoryEvent(
                seq,
                message.id or f"m{seq}",
                "main",
                message.type,
                getattr(message, "name", None),
                message_to_dict(message),
                message.text,
                calls,
                (),
                1,
                True,
                DAY,
            )
        )
    return out


def call(name: str, args: dict[str, Any], call_id: str = "c1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def touches_of(*messages: BaseMessage) -> list[tuple[int, str, str, str, str | None]]:
    return [
        (t.seq, t.kind, t.artifact, t.action, t.state) for t in span_touches(events_of([*messages]))
    ]


# ----------------------------------------------------------------------------- extraction


def test_a_read_is_touched_at_its_result_with_the_short_result_as_state() -> None:
    found = touches_of(
        call("read_file", {"path": "/etc/app/worker.yaml"}),
        ToolMessage("retries: 3\nbackoff: 5s", tool_call_id="c1"),
    )
    assert found == [(2, "path", "/etc/app/worker.yaml", "read", "retries: 3\nbackoff: 5s")]


@pytest.mark.parametrize(
    ("name", "args", "action", "artifact"),
    [
        (
            "write_file",
            {"path": "src/app/main.py", "content": "x = 1"},
            "changed",
            "src/app/main.py",
        ),
        (
            "edit",
            {"file_path": "/srv/app.yaml", "old": "a", "new": "b"},
            "changed",
            "/srv/app.yaml",
        ),
        ("create_file", {"path": "/srv/new.txt"}, "created", "/srv/new.txt"),
        (
            "str_replace_based_edit_tool",
            {"command": "create", "path": "/a/b.md"},
            "created",
            "/a/b.md",
        ),
        ("str_replace_based_edit_tool", {"path": "/a/b.md", "command": "view"}, "read", "/a/b.md"),
        ("run_command", {"command": "rm -rf /tmp/build/out"}, "changed", "/tmp/build/out"),
        ("run_command", {"command": "sed -i 's/a/b/' /etc/x.conf"}, "changed", "/etc/x.conf"),
        ("run_command", {"command": "echo 1 > /srv/flag.txt"}, "changed", "/srv/flag.txt"),
        ("run_command", {"command": "cat /srv/flag.txt"}, "read", "/srv/flag.txt"),
        ("bash", {"command": "pytest"}, "read", "pytest"),
        ("fetch", {"url": "https://example.com/a/b?c=1"}, "read", "https://example.com/a/b?c=1"),
        ("update_ticket", {"ticket_id": "TCK-1234", "status": "closed"}, "changed", "TCK-1234"),
    ],
)
def test_what_a_call_did_is_read_from_its_name_and_command(
    name: str, args: dict[str, Any], action: str, artifact: str
) -> None:
    found = touches_of(call(name, args), ToolMessage("ok", tool_call_id="c1"))
    assert (artifact, action) in [(a, how) for _, _, a, how, _ in found]


def test_a_command_naming_nothing_is_the_artifact_and_an_id_only_looked_up_is_not() -> None:
    found = touches_of(
        call("run_command", {"command": "pytest -q tests"}, "c1"),
        ToolMessage("3 failed, 41 passed in 2.1s", tool_call_id="c1"),
        call("get_invoice", {"invoice_id": "INV-2024-0042"}, "c2"),
        ToolMessage("invoice INV-2024-0042: open", tool_call_id="c2"),
    )
    assert found == [
        (2, "command", "pytest -q tests", "read", "3 failed, 41 passed in 2.1s"),
    ]


def test_a_short_result_names_artifacts_of_its_own_and_an_error_fails_the_touch() -> None:
    output = "account:   Acme\ntarget:    /mnt/backups/acme/nightly.tar.zst\nretention: 30 days\n"
    found = touches_of(
        call("run_command", {"command": "backupctl show --account 'Acme'"}, "c1"),
        ToolMessage(output, tool_call_id="c1"),
        call("read_file", {"path": "/etc/missing.yaml"}, "c2"),
        ToolMessage("Error: [Errno 2] No such file: '/etc/missing.yaml'", tool_call_id="c2"),
    )
    assert (2, "path", "/mnt/backups/acme/nightly.tar.zst", "mentioned", output.strip()) in found
    assert (
        4,
        "path",
        "/etc/missing.yaml",
        "failed",
        "Error: [Errno 2] No such file: '/etc/missing.yaml'",
    ) in found


def test_a_huge_result_gives_the_line_naming_the_artifact_and_no_listing() -> None:
    rows = [f"/srv/data/file-{n:05d}.csv  {n} KB" for n in range(2_000)]
    rows[1_234] = "/srv/app/config.yaml  changed 2024-05-01 by deploy"
    found = touches_of(
        call("run_command", {"command": "ls -l /srv/app/config.yaml /srv/data"}),
        ToolMessage("\n".join(rows), tool_call_id="c1"),
    )
    assert [(a, s) for _, _, a, _, s in found if a == "/srv/app/config.yaml"] == [
        ("/srv/app/config.yaml", "/srv/app/config.yaml  changed 2024-05-01 by deploy")
    ]
    assert len(found) == 2  # the call's two paths; the listing's 2,000 files are its data


def test_odd_content_blocks_are_read_for_their_text() -> None:
    tool_call = {"name": "read_file", "args": {"path": "/srv/notes.md"}, "id": "c1"}
    ai = AIMessage(
        [
            {"type": "thinking", "thinking": "look at /secret/thoughts.txt", "signature": "s"},
            {"type": "text", "text": "Reading /srv/notes.md now."},
            {
                "type": "tool_use",
                "id": "c1",
                "name": "read_file",
                "input": {"path": "/srv/notes.md"},
            },
        ],
        tool_calls=[tool_call],
    )
    result = ToolMessage(
        [{"type": "text", "text": "# Notes\nship on Friday"}, {"type": "image", "url": "x"}],
        tool_call_id="c1",
    )
    found = touches_of(ai, result)
    assert (2, "path", "/srv/notes.md", "read", "# Notes\nship on Friday") in found
    assert all(a != "/secret/thoughts.txt" for _, _, a, _, _ in found)  # reasoning is not said


def test_no_artifacts_no_touches_and_lookup_pages_are_skipped() -> None:
    page = ToolMessage(
        json.dumps({"records": [{"text": "/etc/quoted/file.yaml"}]}),
        tool_call_id="c1",
        artifact={"ctx_lookup": True},
    )
    assert touches_of(HumanMessage("How are you today?"), AIMessage("Fine, thanks.")) == []
    assert touches_of(call("history_lookup", {"query": "yaml"}), page) == []


def test_what_a_person_says_is_the_state_whole_when_short_else_the_sentence() -> None:
    short = (
        "The nightly backup for Acme is written to /mnt/backups/acme.tar.zst; restore from there."
    )
    long = "Some context. " * 30 + "The key lives in /etc/keys/app.pem for now. " + "More. " * 10
    found = touches_of(HumanMessage(short), HumanMessage(long))
    assert found == [
        (1, "path", "/mnt/backups/acme.tar.zst", "mentioned", short),
        (
            2,
            "path",
            "/etc/keys/app.pem",
            "mentioned",
            "The key lives in /etc/keys/app.pem for now.",
        ),
    ]


# ----------------------------------------------------------------------------- merge and cap


def test_trails_merge_across_generations_through_the_checkpoint_metadata() -> None:
    first = ArtifactTrail().merged(
        [
            Touch("/a.yaml", "path", 3, "read", "read_file", "a: 1"),
            Touch("/b.yaml", "path", 5, "mentioned", "user", "b is at /b.yaml"),
        ]
    )
    stored = json.loads(json.dumps(first.to_metadata()))  # what the store gives back
    again = ArtifactTrail.from_metadata(stored).merged(
        [
            Touch("/a.yaml", "path", 40, "changed", "write_file", "a: 2"),
            Touch("/a.yaml", "path", 41, "mentioned", "assistant", None),
        ]
    )
    assert [e.artifact for e in again.entries] == ["/b.yaml", "/a.yaml"]  # newest touched last
    a = again.entries[-1]
    assert a.touches == ((3, "read"), (40, "changed"), (41, "mentioned"))
    assert (a.state, a.state_seq, a.state_via) == ("a: 2", 40, "write_file")  # a bare name keeps it
    assert ArtifactTrail.from_metadata({"version": 99}) == ArtifactTrail()
    assert ArtifactTrail.from_metadata(None) == ArtifactTrail()


def test_an_entry_keeps_its_first_touch_and_the_newest() -> None:
    trail = ArtifactTrail().merged(
        Touch("/a", "path", seq, "read", "t", None) for seq in range(1, 20)
    )
    assert [seq for seq, _ in trail.entries[0].touches] == [1, 15, 16, 17, 18, 19]


def entry(artifact: str, seq: int, action: str, state: str | None = None) -> ArtifactEntry:
    return ArtifactEntry(artifact, "path", ((seq, action),), state, seq, "t")


def test_the_cap_evicts_reads_before_mentions_before_changes_oldest_first() -> None:
    trail = ArtifactTrail(
        (
            entry("/changed-old", 1, "changed"),
            entry("/told-old", 2, "mentioned", "the told-old file is at /told-old"),
            entry("/read-old", 3, "read", "x: 1"),
            entry("/told-new", 10, "mentioned", "the told-new file is at /told-new"),
            entry("/read-new", 11, "read", "y: 2"),
        )
    )
    kept = [
        [e.artifact for e in trail.capped(tokens, COUNTER).entries] for tokens in range(10, 120, 2)
    ]
    # as the cap shrinks: the reads go first (oldest first), then what was told, then changes
    orders = [k for n, k in enumerate(kept) if n == 0 or k != kept[n - 1]]
    assert orders == [
        [],
        ["/changed-old"],
        ["/changed-old", "/told-new"],
        ["/changed-old", "/told-old", "/told-new"],
        ["/changed-old", "/told-old", "/told-new", "/read-new"],
        ["/changed-old", "/told-old", "/read-old", "/told-new", "/read-new"],
    ]
    capped = trail.capped(60, COUNTER)
    assert capped.tokens is not None and 0 < capped.tokens <= 60
    assert capped.evicted == len(trail.entries) - len(capped.entries)
    assert COUNTER.count_text(capped.render()) == capped.tokens


def test_a_touched_old_entry_outlives_a_newer_untouched_one() -> None:
    trail = ArtifactTrail((entry("/old", 1, "read"), entry("/new", 5, "read")))
    trail = trail.merged([Touch("/old", "path", 9, "read", "t", None)])
    one = trail.capped(COUNTER.count_text(trail.render()) - 3, COUNTER)
    assert [e.artifact for e in one.entries] == ["/old"]


# ----------------------------------------------------------------------------- rendering


def test_the_section_quotes_states_verbatim_once_and_is_not_read_as_prose() -> None:
    state = "account:   Acme\n## Done\n  target:    /mnt/b/acme.tar.zst"
    trail = ArtifactTrail().merged(
        [
            Touch("/mnt/b/acme.tar.zst", "path", 7, "mentioned", "run_command", state),
            Touch("/mnt/b/old.tar.zst", "path", 7, "mentioned", "run_command", state),
            Touch("/srv/x.yaml", "path", 8, "mentioned", "user", "x lives in /srv/x.yaml"),
        ]
    )
    prose = SummaryDocument(goal="Restore Acme").render() + '\n- user: "x lives in /srv/x.yaml"'
    text = with_trail(prose, trail)
    assert normalize(state) in normalize(text)  # whitespace aside, the state reads verbatim
    assert text.count("account:") == 1  # a state two entries share is quoted once
    assert "state (seq 8) quoted in the summary above" in text
    assert SummaryDocument.parse(text) == SummaryDocument.parse(prose)  # "## Done" stays data


def test_a_summary_text_without_a_trail_still_parses_and_reads_an_empty_trail(
    store: HistoryStore,
) -> None:
    store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(6)])
    old = store.create_candidate(
        store.snapshot("t", through_seq=3),
        summary_text=SummaryDocument(goal="Old").render(),
    )
    assert ArtifactTrail.from_checkpoint(old) == ArtifactTrail()
    merged = next_trail(old, store.read_events("t", from_seq=4), 500, COUNTER)
    assert merged.entries == ()


def test_the_trail_has_room_beside_or_inside_the_summary() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    node = CompactNode(store, WINDOW, counter=COUNTER)
    assert node.trail_tokens == min(1_000, node.cap)  # beside the prose, up to its cap
    inside = CompactNode(store, replace(WINDOW, artifact_trail_room="inside"), counter=COUNTER)
    assert inside.trail_tokens == min(1_000, inside.cap // 2)  # the prose keeps half at least
    assert WINDOW.with_trail_room(lookup=True).artifact_trail_room == "inside"
    assert WINDOW.with_trail_room(lookup=False).artifact_trail_room == "beside"
    with pytest.raises(ValueError, match="artifact_trail_room"):
        ContextConfig(artifact_trail_room="under")  # type: ignore[arg-type]
    off = CompactNode(store, ContextConfig(**{**vars(WINDOW), "artifact_trail_tokens": None}))
    assert off.trail_tokens == 0
    with pytest.raises(ValueError, match="artifact_trail_tokens"):
        ContextConfig(artifact_trail_tokens=10)
    store.close()


# ----------------------------------------------------------------------------- in a graph


CALLS = itertools.count()


def agent_reply(messages: list[BaseMessage]) -> AIMessage:
    """Reads a file on every user turn, then answers."""
    last = messages[-1]
    if isinstance(last, HumanMessage):
        turn = int(str(last.id).lstrip("h"))
        return call("read_file", {"path": f"/srv/app/file-{turn}.yaml"}, f"c{next(CALLS)}")
    return AIMessage("Done: the file is read and the settings look fine. " * 2)


def build(store: HistoryStore, summarizer: Any, config: ContextConfig = WINDOW) -> Any:
    model = MeteringChatModel(replies=[agent_reply])

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: dict[str, Any]) -> dict[str, Any]:
        results = [
            ToolMessage(
                f"setting_{c['args']['path'][-6]}: on\nowner: platform team",
                tool_call_id=c["id"],
                name=c["name"],
                id=f"r-{c['id']}",
            )
            for c in state["messages"][-1].tool_calls
        ]
        return {"messages": results}

    builder = StateGraph(ContextState)
    builder.add_node("ctx_budget", make_budget_node(store, config=config, counter=COUNTER))
    builder.add_node(
        "ctx_compact",
        make_compact_node(store, config=config, counter=COUNTER, summarizer=summarizer),
    )
    builder.add_node("model", call_model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "ctx_budget")
    builder.add_conditional_edges(
        "ctx_budget", make_budget_router("model"), ["ctx_compact", "model"]
    )
    builder.add_edge("ctx_compact", "ctx_budget")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if getattr(s["messages"][-1], "tool_calls", None) else END
    )
    builder.add_edge("tools", "ctx_budget")
    return builder.compile(checkpointer=InMemorySaver())


BACKUP = "The nightly backup of the ledger is written to /mnt/backups/ledger/nightly.tar.zst; restore from there."


def chat(turn: int) -> str:
    if turn == 1:
        return BACKUP
    return f"Turn {turn}: please check the next file of the app and tell me what it says. " * 3


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["extractive", "llm"])
def test_the_trail_survives_several_compactions_in_the_store_and_the_view(
    store: HistoryStore, mode: str, kind: str
) -> None:
    summarizer = (
        ExtractiveSummarizer()
        if kind == "extractive"
        else LLMSummarizer(MeteringChatModel(replies=[scripted_summary_reply]))
    )
    graph = build(store, summarizer)
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}

    async def run() -> dict[str, Any]:
        state: dict[str, Any] = {}
        for turn in range(1, 70):
            inputs = {"messages": [HumanMessage(chat(turn), id=f"h{turn}")]}
            if mode == "sync":
                state = graph.invoke(inputs, cfg)
            else:
                state = await graph.ainvoke(inputs, cfg)
        return state

    state = asyncio.run(run())
    active = store.get_active("t")
    assert active is not None and active.generation >= 3
    assert active.summarizer_id == summarizer.id  # the trail is the same whoever wrote the prose
    trail = ArtifactTrail.from_metadata(active.metadata[TRAIL_KEY])
    artifacts = [e.artifact for e in trail.entries]
    assert "/mnt/backups/ledger/nightly.tar.zst" in artifacts  # said at seq 1, kept since
    assert "/srv/app/file-2.yaml" in artifacts or trail.evicted > 0
    summary = next(m for m in state["messages"] if m.id == SUMMARY_MESSAGE_ID)
    assert "## Artifact trail" in summary.text
    assert normalize(BACKUP) in normalize(summary.text)
    report = state["context"]["report"]["artifacts"]
    assert report["count"] == len(trail.entries) and report["tokens"] == trail.tokens
    assert report["newest"][0]["last_seq"] == trail.entries[-1].last_seq
    assert trail.tokens is not None and trail.tokens <= CompactNode(store, WINDOW).trail_tokens


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_trail_inside_the_summary_cap_leaves_the_prose_the_rest(
    store: HistoryStore, mode: str
) -> None:
    inside = replace(WINDOW, artifact_trail_room="inside")
    graph = build(store, ExtractiveSummarizer(), config=inside)
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}

    async def run() -> None:
        for turn in range(1, 70):
            inputs = {"messages": [HumanMessage(chat(turn), id=f"h{turn}")]}
            if mode == "sync":
                graph.invoke(inputs, cfg)
            else:
                await graph.ainvoke(inputs, cfg)

    asyncio.run(run())
    node = CompactNode(store, inside, counter=COUNTER)
    versions = [v for v in store.list_versions("t") if v.status in ("active", "superseded")]
    assert len(versions) >= 3
    for version in versions:  # prose and trail together within the summary's cap
        trail = ArtifactTrail.from_metadata(version.metadata[TRAIL_KEY])
        assert trail.entries and (trail.tokens or 0) <= node.trail_tokens
        assert version.summary_tokens is not None and version.summary_tokens <= node.cap + 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_lookup_naming_an_artifact_returns_its_entry_and_events(
    store: HistoryStore, mode: str
) -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Where is the nightly backup?", id="h1"),
        call("run_command", {"command": "backupctl show --account 'Acme'"}, "c1"),
        ToolMessage(
            "account: Acme\ntarget: /mnt/backups/acme/nightly.tar.zst\n", tool_call_id="c1", id="t1"
        ),
        AIMessage("It is in the record above.", id="a2"),
        *[HumanMessage(f"filler {n} about something else entirely", id=f"f{n}") for n in range(8)],
    ]
    messages[1].id = "a1"
    store.append("t1", messages)
    snap = store.snapshot("t1", through_seq=4)
    trail = next_trail(None, snap.events, 500, COUNTER)
    candidate = store.create_candidate(
        snap, summary_text=with_trail("# s", trail), metadata=trail.metadata()
    )
    store.commit_candidate(candidate)
    tool = make_history_lookup_tool(store, max_tokens=1500, counter=COUNTER)
    args = {"query": "what is in nightly.tar.zst?"}
    cfg = {"configurable": {"thread_id": "t1"}}
    text = tool.invoke(args, config=cfg) if mode == "sync" else asyncio.run(tool.ainvoke(args, cfg))
    page = json.loads(text)
    assert page["artifacts"] == [
        {
            "artifact": "/mnt/backups/acme/nightly.tar.zst",
            "kind": "path",
            "touches": ["mentioned 3"],
            "state": "account: Acme\ntarget: /mnt/backups/acme/nightly.tar.zst",
            "state_seq": 3,
        }
    ]
    assert 3 in [r["seq"] for r in page["records"] if r.get("hit")]
    assert COUNTER.count_text(text) <= 1500
    unnamed = json.loads(tool.invoke({"query": "filler something"}, config=cfg))
    assert "artifacts" not in unnamed


@pytest.mark.parametrize("edit", ["delete_events", "hide_events"])
def test_deleting_or_hiding_a_covered_event_clears_the_trail_that_quotes_it(
    store: HistoryStore, edit: str
) -> None:
    secret = "The private key is kept in /home/ann/.ssh/id_ed25519 on the build host."
    store.append(
        "t",
        [HumanMessage(secret, id="s1"), *[HumanMessage(f"m {n}", id=f"m{n}") for n in range(4)]],
    )
    snap = store.snapshot("t", through_seq=3)
    trail = next_trail(None, snap.events, 500, COUNTER)
    assert trail.entries[0].state == secret
    metadata = {**trail.metadata(), "instructions": "keep the API decisions"}
    committed = store.commit_candidate(
        store.create_candidate(snap, summary_text=with_trail("# s", trail), metadata=metadata)
    )
    getattr(store, edit)("t", ["s1"])
    version = next(v for v in store.list_versions("t") if v.id == committed.id)
    assert version.status == "invalid" and version.summary_text is None
    assert version.metadata == {"instructions": "keep the API decisions"}  # the rest stays
    assert secret not in json.dumps(version.to_json())
