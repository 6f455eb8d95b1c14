"""``LedgerCallbackHandler``: book every chat-model call of a run in the usage ledger.

Attach it to a run (``config={"callbacks": [handler]}``) and every chat model called inside is
booked under the run's scope (its ``configurable``'s ``ctx_tenant``, ``thread_id`` and
``ctx_branch``), with its purpose from the call's metadata (``ctx_purpose``) or tags
(``ctx:summary``). Streamed usage is folded chunk by chunk
(:class:`~ctx_langgraph.usage.UsageAccumulator`); a call without usage is booked ``unknown``.
Each call's ``cacheable_prefix`` is measured against the thread's previous request, which the
ledger keeps (``note_request``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, GenerationChunk, LLMResult

from ctx_langgraph.budget.counters import CountCache, TokenCounter, default_counter
from ctx_langgraph.budget.prefix import RequestShape, cacheable_prefix, request_shape
from ctx_langgraph.core.call_scope import scope_of_call
from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.stream_usage import warn_unknown_usage
from ctx_langgraph.errors import ContextManagementError
from ctx_langgraph.history.types import Scope
from ctx_langgraph.usage.accumulator import UsageAccumulator
from ctx_langgraph.usage.booking import FINAL_VERSION
from ctx_langgraph.usage.ledger import BookedDelta, UsageLedger, call_key_for
from ctx_langgraph.usage.normalize import normalize_usage
from ctx_langgraph.usage.types import NormalizedUsage

__all__ = ["AsyncLedgerCallbackHandler", "LedgerCallbackHandler"]

log = logging.getLogger(__name__)


@dataclass
class _Run:
    scope: Scope
    purpose: str
    model: str | None
    accumulator: UsageAccumulator = field(default_factory=UsageAccumulator)
    cacheable_prefix: int | None = None
    serialized: Mapping[str, Any] | None = None
    streamed: bool = False


def purpose_of(tags: Sequence[str] | None, metadata: Mapping[str, Any] | None, default: str) -> str:
    """The purpose of a call: ``metadata["ctx_purpose"]``, else a ``ctx:<purpose>`` tag, else ``default``.

    Examples:
        >>> purpose_of(["ctx:summary"], {}, "answer"), purpose_of([], {"ctx_purpose": "lookup"}, "answer")
        ('summary', 'lookup')
    """
    if metadata and isinstance(metadata.get("ctx_purpose"), str):
        return str(metadata["ctx_purpose"])
    for tag in tags or ():
        if tag.startswith("ctx:") and len(tag) > 4:
            return tag[4:]
    return default


def _model_from(kwargs: Mapping[str, Any]) -> str | None:
    params = kwargs.get("invocation_params") or {}
    for key in ("model", "model_name", "model_id"):
        if isinstance(params.get(key), str):
            return str(params[key])
    return None


class _LedgerHandlerCore:
    """What both handlers do."""

    def __init__(
        self,
        ledger: UsageLedger,
        *,
        scope: Scope | str | None = None,
        default_purpose: str = "answer",
        counter: TokenCounter | None = None,
        measure_prefix: bool = True,
    ) -> None:
        self.ledger = ledger
        self.scope = Scope(scope) if isinstance(scope, str) else scope
        self.default_purpose = default_purpose
        self.counter = counter
        self.measure_prefix = measure_prefix
        self._counters: dict[str, TokenCounter] = {}
        self._count_cache = CountCache()
        self._runs: dict[UUID, _Run] = {}
        self._lock = threading.Lock()

    def _counter_for(self, model: str | None) -> TokenCounter:
        if self.counter is not None:
            return self.counter
        with self._lock:
            if (model or "") not in self._counters:
                self._counters[model or ""] = default_counter(model or None)
            return self._counters[model or ""]

    def _shape(
        self, run: _Run, messages: Sequence[Sequence[BaseMessage]], kwargs: Mapping[str, Any]
    ) -> RequestShape | None:
        """The request's parts, when its cacheable prefix is to be measured."""
        if not self.measure_prefix or not messages:
            return None
        try:
            tools = (kwargs.get("invocation_params") or {}).get("tools")
            return request_shape(
                messages[0],
                self._counter_for(run.model),
                tools=list(tools) if isinstance(tools, list | tuple) else [],
                cache=self._count_cache,
            )
        except Exception as exc:  # measuring must never break the call
            log.warning("ctx-langgraph: could not measure the request's prefix: %s", exc)
            return None

    def _start(
        self,
        run_id: UUID,
        serialized: Mapping[str, Any] | None,
        messages: Sequence[Sequence[BaseMessage]],
        tags: Sequence[str] | None,
        metadata: Mapping[str, Any] | None,
        kwargs: Mapping[str, Any],
    ) -> Flow[None]:
        """Register the call and measure its cacheable prefix."""
        scope = scope_of_call(metadata, self.scope)
        if scope is None:
            log.warning(
                "ctx-langgraph: model call %s has no thread_id and the handler no scope; not booked",
                run_id,
            )
            return
        run = _Run(
            scope,
            purpose_of(tags, metadata, self.default_purpose),
            _model_from(kwargs),
            serialized=serialized,
        )
        with self._lock:
            self._runs[run_id] = run
        shape = self._shape(run, messages, kwargs)
        if shape is None:
            return
        try:
            ledger = self.ledger
            previous = yield from call(
                ledger.note_request, ledger.anote_request, scope, shape.digests
            )
            run.cacheable_prefix = cacheable_prefix(previous, shape)
        except Exception as exc:  # the ledger's database down must not fail the call
            log.warning("ctx-langgraph: could not note the request's digests: %s", exc)

    def _chunk(self, run_id: UUID, chunk: Any) -> None:
        run = self._runs.get(run_id)
        if run is not None and isinstance(chunk, ChatGenerationChunk):
            run.streamed = True
            try:
                run.accumulator.add(chunk.message)
            except ContextManagementError as exc:  # a malformed chunk must not break the stream
                log.warning("ctx-langgraph: unreadable usage in a stream chunk: %s", exc)

    def _final_usage(
        self, run: _Run, message: BaseMessage | None
    ) -> tuple[NormalizedUsage, str | None]:
        streamed = run.accumulator.finish() if run.accumulator.usage is not None else None
        usage = NormalizedUsage(complete=False)
        if message is not None:
            try:
                usage = normalize_usage(message)
            except ContextManagementError as exc:
                usage = NormalizedUsage(complete=False, raw={"error": str(exc)})
        if streamed is not None and streamed.known:
            # the folded stream knows cumulative usage; the aggregated message may have summed it
            usage = replace(streamed, complete=True).merged_over(usage)
        if usage.model is None:
            usage = replace(usage, model=run.model)
        return usage, None if message is None else message.id

    def _booking(
        self, run_id: UUID, response: LLMResult | None, error: BaseException | None
    ) -> tuple[Any, ...] | None:
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            return None
        message = None
        if response is not None and response.generations and response.generations[0]:
            generation = response.generations[0][0]
            if isinstance(generation, ChatGeneration):
                message = generation.message
        usage, message_id = self._final_usage(run, message)
        if error is not None:
            usage = replace(usage, complete=False)
        elif not usage.known:  # say why (once), where the ledger can only book it unknown
            warn_unknown_usage(run.serialized, streamed=run.streamed)
        key = call_key_for(usage, message_id=message_id, attempt_id=str(run_id))
        status = usage.status if error is None else ("partial" if usage.known else "unknown")
        return key, usage, run.scope, run.purpose, status, run.cacheable_prefix

    def _book(self, booking: tuple[Any, ...] | None) -> BookedDelta | None:
        if booking is None:
            return None
        args, kwargs = recorded(booking)
        return self.ledger.record(*args, **kwargs)

    async def _abook(self, booking: tuple[Any, ...] | None) -> BookedDelta | None:
        if booking is None:
            return None
        args, kwargs = recorded(booking)
        return await self.ledger.arecord(*args, **kwargs)


def recorded(booking: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A handler's booking (key, usage, scope, purpose, status, cacheable prefix) as the
    arguments of ``UsageLedger.record``."""
    key, usage, scope, purpose, status, prefix = booking
    options = {"scope": scope, "purpose": purpose, "status": status}
    return (key, usage), {**options, "version": FINAL_VERSION, "cacheable_prefix": prefix}


class LedgerCallbackHandler(_LedgerHandlerCore, BaseCallbackHandler):
    """Books every chat-model call of a run (sync; LangChain runs it in a thread for async runs).

    Args:
        ledger: where the calls are booked.
        scope: the thread of calls whose run metadata has no ``thread_id``.
        default_purpose: the purpose of a call with no ``ctx_purpose`` metadata or tag.
        counter: counts the request's parts for its ``cacheable_prefix`` (default: by model).
        measure_prefix: measure each call's ``cacheable_prefix`` against the thread's previous
            request.

    Examples:
        .. code-block:: python

            handler = LedgerCallbackHandler(UsageLedger(store))
            graph.invoke(inputs, {"configurable": {"thread_id": "t1"}, "callbacks": [handler]})
            summarizer.invoke(prompt, {"tags": ["ctx:summary"], "callbacks": [handler]})
    """

    raise_error = False

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        run(self._start(run_id, serialized, messages, tags, metadata, kwargs))

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self._chunk(run_id, chunk)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self._book(self._booking(run_id, response, None))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._book(self._booking(run_id, None, error))


class AsyncLedgerCallbackHandler(_LedgerHandlerCore, AsyncCallbackHandler):
    """Async twin of :class:`LedgerCallbackHandler` (books with the ledger's async methods)."""

    raise_error = False

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await arun(self._start(run_id, serialized, messages, tags, metadata, kwargs))

    async def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self._chunk(run_id, chunk)

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        await self._abook(self._booking(run_id, response, None))

    async def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        await self._abook(self._booking(run_id, None, error))
