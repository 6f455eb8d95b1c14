"""Provider-native context features through the real clients, against a loopback server that
speaks the documented wire formats: OpenAI Responses compaction (standalone and server-side),
Anthropic context editing, and a thread moving between the two."""

from __future__ import annotations

import itertools
import json
from typing import Any

import fake_providers as fp
import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    ExtractiveSummarizer,
    create_context_agent,
)
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.budget.measure import estimate_view
from ctx_langgraph.errors import ProviderCompactionError
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.providers import (
    AnthropicContextEditing,
    OpenAIResponsesCompaction,
    provider_key,
    server_compaction_item,
    without_provider_items,
)
from ctx_langgraph.state import unpack
from ctx_langgraph.usage import UsageLedger

FILLER = "Let us go over the migration plan again, step by step, with the rollback notes. " * 3
IDS = itertools.count(1)


def tokens_of(request: dict[str, Any]) -> int:
    """What the fake provider reports as the request's input tokens (close to tiktoken's)."""
    return TiktokenCounter("gpt-4o").count_text(json.dumps(request.get("input") or request))


def responses_reply(request: dict[str, Any], output: list[dict[str, Any]] | None = None) -> Any:
    n = next(IDS)
    used = tokens_of(request)
    usage = {
        "input_tokens": used,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": used + 12,
    }
    body = fp.responses_body(f"resp_{n:04d}", usage, text=f"Noted, turn {n}.")
    if output is not None:
        body["output"] = [*output, *body["output"]]
    return body


def compact_reply(request: dict[str, Any]) -> Any:
    """The compact endpoint: the user messages (the last two here) and one compaction item."""
    n = next(IDS)
    users = [item for item in request["input"] if item.get("role") == "user"][-2:]
    window = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": _text(item)[:200]}],
        }
        for item in users
    ]
    window.append({"type": "compaction", "id": f"cmp_{n:04d}", "encrypted_content": f"gAAA{n}=="})
    used = tokens_of(request)
    return {
        "id": f"resp_cmp_{n:04d}",
        "object": "response.compaction",
        "created_at": 1_700_000_000,
        "output": window,
        "usage": {
            "input_tokens": used,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 180,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": used + 180,
        },
    }


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def anthropic_reply(request: dict[str, Any], edits: list[dict[str, Any]] | None = None) -> Any:
    used = TiktokenCounter("gpt-4o").count_text(json.dumps(request.get("messages")))
    body = fp.anthropic_message(
        f"msg_{next(IDS):04d}", {"input_tokens": used, "output_tokens": 9}, "Understood."
    )
    if edits is not None:
        body["context_management"] = {"applied_edits": edits}
    return body


def openai_model(server: fp.ProviderReplay, **kw: Any) -> ChatOpenAI:
    options: dict[str, Any] = {"use_responses_api": True, **kw}
    return ChatOpenAI(
        model="gpt-4.1", base_url=server.url + "/v1", api_key="test-key", max_retries=0, **options
    )


def anthropic_model(server: fp.ProviderReplay, **kw: Any) -> ChatAnthropic:
    return ChatAnthropic(
        model="claude-sonnet-4-5", base_url=server.url, api_key="test-key", max_retries=0, **kw
    )


def sent(server: fp.ProviderReplay, path: str) -> list[dict[str, Any]]:
    return [body for where, body in server.requests if where == path]


SMALL = dict(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=400
)

OFFLINE = ExtractiveSummarizer()
"""The summarizer of these agents: the server answers as the provider would a conversation, not
a summary request (the default, an ``LLMSummarizer`` on the agent's model, is tested in
test_default_summarizer.py)."""


@pytest.fixture
def server() -> Any:
    with fp.serve() as replay:
        replay.answer["/v1/responses"] = responses_reply
        replay.answer["/v1/responses/compact"] = compact_reply
        replay.answer["/v1/messages"] = anthropic_reply
        yield replay


def test_provider_keys_name_the_wire_protocol(server: fp.ProviderReplay):
    assert provider_key(openai_model(server)) == "openai-responses"
    assert provider_key(openai_model(server, use_responses_api=False)) == "openai-chat"
    assert provider_key(anthropic_model(server)) == "anthropic"
    assert provider_key(None) == "unknown"


def responses_agent(server: fp.ProviderReplay, store: HistoryStore, saver: InMemorySaver) -> Any:
    """An agent on the Responses API that compacts through OpenAI's compact endpoint."""
    model = openai_model(server)
    config = ContextConfig(**SMALL, compaction_backend=OpenAIResponsesCompaction(model))
    builder = create_context_agent(
        model, store=store, config=config, summarizer=OFFLINE, lookup_tool=False
    )
    return builder.compile(checkpointer=saver)


def compacted_openai_thread(
    server: fp.ProviderReplay, store: HistoryStore, saver: InMemorySaver, thread: str
) -> tuple[Any, dict[str, Any], int]:
    """Turns on the Responses API until the compact endpoint ran and one more request went out."""
    graph = responses_agent(server, store, saver)
    run: dict[str, Any] = {"configurable": {"thread_id": thread}}
    for n in range(1, 40):
        graph.invoke({"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"o{n}")]}, run)
        if sent(server, "/v1/responses/compact"):
            return graph, run, n
    raise AssertionError("the thread never compacted")


def test_a_responses_thread_compacts_through_the_adapter_and_sends_the_window_unpruned(
    server: fp.ProviderReplay, store: HistoryStore
):
    _graph, _run, _turn = compacted_openai_thread(server, store, InMemorySaver(), "resp")
    [compact] = sent(server, "/v1/responses/compact")
    assert compact["model"] == "gpt-4.1"
    assert any("turn 1:" in _text(item) for item in compact["input"] if item.get("role") == "user")

    active = store.get_active("resp")
    assert active is not None
    state = active.provider_state or {}
    window = state["window"]
    assert state["provider"] == "openai-responses" and state["kind"] == "standalone"
    assert window == compact_reply_like(window)  # kept whole, as the API returned it
    # the readable summary of the same span is there too
    assert (active.summary_text or "").startswith("# Context summary")
    # the item is budgeted at what the provider reported generating, not at its ciphertext
    assert state["item_tokens"] == 180
    from ctx_langgraph.budget.counters import CountCache
    from ctx_langgraph.view.summary import project_checkpoint

    [*_users, item] = project_checkpoint(active, "openai-responses")
    assert CountCache().count(TiktokenCounter("gpt-4.1"), item) == 180

    # the request that followed the compaction starts from the returned window, unpruned
    index = next(i for i, (path, _) in enumerate(server.requests) if path.endswith("/compact"))
    after = next(body for path, body in server.requests[index:] if path == "/v1/responses")
    items = [item for item in after["input"] if item.get("role") != "system"]
    head = items[: len(window)]
    for got, want in zip(head, window, strict=True):
        if want["type"] == "compaction":
            assert got == want
        else:
            assert (got["role"], got["content"]) == (want["role"], want["content"])
    assert not any("turn 1:" in _text(item) for item in items[len(window) :])

    ledger = UsageLedger(store)
    [booked] = ledger.records("resp", purpose="compaction")
    assert booked.usage.input_total == tokens_of(compact)
    assert booked.usage.output == 180
    assert len(ledger.records("resp", purpose="answer")) == len(sent(server, "/v1/responses"))


def compact_reply_like(window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The window's shape: user messages, then exactly one compaction item last."""
    assert [item["type"] for item in window][-1] == "compaction"
    assert sum(item["type"] == "compaction" for item in window) == 1
    assert all(item.get("role") == "user" for item in window[:-1])
    assert window[-1]["encrypted_content"].startswith("gAAA")
    return window


async def test_a_failed_compact_call_still_commits_the_readable_summary(
    server: fp.ProviderReplay, store: HistoryStore
):
    server.answer.pop("/v1/responses/compact")  # the endpoint answers 404
    graph = responses_agent(server, store, InMemorySaver())
    run: Any = {"configurable": {"thread_id": "fail"}}
    for n in range(1, 30):
        out = await graph.ainvoke(
            {"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"f{n}")]}, run
        )
        if store.get_active("fail") is not None:
            break
    active = store.get_active("fail")
    assert active is not None and active.provider_state is None and active.summary_text
    assert out["context"]["report"]["compaction"]["provider"]["status"] == "failed"
    assert "404" in out["context"]["report"]["compaction"]["provider"]["error"]
    with pytest.raises(ProviderCompactionError, match="404"):
        OpenAIResponsesCompaction(openai_model(server)).compact([HumanMessage("x")])


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("output_version", [None, "v0", "responses/v1", "v1"])
def test_server_side_compaction_items_are_recorded_with_the_coverage_they_imply(
    server: fp.ProviderReplay, store: HistoryStore, output_version: str | None, streaming: bool
):
    """In every output format langchain-openai produces (``v1`` wraps the item in a
    ``non_standard`` block), invoked or streamed."""
    threshold = 1_500
    compaction = {"type": "compaction", "id": "cmp_srv_1", "encrypted_content": "gAAAsrv=="}

    def reply(request: dict[str, Any]) -> Any:
        already = any(item.get("type") == "compaction" for item in request["input"])
        over = tokens_of(request) > threshold
        body = responses_reply(request, [compaction] if over and not already else None)
        if not request.get("stream"):
            return body
        items = [item for item in body["output"] if item.get("type") == "compaction"]
        text = body["output"][-1]["content"][0]["text"]
        return fp.Reply(events=fp.responses_stream(body["id"], body["usage"], text, items))

    server.answer["/v1/responses"] = reply
    mode = [{"type": "compaction", "compact_threshold": threshold}]
    options: dict[str, Any] = {"streaming": streaming}
    if output_version is not None:
        options["output_version"] = output_version
    model = openai_model(server, context_management=mode, **options)
    config = ContextConfig(context_window=50_000, output_reserve=1_000)  # we never compact here
    graph = create_context_agent(
        model, store=store, config=config, summarizer=OFFLINE, lookup_tool=False
    ).compile(checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "srv"}}
    for n in range(1, 30):
        graph.invoke({"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"s{n}")]}, run)
        if store.get_active("srv") is not None:
            break
    requests = sent(server, "/v1/responses")
    assert all(body["context_management"] == mode for body in requests)
    active = store.get_active("srv")
    assert active is not None
    carrier = next(e for e in store.read_events("srv") if server_compaction_item(e.message))
    assert active.covered_through_seq == carrier.seq - 1  # everything before the reply
    assert active.provider_state["kind"] == "server"
    assert active.provider_state["model"] == "gpt-4.1-2025-04-14"  # the reply's model
    assert active.provider_state["window"] == [compaction]
    assert active.summary_text and "turn 1:" in active.summary_text  # readable, same span

    # the request after it starts at the compaction item: earlier items are dropped
    last = requests[-1]
    items = [item for item in last["input"] if item.get("role") != "system"]
    assert items[0] == compaction
    assert sum(item.get("type") == "compaction" for item in items) == 1
    assert not any("turn 1:" in _text(item) for item in items)


def test_anthropic_context_editing_is_sent_recorded_and_followed_by_the_budget(
    server: fp.ProviderReplay, store: HistoryStore
):
    edits = [
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 1_200}
    ]
    server.answer["/v1/messages"] = lambda request: anthropic_reply(request, edits)
    editing = AnthropicContextEditing(trigger_tokens=2_000, keep_tool_uses=1)
    model = editing.apply(anthropic_model(server))
    graph = create_context_agent(
        model,
        store=store,
        config=ContextConfig(context_window=20_000, output_reserve=1_000),
        summarizer=OFFLINE,
    ).compile(checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "edit"}}
    graph.invoke({"messages": [HumanMessage(f"first: {FILLER}", id="a1")]}, run)
    out = graph.invoke({"messages": [HumanMessage(f"second: {FILLER}", id="a2")]}, run)

    [first, *_] = sent(server, "/v1/messages")
    assert first["context_management"] == editing.params()
    context = unpack(out["context"])
    assert context["provider_edits"]["applied_edits"] == edits
    assert context["provider_edits"]["cleared_input_tokens"] == 1_200
    assert context["provider_edits_total"] == {
        "replies": 2,
        "cleared_input_tokens": 2_400,
        "cleared_tool_uses": 6,
    }
    # the estimate of the second request starts from what the provider measured for the first,
    # after its edits (the baseline) ...
    answers = UsageLedger(store).records("edit", purpose="answer")
    assert context["budget"]["method"] == "baseline"
    assert context["budget"]["measured_baseline"] == answers[0].usage.input_total
    # ... and a recount of the full view takes off what the provider will clear again
    from ctx_langgraph.budget.node import BudgetNode

    node = BudgetNode(store, ContextConfig(context_window=20_000, output_reserve=1_000), model)
    call = {"name": "get_log", "args": {}, "id": "toolu_1", "type": "tool_call"}
    view = [
        *out["messages"],
        AIMessage("", tool_calls=[call], id="t1"),
        ToolMessage("error at line 12; retrying. " * 300, tool_call_id="toolu_1", id="t2"),
        HumanMessage("and now?", id="t3"),
    ]
    plain = estimate_view(node.settings, node.settings.counter, view, {})
    edited = estimate_view(
        node.settings, node.settings.counter, view, {"provider_edits": context["provider_edits"]}
    )
    assert edited.method == plain.method == "recount"
    assert edited.input_tokens == plain.input_tokens - 1_200 and edited.provider_cleared == 1_200
    # never more than the tool results the view holds
    capped = estimate_view(
        node.settings,
        node.settings.counter,
        out["messages"],
        {"provider_edits": context["provider_edits"]},
    )
    assert capped.provider_cleared == 0
    assert len(UsageLedger(store).records("edit", purpose="answer")) == 2


@pytest.mark.parametrize("window", [2_000, 900], ids=["fits", "smaller-window-compacts-first"])
def test_a_compacted_openai_thread_moves_to_anthropic_and_back(
    server: fp.ProviderReplay, store: HistoryStore, window: int
):
    saver = InMemorySaver()
    openai_graph, run, _turn = compacted_openai_thread(server, store, saver, "move")
    compacted = store.get_active("move")
    assert compacted is not None and compacted.provider_state

    before = openai_graph.get_state(run).values
    # the same thread, now on Anthropic, with a smaller window
    small = ContextConfig(
        context_window=window,
        output_reserve=window // 5,
        keep_recent_tokens=window // 6,
        summary_max_tokens=200,
    )
    anthropic_graph = create_context_agent(
        anthropic_model(server), store=store, config=small, summarizer=OFFLINE, lookup_tool=False
    ).compile(checkpointer=saver)
    out = anthropic_graph.invoke(
        {"messages": [HumanMessage("Where were we with the rollback?", id="switch-1")]}, run
    )
    [first] = sent(server, "/v1/messages")
    body = json.dumps(first)
    assert "encrypted_content" not in body and '"compaction"' not in body  # no opaque item
    assert "Summary of the earlier conversation" in body  # the readable summary
    assert "Where were we with the rollback?" in body  # and the tail
    budget = out["context"]["report"]["budget"]
    assert budget["window"] == window and budget["total"] <= budget["usable"]
    counter = TiktokenCounter("gpt-4o")
    assert counter.count_text(json.dumps(first["messages"])) <= budget["usable"]
    after_switch = store.get_active("move")
    assert after_switch is not None
    if window < 1_000:  # the thread did not fit the new window: compacted (locally) first
        assert after_switch.generation == compacted.generation + 1
        assert after_switch.provider_state is None
        # the summary and the part of the tail the new target affords
        assert len(first["messages"]) < len(before["messages"])
    else:
        assert "provider changed (openai-responses -> anthropic)" in str(out["context"])
        assert after_switch.id == compacted.id
    for n in range(2, 6):
        anthropic_graph.invoke(
            {"messages": [HumanMessage(f"anthropic turn {n}: {FILLER}", id=f"switch-{n}")]}, run
        )
    assert all("encrypted_content" not in json.dumps(b) for b in sent(server, "/v1/messages"))

    # and back to OpenAI: a request it can read (its own window, or the readable summary)
    before = len(sent(server, "/v1/responses"))
    back = openai_graph.invoke({"messages": [HumanMessage("Back on OpenAI.", id="back-1")]}, run)
    [request] = sent(server, "/v1/responses")[before:]
    items = request["input"]
    active = store.get_active("move")
    assert active is not None
    window = (active.provider_state or {}).get("window")
    if window and (active.provider_state or {}).get("provider") == "openai-responses":
        assert sum(item.get("type") == "compaction" for item in items) == 1
    else:
        assert not any(item.get("type") == "compaction" for item in items)
        assert "Summary of the earlier conversation" in json.dumps(items)
    assert "Back on OpenAI." in json.dumps(items)
    assert (
        back["context"]["report"]["budget"]["total"]
        <= back["context"]["report"]["budget"]["usable"]
    )
    purposes = {r.purpose for r in UsageLedger(store).records("move")}
    assert purposes == {"answer", "compaction"}


def test_opaque_items_are_stripped_only_from_copies():
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "x"}
    message = AIMessage([item, {"type": "text", "text": "hi"}], id="m1")
    stripped = without_provider_items(message)
    assert stripped.content == [{"type": "text", "text": "hi"}] and message.content[0] == item
    assert without_provider_items(AIMessage("plain")).content == "plain"
    assert server_compaction_item(message) == item and server_compaction_item(stripped) is None
    # langchain-openai's v1 output wraps the item; a stream's merge adds an index
    wrapped = AIMessage(
        [{"type": "non_standard", "value": {**item, "index": 0}}, {"type": "text", "text": "hi"}]
    )
    assert server_compaction_item(wrapped) == item
    assert without_provider_items(wrapped).content == [{"type": "text", "text": "hi"}]


def test_a_backend_that_is_not_an_adapter_is_refused():
    with pytest.raises(ValueError, match="compaction_backend"):
        ContextConfig(compaction_backend="openai")


async def test_the_async_path_compacts_through_the_async_client(
    server: fp.ProviderReplay, store: HistoryStore
):
    graph = responses_agent(server, store, InMemorySaver())
    run: Any = {"configurable": {"thread_id": "async-resp"}}
    for n in range(1, 40):
        out = await graph.ainvoke(
            {"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"x{n}")]}, run
        )
        if sent(server, "/v1/responses/compact"):
            break
    active = store.get_active("async-resp")
    assert active is not None and (active.provider_state or {}).get("kind") == "standalone"
    assert out["context"]["report"]["compaction"]["provider"]["status"] == "compacted"
    assert [m.id for m in out["messages"] if m.id and m.id.startswith("ctx-window-")]
    [booked] = await UsageLedger(store).arecords("async-resp", purpose="compaction")
    assert booked.usage.output == 180


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"id": "r1", "object": "response.compaction", "output": []}, "no output window"),
        (
            {"id": "r1", "output": [{"type": "message", "role": "user", "content": "x"}]},
            "no compaction item",
        ),
    ],
)
def test_a_compact_reply_without_a_window_is_a_typed_error(
    server: fp.ProviderReplay, reply: dict[str, Any], problem: str
):
    server.answer["/v1/responses/compact"] = lambda request: reply
    with pytest.raises(ProviderCompactionError, match=problem):
        OpenAIResponsesCompaction(openai_model(server)).compact([HumanMessage("hello")])


def test_a_backend_for_another_provider_is_skipped_with_a_warning(
    server: fp.ProviderReplay, caplog: Any
):
    from ctx_langgraph.compaction.node import CompactNode
    from ctx_langgraph.history import SQLiteHistoryStore

    chat = openai_model(server, use_responses_api=False)
    config = ContextConfig(**SMALL, compaction_backend=OpenAIResponsesCompaction(chat))
    with SQLiteHistoryStore.from_path(":memory:") as store:
        node = CompactNode(store, config, model=chat)
    assert node.provider == "openai-chat" and "only the readable summary" in caplog.text


def test_the_agent_asks_the_provider_for_an_exact_count_near_the_limit(
    server: fp.ProviderReplay, store: HistoryStore
):
    from ctx_langgraph.budget import OpenAIResponsesCountHook

    server.answer["/v1/responses/input_tokens"] = lambda request: {
        "object": "response.input_tokens",
        "input_tokens": tokens_of(request),
    }
    model = openai_model(server)
    graph = create_context_agent(
        model,
        store=store,
        config=ContextConfig(**SMALL, trigger=0.97),  # counts are asked above 0.9
        summarizer=OFFLINE,
        lookup_tool=False,
        provider_count=OpenAIResponsesCountHook(model),
    ).compile(checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "count"}}
    methods = []
    for n in range(1, 30):
        out = graph.invoke({"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"c{n}")]}, run)
        methods.append(out["context"]["report"]["budget"]["method"])
    counted = sent(server, "/v1/responses/input_tokens")
    assert counted and "provider" in methods
    assert len(counted) < len(methods) / 2  # asked only near the limit, not every turn
    assert all(body["model"] == "gpt-4.1" and body["input"] for body in counted)


@pytest.mark.parametrize("mode", ["graph", "middleware"])
def test_a_thread_chained_by_previous_response_id_sends_a_compacted_view_whole_once(
    server: fp.ProviderReplay, store: HistoryStore, mode: str
):
    """With ``use_previous_response_id`` langchain sends only what follows the last reply and
    the provider keeps the rest. A compaction (or an edit) changes the view the provider holds:
    the next request goes out whole, without ``previous_response_id``, and starts a new chain;
    the provider's context then never outgrows the window."""
    held: dict[str, list[Any]] = {}  # response id -> the conversation the provider holds
    largest = [0]

    def reply(request: dict[str, Any]) -> Any:
        previous = request.get("previous_response_id")
        if previous is not None and previous not in held:
            missing = f"Previous response with id '{previous}' not found."
            return fp.Reply(400, fp.openai_error(missing, code="previous_response_not_found"))
        context = [*held.get(previous or "", []), *request["input"]]
        largest[0] = max(largest[0], tokens_of({"input": context}))
        body = responses_reply({**request, "input": context})
        held[body["id"]] = [*context, *body["output"]]
        return body

    server.answer["/v1/responses"] = reply
    model = openai_model(server, use_previous_response_id=True)
    config = ContextConfig(**SMALL)
    run: Any = {"configurable": {"thread_id": f"chain-{mode}"}}
    if mode == "graph":
        graph = create_context_agent(
            model, store=store, config=config, summarizer=OFFLINE, lookup_tool=False
        ).compile(checkpointer=InMemorySaver())
    else:
        middleware = ContextManagementMiddleware(
            store, model=model, config=config, summarizer=OFFLINE, lookup_tool=False
        )
        graph = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    for n in range(1, 30):
        graph.invoke({"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"c{n}")]}, run)

    active = store.get_active(f"chain-{mode}")
    assert active is not None and active.generation >= 2
    requests = sent(server, "/v1/responses")
    whole = [body for body in requests[1:] if "previous_response_id" not in body]
    assert len(whole) >= active.generation  # once after each compaction
    for body in whole:  # the compacted view, summary first
        assert "Summary of the earlier conversation" in json.dumps(body["input"])
    assert sum("previous_response_id" in body for body in requests) >= len(requests) // 2
    # the provider's context stayed within the usable window (a little framing aside)
    assert largest[0] <= config.resolve().usable * 1.1
