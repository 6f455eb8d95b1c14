"""How :func:`~ctx_langgraph.integration.add_context_management` changes an existing graph: the
model node wrapped in the overflow retry (:class:`OverflowRetry`), and its edges moved onto
``ctx_budget`` and ``ctx_usage`` (:func:`splice`)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Generator, Hashable, Mapping
from dataclasses import dataclass, field
from inspect import isclass
from typing import Annotated, Any, NamedTuple, Protocol, get_type_hints

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import patch_config
from langgraph.graph import StateGraph
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from ctx_langgraph._checkpoint_safe import checkpoint_safe
from ctx_langgraph._overflow import OverflowStep, Recovered, merge_recovery, retry_on_overflow
from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.core.call_scope import calls_in
from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.scope import scope_from_config
from ctx_langgraph.state import ContextReport, merge_context
from ctx_langgraph.usage.held import HoldingLedgerHandler, answering, booked_by
from ctx_langgraph.view.provider_items import Wire

__all__ = [
    "CTX_BUDGET",
    "CTX_COMPACT",
    "CTX_USAGE",
    "ModelCall",
    "ModelNode",
    "OverflowRetry",
    "guarded_model_node",
    "splice",
]

log = logging.getLogger("ctx_langgraph.integration")

CTX_BUDGET = "ctx_budget"
"""The name of the budget node in a graph."""
CTX_COMPACT = "ctx_compact"
"""The name of the compaction node in a graph."""
CTX_USAGE = "ctx_usage"
"""The name of the usage node in a graph."""

Builder = StateGraph[Any, Any, Any, Any]


class ModelNode(NamedTuple):
    """What replaces the model node: its runnable, and its input schema (None: the node's own)
    and that schema's channels when that changes."""

    runnable: Runnable[Any, Any]
    input_schema: Any = None
    channels: dict[str, Any] | None = None


def splice(builder: Builder, model_node: str, replacement: ModelNode) -> None:
    """Route ``model_node``'s edges through ``ctx_budget`` (in) and ``ctx_usage`` (out), and
    put ``replacement`` in the node's place.

    ``StateGraph`` has no public way to change an edge or a node, so this is the one function
    that writes the builder's own ``edges``, ``waiting_edges``, ``branches``, ``nodes`` and
    ``schemas`` (checked against langgraph 1.2.24 by tests/test_integration.py and
    tests/test_graphs.py).
    """

    def start(node: str) -> str:
        return CTX_USAGE if node == model_node else node

    def end(node: Any) -> Any:
        return CTX_BUDGET if node == model_node else node

    def rename(result: Any) -> Any:
        return [end(r) for r in result] if isinstance(result, list | tuple) else end(result)

    builder.edges = {(start(a), end(b)) for a, b in builder.edges}
    builder.waiting_edges = {(tuple(map(start, a)), end(b)) for a, b in builder.waiting_edges}
    for branches in builder.branches.values():
        for name, spec in list(branches.items()):
            if spec.ends is not None:
                ends: dict[Hashable, str] = {key: end(node) for key, node in spec.ends.items()}
                branches[name] = spec._replace(ends=ends)
            else:
                branches[name] = spec._replace(path=spec.path | RunnableLambda(rename))
    if model_node in builder.branches:
        builder.branches[CTX_USAGE] = builder.branches.pop(model_node)
    node = builder.nodes[model_node]
    if replacement.input_schema is None:
        builder.nodes[model_node] = dataclasses.replace(node, runnable=replacement.runnable)
        return
    builder.schemas[replacement.input_schema] = replacement.channels or {}
    builder.nodes[model_node] = dataclasses.replace(
        node, runnable=replacement.runnable, input_schema=replacement.input_schema
    )


@dataclass(frozen=True)
class OverflowRetry:
    """The user's model node under :func:`~ctx_langgraph._overflow.retry_on_overflow`."""

    node: Runnable[Any, Any]
    compact: Runnable[Any, Any]
    budget: Runnable[Any, Any]
    counter: TokenCounter
    own_context: bool
    """The node's input has the ``context`` channel itself."""
    coerce: Callable[..., Any] | None
    """Builds a pydantic or dataclass state from the channel values; None for a dict state."""
    wire: Wire = field(default_factory=Wire)  # as ContextSteps.wire
    booking: HoldingLedgerHandler | None = None  # as ContextSteps.booking

    def _node_input(self, state: dict[str, Any], step: OverflowStep) -> Any:
        kind, view = step
        values = dict(state)
        if kind == "retry":
            values["messages"] = view["messages"]
            if self.own_context:
                values["context"] = view["context"]
        context = view["context"] if kind == "retry" else state.get("context")
        values["messages"] = self.wire.messages(values.get("messages") or [], context)
        if not self.own_context:
            values.pop("context", None)
        return self.coerce(**values) if self.coerce is not None else values

    def _flow(self, state: dict[str, Any], config: RunnableConfig) -> Flow[Recovered]:
        def send(step: OverflowStep) -> Any:
            return self.node.invoke(self._node_input(state, step), config)

        async def asend(step: OverflowStep) -> Any:
            return await self.node.ainvoke(self._node_input(state, step), config)

        context = state.get("context") or {}
        call = ModelCall(send, asend, self.compact, self.budget, config, context, self.booking)
        view = {"messages": state.get("messages"), "context": context}
        return call.flow(retry_on_overflow(view, self.counter))

    def invoke(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        outcome = run(self._flow(state, config))
        return checkpoint_safe(merge_recovery(outcome.result, outcome.update))

    async def ainvoke(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        outcome = await arun(self._flow(state, config))
        return checkpoint_safe(merge_recovery(outcome.result, outcome.update))


class _Step(Protocol):
    """A budget or compaction step (a node's runnable, or the node itself)."""

    def invoke(self, state: Any, config: RunnableConfig, /) -> Any: ...

    async def ainvoke(self, state: Any, config: RunnableConfig, /) -> Any: ...


@dataclass(frozen=True)
class ModelCall:
    """One model call under the overflow recovery (both wirings): serves the steps of
    :func:`~ctx_langgraph._overflow.retry_on_overflow`, the model's by ``send``/``asend``, the
    others by ``compact``/``budget``; a failed call's usage is booked at once."""

    send: Callable[[OverflowStep], Any]
    asend: Callable[[OverflowStep], Awaitable[Any]]
    compact: _Step
    budget: _Step
    config: RunnableConfig
    context: Mapping[str, Any]
    booking: HoldingLedgerHandler | None

    def flow(self, steps: Generator[OverflowStep, Any, Recovered]) -> Flow[Recovered]:
        """The recovery's ``steps`` as effects served by :meth:`serve`/:meth:`aserve`."""
        result: Any = None
        error: Exception | None = None
        try:
            while True:
                try:
                    step = steps.throw(error) if error is not None else steps.send(result)
                except StopIteration as stop:
                    recovered: Recovered = stop.value
                    return recovered
                try:
                    result, error = (yield from call(self.serve, self.aserve, step)), None
                except Exception as exc:
                    result, error = None, exc
        finally:
            steps.close()

    def _step(self, step: OverflowStep) -> tuple[_Step, RunnableConfig] | None:
        node = {"compact": self.compact, "budget": self.budget}.get(step[0])
        name = CTX_COMPACT if step[0] == "compact" else CTX_BUDGET
        return None if node is None else (node, patch_config(self.config, run_name=name))

    def serve(self, step: OverflowStep) -> Any:
        if (node := self._step(step)) is not None:
            return node[0].invoke(step[1], node[1])
        scope = scope_from_config(self.config, dict(self.context))
        with answering(), calls_in(scope), booked_by(self.booking):
            try:
                return self.send(step)
            except BaseException:
                if self.booking is not None:
                    self.booking.release(scope)
                raise

    async def aserve(self, step: OverflowStep) -> Any:
        if (node := self._step(step)) is not None:
            return await node[0].ainvoke(step[1], node[1])
        scope = scope_from_config(self.config, dict(self.context))
        with answering(), calls_in(scope), booked_by(self.booking):
            try:
                return await self.asend(step)
            except BaseException:
                if self.booking is not None:
                    await self.booking.arelease(scope)
                raise


def with_context_schema(builder: Builder, model_node: str, channels: dict[str, Any]) -> Any:
    """A schema of the node's channels plus ``context``, made at run time."""
    try:
        hints = get_type_hints(builder.nodes[model_node].input_schema, include_extras=True)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {name: hints.get(name, Any) for name in channels}
    fields.setdefault("context", Annotated[ContextReport, merge_context])
    typed_dict: Any = TypedDict
    return typed_dict(f"{model_node}_input_with_context", fields, total=False)


def guarded_model_node(
    builder: Builder,
    model_node: str,
    runnable: Runnable[Any, Any],
    *,
    compact: Runnable[Any, Any],
    budget: Runnable[Any, Any],
    counter: TokenCounter,
    wire: Wire | None = None,
    booking: HoldingLedgerHandler | None = None,
) -> ModelNode:
    """``runnable`` (the model node's) wrapped in :class:`OverflowRetry`, reading the node's
    channels plus ``context``."""
    schema = builder.nodes[model_node].input_schema
    channels = builder.schemas[schema]
    if "messages" not in channels:
        log.warning(
            "ctx-langgraph: node %r does not read 'messages'; it is not retried after a "
            "provider's context-length error",
            model_node,
        )
        return ModelNode(runnable)
    own_context = "context" in channels
    coerce = (
        schema
        if isclass(schema) and (issubclass(schema, BaseModel) or dataclasses.is_dataclass(schema))
        else None
    )
    guard = OverflowRetry(
        runnable, compact, budget, counter, own_context, coerce, wire or Wire(), booking
    )
    wrapped = RunnableCallable(
        guard.invoke, guard.ainvoke, name=model_node, trace=False, recurse=False
    )
    if own_context and coerce is None:
        return ModelNode(wrapped)
    with_context = with_context_schema(builder, model_node, channels)
    return ModelNode(wrapped, with_context, {"context": builder.channels["context"], **channels})
