"""The ``ctx_compact`` node: summarize the oldest uncovered span and commit it atomically.

Protocol (docs/design.md §6): choose the cut, snapshot the span, summarize and validate it
(retrying, with the offline fallback when the request would not fit), store the candidate and
commit it by compare-and-swap, and only then rewrite the state. A failure keeps the old summary
and is recorded as a ``failed`` version; the steps live in span, summarize, commit and report.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph.budget.counters import CountCache, TokenCounter, default_counter
from ctx_langgraph.compaction.commit import (
    ProviderWindow,
    commit_candidate,
    commit_precomputed,
    create_candidate,
    take_snapshot,
)
from ctx_langgraph.compaction.format import SummaryDocument
from ctx_langgraph.compaction.report import (
    failed,
    next_backoff,
    precompacting,
    refused,
    rewritten,
    served,
)
from ctx_langgraph.compaction.segments import SegmentBuilder
from ctx_langgraph.compaction.span import (
    CompactionPass,
    Span,
    choose_span_cut,
    locate_span,
    read_turn,
    reconcile_with,
)
from ctx_langgraph.compaction.summarize import (
    FALLBACK_MIN_S,
    Attempts,
    SummaryPlan,
    Written,
    summarized_events,
    write_summary,
)
from ctx_langgraph.compaction.summarizers import ExtractiveSummarizer, Summarizer
from ctx_langgraph.compaction.trail import ArtifactTrail, merged_trail, with_trail
from ctx_langgraph.config import ContextConfig, ResolvedBudget
from ctx_langgraph.core.background import in_task, in_thread
from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.scope import Scope, scope_from_config
from ctx_langgraph.core.streaming import keep_out_of_message_stream
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import CompactionCheckpoint, CoverageSnapshot
from ctx_langgraph.providers import CompactionBackend, provider_key
from ctx_langgraph.state import SegmentReport, SummarizerBackoff, packed
from ctx_langgraph.storage.required import require_store
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.view.summary import SUMMARY_MESSAGE_ID, summary_message

__all__ = ["SUMMARY_MESSAGE_ID", "CompactNode", "make_compact_node", "summary_message"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactNode:
    """The ``ctx_compact`` node (use :func:`make_compact_node`); configuration only, shared by
    every thread of a compiled graph."""

    store: HistoryStore
    config: ContextConfig = field(default_factory=ContextConfig)
    summarizer: Summarizer = field(default_factory=ExtractiveSummarizer)
    model: Any = None
    counter: TokenCounter | None = None
    cache: CountCache = field(default_factory=CountCache)
    ledger: UsageLedger | None = None
    """Where a provider compaction's usage is booked (purpose ``compaction``)."""
    fallback: Summarizer = field(init=False, default_factory=ExtractiveSummarizer)
    budget: ResolvedBudget = field(init=False)
    cap: int = field(init=False)
    trail_tokens: int = field(init=False)
    provider: str | None = field(init=False)
    backend: CompactionBackend | None = field(init=False)
    window: ProviderWindow = field(init=False)
    segments: SegmentBuilder | None = field(init=False)
    """Builds the segment index after a commit; None: no index."""

    def __post_init__(self) -> None:
        def derive(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        derive("counter", self.counter or default_counter(self.model))
        derive("budget", self.config.resolve(self.model))
        derive("cap", self.config.summary_cap(self.budget.target))
        derive("trail_tokens", self.config.artifact_trail_cap(self.cap))
        derive("provider", provider_key(self.model))
        backend = self.config.compaction_backend
        derive("backend", None if backend == "local" else backend)
        derive("window", ProviderWindow(self.model, self.provider, self.backend, self.ledger))
        size = self.config.segment_events
        builder = SegmentBuilder(
            self.store,
            self.summarizer,
            self.fallback,
            self._counter,
            size or 0,
            self.config.segment_gap_s,
            self.cap,
            attempts=self.config.compaction_attempts,
            timeout_s=self.config.compaction_timeout_s,
        )
        derive("segments", builder if size else None)
        if self.backend is not None and self.backend.provider != self.provider:
            log.warning(
                "ctx-langgraph: compaction_backend %s is for %s, but the model speaks %s: "
                "only the readable summary is used",
                self.backend.id,
                self.backend.provider,
                self.provider,
            )

    @property
    def _counter(self) -> TokenCounter:
        assert self.counter is not None
        return self.counter

    def flow(
        self, state: dict[str, Any], config: RunnableConfig | None, *, commit: bool = True
    ) -> Flow[dict[str, Any]]:
        """The compaction protocol; with ``commit=False`` (the background pre-compaction) it
        stops after storing the candidate and returns ``{"candidate_id": ...}``."""
        turn = read_turn(state, config, self.budget.usable, commit=commit)
        if turn.request_error is not None:
            return refused(turn.report())
        outcome = yield from self._compact(turn, commit)
        if commit and (through := _committed_through(outcome, self.segments)) is not None:
            report: SegmentReport = {"built": 0, "failed": 0, "pending": 0, "background": True}
            if not self._index_in_background:
                report = yield from self._index(turn.scope, through)
            outcome["context"]["compaction"]["segments"] = report
        return outcome if turn.request is None else served(outcome)

    @property
    def _index_in_background(self) -> bool:
        return self.config.precompact_at is not None

    def _index(self, scope: Scope, through: int) -> Flow[SegmentReport]:
        assert self.segments is not None
        return (yield from self.segments.flow(scope, through))

    def _compact(self, turn: CompactionPass, commit: bool) -> Flow[dict[str, Any]]:
        started = time.monotonic()
        request = turn.request
        fills = self.config.tail_fills_target and request is None
        cap = self.cap + self._trail_beside(turn) if fills else None
        keep = request.get("keep_recent_tokens") if request is not None else None
        cut = choose_span_cut(
            turn, self.budget, self._counter, self.cache, summary_cap=cap, keep_recent_tokens=keep
        )
        span = yield from locate_span(turn, cut, self.store)
        if not isinstance(span, Span):
            return span
        deadline = time.monotonic() + self.config.compaction_timeout_s
        attempts = Attempts(turn.report(), deadline, started=started)
        for _round in range(3):  # a conflict or a stale snapshot: start again
            outcome = yield from self._round(turn, span, attempts, commit)
            if outcome is not None:
                return outcome
        return failed(attempts, turn.estimate, self.budget.usable, {})

    def _round(
        self, turn: CompactionPass, span: Span, attempts: Attempts, commit: bool
    ) -> Flow[dict[str, Any] | None]:
        """One try from the store's current state; None when a conflict calls for another."""
        store, scope = self.store, turn.scope
        active = yield from call(store.get_active, store.aget_active, scope)
        if active is not None and active.covered_through_seq >= span.through_seq:
            active = yield from reconcile_with(turn, active, store, span)
            return self._report(turn, active, attempts, "reconciled")
        if commit and turn.request is None:
            early = yield from commit_precomputed(
                store, scope, turn.messages, active, attempts.problems
            )
            if early is not None:
                return self._report(turn, early, attempts, "committed_precomputed")
        snapshot = yield from take_snapshot(store, scope, span.through_seq)
        if isinstance(snapshot, CompactionCheckpoint):  # another worker covered the span
            snapshot = yield from reconcile_with(turn, snapshot, store, span)
            return self._report(turn, snapshot, attempts, "reconciled")
        previous = (
            SummaryDocument.parse(active.summary_text) if active and active.summary_text else None
        )
        # inside the summary's cap the trail takes its room first, the prose the rest
        room = self.trail_tokens
        history = summarized_events(snapshot.events)
        merged = merged_trail(active, history) if room > 0 else ArtifactTrail()
        prose_cap = self.cap
        if self.config.trail_inside and room > 0:
            room = merged.capped(room, self._counter).tokens or 0
            prose_cap -= room
        written = yield from write_summary(
            self._plan(turn, prose_cap), previous, snapshot, attempts, lambda: self._backoff(turn)
        )
        if written.text is None:
            yield from self._record_failure(turn, snapshot, span, attempts, written, commit)
            return failed(attempts, turn.estimate, self.budget.usable, written.backoff)
        provider_state = yield from self.window.state(
            scope, turn.messages, span, turn.server, attempts.info
        )
        trail = merged.capped(room, self._counter, written.text) if room > 0 else ArtifactTrail()
        text = with_trail(written.text, trail)
        outcome = self._outcome(turn, span, attempts, written, commit)
        candidate = yield from create_candidate(
            store,
            snapshot,
            text,
            active,
            span,
            written.summarizer.id,
            self._counter.count_text(text),
            provider_state,
            metadata={**trail.metadata(), **_recorded_request(turn), "compaction": outcome},
        )
        if not commit:
            return {"candidate_id": candidate.id}
        committed = yield from commit_candidate(store, candidate, attempts.problems)
        if committed is None:
            return None
        return (yield from self._committed(turn, span, attempts, committed, written))

    def _committed(
        self,
        turn: CompactionPass,
        span: Span,
        attempts: Attempts,
        committed: CompactionCheckpoint,
        written: Written,
    ) -> Flow[dict[str, Any]]:
        """The report of a commit, after pruning old summary versions."""
        info = attempts.info
        info.update(
            {"attempts": attempts.count, "cut": span.kind, "summarizer": written.summarizer.id}
        )
        if attempts.problems:
            attempts.info["problems"] = attempts.problems[-5:]
        keep = self.config.summary_versions_keep
        if keep is not None:
            attempts.info["pruned_versions"] = yield from call(
                self.store.prune_versions, self.store.aprune_versions, turn.scope, keep=keep
            )
        done = self._report(turn, committed, attempts, "committed")
        done["context"].update(written.backoff)
        return done

    def _outcome(
        self, turn: CompactionPass, span: Span, attempts: Attempts, written: Written, commit: bool
    ) -> dict[str, Any]:
        """``metadata["compaction"]`` of the version this attempt stores: time up to the
        candidate, attempts, fallback, cut, trigger and the budget's estimate before it."""
        duration_ms = round((time.monotonic() - attempts.started) * 1000)
        attempts.info["duration_ms"] = duration_ms
        before = (turn.context.get("budget") or {}).get("input_tokens")
        trigger = "precompact" if not commit else "budget" if turn.request is None else "request"
        return {
            "duration_ms": duration_ms,
            "attempts": attempts.count,
            "fallback": written.summarizer is self.fallback,
            "cut": span.kind,
            "trigger": trigger,
            "estimate_before": before if isinstance(before, int) else None,
        }

    def _record_failure(
        self,
        turn: CompactionPass,
        snapshot: CoverageSnapshot,
        span: Span,
        attempts: Attempts,
        written: Written,
        commit: bool,
    ) -> Flow[None]:
        """Every try failed: a ``failed`` summary version of the span says so in the store (a
        store error here is only logged)."""
        outcome = self._outcome(turn, span, attempts, written, commit)
        error = "\n".join(attempts.problems[-5:]) or "no summarizer attempt was made in time"
        try:
            yield from call(
                self.store.record_failed,
                self.store.arecord_failed,
                snapshot,
                error=error,
                summarizer_id=written.summarizer.id,
                first_kept_event_id=span.first_kept_id,
                metadata={**_recorded_request(turn), "compaction": outcome},
            )
        except Exception as exc:
            log.warning("ctx-langgraph: the failed compaction was not recorded: %s", exc)

    def _trail_beside(self, turn: CompactionPass) -> int:
        """The room a trail beside the summary takes: the trail's tokens as last reported."""
        if self.config.trail_inside or not self.trail_tokens:
            return 0
        reported = turn.context.get("artifacts")
        tokens = reported.get("tokens") if reported else None
        return min(self.trail_tokens, int(tokens or 0))

    def _plan(self, turn: CompactionPass, cap: int) -> SummaryPlan:
        """Who summarizes, within ``cap`` tokens of prose."""
        return SummaryPlan(
            summarizer=self.summarizer,
            fallback=self.fallback,
            attempts=self.config.compaction_attempts,
            fallback_s=max(FALLBACK_MIN_S, self.config.compaction_timeout_s),
            cap=cap,
            counter=self._counter,
            backing_off=turn.backing_off,
            must_fit=turn.must_fit,
            estimate=turn.estimate,
            usable=self.budget.usable,
            instructions=turn.request.get("instructions") if turn.request else None,
            view=turn.messages,
        )

    def _backoff(self, turn: CompactionPass) -> SummarizerBackoff:
        return next_backoff(turn.context, self.config.compaction_backoff_s, self.summarizer.id)

    def _report(
        self,
        turn: CompactionPass,
        checkpoint: CompactionCheckpoint,
        attempts: Attempts,
        status: str,
    ) -> dict[str, Any]:
        return rewritten(
            turn.messages, checkpoint, self.provider, turn.epoch, attempts.info, status
        )

    def _background_index(self, state: dict[str, Any], config: RunnableConfig, outcome: Any) -> Any:
        """The scope and seq a background build of the segment index runs for, if any."""
        if not self._index_in_background or not isinstance(outcome, dict):
            return None
        through = _committed_through(outcome, self.segments)
        if through is None:
            return None
        return scope_from_config(config, state.get("context")), through

    def invoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started = precompacting(state)
        if started is not None:  # the candidate is built after the turn
            precompact = partial(run, self.flow(state, config, commit=False))
            in_thread(precompact, "ctx-precompact", _background_done)
            return packed(started)
        outcome = run(self.flow(state, config))
        if (index := self._background_index(state, config, outcome)) is not None:
            in_thread(lambda: run(self._index(*index)), "ctx-segments", _background_done)
        return keep_out_of_message_stream(packed(outcome), config)

    async def ainvoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started = precompacting(state)
        if started is not None:
            in_task(
                arun(self.flow(state, config, commit=False)), "ctx-precompact", _background_done
            )
            return packed(started)
        outcome = await arun(self.flow(state, config))
        if (job := self._background_index(state, config, outcome)) is not None:
            in_task(arun(self._index(*job)), "ctx-segments", _background_done)
        return keep_out_of_message_stream(packed(outcome), config)


def _recorded_request(turn: CompactionPass) -> dict[str, Any]:
    request = turn.request
    if request is None:
        return {}
    return {
        "requested_by": request.get("requested_by"),
        "instructions": request.get("instructions"),
    }


def _committed_through(outcome: dict[str, Any], segments: SegmentBuilder | None) -> int | None:
    context = outcome.get("context") or {}
    compaction = context.get("compaction") or {}
    if segments is None or compaction.get("status") not in ("committed", "committed_precomputed"):
        return None
    through = context.get("covered_through_seq")
    return int(through) if isinstance(through, int) else None


def _background_done(outcome: Any) -> None:
    log.debug("ctx-langgraph: background summary candidate: %s", outcome)


def make_compact_node(
    store: HistoryStore,
    *,
    config: ContextConfig | None = None,
    summarizer: Summarizer | None = None,
    model: Any = None,
    counter: TokenCounter | None = None,
    ledger: UsageLedger | None = None,
    name: str = "ctx_compact",
) -> Runnable[Any, Any]:
    """The ``ctx_compact`` node, for ``builder.add_node("ctx_compact", make_compact_node(store, ...))``.

    Route ``ctx_budget`` to it with :func:`~ctx_langgraph.budget.make_budget_router`, and back.

    Args:
        store: the history store (the same one ``ctx_budget`` records into).
        config: the same :class:`~ctx_langgraph.config.ContextConfig` as ``ctx_budget``.
        summarizer: an :class:`~ctx_langgraph.compaction.LLMSummarizer` or the offline
            :class:`~ctx_langgraph.compaction.ExtractiveSummarizer` (the default).
        model: the chat model the graph calls (for its window and token counter).
        counter: overrides the counter picked from the model name.
        ledger: where the usage of a provider compaction (``config.compaction_backend``) is
            booked, with purpose ``compaction``.
    """
    require_store(store, where="make_compact_node(store=...)", expected=HistoryStore)
    node = CompactNode(
        store,
        config or ContextConfig(),
        summarizer or ExtractiveSummarizer(),
        model,
        counter,
        ledger=ledger,
    )
    return RunnableCallable(node.invoke, node.ainvoke, name=name)
