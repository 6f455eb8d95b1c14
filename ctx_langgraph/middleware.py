"""``ContextManagementMiddleware``: the same context management for ``langchain.agents.create_agent``.

``before_model`` runs what the ``ctx_budget`` node runs (and ``ctx_compact`` when the next
request would be over the trigger, then the budget again on the compacted view);
``after_model`` runs what ``ctx_usage`` runs. The logic is the nodes' own; only the wiring
differs. ``wrap_model_call`` folds the model call's usage through a
:class:`~ctx_langgraph.usage.callbacks.LedgerCallbackHandler` as it streams, and ``after_model``
books it in the transaction that records the reply (a call that fails, and every other model
call, the summarizer's or a memory extractor's, is booked by the handler when it ends). When
the provider rejects the request as too long, it compacts the request's messages (the summary
is committed in the store, and ``ctx_budget`` applies it to the state on the next turn) and
calls the model once more on the compacted view, with ``context["overflow"]`` counting the
retries. The middleware also gives the agent the history
lookup tool. Both hooks drive their logic on :mod:`ctx_langgraph.core.effects`, sync or async.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Annotated, Any, cast

import langchain.agents.middleware.types
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import ModelResponse, hook_config
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.tracers.context import register_configure_hook
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from ctx_langgraph._arguments import check_wiring_arguments
from ctx_langgraph._checkpoint_safe import checkpoint_safe
from ctx_langgraph._overflow import OverflowStep, Recovered, retry_on_overflow
from ctx_langgraph._overflow import apply_update as _apply
from ctx_langgraph._rewire import CTX_COMPACT, overflow_calls
from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.budget.node import BudgetNode
from ctx_langgraph.compaction.node import CompactNode
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.compaction.summarizers import default_summarizer
from ctx_langgraph.compaction.tool import make_compact_tool
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.call_scope import calls_in
from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.scope import Scope, scope_from_config
from ctx_langgraph.core.stream_usage import asks_stream_usage
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.providers import Wire, wire_of
from ctx_langgraph.providers.count import ProviderCountHook
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import ContextReport, merge_context
from ctx_langgraph.usage.held import HoldingLedgerHandler, answering
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.usage.node import UsageNode, answer_booker

__all__ = ["ContextAgentState", "ContextManagementMiddleware"]

# LangChain's hook for handlers that come from a context variable: every callback manager set up
# while it holds a handler gets it, so the model call create_agent makes inside wrap_model_call is
# booked by our ledger handler (streamed usage folded chunk by chunk) without rebinding the model.
_MODEL_CALL_HANDLER: ContextVar[BaseCallbackHandler | None] = ContextVar(
    "ctx_langgraph_model_call_handler", default=None
)
register_configure_hook(_MODEL_CALL_HANDLER, inheritable=True)
# a model call's result with a state update (absent from the first langchain 1.x releases)
_EXTENDED_RESPONSE: Any = getattr(langchain.agents.middleware.types, "ExtendedModelResponse", None)


class ContextAgentState(AgentState[Any]):
    """``create_agent``'s state plus the ``context`` channel our hooks keep."""

    context: NotRequired[Annotated[ContextReport, merge_context]]


def _before_model_steps(
    state: dict[str, Any],
    max_rounds: int,
    budget: BudgetNode,
    compact: CompactNode,
    config: RunnableConfig,
) -> Flow[dict[str, Any] | None]:
    """Budget, then (compact, budget) while the budget says so: the graph's loop, inline. The
    budget stops sending the request to compaction after ``max_rounds`` rounds, or after one
    that made no progress; the loop ends there whatever it says."""
    local = {"messages": list(state.get("messages") or []), "context": state.get("context") or {}}
    context: dict[str, Any] = {}
    replaced: dict[str, AnyMessage] = {}
    rewritten = False
    for _round in range(max_rounds + 1):
        update = yield from call(budget.invoke, budget.ainvoke, local, config)
        local = _apply(local, update)
        context = merge_context(context, update.get("context"))
        for message in update.get("messages") or []:
            if isinstance(message, RemoveMessage) and message.id == REMOVE_ALL_MESSAGES:
                rewritten = True
            elif message.id:
                replaced[message.id] = message
        decision = (local["context"].get("budget") or {}).get("decision")
        if decision not in ("compact", "precompact") or _round == max_rounds:
            break
        update = yield from call(compact.invoke, compact.ainvoke, local, config)
        local = _apply(local, update)
        context = merge_context(context, update.get("context"))
        rewritten = rewritten or "messages" in update
    result: dict[str, Any] = {"context": context}
    if (context.get("budget") or {}).get("decision") == "done":
        result["jump_to"] = "end"  # a requested compaction, and nothing for the model to answer
    if rewritten:
        result["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *local["messages"]]
    elif replaced:
        result["messages"] = list(replaced.values())
    return result


class ContextManagementMiddleware(AgentMiddleware[ContextAgentState, Any, Any]):
    """Budget, compaction, usage booking and history lookup for ``create_agent``.

    Args:
        store: the history store that records every message and the summaries.
        config: the budget (window, reserve, trigger, ...); the window may come from ``model``.
        summarizer: the compaction summarizer (wins over ``summary_model``).
        summary_model: a chat model or ``init_chat_model`` spec (``"openai:gpt-4o-mini"``) that
            writes the summaries. Default: ``model`` when it is a real chat model (or a spec
            string, as ``create_agent`` takes), else (no ``model``, or an offline fake such as
            ``MeteringChatModel``) the offline extractive summarizer.
        model: the agent's chat model (its name picks the counter, its profile the window).
        tools: the agent's tools (their schemas are part of every request; pass the same list
            as to ``create_agent``). The lookup tool this middleware adds is counted already.
        system_prompt: the agent's ``system_prompt`` (counted as overhead of every request).
        pinned_rules: persistent rules kept first in the view on every turn, surviving every
            compaction (:class:`~ctx_langgraph.rules.PinnedRules`).
        memory: long-term memory learned from the user's messages and recalled into the view
            under its own budget (:class:`~ctx_langgraph.memory.LongTermMemory`).
        ledger: where usage is booked (default: on ``store``).
        counter: overrides the token counter picked from the model name.
        provider_count: a provider token-count hook asked near the limit.
        lookup_tool: give the agent :func:`~ctx_langgraph.lookup.make_history_lookup_tool`.
        compact_tool: give the agent the ``compact_context`` tool
            (:func:`~ctx_langgraph.compaction.make_compact_tool`): the model asks for a
            compaction, with an optional focus, done before its next call. A compaction can
            also be asked for with the input ``{"context": {"compact": {"instructions": "..."}}}``
            (with no new message the run ends after it, without a model call).
        max_rounds: budget/compact rounds per model call: sets
            ``config.max_compaction_rounds`` (None: as the config says, 3 by default). A
            round that makes no progress is the last.

    Examples:
        >>> from langchain.agents import create_agent
        >>> from ctx_langgraph import ContextConfig, SQLiteHistoryStore
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> model = MeteringChatModel(replies=["Hi!"])
        >>> middleware = ContextManagementMiddleware(
        ...     store, model=model, config=ContextConfig(context_window=8_000, output_reserve=1_000))
        >>> agent = create_agent(model, tools=[], middleware=[middleware])
        >>> out = agent.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "t"}})
        >>> out["messages"][-1].content, [e.role for e in store.read_events("t")]
        ('Hi!', ['human', 'ai'])
    """

    state_schema = ContextAgentState

    def __init__(
        self,
        store: HistoryStore,
        *,
        config: ContextConfig | None = None,
        summarizer: Summarizer | None = None,
        summary_model: BaseChatModel | str | None = None,
        model: Any = None,
        tools: Sequence[Any] = (),
        system_prompt: str | None = None,
        ledger: UsageLedger | None = None,
        counter: TokenCounter | None = None,
        provider_count: ProviderCountHook | None = None,
        lookup_tool: bool = True,
        compact_tool: bool = False,
        max_rounds: int | None = None,
        pinned_rules: PinnedRules | None = None,
        memory: LongTermMemory | None = None,
    ) -> None:
        super().__init__()
        check_wiring_arguments(
            "ContextManagementMiddleware",
            store=store,
            config=config,
            ledger=ledger,
            summarizer=summarizer,
            memory=memory,
            pinned_rules=pinned_rules,
        )
        config = (config or ContextConfig()).with_trail_room(lookup=lookup_tool)
        indexed = config.segment_events is not None  # the lookup searches the segment index
        own: list[BaseTool] = (
            [make_history_lookup_tool(store, segments=indexed)] if lookup_tool else []
        )
        if compact_tool:
            own.append(make_compact_tool())
        self.tools = own
        self.store = store
        if max_rounds is not None:
            config = replace(config, max_compaction_rounds=max_rounds)
        self.max_rounds = config.max_compaction_rounds
        ledger = ledger or UsageLedger(store)
        self._budget = BudgetNode(
            store,
            config,
            model,
            [*tools, *own],
            counter,
            CTX_COMPACT,
            provider_count=provider_count,
            system_prompt=system_prompt,
            pinned_rules=pinned_rules,
            memory=memory,
            book_late=answer_booker(ledger),
        )
        self._handler = HoldingLedgerHandler(ledger)
        self._usage = UsageNode(
            ledger,
            store=store,
            timestamp=config.timestamp,
            embed_in_background=config.precompact_at is not None,
            held=self._handler.take,
        )
        if summarizer is None:
            summarizer = default_summarizer(model, summary_model=summary_model, config=config)
        self._compact = CompactNode(
            store,
            config,
            summarizer,
            model,
            counter,
            ledger=self._usage.ledger,
        )
        self.wire: Wire = wire_of(model)
        """What the model's wire protocol needs of the messages sent: no other provider's
        opaque items, and a view the provider does not hold sent whole when requests are
        chained by ``previous_response_id``."""

    def _node(self, kind: str) -> BudgetNode | CompactNode:
        return self._budget if kind == "budget" else self._compact

    def _before_model(self, state: ContextAgentState) -> Flow[dict[str, Any] | None]:
        return _before_model_steps(
            dict(state), self.max_rounds, self._budget, self._compact, get_config()
        )

    @contextmanager
    def _booking(self) -> Iterator[None]:
        """Every chat-model call inside (the agent's model, the summarizer, a memory extractor)
        is booked by our ledger handler."""
        token = _MODEL_CALL_HANDLER.set(self._handler)
        try:
            yield
        finally:
            _MODEL_CALL_HANDLER.reset(token)

    @hook_config(can_jump_to=["end"])
    def before_model(
        self, state: ContextAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        with self._booking():
            return run(self._before_model(state))

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: ContextAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        with self._booking():
            return await arun(self._before_model(state))

    @property
    def _counter(self) -> TokenCounter:
        counter = self._budget.counter
        assert counter is not None  # set by BudgetNode
        return counter

    def _model_call(
        self, request: ModelRequest[Any], handler: Callable[..., Any]
    ) -> Flow[Recovered]:
        """The model call with the overflow recovery, on the request's messages and context."""
        view = {"messages": request.messages, "context": request.state.get("context") or {}}
        steps = retry_on_overflow(view, self._counter)
        return overflow_calls(_ModelCall(self, request, handler, get_config()), steps)

    @staticmethod
    def _responded(outcome: Recovered) -> Any:
        """The model call's result; after a recovery, with ``context["overflow"]`` for the state
        (its messages are not rewritten here: ``ctx_budget`` applies the committed summary on
        the next turn)."""
        response = checkpoint_safe(outcome.result)
        if outcome.overflow is None:
            return response
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        if not isinstance(response, ModelResponse) or _EXTENDED_RESPONSE is None:
            return response
        command: Command[Any] = Command(update={"context": {"overflow": outcome.overflow}})
        return _EXTENDED_RESPONSE(model_response=response, command=command)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> Any:
        with self._booking():
            outcome = run(self._model_call(request, handler))
        return self._responded(outcome)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        with self._booking():
            outcome = await arun(self._model_call(request, handler))
        return self._responded(outcome)

    def after_model(self, state: ContextAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._usage.invoke(dict(state), get_config()) or None

    async def aafter_model(
        self, state: ContextAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await self._usage.ainvoke(dict(state), get_config()) or None


@dataclass(frozen=True)
class _ModelCall:
    """One ``wrap_model_call``: serves the overflow recovery's steps with ``create_agent``'s
    model handler (sync in ``serve``, async in ``aserve``) and our nodes."""

    middleware: ContextManagementMiddleware
    request: ModelRequest[Any]
    handler: Callable[..., Any]
    config: RunnableConfig

    def _model_request(self, step: OverflowStep) -> ModelRequest[Any]:
        kind, state = step
        request = self.request
        messages = request.messages if kind == "call" else state["messages"]
        context = request.state.get("context") if kind == "call" else state.get("context")
        sent = self.middleware.wire.messages(messages, context)
        model = asks_stream_usage(request.model)  # a stream reports its usage, if it can ask
        if sent is request.messages and model is request.model:
            return request
        return request.override(messages=cast("list[AnyMessage]", list(sent)), model=model)

    def serve(self, step: OverflowStep) -> Any:
        kind, state = step
        if kind not in ("call", "retry"):
            return self.middleware._node(kind).invoke(state, self.config)
        with answering(), calls_in(self._scope()):
            try:
                return self.handler(self._model_request(step))
            except BaseException:  # the answer's usage is booked now: no after_model comes
                self.middleware._handler.release(self._scope())
                raise

    async def aserve(self, step: OverflowStep) -> Any:
        kind, state = step
        if kind not in ("call", "retry"):
            return await self.middleware._node(kind).ainvoke(state, self.config)
        with answering(), calls_in(self._scope()):
            try:
                return await self.handler(self._model_request(step))
            except BaseException:
                await self.middleware._handler.arelease(self._scope())
                raise

    def _scope(self) -> Scope:
        context = cast("dict[str, Any]", self.request.state.get("context") or {})
        return scope_from_config(self.config, context)
