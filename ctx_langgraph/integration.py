"""Drop-in wiring: context management around an existing graph's model node, or a ready agent.

:func:`add_context_management` takes the ``StateGraph`` you already have and inserts our nodes
around its model node, without touching your node code::

    user input ─► ctx_budget ──ok──► <your model node> ─► ctx_usage ─► (your edges: tools, END)
                     │  ▲
       over trigger  ▼  │
                  ctx_compact

Edges into the model node now lead to ``ctx_budget``, edges out of it leave ``ctx_usage``; the
state gets the ``context`` channel. A request the provider rejects as too long is compacted and
sent once more. :func:`create_context_agent` builds a tool-calling agent wired this way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph._arguments import checked_arguments
from ctx_langgraph._rewire import (
    CTX_BUDGET,
    CTX_COMPACT,
    CTX_USAGE,
    Builder,
    guarded_model_node,
    splice,
)
from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.budget.node import make_budget_router
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.stream_usage import asks_stream_usage
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.providers.count import ProviderCountHook
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import ContextState
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.wiring import ContextSteps, context_steps, context_tools

__all__ = [
    "CTX_BUDGET",
    "CTX_COMPACT",
    "CTX_USAGE",
    "add_context_management",
    "create_context_agent",
]

log = logging.getLogger(__name__)


def _check(builder: Builder, model_node: str) -> Runnable[Any, Any]:
    """The model node's runnable, after checking the graph can take context management."""
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
    runnable = builder.nodes[model_node].runnable
    if not isinstance(runnable, Runnable):  # add_node stores a Runnable already
        raise TypeError(f"node {model_node!r} is not a Runnable: {type(runnable).__name__}")
    return runnable


def _tools_of(builder: Builder, tools_node: str | None) -> list[Any]:
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


def _warn_goto(builder: Builder, model_node: str) -> None:
    """A node that can ``Command(goto=model_node)`` skips ``ctx_budget``: say so."""
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


def _wired(
    builder: Builder, model_node: str, runnable: Runnable[Any, Any], steps: ContextSteps
) -> Builder:
    """The graph with our nodes added, the model node wrapped and its edges moved onto ours."""
    budget, compact, usage = steps.nodes()
    try:
        builder.add_node(CTX_BUDGET, budget, input_schema=ContextState)
    except ValueError as exc:
        raise ValueError(
            f"the graph's state cannot take the 'context' channel: {exc}. A 'context' key of "
            "your own clashes with it; rename yours."
        ) from exc
    builder.add_node(CTX_COMPACT, compact, input_schema=ContextState)
    builder.add_node(CTX_USAGE, usage, input_schema=ContextState)
    _warn_goto(builder, model_node)
    if steps.booking is not None:
        runnable = runnable.with_config(callbacks=[steps.booking])
    guarded = guarded_model_node(
        builder,
        model_node,
        runnable,
        compact=compact,
        budget=budget,
        counter=steps.counter,
        wire=steps.wire,
        booking=steps.booking,
    )
    splice(builder, model_node, guarded)
    builder.add_conditional_edges(
        CTX_BUDGET, make_budget_router(model_node, CTX_COMPACT), [CTX_COMPACT, model_node, END]
    )
    builder.add_edge(CTX_COMPACT, CTX_BUDGET)
    builder.add_edge(model_node, CTX_USAGE)
    return builder


@checked_arguments("add_context_management")
def add_context_management(
    builder: StateGraph[Any, Any, Any, Any],
    *,
    model_node: str,
    store: HistoryStore,
    config: ContextConfig | None = None,
    summarizer: Summarizer | None = None,
    summary_model: BaseChatModel | str | None = None,
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

    Edges into ``model_node`` now go to ``ctx_budget`` (then ``ctx_compact`` when the next
    request would be over the trigger), edges out of it leave from ``ctx_usage``. Returns the
    same builder, to compile as usual.

    Args:
        builder: the uncompiled graph; its state must have an ``add_messages`` ``messages`` key.
        model_node: the name of the node that calls the chat model on ``state["messages"]``.
        store: the history store that records every message and the summaries.
        config: the budget (window, reserve, trigger, ...); the window may come from ``model``.
        summarizer: the compaction summarizer (wins over ``summary_model``).
        summary_model: a chat model or ``init_chat_model`` spec that writes the summaries (default:
            ``model`` if a real chat model, else the offline extractive summarizer).
        tools_node: the ``ToolNode`` whose tools are part of every request (default: the only one).
        model: the chat model the node calls (its name picks the counter, its profile the window).
        tools: the tools bound to the model, when they are not all in one ``ToolNode``.
        system_prompt: a system prompt the model node adds itself (counted as overhead).
        ledger: where usage is booked (default: a ``UsageLedger`` on ``store``).
        counter: overrides the token counter picked from the model name.
        provider_count: a provider token-count hook asked near the limit.
        book_model_calls: book every chat-model call (node, summarizer, memory) as it streams.
        pinned_rules: :class:`~ctx_langgraph.rules.PinnedRules` kept first in every view.
        memory: :class:`~ctx_langgraph.memory.LongTermMemory` recalled into the view.

    Examples:
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
        >>> state = builder.compile().invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "t1"}})
        >>> [event.role for event in store.read_events("t1")]
        ['human', 'ai']
    """
    runnable = _check(builder, model_node)
    steps = context_steps(
        store,
        config=config,
        ledger=ledger,
        booking=book_model_calls,
        model=model,
        tools=list(tools) if tools is not None else _tools_of(builder, tools_node),
        system_prompt=system_prompt,
        summarizer=summarizer,
        summary_model=summary_model,
        counter=counter,
        provider_count=provider_count,
        pinned_rules=pinned_rules,
        memory=memory,
    )
    return _wired(builder, model_node, runnable, steps)


def _agent_graph(
    model: Any, tools: list[Any], prompt: str | None
) -> tuple[Builder, Runnable[Any, Any]]:
    """``START → model → tools → model ...`` (``model → END`` without tools), uncompiled, and
    the model node's runnable."""
    model = asks_stream_usage(model)
    bound = model.bind_tools(tools) if tools else model

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
    if tools:
        builder.add_node("tools", ToolNode(tools))
        builder.add_conditional_edges("model", tools_condition, ["tools", END])
        builder.add_edge("tools", "model")
    else:
        builder.add_edge("model", END)
    return builder, model_runnable


@checked_arguments("create_context_agent", chat_model=True)
def create_context_agent(
    model: Any,
    tools: Sequence[Any] = (),
    *,
    store: HistoryStore,
    config: ContextConfig | None = None,
    summarizer: Summarizer | None = None,
    summary_model: BaseChatModel | str | None = None,
    prompt: str | None = None,
    lookup_tool: bool | BaseTool = True,
    ledger: UsageLedger | None = None,
    counter: TokenCounter | None = None,
    pinned_rules: PinnedRules | None = None,
    memory: LongTermMemory | None = None,
    provider_count: ProviderCountHook | None = None,
    compact_tool: bool = False,
) -> StateGraph[Any, Any, Any, Any]:
    """A tool-calling agent with context management, uncompiled (compile with your checkpointer).

    The graph: ``START → ctx_budget → model → ctx_usage → tools → ctx_budget ...``, through
    ``ctx_compact`` when the next request would be over the trigger.

    Args:
        model: a chat model supporting ``bind_tools``, or an ``init_chat_model`` spec string
            (it writes the summaries too, unless ``summary_model``/``summarizer`` is given).
        tools: the agent's tools.
        prompt: a system prompt prepended to every request (not stored in the state).
        store: the history store, as :func:`add_context_management` takes it (so are
            ``config``, ``summarizer``, ``summary_model``, ``pinned_rules``, ``memory`` and
            ``provider_count``).
        lookup_tool: give the model the history lookup tool (``True``, or a tool made with
            :func:`~ctx_langgraph.lookup.make_history_lookup_tool`).
        ledger: where usage is booked (default: on ``store``).
        counter: overrides the token counter picked from the model name.
        compact_tool: give the model the ``compact_context`` tool, to ask for a compaction
            before its next step.

    Examples:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from ctx_langgraph import ContextConfig, SQLiteHistoryStore
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> builder = create_context_agent(MeteringChatModel(replies=["Hi!"]), store=store,
        ...                                config=ContextConfig(context_window=8_000, output_reserve=1_000))
        >>> graph = builder.compile(checkpointer=InMemorySaver())
        >>> out = graph.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "t"}})
        >>> out["messages"][-1].content, out["context"]["report"]["budget"]["decision"]
        ('Hi!', 'proceed')
    """
    own = context_tools(store, config, lookup_tool=lookup_tool, compact_tool=compact_tool)
    all_tools = [*tools, *own]
    builder, runnable = _agent_graph(model, all_tools, prompt)
    steps = context_steps(
        store,
        config=config,
        ledger=ledger,
        model=model,
        tools=all_tools,
        system_prompt=prompt,
        summarizer=summarizer,
        summary_model=summary_model,
        counter=counter,
        provider_count=provider_count,
        pinned_rules=pinned_rules,
        memory=memory,
    )  # the arguments are checked already: wired directly, not through add_context_management
    return _wired(builder, "model", runnable, steps)
