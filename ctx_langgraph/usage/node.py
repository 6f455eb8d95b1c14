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

The reply's ledger record gets the make-up of the request it answers (its tokens by part,
``context["request"]["makeup"]``, :mod:`ctx_langgraph.makeup`) in the same write; when the
callback handler booked the call first, the make-up fills in its record.
"""

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
    Baseline,
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
        return None  # this reply was booked already (the node re-ran after a resume)
    return reply


def _answered(messages: Sequence[BaseMessage]) -> BaseMessage | None:
    """The last message before the reply that the store records (not a summary, preview or
    stand-in): the message the reply follows on the branch."""
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
    """The reply in the history store at once (the next ``ctx_budget`` records it otherwise), at
    its own time, else the time of the message it answers (else the store's clock); with
    ``booking``, its usage booked in the same transaction.

    A compare-and-swap on the branch's head: the reply follows the message this state
    recorded through. A branch that went on past it with other events (a re-run of a turn the
    store already holds) forks there, and the fork is the thread's branch from now on. When the
    message the reply follows was not recorded (``ctx_budget`` did not run, or failed), the
    reply waits for the next ``ctx_budget``, which records both in order."""
    assert reply.id is not None
    through = context.get("recorded_through_id")
    previous = _answered(messages)
    if through is not None and (previous is None or previous.id != through):
        if booking is not None:
            booking.close()
        return {"id": reply.id, "error": "deferred: the message it follows is not recorded"}, None
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
        if booking is not None:
            booking.close()
        log.warning("ctx-langgraph: reply %s not recorded yet: %s", reply.id, exc)
        return {"id": reply.id, "error": str(exc)[:300]}, None
    first = outcome.results[0]
    recorded: RecordedReply = {"id": reply.id, "seq": first.seq, "status": first.status}
    if outcome.forked_from is not None and outcome.head is not None:
        recorded["branch"] = outcome.head.scope.branch
    return recorded, outcome.value if booking is not None else None


def answer_booker(ledger: UsageLedger) -> Callable[[AIMessage, Scope], tuple[Op[BookedDelta], Any]]:
    """What ``ctx_budget`` books an answer with when no ``ctx_usage`` booked it (the node
    failed, or never ran: the store was down, the process died after the model call, a new
    input came first): the reply's own usage, under the key and version ``ctx_usage`` books it
    with, so whichever books it first, the call is counted once. Returns the booking and the
    database it runs on (``make_budget_node(..., book_late=answer_booker(ledger))``).

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
        usage = reply_usage(reply)
        key = call_key_for(usage, message_id=reply.id, attempt_id=reply.id or "unknown")
        booking = ledger.booking(
            key, usage, scope=scope, purpose="answer", status=usage.status, version=FINAL_VERSION
        )
        return booking, ledger.db

    return book


def _book_held(ledger: UsageLedger, held: HeldAnswer) -> Flow[None]:
    args, kwargs = recorded(held.booking)
    yield from call(ledger.record, ledger.arecord, *args, **kwargs)


def _compaction_usages(reply: AIMessage, key: str) -> list[tuple[str, NormalizedUsage]]:
    """The usage of the server-side compaction a reply reports apart from its own (Anthropic's
    ``usage.iterations``), each under its own call key. A reply carrying Anthropic's
    compaction block without it (streamed: langchain-anthropic drops ``iterations``) books the
    compaction as unknown, so the ledger shows a call it cannot price."""
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
        unknown = NormalizedUsage(provider="anthropic", model=model, complete=False)
        usages.append((f"{key}:compaction:0", replace(unknown, raw={"error": why})))
    return usages


def _recorded(
    messages: Sequence[BaseMessage], context: FlatContext, recorded: RecordedReply
) -> FlatContext:
    """What recording the reply changes: the state is recorded through it now, so
    ``ctx_budget`` starts after it, and an edit of the reply by id is noticed against the
    extended checksum; a fork is the thread's branch."""
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
    """Anthropic context editing: what the provider cleared from this request (the client
    keeps the full history; the measured input is after the edits)."""
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


def _baseline(
    messages: Sequence[BaseMessage], context: FlatContext, booked: BookedDelta
) -> FlatContext:
    """The next estimate's starting point: only a complete usage report of a request made
    in the current projection epoch moves it."""
    measured = booked.record.usage
    epoch = int(context.get("projection_epoch", 0))
    request = context.get("request") or {}
    if (
        int(request.get("epoch", epoch)) != epoch
        or booked.record.status != "complete"
        or measured.input_total is None
    ):
        return {}
    before = messages[-2].id if len(messages) > 1 else None
    baseline: Baseline = {
        "measured_input_tokens": measured.input_total,
        "input_through_message_id": request.get("input_through_message_id", before),
        "projection_epoch": epoch,
        "model": measured.model,
        "response_id": measured.response_id,
        "reply_message_id": messages[-1].id,
    }
    return {"baseline": baseline}


def _answered_makeup(messages: Sequence[BaseMessage], context: FlatContext) -> RequestMakeup | None:
    """The make-up of the request the reply answers: ``context["request"]``'s, when that
    request was built in the current projection epoch, ended with the message the reply
    follows, and is not one the overflow recovery replaced by a compacted retry (the reply
    answers the retry then)."""
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


def _last_usage(reply: AIMessage, context: FlatContext, booked: BookedDelta) -> FlatContext:
    """The booking as the state shows it; ``stale`` when the request predates the epoch."""
    measured = booked.record.usage  # the ledger's record: exact even if the handler booked first
    epoch = int(context.get("projection_epoch", 0))
    request_epoch = int((context.get("request") or {}).get("epoch", epoch))
    last: LastUsage = {
        "call_key": booked.call_key,
        "status": booked.record.status,
        "input_total": measured.input_total,
        "output": measured.output,
        "booked": booked.reason,
        "stale": request_epoch != epoch,
    }
    return {"last_usage_message_id": reply.id, "last_usage": last}


def _embed_after_turn(store: HistoryStore, scope: Scope, ledger: UsageLedger) -> Flow[IndexReport]:
    """Embed the thread's events that await a vector, after the model's call. Never raises:
    what is not embedded stays pending for a later turn, and the report says why."""
    try:
        report = yield from call(store.embed_pending, store.aembed_pending, scope, ledger=ledger)
    except Exception as exc:  # the store failed: the events stay pending
        log.warning("ctx-langgraph: embedding after the turn failed: %s", exc)
        return {"embedded": 0, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return cast("IndexReport", report.as_dict())


def _usage_flow(
    state: dict[str, Any],
    config: RunnableConfig | None,
    ledger: UsageLedger,
    purpose: str,
    store: HistoryStore | None = None,
    timestamp: TimestampSource | None = None,
    embed_inline: bool = True,
    held: HeldUsage | None = None,
) -> Flow[dict[str, Any]]:
    """The ``ctx_usage`` steps: record the reply (and embed what awaits a vector, when the
    store has an index), book its usage, report and move the baseline."""
    messages: Sequence[BaseMessage] = state.get("messages") or []
    context = unpack(state.get("context"))
    reply = _new_reply(messages, context)
    if reply is None:
        return {}
    scope = scope_from_config(config, cast("dict[str, Any]", context))
    update: FlatContext = {}
    taken = held(scope) if held is not None else None
    if taken is not None and taken.message_id != reply.id:  # not this reply's: booked apart
        yield from _book_held(ledger, taken)
        taken = None
    if taken is not None:  # the handler folded this call's usage as it streamed
        key, usage = taken.call_key, taken.usage
    else:
        usage = reply_usage(reply)
        key = call_key_for(usage, message_id=reply.id, attempt_id=reply.id or "unknown")
    booking: dict[str, Any] = {
        "scope": scope,
        "purpose": purpose,
        "status": usage.status,
        "version": FINAL_VERSION,
        "makeup": _answered_makeup(messages, context),
    }
    if taken is not None and booking["makeup"] is not None:  # the prefix ctx_budget measured
        booking["cacheable_prefix"] = booking["makeup"]["prefix"]
    booked: BookedDelta | None = None
    if store is not None and reply.id:
        together = ledger.booking(key, usage, **booking) if ledger.store is store else None
        recorded, booked = yield from _record_reply(
            store, scope, reply, messages, context, timestamp, together
        )
        update |= _recorded(messages, context, recorded)
        if embed_inline and store.index is not None:
            update["index"] = yield from _embed_after_turn(store, scope, ledger)
    if booked is None:
        try:
            booked = yield from call(ledger.record, ledger.arecord, key, usage, **booking)
        except HistoryStoreError as exc:  # booked when ctx_budget records the reply
            log.warning("ctx-langgraph: usage of reply %s not booked yet: %s", reply.id, exc)
            update["last_usage"] = {"call_key": key, "status": "deferred", "error": str(exc)[:300]}
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
    update |= _last_usage(reply, context, booked)
    update |= _provider_edits(reply, context)
    update |= _baseline(messages, context, booked)
    return {"context": update}


@dataclass(frozen=True)
class UsageNode:
    """The ``ctx_usage`` node (use :func:`make_usage_node`)."""

    ledger: UsageLedger
    purpose: str = "answer"
    store: HistoryStore | None = None
    """Where the reply is recorded as soon as it arrives (None: the next ``ctx_budget`` does)."""
    timestamp: TimestampSource | None = None
    """Reads a message's own time (``ContextConfig.timestamp``); None: its ``created_at`` /
    ``timestamp`` keys."""

    embed_in_background: bool = False
    """With a store that has a vector index: embed new events in the background (a thread, or
    a task of the loop) instead of before the node returns (``precompact_at`` sets it)."""
    held: HeldUsage | None = None
    """The answer a :class:`~ctx_langgraph.usage.held.HoldingLedgerHandler` holds for the
    thread (its usage folded from the stream), booked here with the reply in place of the
    reply's own usage."""

    def _flow(self, state: dict[str, Any], config: RunnableConfig) -> Flow[dict[str, Any]]:
        return _usage_flow(
            state,
            config,
            self.ledger,
            self.purpose,
            self.store,
            self.timestamp,
            embed_inline=not self.embed_in_background,
            held=self.held,
        )

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
    """The ``ctx_usage`` node, for ``builder.add_node("ctx_usage", make_usage_node(ledger))``.

    Works in sync (``invoke``) and async (``ainvoke``) graphs alike. With ``store`` (the history
    store ``ctx_budget`` records into) the reply is recorded at once, so a turn's last reply is
    in the history when the turn ends, at the reply's own time (``timestamp``: as
    ``ContextConfig.timestamp`` reads it), else the time of the message it answers. A store
    with a vector index then embeds the events that await a vector (``context["index"]``
    reports it), in the background with ``embed_in_background``.

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
    # LangGraph's own node wrapper: inspects the signature once, not on every call
    return RunnableCallable(node.invoke, node.ainvoke, name=name)
