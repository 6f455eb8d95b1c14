"""The ``ctx_usage`` node: after the model node, record the reply, book its usage and move the
baseline.

The reply is recorded in the history store here (when the node has one), so the last reply of a
turn is in the store, the lookup and an export as soon as the turn ends, not when the next turn's
``ctx_budget`` runs (which records it again idempotently: a duplicate).

The capacity baseline (``context["baseline"]``) is what the next budget estimate starts from:
the measured input tokens of the last request and the id of the last message that was in it.
It moves only for a complete usage report of a request made in the current projection epoch; a
stale response (its request predates a compaction or an edit) is booked but leaves the baseline
alone. A usage payload that cannot be read is booked as ``unknown`` and never stops the graph.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph._flow import arun_flow, run_flow
from ctx_langgraph.core.digest import extend_digest
from ctx_langgraph.core.scope import Scope, scope_from_config
from ctx_langgraph.errors import ContextManagementError, HistoryStoreError
from ctx_langgraph.history.types import AppendResult
from ctx_langgraph.providers import applied_edits
from ctx_langgraph.usage.callbacks import FINAL_VERSION
from ctx_langgraph.usage.ledger import BookedDelta, UsageLedger, call_key_for
from ctx_langgraph.usage.normalize import normalize_usage
from ctx_langgraph.usage.types import NormalizedUsage, UsageStatus

if TYPE_CHECKING:  # (the history store imports this package's ledger)
    from ctx_langgraph.history.base import HistoryStore

__all__ = ["UsageNode", "make_usage_node"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Booking:
    call_key: str
    usage: NormalizedUsage
    scope: Scope
    purpose: str
    status: UsageStatus

    def options(self) -> dict[str, Any]:
        """Keyword arguments of ``UsageLedger.record`` for this booking."""
        return {
            "scope": self.scope,
            "purpose": self.purpose,
            "status": self.status,
            "version": FINAL_VERSION,
        }


@dataclass(frozen=True)
class _RecordReply:
    scope: Scope
    reply: AIMessage


def _usage_flow(
    state: dict[str, Any], config: RunnableConfig | None, purpose: str, record: bool = False
) -> Generator[_Booking | _RecordReply, Any, dict[str, Any]]:
    messages: list[BaseMessage] = state.get("messages") or []
    context: dict[str, Any] = state.get("context") or {}
    if not messages or not isinstance(messages[-1], AIMessage):
        return {}
    reply = messages[-1]
    if context.get("last_usage_message_id") == reply.id:
        return {}  # this reply was booked already (the node re-ran after a resume)
    recorded: dict[str, Any] = {}
    if record and reply.id:
        try:
            results: list[AppendResult] = yield _RecordReply(
                scope_from_config(config, context), reply
            )
            recorded = {"id": reply.id, "seq": results[0].seq, "status": results[0].status}
        except HistoryStoreError as exc:  # the next ctx_budget records it (and says so)
            log.warning("ctx-langgraph: reply %s not recorded yet: %s", reply.id, exc)
            recorded = {"id": reply.id, "error": str(exc)[:300]}
    try:
        usage = normalize_usage(reply)
    except ContextManagementError as exc:
        log.warning("ctx-langgraph: unreadable usage on message %s: %s", reply.id, exc)
        usage = NormalizedUsage(complete=False, raw={"error": str(exc), "message_id": reply.id})
    booked: BookedDelta = yield _Booking(
        call_key_for(usage, message_id=reply.id, attempt_id=reply.id or "unknown"),
        usage,
        scope_from_config(config, context),
        purpose,
        usage.status,
    )
    measured = booked.record.usage  # the ledger's record: exact even if the handler booked first
    epoch = int(context.get("projection_epoch", 0))
    request = context.get("request") or {}
    request_epoch = int(request.get("epoch", epoch))
    update: dict[str, Any] = {}
    if recorded:
        update["recorded_reply"] = recorded
        if (
            "seq" in recorded
            and len(messages) > 1
            and (messages[-2].id == context.get("recorded_through_id"))
        ):
            # the state is recorded through the reply now: ctx_budget starts after it, and an
            # edit of the reply by id is noticed against this checksum
            update["recorded_through_id"] = reply.id
            update["recorded_digest"] = extend_digest(context.get("recorded_digest"), [reply])
    update |= {
        "last_usage_message_id": reply.id,
        "last_usage": {
            "call_key": booked.call_key,
            "status": booked.record.status,
            "input_total": measured.input_total,
            "output": measured.output,
            "booked": booked.reason,
            "stale": request_epoch != epoch,
        },
    }
    edits = applied_edits(reply)
    if edits or context.get("provider_edits"):
        # Anthropic context editing: what the provider cleared from this request (the client
        # keeps the full history; the measured input below is after the edits)
        totals = dict(context.get("provider_edits_total") or {})
        cleared_tokens = sum(int(edit.get("cleared_input_tokens") or 0) for edit in edits)
        cleared_uses = sum(int(edit.get("cleared_tool_uses") or 0) for edit in edits)
        update["provider_edits"] = {
            "message_id": reply.id,
            "applied_edits": edits,
            "cleared_input_tokens": cleared_tokens,
            "cleared_tool_uses": cleared_uses,
        }
        if edits:
            update["provider_edits_total"] = {
                "replies": int(totals.get("replies", 0)) + 1,
                "cleared_input_tokens": int(totals.get("cleared_input_tokens", 0)) + cleared_tokens,
                "cleared_tool_uses": int(totals.get("cleared_tool_uses", 0)) + cleared_uses,
            }
    if (
        request_epoch == epoch
        and booked.record.status == "complete"
        and measured.input_total is not None
    ):
        before = messages[-2].id if len(messages) > 1 else None
        update["baseline"] = {
            "measured_input_tokens": measured.input_total,
            "input_through_message_id": request.get("input_through_message_id", before),
            "projection_epoch": epoch,
            "model": measured.model,
            "response_id": measured.response_id,
            "reply_message_id": reply.id,
        }
    return {"context": update}


@dataclass
class UsageNode:
    """The ``ctx_usage`` node (use :func:`make_usage_node`)."""

    ledger: UsageLedger
    purpose: str = "answer"
    store: HistoryStore | None = None
    """Where the reply is recorded as soon as it arrives (None: the next ``ctx_budget`` does)."""

    def _serve(self, request: _Booking | _RecordReply) -> Any:
        if isinstance(request, _RecordReply):
            assert self.store is not None
            return self.store.append(request.scope, [request.reply])
        return self.ledger.record(request.call_key, request.usage, **request.options())

    async def _aserve(self, request: _Booking | _RecordReply) -> Any:
        if isinstance(request, _RecordReply):
            assert self.store is not None
            return await self.store.aappend(request.scope, [request.reply])
        return await self.ledger.arecord(request.call_key, request.usage, **request.options())

    def _flow(
        self, state: dict[str, Any], config: RunnableConfig | None
    ) -> Generator[_Booking | _RecordReply, Any, dict[str, Any]]:
        return _usage_flow(state, config, self.purpose, record=self.store is not None)

    def invoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return run_flow(self._flow(state, config), self._serve)

    async def ainvoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return await arun_flow(self._flow(state, config), self._aserve)


def make_usage_node(
    ledger: UsageLedger,
    *,
    purpose: str = "answer",
    name: str = "ctx_usage",
    store: HistoryStore | None = None,
) -> Runnable[Any, Any]:
    """The ``ctx_usage`` node, for ``builder.add_node("ctx_usage", make_usage_node(ledger))``.

    Works in sync (``invoke``) and async (``ainvoke``) graphs alike. With ``store`` (the history
    store ``ctx_budget`` records into) the reply is recorded at once, so a turn's last reply is
    in the history when the turn ends.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> from ctx_langgraph.usage import UsageLedger
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> node = make_usage_node(UsageLedger(store))
        >>> reply = AIMessage("hi", id="a1", usage_metadata={"input_tokens": 1200, "output_tokens": 5, "total_tokens": 1205})
        >>> update = node.invoke({"messages": [HumanMessage("hello", id="h1"), reply]},
        ...                      {"configurable": {"thread_id": "t1"}})
        >>> update["context"]["baseline"]["measured_input_tokens"], update["context"]["baseline"]["input_through_message_id"]
        (1200, 'h1')
    """

    node = UsageNode(ledger, purpose, store)
    # LangGraph's own node wrapper: inspects the signature once, not on every call
    return RunnableCallable(node.invoke, node.ainvoke, name=name)
