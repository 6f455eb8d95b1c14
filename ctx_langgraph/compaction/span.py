"""The first steps of ``ctx_compact``: read what the state asks for and find the span to cover
(the active summary's cursor + 1 through the event before the cut; docs/design.md §6)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from ctx_langgraph.budget.counters import CountCache, TokenCounter
from ctx_langgraph.compaction.cut import CutPoint, choose_cut, first_coverable
from ctx_langgraph.compaction.report import not_recorded, nothing_to_cover
from ctx_langgraph.config import ResolvedBudget
from ctx_langgraph.core.compact_request import read_request
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope, scope_from_config
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import CompactionCheckpoint, HistoryEvent
from ctx_langgraph.state import (
    BudgetReport,
    CompactionReport,
    CompactRequest,
    FlatContext,
    ServerCompaction,
    unpack,
)
from ctx_langgraph.view.markers import is_summary

__all__ = [
    "CompactionPass",
    "Span",
    "choose_span_cut",
    "locate_span",
    "read_turn",
    "reconcile_with",
]


@dataclass(frozen=True)
class CompactionPass:
    """What the state asks of one compaction."""

    messages: Sequence[BaseMessage]
    context: FlatContext
    scope: Scope
    epoch: int
    estimate: int
    """The budget's estimate of the request (0: none)."""
    must_fit: bool
    """The request is over the usable window."""
    backing_off: bool
    server: ServerCompaction | None
    request: CompactRequest | None = None
    request_error: str | None = None
    """Why ``context["compact"]`` cannot be served."""

    def rounds_before(self, at_message_id: str | None) -> int:
        """The rounds this request ran before: the last compaction's count when it was for the
        same view (up to the same last message), else none."""
        last = self.context.get("compaction") or {}
        rounds = last.get("rounds")
        if last.get("at_message_id") != at_message_id or not isinstance(rounds, int):
            return 0
        return rounds

    def report(self) -> CompactionReport:
        """Where this attempt happened, and the request it serves."""
        at_message_id = self.messages[-1].id if self.messages else None
        report: CompactionReport = {
            "epoch": self.epoch,
            "at_message_id": at_message_id,
            "rounds": self.rounds_before(at_message_id) + 1,
            "estimate_before": self.estimate or None,
        }
        if self.request is not None:
            report["requested"] = self.request
        if self.request_error is not None:
            report["request_error"] = self.request_error
        return report


@dataclass(frozen=True)
class Span:
    """What the summary covers: through ``through_seq``, keeping ``first_kept_id`` on."""

    through_seq: int
    first_kept_id: str
    kind: str
    """The cut's kind, or ``rebuild``."""
    cut: CutPoint | None


def read_turn(
    state: dict[str, Any], config: RunnableConfig | None, usable: int, *, commit: bool
) -> CompactionPass:
    """The state's messages and context, as this compaction reads them."""
    messages: Sequence[BaseMessage] = state.get("messages") or []
    context = unpack(state.get("context"))
    budget = context.get("budget") or BudgetReport()
    estimate = int(budget.get("total") or 0)
    request, request_error = read_request(context.get("compact")) if commit else (None, None)
    return CompactionPass(
        messages=messages,
        context=context,
        scope=scope_from_config(config, cast("dict[str, Any]", context)),
        epoch=int(context.get("projection_epoch", 0)),
        estimate=estimate,
        must_fit=commit and estimate > usable,
        backing_off=budget.get("summarizer") == "fallback",
        server=context.get("server_compaction"),
        request=request,
        request_error=request_error,
    )


def choose_span_cut(
    turn: CompactionPass,
    budget: ResolvedBudget,
    counter: TokenCounter,
    cache: CountCache,
    *,
    summary_cap: int | None = None,
    keep_recent_tokens: int | None = None,
) -> CutPoint | None:
    """The cut: where the provider compacted, else the one that keeps the recent tokens (with
    ``summary_cap``, at least what fills the target beside the fixed part and the summary)."""
    messages, server = turn.messages, turn.server
    counts = [cache.count(counter, m) for m in messages]
    keep_recent = budget.keep_recent_tokens if keep_recent_tokens is None else keep_recent_tokens
    if turn.must_fit:  # the kept tail alone may be too much: cut deeper
        keep_recent = max(0, keep_recent - (turn.estimate - budget.target))
    elif summary_cap is not None and turn.estimate >= sum(counts):
        # (an estimate below the view's own count is not of this view: keep the setting)
        start = first_coverable(messages)
        old_summary = sum(
            c for m, c in zip(messages[:start], counts, strict=False) if is_summary(m)
        )
        history = sum(
            c for m, c in zip(messages[start:], counts[start:], strict=True) if m.type != "system"
        )
        fixed = turn.estimate - history - old_summary  # system, tools, memory, margin
        keep_recent = max(keep_recent, budget.target - fixed - summary_cap)
    server_at = next(
        (i for i, m in enumerate(messages) if server and m.id == server.get("message_id")),
        None,
    )
    start = first_coverable(messages)
    if server_at is not None and server_at > start:
        return CutPoint(start, server_at, "server", 0, 0)
    return choose_cut(messages, counts, keep_recent_tokens=keep_recent)


def locate_span(
    turn: CompactionPass, cut: CutPoint | None, store: HistoryStore
) -> Flow[Span | dict[str, Any]]:
    """The span in the store's seqs, or the report of why there is none."""
    messages, info = turn.messages, turn.report()
    if cut is None and turn.context.get("rebuild"):
        # a rebuild: cover the store's history before the view, keeping the whole view
        start = first_coverable(messages)
        first = messages[start] if start < len(messages) else None
        found: HistoryEvent | None = None
        if first is not None and first.id:
            found = yield from call(store.get_event, store.aget_event, turn.scope, str(first.id))
        if first is None or found is None or found.seq <= 1:
            return nothing_to_cover(info, rebuild=True)
        return Span(found.seq - 1, str(first.id), "rebuild", None)
    if cut is None:
        return nothing_to_cover(info)
    last_covered = messages[cut.index - 1]
    event: HistoryEvent | None = None
    if last_covered.id:
        event = yield from call(store.get_event, store.aget_event, turn.scope, str(last_covered.id))
    if event is None:
        return not_recorded(info, last_covered.id)
    return Span(event.seq, str(messages[cut.index].id), cut.kind, cut)


def reconcile_with(
    turn: CompactionPass, active: CompactionCheckpoint, store: HistoryStore, span: Span
) -> Flow[CompactionCheckpoint]:
    """``active`` (a summary already covering the span) as this view takes it: when its first
    kept message is not in the view (committed by another run of the branch), the view keeps
    from its first message past ``active``'s coverage, or from ``span``'s cut when ``active``
    covers the whole view."""
    messages = turn.messages
    if any(message.id == active.first_kept_event_id for message in messages):
        return active
    for message in messages[first_coverable(messages) :]:
        if not message.id:
            continue
        event = yield from call(store.get_event, store.aget_event, turn.scope, str(message.id))
        if event is None or event.seq > active.covered_through_seq:
            return replace(active, first_kept_event_id=str(message.id))
    return replace(active, first_kept_event_id=span.first_kept_id)
