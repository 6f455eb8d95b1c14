"""The summarize step of ``ctx_compact``: the configured summarizer's bounded, validated tries,
then the offline fallback when they fail and the request would not fit (docs/design.md §6)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.format import SummaryDocument, validate_summary
from ctx_langgraph.compaction.protocol import Summarizer, SummaryRequest
from ctx_langgraph.core.call_scope import calls_in
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.streaming import not_streamed
from ctx_langgraph.history.types import CoverageSnapshot, HistoryEvent, Scope
from ctx_langgraph.state import CompactionReport, FlatContext, SummarizerBackoff

__all__ = [
    "Attempts",
    "SummaryPlan",
    "TimedSummarizer",
    "Written",
    "summarize_span",
    "summarized_events",
    "write_summary",
]

log = logging.getLogger(__name__)

FALLBACK_MIN_S = 30.0
"""The least time the offline fallback summarizer gets."""


@dataclass
class Attempts:
    """The bookkeeping of one compaction run: tries made, problems met, the report so far."""

    info: CompactionReport
    deadline: float
    problems: list[str] = field(default_factory=list)
    count: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Written:
    """The valid text (None: every try failed) and the summarizer that wrote it."""

    text: str | None
    summarizer: Summarizer
    backoff: FlatContext
    """``summarizer_backoff`` when the configured summarizer was tried (None: it succeeded)."""


@dataclass(frozen=True)
class TimedSummarizer:
    """A summarizer call bounded by ``timeout_s``, not streamed, booked under ``scope``."""

    summarizer: Summarizer
    timeout_s: float
    scope: Scope | None = None

    @contextlib.contextmanager
    def _context(self) -> Iterator[None]:
        with not_streamed(), calls_in(self.scope) if self.scope else contextlib.nullcontext():
            yield

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(f"summarizer took longer than {self.timeout_s:.1f}s")

    def summarize(self, request: SummaryRequest) -> str:
        # (not a `with` block: its exit would wait for a summarizer that hangs)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        try:
            with self._context():  # the run's context (config, callbacks) goes along
                run = contextvars.copy_context().run
            future = pool.submit(run, self.summarizer.summarize, request)
            try:
                return future.result(timeout=self.timeout_s)
            except concurrent.futures.TimeoutError:
                raise self._timed_out() from None
        finally:
            pool.shutdown(wait=False)

    async def asummarize(self, request: SummaryRequest) -> str:
        try:
            with self._context():  # (the task wait_for makes copies this context)
                pending = asyncio.ensure_future(self.summarizer.asummarize(request))
            return await asyncio.wait_for(pending, self.timeout_s)
        except asyncio.TimeoutError:
            raise self._timed_out() from None


def summarized_events(events: Sequence[HistoryEvent]) -> list[HistoryEvent]:
    """The events of a span that a summary folds in: no system messages (the view keeps them)."""
    return [event for event in events if event.role != "system"]


def _batches(
    events: Sequence[HistoryEvent], tokens: Sequence[int], budget: int
) -> list[list[HistoryEvent]]:
    """Ordered batches of events whose tokens fit ``budget`` each."""
    batches: list[list[HistoryEvent]] = [[]]
    used = 0
    for event, count in zip(events, tokens, strict=True):
        if batches[-1] and used + count > budget:
            batches.append([])
            used = 0
        batches[-1].append(event)
        used += count
    return [batch for batch in batches if batch]


def _span_batches(
    summarizer: Summarizer,
    previous: SummaryDocument | None,
    events: list[HistoryEvent],
    cap: int,
    counter: TokenCounter,
) -> list[list[HistoryEvent]]:
    window = getattr(summarizer, "window_tokens", None)
    if not window:
        return [events]
    room = window - cap - (counter.count_text(previous.render()) if previous else 0)
    room = max(room, window // 4)
    return _batches(events, [counter.count_text(e.text) + 8 for e in events], room) or [events]


def summarize_span(
    summarizer: Summarizer,
    previous: SummaryDocument | None,
    snapshot: CoverageSnapshot,
    cap: int,
    counter: TokenCounter,
    deadline: float,
    instructions: str | None = None,
    view: Sequence[BaseMessage] | None = None,
) -> Flow[str]:
    """Previous summary + the whole span, in ordered batches beyond the summarizer's window (the
    view goes only with a span summarized in one call)."""
    events = summarized_events(snapshot.events)
    batches = _span_batches(summarizer, previous, events, cap, counter)
    text = ""
    for batch in batches:
        request = SummaryRequest(
            previous=previous,
            events=batch,
            covered_through_seq=batch[-1].seq if batch else snapshot.covered_through_seq,
            cap_tokens=cap,
            counter=counter,
            instructions=instructions,
            view=view if len(batches) == 1 else None,
        )
        timed = TimedSummarizer(summarizer, max(0.001, deadline - time.monotonic()), snapshot.scope)
        text = yield from call(timed.summarize, timed.asummarize, request)
        if batch is not batches[-1]:
            previous = SummaryDocument.parse(text)
    return text


def _attempt(
    summarizer: Summarizer,
    plan: SummaryPlan,
    previous: SummaryDocument | None,
    snapshot: CoverageSnapshot,
    deadline: float,
    problems: list[str],
    view: Sequence[BaseMessage] | None = None,
) -> Flow[str | None]:
    """One summarizer attempt: its valid text, or None with the problem noted."""
    number = len(problems) + 1
    try:
        text: object = yield from summarize_span(
            summarizer,
            previous,
            snapshot,
            plan.cap,
            plan.counter,
            deadline,
            plan.instructions,
            view,
        )
    except Exception as exc:
        problems.append(f"attempt {number} ({summarizer.id}): {type(exc).__name__}: {exc}"[:300])
        return None
    if not isinstance(text, str):
        problems.append(
            f"attempt {number} ({summarizer.id}): returned {type(text).__name__}, not text"
        )
        return None
    found = validate_summary(
        text,
        cap_tokens=plan.cap,
        counter=plan.counter,
        covered_through_seq=snapshot.covered_through_seq,
    )
    if found:
        problems.append(f"attempt {number} ({summarizer.id}): " + "; ".join(found)[:300])
        return None
    return text


@dataclass(frozen=True)
class SummaryPlan:
    """Who summarizes and within what: the configured summarizer, its tries and bounds, the
    offline fallback, and whether it is called for (``must_fit``: over the usable window)."""

    summarizer: Summarizer
    fallback: Summarizer
    attempts: int
    fallback_s: float
    cap: int
    counter: TokenCounter
    backing_off: bool
    must_fit: bool
    estimate: int
    usable: int
    instructions: str | None = None
    view: Sequence[BaseMessage] | None = None


def write_summary(
    plan: SummaryPlan,
    previous: SummaryDocument | None,
    snapshot: CoverageSnapshot,
    run: Attempts,
    backoff: Callable[[], SummarizerBackoff],
) -> Flow[Written]:
    """The configured summarizer's tries, then the fallback's when it failed and must
    (``backoff``: the next backoff when all tries failed)."""
    text = None
    written_backoff: FlatContext = {}
    if not plan.backing_off:
        while run.count < plan.attempts and time.monotonic() < run.deadline:
            run.count += 1
            text = yield from _attempt(
                plan.summarizer, plan, previous, snapshot, run.deadline, run.problems, plan.view
            )
            if text is not None:
                break
        written_backoff = {"summarizer_backoff": None if text is not None else backoff()}
    if text is not None or not (plan.must_fit or plan.backing_off):
        return Written(text, plan.summarizer, written_backoff)
    used = plan.fallback
    run.info["fallback"] = used.id
    run.problems.append(
        f"{plan.summarizer.id} {'is backing off' if plan.backing_off else 'failed'} and the "
        f"request would not fit ({plan.estimate} tokens > {plan.usable} usable): the {used.id} "
        "summarizer covers the span"
    )
    log.warning("ctx-langgraph: the summarizer %s", run.problems[-1])
    run.count += 1
    deadline = time.monotonic() + plan.fallback_s
    text = yield from _attempt(used, plan, previous, snapshot, deadline, run.problems)
    return Written(text, used, written_backoff)
