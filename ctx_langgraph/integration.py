"""Drop-in wiring: context management around an existing graph's model node, or a ready agent.

:func:`add_context_management` takes the ``StateGraph`` you already have and inserts our nodes
around its model node, without touching your node code::

    user input ─► ctx_budget ──ok──► <your model node> ─► ctx_usage ─► (your edges: tools, END)
                     │  ▲
       over trigger  ▼  │
                  ctx_compact

Every edge that led to the model node now leads to ``ctx_budget``; every edge (and conditional
edge) that left the model node now leaves ``ctx_usage``. The ``context`` channel is added to the
graph's state. When the provider rejects a request as too long for the model's window, the model
node compacts the view and calls your node once more. :func:`create_context_agent` builds a
tool-calling agent wired this way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from inspect import isclass
from typing import Annotated, Any, get_type_hints

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import patch_config
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph._branch import BranchSpec
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from ctx_langgraph._checkpoint_safe import checkpoint_safe
from ctx_langgraph._flow import arun_flow, run_flow
from ctx_langgraph._overflow import OverflowStep, merge_recovery, retry_on_overflow
from ctx_langgraph.budget.counters import TokenCounter, default_counter
from ctx_langgraph.budget.node import make_budget_node, make_budget_router
from ctx_langgraph.budget.provider_count import ProviderCountHook
from ctx_langgraph.compaction.node import make_compact_node
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import ContextState, merge_context
from ctx_langgraph.usage.callbacks import LedgerCallbackHandler
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.usage.node import make_usage_node

__all__ = [
    "CTX_BUDGET",
    "CTX_COMPACT",
    "CTX_USAGE",
    "add_context_management",
    "create_context_agent",
]

log = logging.getLogger(__name__)

CTX_BUDGET = "ctx_budget"
CTX_COMPACT = "ctx_compact"
CTX_USAGE = "ctx_usage"


def _tools_of(builder: StateGraph[Any, Any, Any, Any], tools_node: str | None) -> list[Any]:
    """The tools a graph's ``ToolNode`` runs (named, or the only one found)."""
    if tools_node is not None:
        if tools_node not in builder.nodes:
            raise ValueError(f"tools_node {tools_node!r} is not a node of the graph")
        runnable = builder.nodes[tools_node].runnable
        if not isinstance(runnable, ToolNode):
            raise ValueError(
                f"tools_node {tools_node!r} is not a ToolNode: pass its tools with tools=[...]"
            )
        return list(runnable.tools_by_name.values())
    found = [
        spec.runnable for spec in builder.nodes.values() if isinstance(spec.runnable, ToolNode)
    ]
    return list(found[0].tools_by_name.values()) if len(found) == 1 else []


def _redirect_branch(spec: BranchSpec, model_node: str) -> BranchSpec:
    """A conditional edge that could go to the model node now goes to ``ctx_budget``."""
    if spec.ends is not None:
        ends: dict[Hashable, str] = {
            key: CTX_BUDGET if end == model_node else end for key, end in spec.ends.items()
        }
        return spec._replace(ends=ends)

    def rename(result: Any) -> Any:
        if isinstance(result, list | tuple):
            return [CTX_BUDGET if r == model_node else r for r in result]
        return CTX_BUDGET if result == model_node else result

    return spec._replace(path=spec.path | RunnableLambda(rename))


def _rewire(builder: StateGraph[Any, Any, Any, Any], model_node: str) -> None:
    """Into the model node via ``ctx_budget``; out of it via ``ctx_usage``."""

    def start(node: str) -> str:
        return CTX_USAGE if node == model_node else node

    def end(node: str) -> str:
        return CTX_BUDGET if node == model_node else node

    builder.edges = {(start(a), end(b)) for a, b in builder.edges}
    builder.waiting_edges = {
        (tuple(start(a) for a in starts), end(b)) for starts, b in builder.waiting_edges
    }
    for source in list(builder.branches):
        branches = builder.branches[source]
        for name, spec in list(branches.items()):
            branches[name] = _redirect_branch(spec, model_node)
    if model_node in builder.branches:
        builder.branches[CTX_USAGE] = builder.branches.pop(model_node)
    for name, node_spec in builder.nodes.items():
        ends = node_spec.ends or ()
        targets = ends.values() if isinstance(ends, dict) else ends
        if model_node in targets and name != model_node:
            log.warning(
                "ctx-langgraph: node %r can send Command(goto=%r), which skips ctx_budget; route "
                "to the model node with edges (or goto=%r) so every request is budgeted",
                name,
                model_node,
                CTX_BUDGET,
            )


@dataclass(frozen=True)
class _OverflowRetry:
    """The user's model node, compacting the view and calling the node once more when the
    provider rejects the request as too long (one logic for sync and async:
    :func:`~ctx_langgraph._overflow.retry_on_overflow`)."""

    node: Runnable[Any, Any]
    compact: Runnable[Any, Any]
    budget: Runnable[Any, Any]
    counter: TokenCounter
    own_context: bool
    """The node's input has the ``context`` channel itself (else it is read for the recovery
    only, and the node gets its input as before)."""
    coerce: Callable[..., Any] | None
    """Builds the node's input from the channel values, as LangGraph does for a pydantic or
    dataclass state; None for a dict state."""

    def _node_input(self, state: dict[str, Any], step: OverflowStep) -> Any:
        kind, view = step
        values = dict(state)
        if kind == "retry":
            values["messages"] = view["messages"]
            if self.own_context:
                values["context"] = view["context"]
        if not self.own_context:
            values.pop("context", None)
        return self.coerce(**values) if self.coerce is not None else values

    def _served(
        self, step: OverflowStep, state: dict[str, Any], config: RunnableConfig
    ) -> tuple[Runnable[Any, Any], Any, RunnableConfig]:
        """What serves a step: the runnable, its input and its config."""
        kind, view = step
        if kind == "compact":
            return self.compact, view, patch_config(config, run_name=CTX_COMPACT)
        if kind == "budget":
            return self.budget, view, patch_config(config, run_name=CTX_BUDGET)
        return self.node, self._node_input(state, step), config

    def invoke(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        def serve(step: OverflowStep) -> Any:
            runnable, payload, step_config = self._served(step, state, config)
            return runnable.invoke(payload, step_config)

        view = {"messages": state.get("messages"), "context": state.get("context")}
        outcome = run_flow(retry_on_overflow(view, self.counter), serve)
        return checkpoint_safe(merge_recovery(outcome.result, outcome.update))

    async def ainvoke(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        async def serve(step: OverflowStep) -> Any:
            runnable, payload, step_config = self._served(step, state, config)
            return await runnable.ainvoke(payload, step_config)

        view = {"messages": state.get("messages"), "context": state.get("context")}
        outcome = await arun_flow(retry_on_overflow(view, self.counter), serve)
        return checkpoint_safe(merge_recovery(outcome.result, outcome.update))


def _retry_on_overflow(
    builder: StateGraph[Any, Any, Any, Any],
    model_node: str,
    *,
    compact: Runnable[Any, Any],
    budget: Runnable[Any, Any],
    counter: TokenCounter,
) -> None:
    """Wrap the model node in :class:`_OverflowRetry`. The wrapper reads the node's channels
    as a dict, plus the ``context`` channel when the node does not read it (taken out again,
    and the node's own state class built, before the node is called)."""
    spec = builder.nodes[model_node]
    schema = spec.input_schema
    channels = builder.schemas[schema]
    if "messages" not in channels:
        log.warning(
            "ctx-langgraph: node %r does not read 'messages'; it is not retried after a "
            "provider's context-length error",
            model_node,
        )
        return
    own_context = "context" in channels
    coerce = (
        schema
        if isclass(schema) and (issubclass(schema, BaseModel) or dataclasses.is_dataclass(schema))
        else None
    )
    runnable = spec.runnable
    if not isinstance(runnable, Runnable):  # add_node stores a Runnable already
        raise TypeError(f"node {model_node!r} is not a Runnable: {type(runnable).__name__}")
    guard = _OverflowRetry(runnable, compact, budget, counter, own_context, coerce)
    wrapped = RunnableCallable(
        guard.invoke, guard.ainvoke, name=model_node, trace=False, recurse=False
    )
    if own_context and coerce is None:
        builder.nodes[model_node] = dataclasses.replace(spec, runnable=wrapped)
        return
    try:
        hints = get_type_hints(schema, include_extras=True)
    except Exception:  # an unresolvable annotation: the channels are what matter
        hints = {}
    fields: dict[str, Any] = {name: hints.get(name, Any) for name in channels}
    fields.setdefault("context", Annotated[dict[str, Any], merge_context])
    typed_dict: Any = TypedDict  # a schema made at run time
    with_context = typed_dict(f"{model_node}_input_with_context", fields, total=False)
    builder.schemas[with_context] = {"context": builder.channels["context"], **channels}
    builder.nodes[model_node] = dataclasses.replace(
        spec, runnable=wrapped, input_schema=with_context
    )


def add_context_management(
    builder: StateGraph[Any, Any, Any, Any],
    *,
    model_node: str,
    store: HistoryStore,
    config: ContextConfig | None = None,
    summarizer: Summarizer | None = None,
    tools_node: str | None = None,
    model: Any = None,
    tools: Sequence[Any] | None = None,
    system_prompt: str | None = None,
    ledger: UsageLedger | None = None,
    counter: TokenCounter | None = None,
    provider_count: ProviderCountHook | None = None,
    book_model_calls: bool = True,
    pinned_rules: PinnedRules | None = None,
    memory: LongTermMemory | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """Add ``ctx_budget``, ``ctx_compact`` and ``ctx_usage`` around an existing graph's model node.

    Your nodes are not changed: edges into ``model_node`` are moved to ``ctx_budget`` (which
    goes on to ``model_node``, or to ``ctx_compact`` first when the next request would be over
    the trigger), and edges out of it start from ``ctx_usage``. The graph's state gets the
    ``context`` channel (:class:`~ctx_langgraph.state.ContextState`). Then compile with your
    checkpointer as usual (a graph compiled before keeps its old wiring).

    When the provider rejects a request as too long for the model's window
    (:func:`~ctx_langgraph.providers.is_context_overflow`: our estimate fit, the provider's
    count did not), the model node compacts the view as for a request over the window, runs
    the budget on the compacted view, and calls your node once more; its update then replaces
    the view and ``context["overflow"]`` counts the thread's retries. Your node sees its input
    as before (the ``context`` channel only when its state has it). With nothing left to
    compact, the view's tool results are shortened instead, or, with nothing to shorten either,
    the same request is sent once more. A second rejection raises
    :class:`~ctx_langgraph.errors.ContextBudgetExceeded` from the provider's error.

    Args:
        builder: the uncompiled graph; its state must have an ``add_messages`` ``messages`` key.
        model_node: the name of the node that calls the chat model on ``state["messages"]``.
        store: the history store that records every message and the summaries.
        config: the budget (window, reserve, trigger, ...); the window may come from ``model``.
        summarizer: the compaction summarizer (default: the offline extractive one).
        tools_node: the ``ToolNode`` whose tool schemas are part of every request (found
            automatically when the graph has exactly one).
        model: the chat model the node calls: its name picks the token counter, its profile the
            window when ``config.context_window`` is not set.
        tools: the tools bound to the model, when they are not all in one ``ToolNode``.
        system_prompt: a system prompt the model node adds itself (counted as overhead).
        pinned_rules: :class:`~ctx_langgraph.rules.PinnedRules` kept as the first message of
            the model's view on every turn (re-read each turn; never recorded or summarized).
        memory: :class:`~ctx_langgraph.memory.LongTermMemory` learned from the user's messages
            and loaded into the view by scope and relevance under its own token budget.
        ledger: where usage is booked (default: a :class:`~ctx_langgraph.usage.UsageLedger` on
            ``store``).
        counter: overrides the token counter picked from the model name.
        provider_count: a provider token-count hook asked near the limit.
        book_model_calls: also book every chat-model call made inside the model node, the
            summarizer and a model-backed memory extractor through a
            :class:`~ctx_langgraph.usage.LedgerCallbackHandler` (streamed usage folded chunk by
            chunk); ``ctx_usage`` then confirms the same call, never twice.

    Returns:
        The same builder, for chaining.

    Example:
        >>> from langgraph.graph import START, MessagesState, StateGraph
        >>> from ctx_langgraph import ContextConfig, SQLiteHistoryStore
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> model = MeteringChatModel(replies=["Noted."])
        >>> builder = StateGraph(MessagesState)
        >>> _ = builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
        >>> _ = builder.add_edge(START, "agent")
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> _ = add_context_management(builder, model_node="agent", store=store,
        ...                            config=ContextConfig(context_window=8_000, output_reserve=1_000))
        >>> sorted(builder.nodes)
        ['agent', 'ctx_budget', 'ctx_compact', 'ctx_usage']
        >>> graph = builder.compile()
        >>> state = graph.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "t1"}})
        >>> graph.get_graph().nodes.keys() >= {"ctx_budget", "agent", "ctx_usage"}, len(store.read_events("t1"))
        (True, 2)
    """
    if not isinstance(builder, StateGraph):
        raise TypeError(f"builder must be a langgraph StateGraph, got {type(builder).__name__}")
    if model_node not in builder.nodes:
        raise ValueError(
            f"model_node {model_node!r} is not a node of the graph (nodes: {sorted(builder.nodes)})"
        )
    taken = [name for name in (CTX_BUDGET, CTX_COMPACT, CTX_USAGE) if name in builder.nodes]
    if taken:
        raise ValueError(
            f"the graph already has {taken}: context management was added once already"
        )
    if "messages" not in builder.channels:
        raise ValueError("the graph's state has no 'messages' key (use MessagesState or add one)")
    config = config or ContextConfig()
    ledger = ledger or UsageLedger(store)
    bound_tools = list(tools) if tools is not None else _tools_of(builder, tools_node)

    _rewire(builder, model_node)
    compact = make_compact_node(
        store, config=config, summarizer=summarizer, model=model, counter=counter, ledger=ledger
    )
    if book_model_calls:
        handler = LedgerCallbackHandler(ledger)
        spec = builder.nodes[model_node]
        runnable = spec.runnable
        if not isinstance(runnable, Runnable):  # add_node stores a Runnable already
            raise TypeError(f"node {model_node!r} is not a Runnable: {type(runnable).__name__}")
        builder.nodes[model_node] = dataclasses.replace(
            spec, runnable=runnable.with_config(callbacks=[handler])
        )
        compact = compact.with_config(callbacks=[handler])
    budget = make_budget_node(
        store,
        config=config,
        model=model,
        tools=bound_tools,
        counter=counter,
        compact_node=CTX_COMPACT,
        provider_count=provider_count,
        system_prompt=system_prompt,
        pinned_rules=pinned_rules,
        memory=memory,
    )
    if book_model_calls and memory is not None:
        budget = budget.with_config(callbacks=[handler])  # a model-backed memory extractor
    try:
        builder.add_node(
            CTX_BUDGET,
            budget,
            input_schema=ContextState,  # adds the ``context`` channel to the graph
        )
    except ValueError as exc:
        raise ValueError(
            f"the graph's state cannot take the 'context' channel: {exc}. A 'context' key of "
            "your own clashes with it; rename yours."
        ) from exc
    builder.add_node(CTX_COMPACT, compact, input_schema=ContextState)
    _retry_on_overflow(
        builder,
        model_node,
        compact=compact,
        budget=budget,
        counter=counter or default_counter(model),
    )
    builder.add_node(CTX_USAGE, make_usage_node(ledger, store=store), input_schema=ContextState)
    builder.add_conditional_edges(
        CTX_BUDGET, make_budget_router(model_node, CTX_COMPACT), [CTX_COMPACT, model_node]
    )
    builder.add_edge(CTX_COMPACT, CTX_BUDGET)
    builder.add_edge(model_node, CTX_USAGE)
    return builder


def create_context_agent(
    model: Any,
    tools: Sequence[Any] = (),
    *,
    store: HistoryStore,
    config: ContextConfig | None = None,
    summarizer: Summarizer | None = None,
    prompt: str | None = None,
    lookup_tool: bool | BaseTool = True,
    ledger: UsageLedger | None = None,
    counter: TokenCounter | None = None,
    pinned_rules: PinnedRules | None = None,
    memory: LongTermMemory | None = None,
    provider_count: ProviderCountHook | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """A tool-calling agent with context management, uncompiled (compile with your checkpointer).

    The graph: ``START → ctx_budget → model → ctx_usage → tools → ctx_budget ...`` with
    ``ctx_compact`` taken when the next request would be over the trigger. With ``lookup_tool``
    the model also gets :func:`~ctx_langgraph.lookup.make_history_lookup_tool` to fetch exact
    old messages the summary no longer holds.

    Args:
        model: a LangChain chat model supporting ``bind_tools``.
        tools: the agent's tools.
        store: the history store.
        config: the budget; the window may come from the model's profile.
        summarizer: the compaction summarizer (default: the offline extractive one).
        prompt: a system prompt prepended to every request (not stored in the state).
        pinned_rules: persistent rules (a file or a store entry) kept first in the model's view
            on every turn, surviving every compaction (:class:`~ctx_langgraph.rules.PinnedRules`).
        memory: long-term memory across threads of a user (``configurable["user_id"]``),
            :class:`~ctx_langgraph.memory.LongTermMemory`.
        provider_count: a provider token-count hook (``AnthropicCountHook``,
            ``OpenAIResponsesCountHook``) asked for an exact count near the limit.
        lookup_tool: give the model the history lookup tool (``True``: one with default
            settings; or a tool made with :func:`~ctx_langgraph.lookup.make_history_lookup_tool`).
        ledger: where usage is booked (default: on ``store``).
        counter: overrides the token counter picked from the model name.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from ctx_langgraph import ContextConfig, SQLiteHistoryStore
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> builder = create_context_agent(MeteringChatModel(replies=["Hi!"]), store=store,
        ...                                config=ContextConfig(context_window=8_000, output_reserve=1_000))
        >>> graph = builder.compile(checkpointer=InMemorySaver())
        >>> out = graph.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "t"}})
        >>> out["messages"][-1].content, out["context"]["budget"]["decision"]
        ('Hi!', 'proceed')
    """
    all_tools = list(tools)
    if isinstance(lookup_tool, BaseTool):
        all_tools.append(lookup_tool)
    elif lookup_tool:
        all_tools.append(make_history_lookup_tool(store))
    bound = model.bind_tools(all_tools) if all_tools else model

    def request(state: dict[str, Any]) -> list[BaseMessage]:
        messages: list[BaseMessage] = list(state["messages"])
        return [SystemMessage(prompt), *messages] if prompt else messages

    def call_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [bound.invoke(request(state), config)]}

    async def acall_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(request(state), config)]}

    builder = StateGraph(ContextState)
    model_runnable: Runnable[Any, Any] = RunnableCallable(call_model, acall_model, name="model")
    builder.add_node("model", model_runnable)
    builder.add_edge(START, "model")
    if all_tools:
        builder.add_node("tools", ToolNode(all_tools))
        builder.add_conditional_edges("model", tools_condition, ["tools", END])
        builder.add_edge("tools", "model")
    else:
        builder.add_edge("model", END)
    return add_context_management(
        builder,
        model_node="model",
        store=store,
        config=config,
        summarizer=summarizer,
        model=model,
        tools=all_tools,
        system_prompt=prompt,
        ledger=ledger,
        counter=counter,
        pinned_rules=pinned_rules,
        memory=memory,
        provider_count=provider_count,
    )
