"""``compact_thread``: compact a thread now, from the app, a script or the command line: through
a compiled graph with context management (its ``ctx_compact`` serves the request), or on a
history store (the view rebuilt from it, ``ctx_compact``'s own flow run on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.node import CompactNode
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.compaction.summarizers import ExtractiveSummarizer
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.compact_request import compact_request
from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.scope import scope_from_config
from ctx_langgraph.errors import CompactRequestError
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.state import CompactionReport, CompactRequest, FlatContext, unpack
from ctx_langgraph.view.summary import summary_message

__all__ = ["acompact_thread", "compact_thread"]


def _graph_input(graph: Any, config: RunnableConfig, request: CompactRequest) -> dict[str, Any]:
    """The input that asks ``graph`` to compact the thread (checked)."""
    channels = getattr(graph, "channels", None) or {}
    if "context" not in channels:
        raise CompactRequestError(
            "the graph has no context channel: build it with add_context_management, "
            "create_context_agent or ContextManagementMiddleware, or pass the history store"
        )
    if getattr(graph, "checkpointer", None) is None:
        raise CompactRequestError(
            "the graph has no checkpointer, so it keeps no thread to compact: compile it with "
            "one, or pass the history store"
        )
    if not ((config or {}).get("configurable") or {}).get("thread_id"):
        raise CompactRequestError('config has no configurable["thread_id"]')
    return {"context": {"compact": request}}


def _graph_report(values: Mapping[str, Any]) -> CompactionReport:
    report: CompactionReport = unpack(values.get("context")).get("compaction") or CompactionReport()
    return report


def _store_node(
    store: HistoryStore,
    context_config: ContextConfig | None,
    summarizer: Summarizer | None,
    model: Any,
    counter: TokenCounter | None,
) -> CompactNode:
    config = context_config or ContextConfig()
    try:
        config.resolve(model)
    except ValueError as exc:
        raise CompactRequestError(
            f"{exc} (pass context_config=ContextConfig(context_window=...) as the graph uses)"
        ) from None
    return CompactNode(store, config, summarizer or ExtractiveSummarizer(), model, counter)


def _store_flow(
    node: CompactNode, config: RunnableConfig, request: CompactRequest
) -> Flow[CompactionReport]:
    """The thread's view rebuilt from the store, compacted by ``ctx_compact``'s own flow."""
    scope = scope_from_config(config)
    active = yield from call(node.store.get_active, node.store.aget_active, scope)
    after = active.covered_through_seq + 1 if active is not None else 1
    events = yield from call(node.store.read_events, node.store.aread_events, scope, from_seq=after)
    messages: list[BaseMessage] = [summary_message(active)] if active is not None else []
    messages.extend(event.message for event in events)
    if not events and active is None:
        return {"status": "nothing_to_cover", "error": f"thread {scope.thread_id!r} has no history"}
    context: FlatContext = {"compact": request, "branch": scope.branch}
    if active is not None:
        context["active_generation"] = active.generation
    update = yield from node.flow({"messages": messages, "context": context}, config)
    return _graph_report(update)


def _flow(
    target: Any,
    config: RunnableConfig,
    request: CompactRequest,
    summarizer: Summarizer | None,
    context_config: ContextConfig | None,
    model: Any,
    counter: TokenCounter | None,
) -> Flow[CompactionReport]:
    if isinstance(target, HistoryStore):
        node = _store_node(target, context_config, summarizer, model, counter)
        return (yield from _store_flow(node, config, request))
    graph_input = _graph_input(target, config, request)
    yield from call(target.invoke, target.ainvoke, graph_input, config)
    state = yield from call(target.get_state, target.aget_state, config)
    return _graph_report(state.values)


def compact_thread(
    target: Any,
    config: RunnableConfig,
    instructions: str | None = None,
    *,
    requested_by: str = "app",
    keep_recent_tokens: int | None = None,
    summarizer: Summarizer | None = None,
    context_config: ContextConfig | None = None,
    model: Any = None,
    counter: TokenCounter | None = None,
) -> CompactionReport:
    """Compact a thread now, whatever its budget says, with optional instructions.

    Args:
        target: a compiled graph with context management and a checkpointer, or the
            :class:`~ctx_langgraph.history.HistoryStore` the graph records into.
        config: the thread's run config (``{"configurable": {"thread_id": ...}}``).
        instructions: what the summary must keep above all; recorded in the version's
            ``metadata``.
        requested_by: ``app`` (default), ``user`` or ``model``: recorded with the version.
        keep_recent_tokens: the verbatim tail to keep (default: the configuration's).
        summarizer: with a store only, the summarizer (default: the extractive one).
        context_config: with a store only, the graph's configuration (give its window).
        model: with a store only, the graph's chat model (for the counter and the window).
        counter: with a store only, the token counter (default: picked from ``model``).

    Returns:
        The compaction report (``context["compaction"]``).

    Raises:
        CompactRequestError: malformed instructions, or a graph without context management, a
            checkpointer or a thread id. Nothing is compacted.

    Examples:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from ctx_langgraph import ContextConfig, SQLiteHistoryStore, create_context_agent
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> config = ContextConfig(context_window=8_000, output_reserve=1_000, keep_recent_tokens=50)
        >>> graph = create_context_agent(MeteringChatModel(replies=["Noted."]), store=store,
        ...                              config=config).compile(checkpointer=InMemorySaver())
        >>> thread = {"configurable": {"thread_id": "t"}}
        >>> for text in ("The deploy key lives in vault path ops/deploy.", "Ship on Friday.",
        ...              "Use blue-green releases."):
        ...     _ = graph.invoke({"messages": [("user", text)]}, thread)
        >>> report = compact_thread(graph, thread, "keep the deploy details")
        >>> report["status"], report["requested"]["instructions"]
        ('committed', 'keep the deploy details')
        >>> metadata = store.get_active("t").metadata
        >>> metadata["requested_by"], metadata["instructions"]
        ('app', 'keep the deploy details')
    """
    request = compact_request(
        instructions, requested_by=requested_by, keep_recent_tokens=keep_recent_tokens
    )
    return run(_flow(target, config, request, summarizer, context_config, model, counter))


async def acompact_thread(
    target: Any,
    config: RunnableConfig,
    instructions: str | None = None,
    *,
    requested_by: str = "app",
    keep_recent_tokens: int | None = None,
    summarizer: Summarizer | None = None,
    context_config: ContextConfig | None = None,
    model: Any = None,
    counter: TokenCounter | None = None,
) -> CompactionReport:
    """Async twin of :func:`compact_thread` (the graph's ``ainvoke``, the store's async methods)."""
    request = compact_request(
        instructions, requested_by=requested_by, keep_recent_tokens=keep_recent_tokens
    )
    return await arun(_flow(target, config, request, summarizer, context_config, model, counter))
