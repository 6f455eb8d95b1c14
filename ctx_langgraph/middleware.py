"""``ContextManagementMiddleware``: the same context management for ``langchain.agents.create_agent``.

``before_model`` runs the budget/compact rounds, ``wrap_model_call`` calls the model through the
overflow retry, ``after_model`` records the reply and books its usage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Annotated, Any, cast

import langchain.agents.middleware.types
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import ModelResponse, hook_config
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from ctx_langgraph._arguments import check_wiring_arguments
from ctx_langgraph._checkpoint_safe import checkpoint_safe
from ctx_langgraph._overflow import OverflowStep, Recovered, retry_on_overflow
from ctx_langgraph._rewire import ModelCall
from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.effects import Flow, arun, run
from ctx_langgraph.core.stream_usage import asks_stream_usage
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.providers.count import ProviderCountHook
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import ContextReport, merge_context, merge_facts, unpack
from ctx_langgraph.usage.held import HoldingLedgerHandler, booked_by
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.wiring import ContextSteps, compaction_rounds, context_steps, context_tools

__all__ = ["ContextAgentState", "ContextManagementMiddleware"]

_EXTENDED_RESPONSE: Any = getattr(langchain.agents.middleware.types, "ExtendedModelResponse", None)
_KEPT = 8
"""Request shapes (model, tools, system prompt) whose steps a middleware keeps built."""


def _thread_of(config: RunnableConfig) -> Any:
    return (config.get("configurable") or {}).get("thread_id")


class ContextAgentState(AgentState[Any]):
    """``create_agent``'s state plus the ``context`` channel our hooks keep."""

    context: NotRequired[Annotated[ContextReport, merge_context]]


class ContextManagementMiddleware(AgentMiddleware[ContextAgentState, Any, Any]):
    """Budget, compaction, usage booking and history lookup for ``create_agent``.

    The model, the tools and the system prompt are read from the model requests
    (``ContextManagementMiddleware(store)`` is enough). ``store``, ``config``, ``summarizer``,
    ``summary_model``, ``ledger``, ``counter``, ``provider_count``, ``pinned_rules`` and
    ``memory`` are as :func:`~ctx_langgraph.add_context_management` takes them; ``model``,
    ``tools`` and ``system_prompt`` override what the model requests carry.

    Args:
        lookup_tool: give the agent :func:`~ctx_langgraph.lookup.make_history_lookup_tool`.
        compact_tool: give the agent the ``compact_context`` tool
            (:func:`~ctx_langgraph.compaction.make_compact_tool`).
        max_rounds: sets ``config.max_compaction_rounds`` (None: as the config says).

    Examples:
        >>> from langchain.agents import create_agent
        >>> from ctx_langgraph import ContextConfig, SQLiteHistoryStore
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> model = MeteringChatModel(replies=["Hi!"])
        >>> middleware = ContextManagementMiddleware(
        ...     store, config=ContextConfig(context_window=8_000, output_reserve=1_000))
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
        tools: Sequence[Any] | None = None,
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
        config = config or ContextConfig()
        if max_rounds is not None:
            config = replace(config, max_compaction_rounds=max_rounds)
        self.store = store
        self.max_rounds = config.max_compaction_rounds
        self.tools = context_tools(
            store, config, lookup_tool=lookup_tool, compact_tool=compact_tool
        )
        ledger = ledger or UsageLedger(store)
        self._handler = HoldingLedgerHandler(ledger)
        self._given = (model, None if tools is None else (*tools, *self.tools), system_prompt)
        self._build = partial(
            context_steps,
            store,
            config=config,
            ledger=ledger,
            booking=self._handler,
            summarizer=summarizer,
            summary_model=summary_model,
            counter=counter,
            provider_count=provider_count,
            pinned_rules=pinned_rules,
            memory=memory,
        )
        self._built: dict[tuple[Any, ...], ContextSteps] = {}
        self._steps: ContextSteps | None = None  # the last request's (None: none seen yet)
        if self._given != (None, None, None):
            self._steps = self._steps_for(model, self._given[1] or tuple(self.tools), system_prompt)
        self._unbudgeted: dict[Any, None] = {}  # threads whose model call must run the budget

    def _steps_for(
        self, model: Any, tools: tuple[Any, ...], system_prompt: str | None
    ) -> ContextSteps:
        """The steps for requests of this model, tools and system prompt (a few kept built)."""
        key = (id(model), tuple(map(id, tools)), system_prompt)
        if key not in self._built:
            if len(self._built) >= _KEPT:
                del self._built[next(iter(self._built))]
            self._built[key] = self._build(model=model, tools=tools, system_prompt=system_prompt)
        return self._built[key]

    def _learn(self, request: ModelRequest[Any]) -> ContextSteps:
        """The steps for ``request`` (what this middleware was not given, read from it)."""
        model, tools, prompt = self._given
        self._steps = self._steps_for(
            request.model if model is None else model,
            tuple(request.tools) if tools is None else tools,
            request.system_prompt if prompt is None else prompt,
        )
        return self._steps

    def _before_model(self, state: ContextAgentState) -> Flow[dict[str, Any]] | None:
        """The budget/compact rounds; None before any request showed the model (the model call
        runs them then)."""
        config = get_config()
        if self._steps is None:
            if len(self._unbudgeted) >= _KEPT * 128:
                del self._unbudgeted[next(iter(self._unbudgeted))]
            self._unbudgeted[_thread_of(config)] = None
            return None
        return compaction_rounds(self._steps, dict(state), config)

    @hook_config(can_jump_to=["end"])
    def before_model(
        self, state: ContextAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        with booked_by(self._handler):
            return None if (flow := self._before_model(state)) is None else run(flow)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: ContextAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        with booked_by(self._handler):
            return None if (flow := self._before_model(state)) is None else await arun(flow)

    def _model_call(
        self, request: ModelRequest[Any], handler: Callable[..., Any]
    ) -> Flow[tuple[Recovered, dict[str, Any] | None]]:
        """The model call with the overflow recovery, after the budget ``before_model`` could not
        run yet; returns the outcome and that budget's update (None: ``before_model`` ran it)."""
        steps, config = self._learn(request), get_config()
        context = unpack(cast("dict[str, Any]", request.state).get("context"))
        before: dict[str, Any] | None = None
        if self._unbudgeted.pop(_thread_of(config), "budgeted") is None:
            before = yield from compaction_rounds(steps, dict(request.state), config)
            context = merge_facts(context, before.get("context"))
            if "messages" in before:
                messages = add_messages(cast("Any", request.messages), before["messages"])
                request = request.override(messages=cast("Any", messages))
            if before.get("jump_to") == "end":
                return Recovered(ModelResponse(result=[])), before

        def send(step: OverflowStep) -> Any:
            kind, view = step
            messages = request.messages if kind == "call" else view["messages"]
            sent = steps.wire.messages(messages, context if kind == "call" else view["context"])
            model = asks_stream_usage(request.model)
            if sent is request.messages and model is request.model:
                return handler(request)
            return handler(request.override(messages=cast("Any", list(sent)), model=model))

        call = ModelCall(send, send, steps.compact, steps.budget, config, context, self._handler)
        view = {"messages": request.messages, "context": context}
        outcome = yield from call.flow(retry_on_overflow(view, steps.counter))
        return outcome, before

    @staticmethod
    def _responded(outcome: Recovered, before: dict[str, Any] | None) -> Any:
        """The model call's result, with the budget's update when it ran here and
        ``context["overflow"]`` after a recovery."""
        response = checkpoint_safe(outcome.result)
        update: dict[str, Any] = dict((before or {}).get("context") or {})
        if outcome.overflow is not None:
            update["overflow"] = outcome.overflow
        if not update and before is None:
            return response
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        if not isinstance(response, ModelResponse):
            return response
        if before is not None and "messages" in before:
            response = replace(response, result=[*before["messages"], *response.result])
        if _EXTENDED_RESPONSE is None or not update:
            return response
        command: Command[Any] = Command(update={"context": update})
        return _EXTENDED_RESPONSE(model_response=response, command=command)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> Any:
        with booked_by(self._handler):
            outcome, before = run(self._model_call(request, handler))
        return self._responded(outcome, before)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        with booked_by(self._handler):
            outcome, before = await arun(self._model_call(request, handler))
        return self._responded(outcome, before)

    def after_model(self, state: ContextAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if self._steps is None:
            return None
        return self._steps.usage.invoke(dict(state), get_config()) or None

    async def aafter_model(
        self, state: ContextAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        if self._steps is None:
            return None
        return await self._steps.usage.ainvoke(dict(state), get_config()) or None
