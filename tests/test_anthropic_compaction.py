"""Anthropic's server-side compaction (the ``compact_20260112`` edit) through the real
``ChatAnthropic`` against a loopback server that answers as the API does: past the trigger, the
reply starts with a ``compaction`` block, and the server reads a request from its last
compaction block on. The thread moves to OpenAI (which compacts server-side too) and back:
neither provider ever gets the other's opaque item, and every request fits its window."""

from __future__ import annotations

import itertools
import json
from typing import Any

import fake_providers as fp
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from test_providers import FILLER, OFFLINE, anthropic_model, openai_model, responses_reply, sent

from ctx_langgraph import ContextConfig, ContextManagementMiddleware, create_context_agent
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.history import HistoryStore, SQLiteHistoryStore
from ctx_langgraph.providers import (
    AnthropicContextEditing,
    AnthropicServerCompaction,
    Wire,
    compacts_server_side,
    item_provider,
    server_compaction,
    wire_of,
)
from ctx_langgraph.usage import UsageLedger

NUMBERS = itertools.count(1)
COUNTER = TiktokenCounter("gpt-4o")
ANTHROPIC_TRIGGER = 1_500
OPENAI_THRESHOLD = 1_600
CONFIG = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=400
)
USABLE = 2_500


def _is_compaction(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "compaction"


def _words(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def anthropic_tokens(request: dict[str, Any]) -> int:
    """What the fake counts of a request: the system prompt and the messages as sent."""
    return COUNTER.count_text(json.dumps([request.get("system"), request.get("messages")]))


def read_from(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the API reads of a request: from the last compaction block on."""
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index].get("content")
        if isinstance(content, list) and any(_is_compaction(b) for b in content):
            return messages[index:]
    return messages


def anthropic_compacting(request: dict[str, Any]) -> Any:
    """Anthropic with the compaction edit: past its trigger, a compaction block (the summary
    names the user turns it covers), then the answer; usage as the API reports it."""
    n = next(NUMBERS)
    edits = (request.get("context_management") or {}).get("edits") or []
    edit = next((e for e in edits if e.get("type") == "compact_20260112"), None)
    messages = read_from(request["messages"])
    used = COUNTER.count_text(json.dumps([request.get("system"), messages]))
    blocks: list[dict[str, Any]] = []
    iterations: list[dict[str, Any]] = []
    if edit is not None and used > edit["trigger"]["value"]:
        turns = [_words(m).split(":")[0] for m in messages if m["role"] == "user"]
        summary = f"Summary {n}: the user went over " + ", ".join(t[:40] for t in turns) + "."
        blocks = [fp.anthropic_compaction_block(summary, n)]
        iterations.append(
            {
                "type": "compaction",
                "input_tokens": used,
                "output_tokens": COUNTER.count_text(summary),
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            }
        )
        used = COUNTER.count_text(json.dumps([request.get("system"), blocks, messages[-1:]]))
    usage = {"input_tokens": used, "output_tokens": 9}
    if blocks:
        message_usage = {"type": "message", "cache_read_input_tokens": 0}
        usage["iterations"] = [*iterations, {**message_usage, **usage}]
    text = f"Understood, turn {n}."
    if blocks and edit is not None and edit.get("pause_after_compaction"):
        paused = fp.anthropic_message(f"msg_{n:04d}", usage, text, blocks)
        return {**paused, "content": blocks, "stop_reason": "compaction"}
    if request.get("stream"):
        start = {"input_tokens": used, "output_tokens": 1}
        events = fp.anthropic_stream(f"msg_{n:04d}", start, [usage], text, blocks)
        return fp.Reply(events=events)
    return fp.anthropic_message(f"msg_{n:04d}", usage, text, blocks)


def openai_compacting(request: dict[str, Any]) -> Any:
    """The Responses API with server-side compaction: past the threshold, a compaction item."""
    items = request["input"]
    last = max((i for i, item in enumerate(items) if item.get("type") == "compaction"), default=0)
    over = COUNTER.count_text(json.dumps(items[last:])) > OPENAI_THRESHOLD
    n = next(NUMBERS)
    item = {"type": "compaction", "id": f"cmp_{n:04d}", "encrypted_content": f"gAAA{n}=="}
    return responses_reply(request, [item] if over else None)


@pytest.fixture
def server() -> Any:
    with fp.serve() as replay:
        replay.answer["/v1/messages"] = anthropic_compacting
        replay.answer["/v1/responses"] = openai_compacting
        yield replay


def _fits(server: fp.ProviderReplay) -> None:
    for path, body in server.requests:
        if path == "/v1/messages":
            assert anthropic_tokens(body) <= USABLE, "an Anthropic request above the window"
        elif path == "/v1/responses":
            assert COUNTER.count_text(json.dumps(body["input"])) <= USABLE


def _no_foreign_items(server: fp.ProviderReplay) -> None:
    """No OpenAI item ever went to Anthropic, no Anthropic block to OpenAI."""
    for path, body in server.requests:
        text = json.dumps(body)
        if path == "/v1/messages":
            assert "gAAA" not in text and '"cmp_' not in text
        elif path == "/v1/responses":
            assert "EqAB" not in text and "sig_" not in text


def _turns(graph: Any, run: Any, label: str, until: Any, most: int = 30) -> int:
    for n in range(1, most):
        graph.invoke({"messages": [HumanMessage(f"{label} {n}: {FILLER}", id=f"{label}{n}")]}, run)
        if until():
            return n
    raise AssertionError(f"{label}: the condition never held")


def _active_provider(store: HistoryStore, thread: str) -> str | None:
    active = store.get_active(thread)
    return None if active is None else (active.provider_state or {}).get("provider")


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("output_version", [None, "v1"])
def test_an_anthropic_thread_compacts_server_side_moves_to_openai_and_back(
    server: fp.ProviderReplay, tmp_path: Any, streaming: bool, output_version: str | None
):
    """Every output format, invoked and streamed (on SQLite; every backend below)."""
    store = SQLiteHistoryStore.from_path(tmp_path / "history.sqlite")
    store.setup()
    try:
        _hop(server, store, streaming, output_version)
    finally:
        store.close()


def test_the_hop_between_providers_on_every_backend(server: fp.ProviderReplay, store: HistoryStore):
    _hop(server, store, streaming=False, output_version=None)


def _hop(
    server: fp.ProviderReplay, store: HistoryStore, streaming: bool, output_version: str | None
) -> None:
    options: dict[str, Any] = {"streaming": streaming}
    if output_version is not None:
        options["output_version"] = output_version
    compaction = AnthropicServerCompaction(trigger_tokens=ANTHROPIC_TRIGGER)
    claude = compaction.apply(anthropic_model(server, **options))
    assert "compact-2026-01-12" in claude.betas
    saver = InMemorySaver()
    run: Any = {"configurable": {"thread_id": "hop"}}
    on_claude = create_context_agent(
        claude, store=store, config=CONFIG, summarizer=OFFLINE, lookup_tool=False
    ).compile(checkpointer=saver)
    _turns(on_claude, run, "claude", lambda: _active_provider(store, "hop") == "anthropic")

    # recorded with the coverage it implies, and a readable summary of the same span
    active = store.get_active("hop")
    assert active is not None and active.provider_state is not None
    carrier = next(e for e in store.read_events("hop") if server_compaction(e.message))
    assert active.covered_through_seq == carrier.seq - 1
    [block] = active.provider_state["window"]
    assert block["type"] == "compaction" and block["content"].startswith("Summary")
    assert block["encrypted_content"].startswith("EqAB")
    assert (block.get("signature") is not None) is not streaming  # langchain drops it streamed
    assert active.summary_text and "claude 1:" in active.summary_text
    assert all(
        body["context_management"] == compaction.params() for body in sent(server, "/v1/messages")
    )

    # the next request to Anthropic starts at the block; nothing it covered is sent again
    on_claude.invoke({"messages": [HumanMessage("And the rollback?", id="claude-next")]}, run)
    request = sent(server, "/v1/messages")[-1]
    first = request["messages"][0]
    assert first["role"] == "assistant" and first["content"][0]["content"] == block["content"]
    assert sum(_is_compaction(b) for m in request["messages"] for b in _blocks(m)) == 1
    assert "claude 1:" not in json.dumps(request["messages"])

    # its usage, apart from the answer's: measured when invoked, unknown when streamed
    [booked, *_] = UsageLedger(store).records("hop", purpose="compaction")
    if streaming:
        assert booked.status == "unknown"
    else:
        assert booked.status == "complete" and booked.usage.output is not None
        assert booked.usage.input_total is not None and booked.usage.input_total > ANTHROPIC_TRIGGER

    # to OpenAI, which compacts server-side itself, then back to Anthropic
    mode = [{"type": "compaction", "compact_threshold": OPENAI_THRESHOLD}]
    on_openai = create_context_agent(
        openai_model(server, context_management=mode),
        store=store,
        config=CONFIG,
        summarizer=OFFLINE,
        lookup_tool=False,
    ).compile(checkpointer=saver)
    first_openai = len(sent(server, "/v1/responses"))
    _turns(on_openai, run, "gpt", lambda: _active_provider(store, "hop") == "openai-responses")
    assert "Summary of the earlier conversation" in json.dumps(
        sent(server, "/v1/responses")[first_openai]
    )
    _turns(on_openai, run, "gpt-more", lambda: True)
    back = len(sent(server, "/v1/messages"))
    _turns(on_claude, run, "back", lambda: _active_provider(store, "hop") == "anthropic")
    returned = sent(server, "/v1/messages")[back]
    assert "Summary of the earlier conversation" in json.dumps(returned)  # readable, not OpenAI's

    _no_foreign_items(server)
    _fits(server)
    purposes = {record.purpose for record in UsageLedger(store).records("hop")}
    assert purposes == {"answer", "compaction"}


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def test_the_middleware_records_anthropic_compaction_and_sends_the_block_back(
    server: fp.ProviderReplay, store: HistoryStore
):
    claude = AnthropicServerCompaction(trigger_tokens=ANTHROPIC_TRIGGER).apply(
        anthropic_model(server)
    )
    middleware = ContextManagementMiddleware(
        store, model=claude, config=CONFIG, summarizer=OFFLINE, lookup_tool=False
    )
    agent = create_agent(claude, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "mw"}}
    _turns(agent, run, "mw", lambda: _active_provider(store, "mw") == "anthropic")
    agent.invoke({"messages": [HumanMessage("next", id="mw-next")]}, run)
    request = sent(server, "/v1/messages")[-1]
    assert _is_compaction(_blocks(request["messages"][0])[0])
    assert "mw 1:" not in json.dumps(request["messages"])
    _fits(server)


def test_a_provider_that_compacts_itself_gets_the_room_up_to_the_window(
    server: fp.ProviderReplay, store: HistoryStore
):
    """Our local compaction would fire first at the same threshold: with the provider's
    compaction on, it waits until a request would not fit otherwise."""
    plain = anthropic_model(server)
    claude = AnthropicServerCompaction(trigger_tokens=ANTHROPIC_TRIGGER).apply(plain)
    assert compacts_server_side(claude) == ANTHROPIC_TRIGGER and compacts_server_side(plain) is None
    graph = create_context_agent(
        claude, store=store, config=CONFIG, summarizer=OFFLINE, lookup_tool=False
    ).compile(checkpointer=InMemorySaver())
    out = graph.invoke(
        {"messages": [HumanMessage("hi", id="h1")]}, {"configurable": {"thread_id": "r"}}
    )
    assert out["context"]["report"]["budget"]["trigger"] == USABLE
    assert CONFIG.resolve().trigger < USABLE


def test_the_trigger_and_instructions_are_ours_and_editing_keeps_the_compaction_edit(
    server: fp.ProviderReplay,
):
    model = anthropic_model(server)
    edit = AnthropicServerCompaction(instructions="Keep every file path.").apply(model, CONFIG)
    [compact] = edit.context_management["edits"]
    assert compact == {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": CONFIG.resolve().trigger},
        "instructions": "Keep every file path.",
    }
    both = AnthropicContextEditing(trigger_tokens=2_000).apply(edit)
    assert [e["type"] for e in both.context_management["edits"]] == [
        "clear_tool_uses_20250919",
        "compact_20260112",
    ]
    assert set(both.betas) == {"compact-2026-01-12", "context-management-2025-06-27"}
    again = AnthropicServerCompaction(trigger_tokens=60_000).apply(both)
    assert [e["type"] for e in again.context_management["edits"]] == [
        "clear_tool_uses_20250919",
        "compact_20260112",
    ]
    assert again.context_management["edits"][1]["trigger"]["value"] == 60_000
    paused = AnthropicServerCompaction(pause_after_compaction=True).params()["edits"][0]
    assert paused == {"type": "compact_20260112", "pause_after_compaction": True}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            AIMessage([{"type": "compaction", "id": "cmp_1", "encrypted_content": "g"}]),
            "openai-responses",
        ),
        (AIMessage([{"type": "compaction", "content": "s", "signature": "x"}]), "anthropic"),
        (
            AIMessage(
                [{"type": "compaction", "content": "s", "encrypted_content": "e", "index": 0}]
            ),
            "anthropic",
        ),
        (
            AIMessage(
                [{"type": "compaction", "id": "x", "content": "s", "index": 0}],
                response_metadata={"model_provider": "anthropic"},
            ),
            "anthropic",
        ),
        (
            AIMessage(
                [{"type": "non_standard", "value": {"type": "compaction", "content": "s"}}],
                response_metadata={"model_provider": "openai"},
            ),
            "openai-responses",
        ),
    ],
    ids=[
        "openai-shape",
        "anthropic-shape",
        "anthropic-streamed",
        "by-reply-anthropic",
        "by-reply-openai",
    ],
)
def test_compaction_items_are_told_apart(message: AIMessage, expected: str):
    found = server_compaction(message)
    assert found is not None and found[0] == expected
    assert item_provider(message, found[1]) == expected
    other = "anthropic" if expected == "openai-responses" else "openai-responses"
    assert Wire(other).messages([message], {}) == []  # nothing else in it: not sent at all
    assert Wire(expected).messages([message], {})[0] is message


def test_a_failed_anthropic_compaction_is_not_recorded_and_an_unknown_model_changes_nothing():
    failed = AIMessage(
        [
            {"type": "compaction", "content": None, "encrypted_content": None},
            {"type": "text", "text": "ok"},
        ],
        response_metadata={"model_provider": "anthropic"},
    )
    assert server_compaction(failed) is None  # the API treats it as a no-op
    assert wire_of(None).messages([failed], {})[0] is failed
    block = {
        "type": "compaction",
        "content": "Summary.",
        "encrypted_content": "e",
        "signature": "s",
    }
    paused = AIMessage(
        [block], response_metadata={"model_provider": "anthropic", "stop_reason": "compaction"}
    )
    question = HumanMessage("next")
    assert Wire("anthropic").messages([paused, question], {}) == [paused, question]
    assert Wire("openai-responses").messages([paused, question], {}) == [question]  # no empty turn


def test_a_reply_paused_after_compacting_ends_the_turn_and_the_thread_goes_on(
    server: fp.ProviderReplay, store: HistoryStore
):
    """``pause_after_compaction``: the reply is the compaction block alone. The next turn
    starts from it, and the paused reply (empty once its block moved into the projection) is
    never sent as an empty assistant turn, which the API would refuse on every later turn."""
    compaction = AnthropicServerCompaction(
        trigger_tokens=ANTHROPIC_TRIGGER, pause_after_compaction=True
    )
    claude = compaction.apply(anthropic_model(server))
    graph = create_context_agent(
        claude, store=store, config=CONFIG, summarizer=OFFLINE, lookup_tool=False
    ).compile(checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "pause"}}
    _turns(graph, run, "p", lambda: _active_provider(store, "pause") == "anthropic")
    paused = next(e for e in store.read_events("pause") if server_compaction(e.message))
    assert paused.message.response_metadata["stop_reason"] == "compaction"
    for n in range(3):
        out = graph.invoke({"messages": [HumanMessage(f"after {n}", id=f"after{n}")]}, run)
        assert out["messages"][-1].content  # answered
        request = sent(server, "/v1/messages")[-1]
        assert all(m["content"] for m in request["messages"])  # no empty turn
        assert _is_compaction(_blocks(request["messages"][0])[0])
    _fits(server)
