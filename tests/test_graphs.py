"""The Studio graphs under graphs/: they load, answer offline, and keep their wiring."""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import LLMSummarizer, SQLiteHistoryStore
from ctx_langgraph.testing import MeteringChatModel

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).parent / "snapshots"
GRAPHS = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
MODEL_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CTX_OPENAI_MODEL", "CTX_ANTHROPIC_MODEL")


@pytest.fixture(autouse=True)
def offline_env(tmp_path, monkeypatch):
    """No API key (the graphs pick the offline model) and the SQLite files in tmp_path."""
    for name in MODEL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CTX_EXPLORER_DB", str(tmp_path / "explorer.sqlite"))
    monkeypatch.setenv("CTX_HISTORY_DB", str(tmp_path / "history.sqlite"))
    monkeypatch.setenv("CTX_MEMORY_DB", str(tmp_path / "memory.sqlite"))


def load(name: str):
    path, attr = GRAPHS[name].split(":")
    spec = importlib.util.spec_from_file_location(f"graphs_{name}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, getattr(module, attr)


def with_checkpointer(graph):
    """The Studio graph compiled again with a checkpointer, as ``langgraph dev`` runs it."""
    return graph.builder.compile(checkpointer=InMemorySaver())


def thread() -> dict:
    return {"configurable": {"thread_id": f"test-{uuid.uuid4().hex[:8]}"}}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_graph_wiring_matches_snapshot(name):
    _, graph = load(name)
    mermaid = graph.get_graph().draw_mermaid()
    snapshot = SNAPSHOTS / f"{name}.mmd"
    assert mermaid == snapshot.read_text(), (
        f"wiring of {name} changed; update {snapshot} if intended"
    )


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_graphs_leave_persistence_to_the_server(name):
    _, graph = load(name)
    assert graph.checkpointer is None  # langgraph dev (and LangGraph Platform) supply their own


def test_history_explorer_answers_with_exact_evidence():
    module, graph = load("history_explorer")
    qa = module.CONVERSATION.questions[0]
    evidence = next(m for m in module.CONVERSATION.messages if m.id == qa.evidence[0])
    result = graph.invoke({"messages": [HumanMessage(qa.query)]})
    answer = result["messages"][-1].content
    assert evidence.content in answer and "seq " in answer
    assert (
        "No message"
        in graph.invoke({"messages": [HumanMessage("zeppelin")]})["messages"][-1].content
    )
    assert (
        "Not a searchable"
        in graph.invoke({"messages": [HumanMessage("?!")]})["messages"][-1].content
    )


@pytest.mark.parametrize(
    ("env", "expected", "model_name"),
    [
        ({}, MeteringChatModel, "gpt-4o"),
        ({"OPENAI_API_KEY": "sk-test"}, "ChatOpenAI", "gpt-4o-mini"),
        ({"OPENAI_API_KEY": "sk-test", "CTX_OPENAI_MODEL": "gpt-4.1"}, "ChatOpenAI", "gpt-4.1"),
        ({"ANTHROPIC_API_KEY": "sk-ant-test"}, "ChatAnthropic", "claude-3-5-haiku-latest"),
        (
            {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"},
            "ChatOpenAI",
            "gpt-4o-mini",
        ),
    ],
)
def test_context_agent_picks_its_model_from_the_environment(env, expected, model_name, monkeypatch):
    module, _ = load("context_agent")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    model, summarizer = module.choose_model()
    config = module.context_config(model)
    if expected is MeteringChatModel:
        assert isinstance(model, MeteringChatModel) and summarizer is None
        assert config.compaction_backend == "local"
    else:
        assert type(model).__name__ == expected
        assert isinstance(summarizer, LLMSummarizer) and summarizer.model is model
    if expected == "ChatOpenAI":  # the Responses API, compacting through OpenAI's endpoint too
        assert config.compaction_backend.provider == "openai-responses"
    if expected == "ChatAnthropic":  # Anthropic's context editing clears old tool results
        assert model.context_management["edits"][0]["type"] == "clear_tool_uses_20250919"
        assert config.compaction_backend == "local"
    assert model_name in {getattr(model, "model_name", None), getattr(model, "model", None)}


def test_context_agent_answers_an_order_question_through_its_tool(tmp_path):
    _, graph = load("context_agent")
    agent, config = with_checkpointer(graph), thread()
    state = agent.invoke({"messages": [HumanMessage("Where is ORD-1042?")]}, config)

    human, call, result, answer = state["messages"]
    assert call.tool_calls[0]["name"] == "get_order_status"
    assert isinstance(result, ToolMessage) and result.content.startswith("Order ORD-1042: ")
    assert answer.text.startswith("The get_order_status result says: Order ORD-1042: ")
    budget = state["context"]["report"]["budget"]
    assert budget["decision"] == "proceed" and budget["window"] == 16_000
    assert 0 < budget["input_tokens"] < budget["trigger"]
    # every message is recorded in the SQLite file named by CTX_HISTORY_DB
    with SQLiteHistoryStore.from_path(tmp_path / "history.sqlite") as store:
        recorded = [
            event.event_id for event in store.read_events(config["configurable"]["thread_id"])
        ]
    assert recorded[:3] == [human.id, call.id, result.id]


def test_context_agent_caps_a_big_tracking_log_and_keeps_it_in_the_history(tmp_path):
    module, graph = load("context_agent")
    agent, config = with_checkpointer(graph), thread()
    full = module.get_order_status.invoke({"order_id": "ORD-1047"})
    state = agent.invoke({"messages": [HumanMessage("Where is ORD-1047?")]}, config)

    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    capped = result.additional_kwargs["ctx_capped"]
    assert len(result.content) < len(full)
    assert capped["original_tokens"] > module.CONFIG.tool_output_cap_tokens
    with SQLiteHistoryStore.from_path(tmp_path / "history.sqlite") as store:
        [event] = [
            e
            for e in store.read_events(config["configurable"]["thread_id"])
            if e.event_id == result.id
        ]
    assert event.message.content == full


async def test_context_agent_remembers_a_user_across_threads():
    _, graph = load("context_agent")
    agent = with_checkpointer(graph)
    ann = {"configurable": {"thread_id": "ann-1", "user_id": "ann"}}
    agent.invoke({"messages": [HumanMessage("Hi, my name is Ann and I live in Lisbon.")]}, ann)
    later = {"configurable": {"thread_id": "ann-2", "user_id": "ann"}}
    state = await agent.ainvoke({"messages": [HumanMessage("Where is ORD-1042?")]}, later)
    [memory] = [m for m in state["messages"] if m.id == "ctx-memory"]
    assert "The user's name is Ann." in memory.text and "lives in Lisbon" in memory.text
    other = {"configurable": {"thread_id": "bob-1", "user_id": "bob"}}
    state = agent.invoke({"messages": [HumanMessage("Where is ORD-1042?")]}, other)
    assert not any(m.id == "ctx-memory" for m in state["messages"])


def test_compaction_playground_compacts_within_a_few_turns():
    _, graph = load("compaction_playground")
    agent, config = with_checkpointer(graph), thread()
    turns = ["My locker code is 4471"] + [f"Where is ORD-{n}?" for n in range(2041, 2048)]
    for text in turns:
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
        if (state["context"].get("summary", {}).get("generation") or 0) >= 1:
            break
    else:
        pytest.fail(f"no compaction within {len(turns)} turns: {state['context']['budget']}")
    assert state["context"]["report"]["compaction"]["status"] == "committed"
    summary = state["messages"][0]
    assert summary.id == "ctx-summary"
    assert all("4471" not in m.text for m in state["messages"][1:])  # summarized away

    # the exact words come back from the history store through the lookup tool
    state = agent.invoke({"messages": [HumanMessage("Recall my locker code")]}, config)
    lookups = [m for m in state["messages"] if m.type == "tool" and m.name == "history_lookup"]
    assert lookups and "My locker code is 4471" in lookups[-1].text


@pytest.mark.postgres
def test_context_agent_keeps_history_and_memory_on_postgres_when_a_dsn_is_set(pg_dsn, monkeypatch):
    from langgraph.store.postgres import PostgresStore

    from ctx_langgraph import PostgresHistoryStore

    monkeypatch.setenv("CTX_HISTORY_DSN", pg_dsn)
    module, _ = load("context_agent")
    store, memory = module.history_store(), module.long_term_memory()
    try:
        assert isinstance(store, PostgresHistoryStore) and store.db.conninfo == pg_dsn
        assert isinstance(memory.store, PostgresStore)
    finally:
        store.close()
        memory.store.conn.close()


def test_context_agent_load_switches_shrink_the_window_and_fail_the_summarizer(monkeypatch):
    from ctx_langgraph.testing import FlakySummarizer

    module, _ = load("context_agent")
    assert module.summarizer_for(None) is None  # off by default
    assert module.context_config(MeteringChatModel(replies=["ok"])) == module.CONFIG
    monkeypatch.setenv("CTX_CONTEXT_WINDOW", "3200")
    monkeypatch.setenv("CTX_SUMMARIZER_FAILURE_RATE", "0.25")
    config = module.context_config(MeteringChatModel(replies=["ok"]))
    assert (config.context_window, config.keep_recent_tokens) == (3_200, 800)
    flaky = module.summarizer_for(None)
    assert isinstance(flaky, FlakySummarizer) and flaky.rate == 0.25
    monkeypatch.setenv("CTX_CONTEXT_WINDOW", "3k")
    with pytest.raises(
        ValueError, match=r"CTX_CONTEXT_WINDOW must be a whole number >= 0, not '3k'"
    ):
        module.context_config(MeteringChatModel(replies=["ok"]))
