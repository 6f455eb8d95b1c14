"""The one place that builds context management's steps around a model, for every wiring (graph
nodes, or the middleware's hooks), and the budget/compact rounds as one flow
(:func:`compaction_rounds`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph._overflow import apply_update
from ctx_langgraph._rewire import CTX_BUDGET, CTX_COMPACT, CTX_USAGE
from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.budget.node import BudgetNode
from ctx_langgraph.compaction.node import CompactNode
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.compaction.summarizers import default_summarizer
from ctx_langgraph.compaction.tool import make_compact_tool
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.lookup import is_history_lookup_tool, make_history_lookup_tool
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.providers import Wire, wire_of
from ctx_langgraph.providers.count import ProviderCountHook
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import FlatContext, merge_facts, unpack
from ctx_langgraph.usage.held import HoldingLedgerHandler
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.usage.node import UsageNode, answer_booker

__all__ = ["ContextSteps", "compaction_rounds", "context_steps", "context_tools"]


@dataclass(frozen=True)
class ContextSteps:
    """The budget, compaction and usage steps around one model (:func:`context_steps`)."""

    budget: BudgetNode
    compact: CompactNode
    usage: UsageNode
    booking: HoldingLedgerHandler | None
    """Books every chat-model call, holding the answer's usage for the usage step (None: the
    usage step books the answer alone)."""
    wire: Wire
    """What the model's wire protocol needs of the messages sent."""

    @property
    def counter(self) -> TokenCounter:
        """The model's token counter (the budget's)."""
        return self.budget.settings.counter

    def nodes(self) -> tuple[Runnable[Any, Any], Runnable[Any, Any], Runnable[Any, Any]]:
        """The steps as the graph's ``ctx_budget``, ``ctx_compact`` and ``ctx_usage`` nodes."""
        budget: Runnable[Any, Any] = RunnableCallable(
            self.budget.invoke, self.budget.ainvoke, name=CTX_BUDGET
        )
        compact = RunnableCallable(self.compact.invoke, self.compact.ainvoke, name=CTX_COMPACT)
        usage = RunnableCallable(self.usage.invoke, self.usage.ainvoke, name=CTX_USAGE)
        if self.booking is None:
            return budget, compact, usage
        if self.budget.memory is not None:
            budget = budget.with_config(callbacks=[self.booking])
        return budget, compact.with_config(callbacks=[self.booking]), usage


def context_tools(
    store: HistoryStore,
    config: ContextConfig | None = None,
    *,
    lookup_tool: bool | BaseTool = True,
    compact_tool: bool = False,
) -> list[BaseTool]:
    """The tools context management gives the model: the history lookup tool and, when asked
    for, the ``compact_context`` tool.

    Examples:
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> [tool.name for tool in context_tools(store, compact_tool=True)]
        ['history_lookup', 'compact_context']
    """
    segments = config is not None and config.segment_events is not None
    own: list[BaseTool] = []
    if isinstance(lookup_tool, BaseTool):
        own.append(lookup_tool)
    elif lookup_tool:
        own.append(make_history_lookup_tool(store, segments=segments))
    if compact_tool:
        own.append(make_compact_tool())
    return own


def context_steps(
    store: HistoryStore,
    *,
    config: ContextConfig | None = None,
    ledger: UsageLedger | None = None,
    booking: HoldingLedgerHandler | bool = True,
    model: Any = None,
    tools: Sequence[Any] = (),
    system_prompt: str | None = None,
    summarizer: Summarizer | None = None,
    summary_model: BaseChatModel | str | None = None,
    counter: TokenCounter | None = None,
    provider_count: ProviderCountHook | None = None,
    pinned_rules: PinnedRules | None = None,
    memory: LongTermMemory | None = None,
) -> ContextSteps:
    """The steps of context management around ``model``; the arguments are
    :func:`~ctx_langgraph.integration.add_context_management`'s, ``booking`` its
    ``book_model_calls`` (or a :class:`~ctx_langgraph.usage.held.HoldingLedgerHandler`).

    Examples:
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> steps = context_steps(store, config=ContextConfig(context_window=8_000, output_reserve=1_000))
        >>> steps.budget.budget.usable, type(steps.compact.summarizer).__name__
        (7000, 'ExtractiveSummarizer')
    """
    ledger = ledger if ledger is not None else UsageLedger(store)
    config = (config or ContextConfig()).with_trail_room(
        lookup=any(is_history_lookup_tool(tool) for tool in tools)
    )
    if booking is True:
        booking = HoldingLedgerHandler(ledger)
    handler = booking or None
    if summarizer is None:
        summarizer = default_summarizer(model, summary_model=summary_model, config=config)
    budget = BudgetNode(
        store,
        config=config,
        model=model,
        tools=tools,
        counter=counter,
        compact_node=CTX_COMPACT,
        provider_count=provider_count,
        system_prompt=system_prompt,
        pinned_rules=pinned_rules,
        memory=memory,
        book_late=answer_booker(ledger),
    )
    compact = CompactNode(
        store, config=config, summarizer=summarizer, model=model, counter=counter, ledger=ledger
    )
    usage = UsageNode(
        ledger,
        store=store,
        timestamp=config.timestamp,
        embed_in_background=config.precompact_at is not None,
        held=None if handler is None else handler.take,
    )
    return ContextSteps(budget, compact, usage, handler, wire_of(model))


def compaction_rounds(
    steps: ContextSteps, state: dict[str, Any], config: RunnableConfig
) -> Flow[dict[str, Any]]:
    """The budget, then (compaction, budget) while it says so, at most
    ``max_compaction_rounds`` times; returns the state update of them all (``jump_to="end"``
    when a requested compaction left the model nothing to answer)."""
    local: dict[str, Any] = {
        "messages": list(state.get("messages") or []),
        "context": unpack(state.get("context")),
    }
    context: FlatContext = {}
    replaced: dict[str, AnyMessage] = {}
    rewritten = False
    budget, compact = steps.budget, steps.compact
    last_round = budget.config.max_compaction_rounds
    for round_ in range(last_round + 1):
        update = yield from call(budget.invoke, budget.ainvoke, local, config)
        local = apply_update(local, update)
        context = merge_facts(context, update.get("context"))
        for message in update.get("messages") or []:
            if isinstance(message, RemoveMessage) and message.id == REMOVE_ALL_MESSAGES:
                rewritten = True
            elif message.id:
                replaced[message.id] = message
        decision = (local["context"].get("budget") or {}).get("decision")
        if decision not in ("compact", "precompact") or round_ == last_round:
            break
        update = yield from call(compact.invoke, compact.ainvoke, local, config)
        local = apply_update(local, update)
        context = merge_facts(context, update.get("context"))
        rewritten = rewritten or "messages" in update
    result: dict[str, Any] = {"context": context}
    if (context.get("budget") or {}).get("decision") == "done":
        result["jump_to"] = "end"
    if rewritten:
        result["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *local["messages"]]
    elif replaced:
        result["messages"] = list(replaced.values())
    return result
