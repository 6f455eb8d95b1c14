"""Clearing old tool results (``ContextConfig.tool_clearing``), with the options of LangChain's
``ClearToolUsesEdit`` and Anthropic's ``clear_tool_uses_20250919``: tools never cleared (the
history lookup's pages by default), the calls' inputs cleared too, the placeholder text, a
trigger in tokens, a least amount to reclaim, keep-N; results the model has not read yet are
never cleared. Node by node (every backend, sync and async) and through the two wirings."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    ToolClearing,
    add_context_management,
    make_history_lookup_tool,
)
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.budget.node import make_budget_node
from ctx_langgraph.compaction import pairing_problems
from ctx_langgraph.testing import MeteringChatModel
from tests.conftest import Api, Backend

CONFIG = {"configurable": {"thread_id": "t"}}
COUNTER = TiktokenCounter("gpt-4o")
LOOKUP_ARTIFACT = {"ctx_lookup": True}


def node_for(store: Any, clearing: Any = None, **cfg: Any) -> Any:
    config = ContextConfig(
        context_window=100_000, output_reserve=1_000, tool_clearing=clearing, **cfg
    )
    return make_budget_node(store, config=config, counter=COUNTER, compact_node=None)


async def step(api: Api, node: Any, state: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    if api.mode == "sync":
        update = node.invoke(state, CONFIG)
    else:
        update = await node.ainvoke(state, CONFIG)
    merged = dict(state)
    merged["context"] = {**state.get("context", {}), **update["context"]}
    if "messages" in update:
        replaced = {m.id: m for m in update["messages"]}
        merged["messages"] = [replaced.get(m.id, m) for m in state["messages"]]
    return merged, update


def conversation(*results: tuple[str, dict[str, Any], str], answered: bool = True) -> list:
    """One tool call and its result per ``(tool, args, text)``, then (``answered``) the model's
    answer and a new user message: every result has been read by the model."""
    messages: list[BaseMessage] = [HumanMessage("go", id="h")]
    for n, (name, args, text) in enumerate(results):
        artifact = LOOKUP_ARTIFACT if name == "history_lookup" else None
        messages += [
            AIMessage("", id=f"a{n}", tool_calls=[{"name": name, "args": args, "id": f"c{n}"}]),
            ToolMessage(text, tool_call_id=f"c{n}", name=name, id=f"t{n}", artifact=artifact),
        ]
    if answered:
        messages += [AIMessage("done", id="answer"), HumanMessage("next", id="h2")]
    return messages


def result(state: dict[str, Any], message_id: str) -> BaseMessage:
    return next(m for m in state["messages"] if m.id == message_id)


def is_cleared(message: BaseMessage) -> bool:
    return bool(message.additional_kwargs.get("ctx_cleared"))


FILE = "def handler(event):\n    return event['body']\n" * 40  # ~500 tokens


# ----------------------------------------------------------------------- node by node


async def test_excluded_tools_are_never_cleared(api: Api) -> None:
    clearing = ToolClearing(keep=1, exclude_tools=["search"])
    node = node_for(api.store, clearing)
    state = {
        "messages": conversation(
            ("search", {"q": "refund policy"}, "policy: 30 days " * 60),
            ("read_file", {"path": "a.py"}, FILE),
            ("read_file", {"path": "b.py"}, FILE),
            ("read_file", {"path": "c.py"}, FILE),
        )
    }
    state, update = await step(api, node, state)
    assert sorted(m.id for m in update["messages"]) == ["t1", "t2"]
    assert result(state, "t0").content == "policy: 30 days " * 60
    assert not is_cleared(result(state, "t0")) and not is_cleared(result(state, "t3"))
    # a later pass over the same state clears nothing more: the search result stays
    state, update = await step(api, node, state)
    assert "messages" not in update and result(state, "t0").content.startswith("policy")


async def test_history_lookup_pages_are_not_cleared_by_default(api: Api) -> None:
    page = json.dumps({"notice": "records are data", "records": [{"text": "LK-88213-Q"}]})
    messages = conversation(
        ("history_lookup", {"query": "locker code"}, page * 20),
        ("read_file", {"path": "a.py"}, FILE),
    )
    # the two options that existed before keep their meaning, and skip lookup pages now
    node = node_for(api.store, clear_tool_results_keep=0, clear_tool_results_batch=1)
    state, update = await step(api, node, {"messages": messages})
    assert [m.id for m in update["messages"]] == ["t1"]
    assert result(state, "t0").content == page * 20
    # asked for, they are cleared like any other result
    node = node_for(api.store, ToolClearing(keep=0, clear_lookup_results=True))
    state, update = await step(api, node, state)
    assert [m.id for m in update["messages"]] == ["t0"] and is_cleared(result(state, "t0"))


async def test_results_the_model_has_not_read_are_never_cleared(api: Api) -> None:
    node = node_for(api.store, clear_tool_results_keep=0, clear_tool_results_batch=1)
    calls = [{"name": "read_file", "args": {"path": f"{n}.py"}, "id": f"c{n}"} for n in range(3)]
    messages: list[BaseMessage] = [
        HumanMessage("read the three files", id="h"),
        AIMessage("", id="a", tool_calls=calls),
        *(ToolMessage(FILE, tool_call_id=f"c{n}", name="read_file", id=f"t{n}") for n in range(3)),
    ]
    state, update = await step(api, node, {"messages": messages})
    assert "messages" not in update  # the model asked for them and has not seen them yet
    state["messages"] += [AIMessage("read them", id="answer"), HumanMessage("thanks", id="h2")]
    state, update = await step(api, node, state)
    assert sorted(m.id for m in update["messages"]) == ["t0", "t1", "t2"]


async def test_tool_inputs_are_cleared_when_asked_and_the_pairs_stay_valid(api: Api) -> None:
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    args = {"path": "src/billing/invoice.py", "lines": "1-400"}
    node = node_for(api.store, ToolClearing(keep=1, clear_tool_inputs=True))
    messages = conversation(
        ("read_file", args, FILE),
        ("read_file", {"path": "b.py"}, FILE),
    )
    # as ChatAnthropic returns it: the call is in the content too
    messages[1] = AIMessage(
        [
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "c0", "name": "read_file", "input": args},
        ],
        id="a0",
        tool_calls=[{"name": "read_file", "args": args, "id": "c0"}],
    )
    state, update = await step(api, node, {"messages": messages})
    assert sorted(m.id for m in update["messages"]) == ["a0", "t0"]
    call = result(state, "a0")
    assert call.tool_calls[0]["args"] == {} and call.tool_calls[0]["id"] == "c0"
    assert call.content[1]["input"] == {} and call.content[0]["text"] == "Reading it."
    assert call.response_metadata["context_editing"]["cleared_tool_inputs"] == ["c0"]
    assert result(state, "a1").tool_calls[0]["args"] == {"path": "b.py"}  # kept (keep=1)
    assert "src/billing" not in json.dumps(call.content) + json.dumps(call.tool_calls)
    assert pairing_problems(state["messages"]) == []
    # each provider's request pairs every result with its call
    anthropic = ChatAnthropic(model="claude-sonnet-4-5", api_key="k")
    payload = anthropic._get_request_payload(state["messages"])
    blocks = [
        b for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"]
    ]
    uses = [b for b in blocks if b["type"] == "tool_use"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert [u["id"] for u in uses] == [r["tool_use_id"] for r in results] == ["c0", "c1"]
    assert uses[0]["input"] == {}
    openai = ChatOpenAI(model="gpt-4o", api_key="k")
    sent = openai._get_request_payload(state["messages"])["messages"]
    assert [c["id"] for m in sent for c in m.get("tool_calls", [])] == ["c0", "c1"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["c0", "c1"]
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    # the call is recorded as the model made it; the state's copy is not a revision of it
    assert api.store.get_event("t", "a0").message.tool_calls[0]["args"] == args
    state["messages"].append(AIMessage("ok", id="answer2"))
    state, update = await step(api, node, state)
    assert api.store.get_event("t", "a0").revision == 1
    assert "edited message" not in state["context"]["report"]["budget"]["epoch_bumped_for"]


async def test_the_placeholder_text_is_used(api: Api) -> None:
    messages = conversation(("read_file", {"path": "a.py"}, FILE), ("get", {}, "x" * 900))
    node = node_for(api.store, ToolClearing(keep=0, placeholder="[cleared]"))
    state, _ = await step(api, node, {"messages": messages})
    assert result(state, "t0").content == result(state, "t1").content == "[cleared]"
    assert result(state, "t0").response_metadata["context_editing"]["cleared"] is True
    # its fields are filled in: the tool, the handle the lookup reads it back by, its size
    node = node_for(api.store, ToolClearing(keep=0, placeholder="[{tool} output: {handle}]"))
    state, _ = await step(api, node, {"messages": conversation(("read_file", {}, FILE))})
    assert result(state, "t0").content == "[read_file output: history:t0]"
    # the default says what it was and how to read it again
    node = node_for(api.store, ToolClearing(keep=0))
    state, _ = await step(api, node, {"messages": conversation(("read_file", {}, FILE))})
    assert 'history_lookup with handle="history:t0"' in result(state, "t0").content


async def test_a_trigger_in_tokens_clears_only_above_it(api: Api) -> None:
    probe = node_for(api.store)
    messages = conversation(("read_file", {}, FILE), ("read_file", {}, FILE))
    _, update = await step(api, probe, {"messages": messages})
    before = update["context"]["report"]["budget"]["total"]
    node = node_for(api.store, ToolClearing(keep=0, trigger=before + 400))
    state, update = await step(api, node, {"messages": messages})
    assert "messages" not in update  # under the trigger: nothing cleared
    state["messages"] += [
        AIMessage("", id="a9", tool_calls=[{"name": "read_file", "args": {}, "id": "c9"}]),
        ToolMessage(FILE, tool_call_id="c9", name="read_file", id="t9"),
        AIMessage("read", id="answer9"),
        HumanMessage("and now?", id="h9"),
    ]
    state, update = await step(api, node, state)  # over it: every result read is cleared
    assert sorted(m.id for m in update["messages"]) == ["t0", "t1", "t9"]
    assert state["context"]["report"]["budget"]["total"] < before
    # a fraction is of the usable window, as the compaction trigger's
    node = node_for(api.store, ToolClearing(keep=0, trigger=0.9))
    _, update = await step(api, node, {"messages": messages})
    assert "messages" not in update


async def test_clear_at_least_clears_only_what_reclaims_enough(api: Api) -> None:
    one = COUNTER.count_text(FILE)
    messages = conversation(*[("read_file", {"path": f"{n}.py"}, FILE) for n in range(3)])
    # the three results together reclaim less than asked: clearing is not worth the cache
    node = node_for(api.store, ToolClearing(keep=0, clear_at_least=3 * one + 100))
    state, update = await step(api, node, {"messages": messages})
    assert "messages" not in update
    # oldest first, until at least that much is reclaimed
    node = node_for(api.store, ToolClearing(keep=0, clear_at_least=one + 10))
    state, update = await step(api, node, state)
    assert sorted(m.id for m in update["messages"]) == ["t0", "t1"]
    assert not is_cleared(result(state, "t2"))


async def test_cleared_results_are_read_back_by_their_handle(api: Api) -> None:
    secret = "the invoice total is EUR 4,812.50 for order ORD-7731\n" * 30
    node = node_for(api.store, ToolClearing(keep=0))
    state, _ = await step(api, node, {"messages": conversation(("read_file", {}, secret))})
    cleared = result(state, "t0")
    assert "ORD-7731" not in cleared.text
    handle = cleared.additional_kwargs["ctx_cleared"]["handle"]
    lookup = make_history_lookup_tool(api.store)
    args = {"handle": handle}
    if api.mode == "sync":
        page = lookup.invoke(args, {"configurable": {"thread_id": "t"}})
    else:
        page = await lookup.ainvoke(args, {"configurable": {"thread_id": "t"}})
    assert "ORD-7731" in page and "EUR 4,812.50" in page


# ----------------------------------------------------------------------- construction


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"keep": -1}, ValueError, "ToolClearing.keep=-1: expected an int >= 0"),
        ({"keep": 1.5}, TypeError, "ToolClearing.keep=1.5 (float): expected an int >= 0"),
        ({"trigger": 0}, ValueError, "ToolClearing.trigger=0: expected"),
        ({"trigger": 1.5}, ValueError, "ToolClearing.trigger=1.5: expected"),
        ({"trigger": "100k"}, TypeError, "ToolClearing.trigger='100k' (str): expected"),
        ({"clear_at_least": -5}, ValueError, "ToolClearing.clear_at_least=-5: expected"),
        ({"batch": 0}, ValueError, "ToolClearing.batch=0: expected an int >= 1"),
        ({"exclude_tools": "search"}, TypeError, "exclude_tools=('search',)"),
        ({"exclude_tools": ["search", ""]}, ValueError, "ToolClearing.exclude_tools="),
        ({"placeholder": ""}, ValueError, "ToolClearing.placeholder=''"),
        ({"placeholder": 7}, TypeError, "ToolClearing.placeholder=7 (int)"),
        ({"clear_tool_inputs": "yes"}, TypeError, "ToolClearing.clear_tool_inputs='yes'"),
        ({"clear_lookup_results": 1}, TypeError, "ToolClearing.clear_lookup_results=1"),
    ],
)
def test_invalid_options_are_refused_at_construction(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as info:
        ToolClearing(**kwargs)
    assert words in str(info.value)


def test_the_config_refuses_what_cannot_work() -> None:
    with pytest.raises(TypeError, match=r"ContextConfig\.tool_clearing=.*expected a ToolClearing"):
        ContextConfig(tool_clearing={"keep": 2})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both") as info:
        ContextConfig(tool_clearing=ToolClearing(keep=2), clear_tool_results_keep=2)
    assert "clear_tool_results_keep" in str(info.value)
    with pytest.raises(ValueError, match=r"ToolClearing\.batch"):
        ContextConfig(tool_clearing=ToolClearing(), clear_tool_results_batch=2)
    # a trigger the window cannot reach is refused once the window is known
    with pytest.raises(ValueError, match=r"ToolClearing\.trigger") as info:
        ContextConfig(context_window=8_000, tool_clearing=ToolClearing(trigger=100_000))
    assert "6000" in str(info.value).replace(",", "")
    lazy = ContextConfig(tool_clearing=ToolClearing(trigger=100_000))  # window from the model
    with pytest.raises(ValueError, match=r"ToolClearing\.trigger"):
        lazy.resolve(MeteringChatModel(replies=["ok"], profile={"max_input_tokens": 8_000}))
    # the two fields of before still mean what they meant
    assert ContextConfig(clear_tool_results_keep=2).clearing() == ToolClearing(keep=2, batch=4)
    assert ContextConfig().clearing() is None
    assert ToolClearing(exclude_tools=["a", "b"]).exclude_tools == ("a", "b")


# ----------------------------------------------------------------------- through the wirings


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return f"# {path}\n" + "def handler(event):\n    return event['body']\n" * 30


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    return f"results for {query}: refunds within 30 days; " * 20


SCRIPT = [
    "search refund policy",
    "read src/a.py",
    "recall refund policy",
    "read src/b.py",
    "read src/c.py",
    "thanks",
]


class Recorder:
    """A scripted tool-using model's policy that keeps every request it answers."""

    def __init__(self) -> None:
        self.requests: list[list[BaseMessage]] = []

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.requests.append(list(messages))
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"Done: {last.text[:40]}")
        text = str(last.text)
        verb, _, rest = text.partition(" ")
        name, args = {
            "search": ("search", {"query": rest}),
            "read": ("read_file", {"path": rest}),
            "recall": ("history_lookup", {"query": rest}),
        }.get(verb, (None, {}))
        if name is None:
            return AIMessage("You are welcome.")
        call_id = f"call_{len(self.requests)}"
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


CLEARING = ToolClearing(
    keep=1, exclude_tools=("search",), clear_tool_inputs=True, placeholder="[cleared {handle}]"
)
WINDOW = ContextConfig(context_window=100_000, output_reserve=2_000, tool_clearing=CLEARING)


def graph_agent(model: Any, store: Any) -> Any:
    tools = [read_file, search, make_history_lookup_tool(store)]
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_context_management(builder, model_node="agent", store=store, config=WINDOW, model=model)
    return builder.compile(checkpointer=InMemorySaver())


def middleware_agent(model: Any, store: Any) -> Any:
    tools = [read_file, search, make_history_lookup_tool(store)]
    middleware = ContextManagementMiddleware(store, config=WINDOW, model=model, tools=tools)
    return create_agent(model, tools=tools, middleware=[middleware], checkpointer=InMemorySaver())


def check_last_request(request: list[BaseMessage], store: Any) -> None:
    assert pairing_problems(request) == []
    results = {m.name: [] for m in request if isinstance(m, ToolMessage)}
    for m in request:
        if isinstance(m, ToolMessage):
            results[m.name].append(m)
    # the excluded tool and the lookup page are whole; of read_file, the last is kept
    assert results["search"][0].text.startswith("results for refund policy")
    assert json.loads(results["history_lookup"][0].text)["records"]
    first, second, last = results["read_file"]
    assert first.text == f"[cleared history:{first.id}]"
    assert second.text == f"[cleared history:{second.id}]"
    assert last.text.startswith("# src/c.py")
    calls = {c["id"]: c for m in request if isinstance(m, AIMessage) for c in m.tool_calls}
    assert calls[first.tool_call_id]["args"] == {} and calls[second.tool_call_id]["args"] == {}
    assert calls[last.tool_call_id]["args"] == {"path": "src/c.py"}
    # the originals are in the store
    original = store.get_event("c", str(first.id))
    assert original.message.content.startswith("# src/a.py")


@pytest.mark.parametrize("wiring", ["graph", "middleware"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_clearing_through_the_wirings(backend: Backend, wiring: str, mode: str) -> None:
    store = backend.make()
    store.setup()
    recorder = Recorder()
    model = MeteringChatModel(replies=[recorder.reply])
    graph = (graph_agent if wiring == "graph" else middleware_agent)(model, store)
    run = {"configurable": {"thread_id": "c"}, "recursion_limit": 30}
    for text in SCRIPT:
        if mode == "sync":
            graph.invoke({"messages": [HumanMessage(text)]}, run)
        else:
            await graph.ainvoke({"messages": [HumanMessage(text)]}, run)
    check_last_request(recorder.requests[-1], store)
    state = graph.get_state(run).values if mode == "sync" else (await graph.aget_state(run)).values
    cleared = [m for m in state["messages"] if is_cleared(m)]
    assert [m.name for m in cleared] == ["read_file", "read_file"]
    # a cleared result is read back through the lookup by its handle
    lookup = make_history_lookup_tool(store)
    page = lookup.invoke({"handle": f"history:{cleared[0].id}"}, run)
    assert "# src/a.py" in page


async def test_the_cache_report_names_a_cleared_call(api: Api) -> None:
    node = node_for(api.store, ToolClearing(keep=1, clear_tool_inputs=True))
    state, _ = await step(api, node, {"messages": conversation(("read_file", {"p": 1}, FILE))})
    assert state["context"]["report"]["cache"]["moved_by"] is None
    state["messages"] += [
        AIMessage("", id="a9", tool_calls=[{"name": "read_file", "args": {"p": 2}, "id": "c9"}]),
        ToolMessage(FILE, tool_call_id="c9", name="read_file", id="t9"),
        AIMessage("read", id="answer9"),
        HumanMessage("and now?", id="h9"),
    ]
    state, update = await step(api, node, state)
    assert sorted(m.id for m in update["messages"]) == ["a0", "t0"]
    # the request's cacheable prefix now ends at the call whose arguments were cleared
    assert state["context"]["report"]["cache"]["moved_by"] == "cleared tool call"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_long_thread_with_clearing_and_compaction_stays_valid(mode: str) -> None:
    from ctx_langgraph import SQLiteHistoryStore, create_context_agent

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    recorder = Recorder()
    config = ContextConfig(
        context_window=6_000,
        output_reserve=1_000,
        keep_recent_tokens=800,
        summary_max_tokens=300,
        tool_clearing=ToolClearing(keep=1, clear_tool_inputs=True, trigger=0.3),
    )
    graph = create_context_agent(
        MeteringChatModel(replies=[recorder.reply]), [read_file], store=store, config=config
    ).compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "long"}, "recursion_limit": 30}
    for turn in range(40):
        inputs = {"messages": [HumanMessage(f"read src/m{turn}.py")]}
        if mode == "sync":
            graph.invoke(inputs, run)
        else:
            await graph.ainvoke(inputs, run)
    assert all(pairing_problems(request) == [] for request in recorder.requests)
    assert store.get_active("long") is not None  # compacted along the way
    # every result the model read was kept whole in the store, cleared or not in the view
    reads = [e for e in store.read_events("long") if e.role == "tool"]
    assert len(reads) == 40 and all(e.message.content.startswith("# src/m") for e in reads)
    last = recorder.requests[-1]
    cleared_calls = [
        m
        for m in last
        if isinstance(m, AIMessage) and m.additional_kwargs.get("ctx_inputs_cleared")
    ]
    assert cleared_calls and all(c["args"] == {} for m in cleared_calls for c in m.tool_calls)
    store.close()
