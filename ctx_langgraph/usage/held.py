"""The agent's answer booked with its reply, in one write: a :class:`HoldingLedgerHandler`
holds the usage of a call made inside :func:`answering` that ends with a reply, and
``ctx_usage`` books it in the transaction that records the reply. Every other call is booked
when it ends, and a held answer no ``ctx_usage`` takes is booked as soon as that is known."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook

from ctx_langgraph.core.scope import Scope
from ctx_langgraph.usage.callbacks import LedgerCallbackHandler
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.usage.types import NormalizedUsage

__all__ = ["HeldAnswer", "HoldingLedgerHandler", "answering", "booked_by"]

_ANSWERING: ContextVar[bool] = ContextVar("ctx_langgraph_answering", default=False)
# every callback manager set up while it holds a handler gets it (a model called without config)
_BOOKED_BY: ContextVar[BaseCallbackHandler | None] = ContextVar(
    "ctx_langgraph_booked_by", default=None
)
register_configure_hook(_BOOKED_BY, inheritable=True)


@contextmanager
def booked_by(handler: BaseCallbackHandler | None) -> Iterator[None]:
    """Every chat-model call made inside is booked by ``handler`` (None: as before)."""
    token = _BOOKED_BY.set(handler) if handler is not None else None
    try:
        yield
    finally:
        if token is not None:
            _BOOKED_BY.reset(token)


@contextmanager
def answering() -> Iterator[None]:
    """The chat-model calls made inside are the agent's answer, held for ``ctx_usage``."""
    token = _ANSWERING.set(True)
    try:
        yield
    finally:
        _ANSWERING.reset(token)


@dataclass(frozen=True)
class HeldAnswer:
    """An answer's booking, held for the ``ctx_usage`` of its thread."""

    message_id: str
    booking: tuple[Any, ...]
    """Key, usage, scope, purpose, status, cacheable prefix."""

    @property
    def call_key(self) -> str:
        return str(self.booking[0])

    @property
    def usage(self) -> NormalizedUsage:
        usage: NormalizedUsage = self.booking[1]
        return usage


def _reply_id(response: LLMResult) -> str | None:
    generations = response.generations[0] if response.generations else []
    generation = generations[0] if generations else None
    return generation.message.id if isinstance(generation, ChatGeneration) else None


class HoldingLedgerHandler(LedgerCallbackHandler):
    """Books every model call when it ends, but holds the agent's answer for ``ctx_usage``.

    Examples:
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> handler = HoldingLedgerHandler(UsageLedger(store))
        >>> handler.take(Scope("t1")) is None  # nothing held for the thread
        True
    """

    max_held = 1024
    """Threads whose answer is held at once; past it the oldest is booked."""

    def __init__(self, ledger: UsageLedger) -> None:
        super().__init__(ledger, measure_prefix=False)
        self._held: OrderedDict[tuple[str, str], HeldAnswer] = OrderedDict()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        booking = self._booking(run_id, response, None)
        message_id = _reply_id(response)
        if (
            booking is None
            or message_id is None
            or not _ANSWERING.get()
            or booking[3] != self.default_purpose
        ):
            self._book(booking)
            return
        thread = booking[2].tenant, booking[2].thread_id
        with self._lock:
            replaced = self._held.pop(thread, None)  # a second call of the same model node
            self._held[thread] = HeldAnswer(message_id, booking)
            evicted = [
                self._held.popitem(last=False)[1]
                for _ in range(max(0, len(self._held) - self.max_held))
            ]
        for held in ([replaced] if replaced is not None else []) + evicted:
            self._book(held.booking)

    def take(self, scope: Scope) -> HeldAnswer | None:
        """The answer held for the scope's thread (once; None: none held)."""
        with self._lock:
            return self._held.pop((scope.tenant, scope.thread_id), None)

    def release(self, scope: Scope) -> None:
        """Book the answer held for the scope's thread now (its node failed after the call)."""
        held = self.take(scope)
        if held is not None:
            self._book(held.booking)

    async def arelease(self, scope: Scope) -> None:
        """Async twin of :meth:`release`."""
        held = self.take(scope)
        if held is not None:
            await self._abook(held.booking)
