"""Mistakes caught where they are made: a configuration that cannot work, a store that is not a
store, a run without a thread, a database that is not there. Each is a clear error at
construction (or at the first use that can know), naming what is wrong and what is expected;
never a bare ``TypeError`` from deep inside the first invoke."""

from __future__ import annotations

import dataclasses
import math

import pytest

from ctx_langgraph import ContextConfig

# --------------------------------------------------------------------------- ContextConfig


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"trigger": 1.5}, ValueError, ["trigger", "1.5", "(0, 1]"]),
        ({"target": 0.0}, ValueError, ["target", "0.0"]),
        ({"target": -0.2}, ValueError, ["target", "-0.2"]),
        ({"trigger": math.nan}, ValueError, ["trigger", "nan"]),
        ({"trigger": math.inf}, ValueError, ["trigger", "inf"]),
        ({"trigger": -5}, ValueError, ["trigger", "-5"]),
        ({"trigger": True}, TypeError, ["trigger", "True", "fraction"]),
        ({"trigger": "80%"}, TypeError, ["trigger", "'80%'", "fraction"]),
        ({"safety_margin": 1.5}, ValueError, ["safety_margin", "1.5"]),
        ({"safety_margin": -1}, ValueError, ["safety_margin", "-1"]),
        ({"safety_margin": math.nan}, ValueError, ["safety_margin", "nan"]),
        ({"precompact_at": 2.0}, ValueError, ["precompact_at", "2.0"]),
        ({"trigger": 0.3, "target": 0.6}, ValueError, ["target", "0.6", "trigger", "0.3"]),
        ({"trigger": 0.5, "target": 0.5}, ValueError, ["target", "trigger"]),
        ({"trigger": 9_000, "target": 9_500}, ValueError, ["target", "9500", "trigger"]),
        (
            {"trigger": 0.6, "target": 0.3, "precompact_at": 0.7},
            ValueError,
            ["precompact_at", "0.7"],
        ),
        ({"context_window": "4k"}, TypeError, ["context_window", "'4k'", "int"]),
        ({"context_window": 4000.0}, TypeError, ["context_window", "4000.0", "int"]),
        ({"context_window": True}, TypeError, ["context_window", "True"]),
        ({"context_window": -4_000}, ValueError, ["context_window", "-4000"]),
        ({"context_window": 0}, ValueError, ["context_window", "0"]),
        ({"output_reserve": "1k"}, TypeError, ["output_reserve", "'1k'"]),
        ({"output_reserve": -1}, ValueError, ["output_reserve", "-1"]),
        ({"keep_recent_tokens": -10}, ValueError, ["keep_recent_tokens", "-10"]),
        ({"keep_recent_tokens": "20k"}, TypeError, ["keep_recent_tokens", "'20k'"]),
        ({"keep_recent_tokens": None}, TypeError, ["keep_recent_tokens", "None"]),
        ({"summary_max_tokens": 2_000.5}, TypeError, ["summary_max_tokens", "2000.5"]),
        ({"summary_max_tokens": False}, TypeError, ["summary_max_tokens", "False"]),
        ({"tool_output_cap_tokens": "8000"}, TypeError, ["tool_output_cap_tokens", "'8000'"]),
        ({"clear_tool_results_keep": -1}, ValueError, ["clear_tool_results_keep", "-1"]),
        ({"clear_tool_results_keep": 2.5}, TypeError, ["clear_tool_results_keep", "2.5"]),
        ({"clear_tool_results_batch": 0}, ValueError, ["clear_tool_results_batch", "0"]),
        ({"summary_versions_keep": -1}, ValueError, ["summary_versions_keep", "-1"]),
        ({"compaction_attempts": 0}, ValueError, ["compaction_attempts", "0"]),
        ({"compaction_attempts": 2.0}, TypeError, ["compaction_attempts", "2.0"]),
        ({"compaction_timeout_s": math.nan}, ValueError, ["compaction_timeout_s", "nan"]),
        ({"compaction_timeout_s": "60"}, TypeError, ["compaction_timeout_s", "'60'"]),
        ({"compaction_backoff_s": -1.0}, ValueError, ["compaction_backoff_s", "-1.0"]),
        ({"segment_gap_s": math.nan}, ValueError, ["segment_gap_s", "nan"]),
        ({"segment_events": 2.0}, TypeError, ["segment_events", "2.0"]),
        ({"tail_fills_target": "yes"}, TypeError, ["tail_fills_target", "'yes'", "bool"]),
    ],
)
def test_a_config_that_cannot_work_fails_at_construction_naming_the_field(
    kwargs: dict[str, object], error: type[Exception], words: list[str]
) -> None:
    with pytest.raises(error) as raised:
        ContextConfig(**kwargs)  # type: ignore[arg-type]
    message = str(raised.value)
    for word in words:
        assert word in message, (word, message)
    assert "not supported between" not in message  # never the bare comparison error


def test_a_replaced_config_is_checked_like_a_new_one() -> None:
    config = ContextConfig(context_window=8_000)
    with pytest.raises(ValueError, match=r"trigger=1\.5"):
        dataclasses.replace(config, trigger=1.5)
    with pytest.raises(TypeError, match="context_window"):
        dataclasses.replace(config, context_window="8k")


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"trigger": 100_000, "target": 50_000},
        {"trigger": 0.9, "target": 40_000},  # mixed kinds: compared once the window is known
        {"trigger": 1, "target": 0.5, "context_window": None},
        {"safety_margin": 0},
        {"safety_margin": 0.0},
        {"safety_margin": 500},
        {"precompact_at": 0.6},
        {"keep_recent_tokens": 0},
        {"summary_versions_keep": 0},
        {"compaction_backoff_s": 0},
        {"compaction_timeout_s": 30},
        {"segment_gap_s": None},
    ],
)
def test_a_config_that_can_work_is_accepted(kwargs: dict[str, object]) -> None:
    ContextConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"summary_max_tokens": 10_000}, "summary_max_tokens"),
        ({"tool_output_cap_tokens": 12_000}, "tool_output_cap_tokens"),
    ],
)
def test_a_cap_larger_than_the_usable_window_fails_once_the_window_is_known(
    kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(ValueError) as raised:
        ContextConfig(context_window=8_000, output_reserve=1_000, **kwargs)  # type: ignore[arg-type]
    message = str(raised.value)
    assert field in message and "7,000" in message and "8,000" in message, message
    # without a window nothing can be said yet ...
    late = ContextConfig(**kwargs)  # type: ignore[arg-type]
    # ... until the model's profile gives it, when the nodes are built (before any model call)
    from ctx_langgraph.testing import MeteringChatModel

    model = MeteringChatModel(replies=["never sent"])
    object.__setattr__(model, "profile", {"max_input_tokens": 8_000})
    with pytest.raises(ValueError, match=field):
        late.resolve(model)


def test_the_library_defaults_scale_down_to_a_small_window() -> None:
    """A default cap (not one the user set) shrinks to a small window as documented."""
    budget = ContextConfig(context_window=2_000).resolve()
    assert budget.usable == 1_500 and budget.keep_recent_tokens <= budget.target // 2


# --------------------------------------------------------------------------- what the builders take


def _builder() -> object:
    from langgraph.graph import START, MessagesState, StateGraph

    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": []})
    builder.add_edge(START, "agent")
    return builder


def _entry_points() -> dict[str, object]:
    """Every public builder that takes a history store, called with ``store`` only varying."""
    from ctx_langgraph import (
        ContextManagementMiddleware,
        UsageLedger,
        add_context_management,
        create_context_agent,
        make_history_lookup_tool,
    )
    from ctx_langgraph.budget import make_budget_node
    from ctx_langgraph.compaction import make_compact_node
    from ctx_langgraph.testing import MeteringChatModel

    window = ContextConfig(context_window=8_000, output_reserve=1_000)
    model = MeteringChatModel(replies=["ok"])
    return {
        "add_context_management": lambda store: add_context_management(
            _builder(),  # type: ignore[arg-type]
            model_node="agent",
            store=store,
            config=window,
        ),
        "create_context_agent": lambda store: create_context_agent(
            model, store=store, config=window
        ),
        "ContextManagementMiddleware": lambda store: ContextManagementMiddleware(
            store, model=model, config=window
        ),
        "make_history_lookup_tool": lambda store: make_history_lookup_tool(store),
        "UsageLedger": lambda store: UsageLedger(store),
        "make_budget_node": lambda store: make_budget_node(store, config=window),
        "make_compact_node": lambda store: make_compact_node(store, config=window),
    }


def _not_stores() -> dict[str, tuple[object, list[str]]]:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from ctx_langgraph import SQLiteHistoryStore

    return {
        "a path": ("history.sqlite", ["'history.sqlite'", "SQLiteHistoryStore.from_path"]),
        "a dsn": (
            "postgresql://app:s3cret@db.internal:5432/app",
            ["PostgresHistoryStore.from_conn_string"],
        ),
        "the class": (SQLiteHistoryStore, ["the class SQLiteHistoryStore", "instance"]),
        "None": (None, ["None", "SQLiteHistoryStore.from_path"]),
        "a LangGraph store": (InMemoryStore(), ["InMemoryStore", "LongTermMemory"]),
        "a checkpointer": (InMemorySaver(), ["InMemorySaver", "checkpointer="]),
        "a dict": ({"path": "x"}, ["dict"]),
    }


@pytest.mark.parametrize(
    "entry",
    [
        "add_context_management",
        "create_context_agent",
        "ContextManagementMiddleware",
        "make_history_lookup_tool",
        "UsageLedger",
        "make_budget_node",
        "make_compact_node",
    ],
)
@pytest.mark.parametrize(
    "kind",
    ["a path", "a dsn", "the class", "None", "a LangGraph store", "a checkpointer", "a dict"],
)
def test_a_store_that_is_not_a_store_is_refused_at_build_time(entry: str, kind: str) -> None:
    build = _entry_points()[entry]
    value, words = _not_stores()[kind]
    with pytest.raises(TypeError) as raised:
        build(value)  # type: ignore[operator]
    message = str(raised.value)
    assert entry in message and "store" in message, message
    for word in words:
        assert word in message, (word, message)
    assert "s3cret" not in message  # a connection string's password is never echoed


def _wrong_arguments() -> list[tuple[str, str, object, list[str]]]:
    return [
        ("config", "config", {"context_window": 8_000}, ["ContextConfig", "dict"]),
        ("config", "config", 8_000, ["ContextConfig", "int"]),
        ("ledger", "ledger", "ledger.sqlite", ["UsageLedger"]),
        ("summarizer", "summarizer", "extractive", ["Summarizer", "summary_model"]),
        ("memory", "memory", object(), ["LongTermMemory"]),
        ("pinned_rules", "pinned_rules", "Always answer in French.", ["PinnedRules"]),
    ]


@pytest.mark.parametrize("entry", ["add_context_management", "create_context_agent", "middleware"])
@pytest.mark.parametrize(
    ("argument", "field", "value", "words"),
    _wrong_arguments(),
    ids=[f"{a}-{type(v).__name__}" for a, _, v, _ in _wrong_arguments()],
)
def test_other_wrong_arguments_are_refused_at_build_time(
    entry: str, argument: str, field: str, value: object, words: list[str]
) -> None:
    from ctx_langgraph import (
        ContextManagementMiddleware,
        SQLiteHistoryStore,
        add_context_management,
        create_context_agent,
    )
    from ctx_langgraph.testing import MeteringChatModel

    store = SQLiteHistoryStore.from_path(":memory:")
    model = MeteringChatModel(replies=["ok"])
    kwargs = {"config": ContextConfig(context_window=8_000, output_reserve=1_000), argument: value}
    with pytest.raises(TypeError) as raised:
        if entry == "add_context_management":
            add_context_management(_builder(), model_node="agent", store=store, **kwargs)  # type: ignore[arg-type]
        elif entry == "create_context_agent":
            create_context_agent(model, store=store, **kwargs)  # type: ignore[arg-type]
        else:
            ContextManagementMiddleware(store, model=model, **kwargs)  # type: ignore[arg-type]
    message = str(raised.value)
    assert f"{field}=" in message, message
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize("model", [None, 42, object()])
def test_create_context_agent_needs_a_chat_model(model: object) -> None:
    from ctx_langgraph import SQLiteHistoryStore, create_context_agent

    store = SQLiteHistoryStore.from_path(":memory:")
    with pytest.raises(TypeError, match=r"create_context_agent\(model=.*chat model"):
        create_context_agent(model, store=store)


def test_create_context_agent_takes_a_model_spec_as_create_agent_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``"openai:gpt-4o-mini"`` is made into a chat model at build time (no network call);
    a spec that cannot be is refused at build time, naming the argument."""
    from ctx_langgraph import SQLiteHistoryStore, create_context_agent
    from ctx_langgraph.errors import SummaryModelError

    store = SQLiteHistoryStore.from_path(":memory:")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    builder = create_context_agent(
        "openai:gpt-4o-mini", store=store, config=ContextConfig(context_window=8_000)
    )
    assert "model" in builder.nodes
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(SummaryModelError, match=r"model='openai:gpt-4o-mini'.*OPENAI_API_KEY"):
        create_context_agent("openai:gpt-4o-mini", store=store)


# --------------------------------------------------------------------------- a run without a thread


def _anonymous_graphs(store: object, model: object) -> dict[str, object]:
    """The three ways in, each compiled with a checkpointer-less graph (LangGraph itself then
    accepts a run without ``thread_id``)."""
    from langchain.agents import create_agent
    from langgraph.graph import START, MessagesState, StateGraph

    from ctx_langgraph import (
        ContextManagementMiddleware,
        add_context_management,
        create_context_agent,
    )

    window = ContextConfig(context_window=8_000, output_reserve=1_000)
    builder = StateGraph(MessagesState)

    def agent(state: MessagesState) -> dict[str, object]:
        return {"messages": [model.invoke(state["messages"])]}  # type: ignore[attr-defined]

    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    middleware = ContextManagementMiddleware(store, model=model, config=window)  # type: ignore[arg-type]
    return {
        "create_context_agent": create_context_agent(model, store=store, config=window).compile(),  # type: ignore[arg-type]
        "add_context_management": add_context_management(
            builder,
            model_node="agent",
            store=store,  # type: ignore[arg-type]
            config=window,
        ).compile(),
        "middleware": create_agent(model, tools=[], middleware=[middleware]),  # type: ignore[arg-type]
    }


def _thread_ids(store: object) -> list[str]:
    from ctx_langgraph.history import Scope

    ids = []
    for thread in ("_no_thread", "default", "None", "anonymous"):
        if store.read_events(Scope(thread)):  # type: ignore[attr-defined]
            ids.append(thread)
    return ids


@pytest.mark.parametrize("entry", ["create_context_agent", "add_context_management", "middleware"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "config", [None, {}, {"configurable": {}}, {"configurable": {"user_id": "u"}}]
)
async def test_a_run_without_a_thread_id_is_refused_and_keeps_nothing(
    store: object, entry: str, mode: str, config: dict[str, object] | None
) -> None:
    """Two strangers' anonymous runs never share a stored thread: without ``thread_id`` there
    is no thread, and the run is refused before any message is stored or sent."""
    from ctx_langgraph.errors import ThreadIdMissing
    from ctx_langgraph.testing import MeteringChatModel

    model = MeteringChatModel(replies=["ok"] * 4)
    graph = _anonymous_graphs(store, model)[entry]
    for secret in ("alice's card is 4111-1111", "bob's password is hunter2"):
        with pytest.raises(ThreadIdMissing) as raised:
            if mode == "sync":
                graph.invoke({"messages": [("user", secret)]}, config)  # type: ignore[attr-defined]
            else:
                await graph.ainvoke({"messages": [("user", secret)]}, config)  # type: ignore[attr-defined]
        message = str(raised.value)
        assert "configurable" in message and "thread_id" in message, message
        assert isinstance(raised.value, ValueError)  # as LangGraph's own missing-key error
    assert _thread_ids(store) == []
    assert model._calls == 0  # nothing was sent either  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_nodes_refuse_a_run_without_a_thread_id(store: object, mode: str) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from ctx_langgraph.budget import make_budget_node
    from ctx_langgraph.compaction import make_compact_node
    from ctx_langgraph.errors import ThreadIdMissing
    from ctx_langgraph.usage import UsageLedger
    from ctx_langgraph.usage.node import make_usage_node

    window = ContextConfig(context_window=8_000, output_reserve=1_000)
    state = {"messages": [HumanMessage("hi", id="h1"), AIMessage("ok", id="a1")]}
    nodes = [
        make_budget_node(store, config=window),  # type: ignore[arg-type]
        make_usage_node(UsageLedger(store), store=store),  # type: ignore[arg-type]
        make_compact_node(store, config=window),  # type: ignore[arg-type]
    ]
    for node in nodes:
        with pytest.raises(ThreadIdMissing, match="thread_id"):
            if mode == "sync":
                node.invoke({**state, "context": {"budget": {"decision": "compact"}}}, {})
            else:
                await node.ainvoke({**state, "context": {"budget": {"decision": "compact"}}}, {})
    assert _thread_ids(store) == []


def test_scope_from_config_names_the_missing_thread_id() -> None:
    from ctx_langgraph.core.scope import scope_from_config
    from ctx_langgraph.errors import ScopeError, ThreadIdMissing

    for config in (
        None,
        {},
        {"configurable": {"thread_id": None}},
        {"configurable": {"thread_id": ""}},
    ):
        with pytest.raises(ThreadIdMissing, match=r'config=\{"configurable": \{"thread_id"'):
            scope_from_config(config)  # type: ignore[arg-type]
    assert issubclass(ThreadIdMissing, ScopeError)
    assert scope_from_config({"configurable": {"thread_id": 7}}).thread_id == "7"


# --------------------------------------------------------------------------- a database that is not there


@pytest.mark.parametrize("value", [None, 5432, b"postgresql://x", ["dsn"]])
def test_from_conn_string_refuses_what_is_not_a_connection_string_at_once(value: object) -> None:
    import time

    from ctx_langgraph import PostgresHistoryStore

    started = time.monotonic()
    with pytest.raises(TypeError, match=r"from_conn_string\(conninfo=\.\.\.\) expects"):
        PostgresHistoryStore.from_conn_string(value)  # type: ignore[arg-type]
    assert time.monotonic() - started < 0.5


def test_from_conn_string_refuses_a_malformed_string_at_once() -> None:
    from ctx_langgraph import PostgresHistoryStore
    from ctx_langgraph.errors import HistoryStoreError

    for text in ("host=localhost port", "postgresql://app:s3cret@[::1", "password=s3cret port"):
        with pytest.raises(HistoryStoreError, match="connection string") as raised:
            PostgresHistoryStore.from_conn_string(text)
        assert "s3cret" not in str(raised.value)


def _missing(pg_server_dsn: str, **change: object) -> str:
    import psycopg

    return psycopg.conninfo.make_conninfo(pg_server_dsn, **change)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ({"dbname": "ctx_no_such_database"}, 'database "ctx_no_such_database" does not exist'),
        ({"user": "ctx_no_such_role"}, 'role "ctx_no_such_role" does not exist'),
        ({"port": "1"}, "refused"),
    ],
)
async def test_a_server_that_says_no_is_reported_at_once_with_its_own_cause(
    pg_server_dsn: str, mode: str, change: dict[str, object], cause: str
) -> None:
    """The server's reason (a missing database, an unknown role, nothing listening) is in the
    error at once, not after the whole connect timeout as 'pool initialization incomplete'."""
    import time

    from ctx_langgraph import PostgresHistoryStore
    from ctx_langgraph.errors import HistoryStoreError

    store = PostgresHistoryStore.from_conn_string(
        _missing(pg_server_dsn, **change), connect_timeout=20
    )
    started = time.monotonic()
    with pytest.raises(HistoryStoreError) as raised:
        if mode == "sync":
            store.setup()
        else:
            await store.asetup()
    elapsed = time.monotonic() - started
    message = str(raised.value)
    assert cause in message, message
    assert "pool initialization incomplete" not in message
    assert elapsed < 5, elapsed  # not the 20 s connect timeout
    if mode == "sync":
        store.close()
    else:
        await store.aclose()


@pytest.mark.postgres
def test_a_store_that_connects_still_works(pg_dsn: str) -> None:
    from ctx_langgraph import PostgresHistoryStore

    with PostgresHistoryStore.from_conn_string(pg_dsn) as store:
        store.setup()
        assert store.read_events("t") == []


@pytest.mark.parametrize("value", ["memory.sqlite", None, "the history store"])
def test_long_term_memory_needs_a_langgraph_store(value: object) -> None:
    from ctx_langgraph import LongTermMemory, SQLiteHistoryStore

    if value == "the history store":
        value = SQLiteHistoryStore.from_path(":memory:")
    with pytest.raises(
        TypeError, match=r"LongTermMemory\(store=\.\.\.\) expects a LangGraph BaseStore"
    ):
        LongTermMemory(store=value)  # type: ignore[arg-type]


def test_a_large_keep_recent_tokens_is_taken_as_much_as_fits() -> None:
    budget = ContextConfig(context_window=2_000, keep_recent_tokens=9_000).resolve()
    assert budget.keep_recent_tokens == budget.target // 2
