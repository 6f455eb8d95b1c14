"""The ``ctx_usage`` node: after the model node, record the reply, book its usage (with the
make-up of the request it answers) and move the capacity baseline, which only a complete usage
report of a request of the current projection epoch moves. An unreadable payload is booked as
``unknown`` and never stops the graph."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph.core.background import in_task, in_thread
from ctx_langgraph.core.digest import extend_digest
from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.scope import Scope, scope_from_config
from ctx_langgraph.core.timestamps import TimestampSource, batch_times
from ctx_langgraph.errors import ContextManagementError, HistoryStoreError
from ctx_langgraph.makeup import makeup_problem
from ctx_langgraph.providers import applied_edits
from ctx_langgraph.state import (
    FlatContext,
    IndexReport,
    LastUsage,
    ProviderEdits,
    ProviderEditTotals,
    RecordedDigest,
    RecordedReply,
    RequestMakeup,
    packed,
    unpack,
)
from ctx_langgraph.storage.statements import Op
from ctx_langgraph.usage.booking import FINAL_VERSION
from ctx_langgraph.usage.callbacks import recorded
from ctx_langgraph.usage.held import HeldAnswer
from ctx_langgraph.usage.ledger import BookedDelta, UsageLedger, call_key_for
from ctx_langgraph.usage.normalize import normalize_usage, reply_usage
from ctx_langgraph.usage.types import NormalizedUsage
from ctx_langgraph.view.markers import is_synthetic
from ctx_langgraph.view.provider_items import ANTHROPIC, compaction_iterations, server_compaction

if TYPE_CHECKING:  # (the history store imports this package's ledger)
    from ctx_langgraph.history.base import HistoryStore

__all__ = ["UsageNode", "answer_booker", "make_usage_node"]

HeldUsage = Callable[[Scope], "HeldAnswer | None"]
"""The answer a callback handler holds for a thread, taken once (None: none held)."""

log = logging.getLogger(__name__)


def _new_reply(messages: Sequence[BaseMessage], context: FlatContext) -> AIMessage | None:
    """The reply to book: the last message, when it is a reply not booked yet."""
    if not messages or not isinstance(messages[-1], AIMessage):
        return None
    reply = messages[-1]
    if context.get("last_usage_message_id") == reply.id:
        return None  # booked already (the node re-ran after a resume)
    return reply


def _answered(messages: Sequence[BaseMessage]) -> BaseMessage | None:
    """The last message before the reply that the store records: the one the reply follows."""
    return next((m for m in reversed(messages[:-1]) if m.id and not is_synthetic(m)), None)


def _record_reply(
    store: HistoryStore,
    scope: Scope,
    reply: AIMessage,
    messages: Sequence[BaseMessage],
    context: FlatContext,
    timestamp: TimestampSource | None,
    booking: Op[BookedDelta] | None = None,
) -> Flow[tuple[RecordedReply, BookedDelta | None]]:
    """Record the reply after the message this state recorded through (forking a branch that
    went on past it), with ``booking`` in the same transaction; when the message it follows is
    not recorded, the next ``ctx_budget`` records both."""
    assert reply.id is not None
    through = context.get("recorded_through_id")
    previous = _answered(messages)
    error = "deferred: the message it follows is not recorded"
    if through is None or (previous is not None and previous.id == through):
        when = batch_times(
            [reply], previous=messages[-2] if len(messages) > 1 else None, source=timestamp
        ).times[0]
        try:
            outcome = yield from call(
                store.append_after,
                store.aappend_after,
                scope,
                [reply],
                after=None if through is None else str(through),
                created_at=when,
                fork=True,
                active=context.get("active_checkpoint_id"),
                then=booking,
            )
        except HistoryStoreError as exc:  # the next ctx_budget records it (and books it)
            log.warning("ctx-langgraph: reply %s not recorded yet: %s", reply.id, exc)
            error = str(exc)[:300]
        else:
            first = outcome.results[0]
            recorded: RecordedReply = {"id": reply.id, "seq": first.seq, "status": first.status}
            if outcome.forked_from is not None and outcome.head is not None:
                recorded["branch"] = outcome.head.scope.branch
            return recorded, outcome.value if booking is not None else None
    if booking is not None:
        booking.close()
    return {"id": reply.id, "error": error}, None


def answer_booker(ledger: UsageLedger) -> Callable[[AIMessage, Scope], tuple[Op[BookedDelta], Any]]:
    """What ``ctx_budget`` books an answer with when no ``ctx_usage`` booked it: the reply's
    usage under the key and version ``ctx_usage`` uses (so it is counted once), and the
    database the booking runs on (``make_budget_node(..., book_late=answer_booker(ledger))``).

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> ledger = UsageLedger(store)
        >>> reply = AIMessage("hi", id="a1", usage_metadata={"input_tokens": 30, "output_tokens": 2, "total_tokens": 32})
        >>> booking, database = answer_booker(ledger)(reply, Scope("t"))
        >>> database is store.db, database.run(booking, write=True).reason
        (True, 'new')
    """

    def book(reply: AIMessage, scope: Scope) -> tuple[Op[BookedDelta], Any]:
        key, usage = _reply_key(reply)
        booking = ledger.booking(
            key, usage, scope=scope, purpose="answer", status=usage.status, version=FINAL_VERSION
        )
        return booking, ledger.db

    return book


def _reply_key(reply: AIMessage) -> tuple[str, NormalizedUsage]:
    usage = reply_usage(reply)
    return call_key_for(usage, message_id=reply.id, attempt_id=reply.id or "unknown"), usage


def _compaction_usages(reply: AIMessage, key: str) -> list[tuple[str, NormalizedUsage]]:
    """The usage of the server-side compaction a reply reports (Anthropic's
    ``usage.iterations``), each under its own key; unknown for a compaction block without it."""
    model = reply.response_metadata.get("model_name")
    model = model if isinstance(model, str) else None
    usages: list[tuple[str, NormalizedUsage]] = []
    for n, entry in enumerate(compaction_iterations(reply)):
        try:
            usage = normalize_usage(entry, provider="anthropic")
        except ContextManagementError as exc:
            usage = NormalizedUsage(provider="anthropic", complete=False, raw={"error": str(exc)})
        usages.append((f"{key}:compaction:{n}", replace(usage, model=model)))
    found = server_compaction(reply)
    if not usages and found is not None and found[0] == ANTHROPIC:
        why = "the reply carries a compaction block but reports no usage.iterations (streamed)"
        unknown = NormalizedUsage(
            provider="anthropic", model=model, complete=False, raw={"error": why}
        )
        usages.append((f"{key}:compaction:0", unknown))
    return usages


def _recorded(
    messages: Sequence[BaseMessage], context: FlatContext, recorded: RecordedReply
) -> FlatContext:
    """What recording the reply changes: recorded through it (and the digest extended), a
    fork as the thread's branch."""
    update: FlatContext = {"recorded_reply": recorded}
    if "branch" in recorded:
        update["branch"] = recorded["branch"]
    previous = _answered(messages)
    if (
        "seq" in recorded
        and previous is not None
        and previous.id == context.get("recorded_through_id")
    ):
        reply = messages[-1]
        update["recorded_through_id"] = reply.id
        saved = cast("dict[str, Any] | None", context.get("recorded_digest"))
        update["recorded_digest"] = cast(RecordedDigest, extend_digest(saved, [reply]))
    return update


def _provider_edits(reply: AIMessage, context: FlatContext) -> FlatContext:
    """What Anthropic's context editing cleared from this request, and the running totals."""
    edits = applied_edits(reply)
    if not edits and not context.get("provider_edits"):
        return {}
    cleared_tokens = sum(int(edit.get("cleared_input_tokens") or 0) for edit in edits)
    cleared_uses = sum(int(edit.get("cleared_tool_uses") or 0) for edit in edits)
    this: ProviderEdits = {
        "message_id": reply.id,
        "applied_edits": edits,
        "cleared_input_tokens": cleared_tokens,
        "cleared_tool_uses": cleared_uses,
    }
    if not edits:
        return {"provider_edits": this}
    totals: Mapping[str, Any] = context.get("provider_edits_total") or {}
    running: ProviderEditTotals = {
        "replies": int(totals.get("replies", 0)) + 1,
        "cleared_input_tokens": int(totals.get("cleared_input_tokens", 0)) + cleared_tokens,
        "cleared_tool_uses": int(totals.get("cleared_tool_uses", 0)) + cleared_uses,
    }
    return {"provider_edits": this, "provider_edits_total": running}


def _answered_makeup(messages: Sequence[BaseMessage], context: FlatContext) -> RequestMakeup | None:
    """``context["request"]``'s make-up when the reply answers that request: built in this
    epoch, ending with the message the reply follows, not replaced by an overflow retry."""
    request = context.get("request") or {}
    makeup = request.get("makeup")
    if makeup is None:
        return None
    epoch = int(context.get("projection_epoch", 0))
    before = messages[-2].id if len(messages) > 1 else None
    if int(request.get("epoch", -1)) != epoch or request.get("input_through_message_id") != before:
        return None
    overflow = context.get("overflow") or {}
    retried = overflow.get("retry_epoch")
    if overflow.get("at_message_id") == before and retried is not None and retried != epoch:
        return None
    problem = makeup_problem(makeup)
    if problem is not None:
        log.warning("ctx-langgraph: the request's make-up is not booked: %s", problem)
        return None
    return makeup


def _measured(
    messages: Sequence[BaseMessage], context: FlatContext, booked: BookedDelta
) -> FlatContext:
    """The booking as the state shows it (``stale`` when the request predates the epoch), and
    the next estimate's baseline, moved only by a complete report of this epoch's request."""
    measured = booked.record.usage
    epoch = int(context.get("projection_epoch", 0))
    request = context.get("request") or {}
    stale = int(request.get("epoch", epoch)) != epoch
    last: LastUsage = {
        "call_key": booked.call_key,
        "status": booked.record.status,
        "input_total": measured.input_total,
        "output": measured.output,
        "booked": booked.reason,
        "stale": stale,
    }
    update: FlatContext = {"last_usage_message_id": messages[-1].id, "last_usage": last}
    if stale or booked.record.status != "complete" or measured.input_total is None:
        return update
    before = messages[-2].id if len(messages) > 1 else None
    update["baseline"] = {
        "measured_input_tokens": measured.input_total,
        "input_through_message_id": request.get("input_through_message_id", before),
        "projection_epoch": epoch,
        "model": measured.model,
        "response_id": measured.response_id,
        "reply_message_id": messages[-1].id,
    }
    return update


def _embed_after_turn(store: HistoryStore, scope: Scope, ledger: UsageLedger) -> Flow[IndexReport]:
    """Embed the thread's events that await a vector; never raises (they stay pending)."""
    try:
        report = yield from call(store.embed_pending, store.aembed_pending, scope, ledger=ledger)
    except Exception as exc:  # the store failed: the events stay pending
        log.warning("ctx-langgraph: embedding after the turn failed: %s", exc)
        return {"embedded": 0, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return cast("IndexReport", report.as_dict())


@dataclass(frozen=True)
class UsageNode:
    """The ``ctx_usage`` node (use :func:`make_usage_node`)."""

    ledger: UsageLedger
    purpose: str = "answer"
    store: HistoryStore | None = None
    """Where the reply is recorded as soon as it arrives (None: the next ``ctx_budget`` does)."""
    timestamp: TimestampSource | None = None
    """Reads a message's own time (``ContextConfig.timestamp``)."""
    embed_in_background: bool = False
    """Embed new events in the background instead of before the node returns."""
    held: HeldUsage | None = None
    """The answer a :class:`~ctx_langgraph.usage.held.HoldingLedgerHandler` holds for the
    thread, booked here in place of the reply's own usage."""

    def _flow(self, state: dict[str, Any], config: RunnableConfig) -> Flow[dict[str, Any]]:
        """Record the reply (and embed), book its usage, move the baseline."""
        ledger = self.ledger
        messages: Sequence[BaseMessage] = state.get("messages") or []
        context = unpack(state.get("context"))
        reply = _new_reply(messages, context)
        if reply is None:
            return {}
        scope = scope_from_config(config, cast("dict[str, Any]", context))
        update: FlatContext = {}
        taken = self.held(scope) if self.held is not None else None
        if taken is not None and taken.message_id != reply.id:  # not this reply's: booked apart
            args, kwargs = recorded(taken.booking)
            yield from call(ledger.record, ledger.arecord, *args, **kwargs)
            taken = None
        key, usage = (taken.call_key, taken.usage) if taken is not None else _reply_key(reply)
        booking: dict[str, Any] = {
            "scope": scope,
            "purpose": self.purpose,
            "status": usage.status,
            "version": FINAL_VERSION,
            "makeup": _answered_makeup(messages, context),
        }
        if taken is not None and booking["makeup"] is not None:  # the prefix ctx_budget measured
            booking["cacheable_prefix"] = booking["makeup"]["prefix"]
        booked: BookedDelta | None = None
        if (store := self.store) is not None and reply.id:
            together = ledger.booking(key, usage, **booking) if ledger.store is store else None
            reply_row, booked = yield from _record_reply(
                store, scope, reply, messages, context, self.timestamp, together
            )
            update |= _recorded(messages, context, reply_row)
            if not self.embed_in_background and store.index is not None:
                update["index"] = yield from _embed_after_turn(store, scope, ledger)
        if booked is None:
            try:
                booked = yield from call(ledger.record, ledger.arecord, key, usage, **booking)
            except HistoryStoreError as exc:  # booked when ctx_budget records the reply
                log.warning("ctx-langgraph: usage of reply %s not booked yet: %s", reply.id, exc)
                update["last_usage"] = {
                    "call_key": key,
                    "status": "deferred",
                    "error": str(exc)[:300],
                }
                return {"context": update}
        for compaction_key, compaction in _compaction_usages(reply, key):
            yield from call(
                ledger.record,
                ledger.arecord,
                compaction_key,
                compaction,
                scope=scope,
                purpose="compaction",
                status=compaction.status,
                version=FINAL_VERSION,
            )
        update |= _measured(messages, context, booked)
        update |= _provider_edits(reply, context)
        return {"context": update}

    def _background_scope(self, state: dict[str, Any], config: RunnableConfig) -> Scope | None:
        """The thread to embed in the background after this turn (None: nothing to do)."""
        if not self.embed_in_background or self.store is None or self.store.index is None:
            return None
        context = cast("dict[str, Any]", unpack(state.get("context")))
        try:
            return scope_from_config(config, context)
        except ContextManagementError:
            return None

    def invoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        update = run(self._flow(state, config))
        if update and (scope := self._background_scope(state, config)) is not None:
            store, ledger = self.store, self.ledger
            assert store is not None
            in_thread(lambda: store.embed_pending(scope, ledger=ledger), "ctx-embed")
            update["context"]["index"] = {"background": True}
        return packed(update)

    async def ainvoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        update = await arun(self._flow(state, config))
        if update and (scope := self._background_scope(state, config)) is not None:
            assert self.store is not None
            in_task(self.store.aembed_pending(scope, ledger=self.ledger), "ctx-embed")
            update["context"]["index"] = {"background": True}
        return packed(update)


def make_usage_node(
    ledger: UsageLedger,
    *,
    purpose: str = "answer",
    name: str = "ctx_usage",
    store: HistoryStore | None = None,
    timestamp: TimestampSource | None = None,
    embed_in_background: bool = False,
    held: HeldUsage | None = None,
) -> Runnable[Any, Any]:
    """The ``ctx_usage`` node, for ``builder.add_node("ctx_usage", make_usage_node(ledger))``,
    sync and async. With ``store`` (the one ``ctx_budget`` records into) the reply is recorded
    at once, at its own time (read by ``timestamp``), and a store with a vector index embeds
    what awaits a vector (``context["index"]``), in the background with ``embed_in_background``.

    Examples:
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

    node = UsageNode(ledger, purpose, store, timestamp, embed_in_background, held)
    return RunnableCallable(node.invoke, node.ainvoke, name=name)
