"""The segment index, built as history grows: one summary per closed range of covered history
(full, or ended by a pause), searched by the history lookup; a failed build is retried later."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.format import SummaryDocument
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.compaction.summarize import Attempts, SummaryPlan, write_summary
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.errors import ContextManagementError
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import CoverageSnapshot, HistoryEvent
from ctx_langgraph.state import SegmentReport

__all__ = ["EMPTY_RANGE", "SegmentBuilder", "segment_ranges"]

log = logging.getLogger(__name__)

EMPTY_RANGE: Final = "No visible events in this range (deleted or hidden)."


def segment_ranges(
    events: Sequence[HistoryEvent], *, size: int, gap_s: float | None, min_events: int
) -> list[tuple[int, int]]:
    """The closed ranges of ``events`` as (first seq, last seq): a range closes at ``size``
    events, or at a pause over ``gap_s`` once it holds ``min_events``; the last stays open.

    Examples:
        >>> import datetime as dt
        >>> from ctx_langgraph.history.types import HistoryEvent
        >>> day = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
        >>> def ev(seq, hours):
        ...     return HistoryEvent(seq, f"e{seq}", "main", "human", None, {}, "x", (), (), 1,
        ...                         True, day + dt.timedelta(hours=hours))
        >>> events = [ev(n, n / 10) for n in range(1, 8)] + [ev(n, 30 + n / 10) for n in range(8, 12)]
        >>> segment_ranges(events, size=5, gap_s=6 * 3600, min_events=2)
        [(1, 5), (6, 7)]
        >>> segment_ranges(events[:4], size=5, gap_s=None, min_events=2)
        []
    """
    ranges: list[tuple[int, int]] = []
    current: list[HistoryEvent] = []
    for event in events:
        if current and len(current) >= min_events and gap_s is not None:
            pause = (event.created_at - current[-1].created_at).total_seconds()
            if pause > gap_s:
                ranges.append((current[0].seq, current[-1].seq))
                current = []
        current.append(event)
        if len(current) >= size:
            ranges.append((current[0].seq, current[-1].seq))
            current = []
    return ranges


@dataclass(frozen=True)
class SegmentBuilder:
    """Builds the pending segments of a branch, at most ``per_run`` per call."""

    store: HistoryStore
    summarizer: Summarizer
    fallback: Summarizer
    counter: TokenCounter
    size: int
    gap_s: float | None
    cap: int
    attempts: int = 2
    timeout_s: float = 120.0
    per_run: int = 2

    @property
    def min_events(self) -> int:
        return max(2, self.size // 10)

    def pending(self, scope: Scope, through_seq: int) -> Flow[list[tuple[int, int]]]:
        """The invalid segments' ranges, then the closed ranges after the last segment."""
        known = yield from call(
            self.store.segments, self.store.asegments, scope, statuses=("active", "invalid")
        )
        invalid = [(s.first_seq, s.last_seq) for s in known if s.status == "invalid"]
        start = max((s.last_seq for s in known), default=0) + 1
        if through_seq < start:
            return invalid
        events = yield from call(
            self.store.read_events,
            self.store.aread_events,
            scope,
            from_seq=start,
            to_seq=through_seq,
        )
        fresh = segment_ranges(events, size=self.size, gap_s=self.gap_s, min_events=self.min_events)
        return invalid + fresh

    def flow(self, scope: Scope, through_seq: int) -> Flow[SegmentReport]:
        """Build up to ``per_run`` pending segments; the report of what happened."""
        report: SegmentReport = {"built": 0, "failed": 0, "pending": 0}
        try:
            ranges = yield from self.pending(scope, through_seq)
        except ContextManagementError as exc:
            log.warning("ctx-langgraph: the segment index could not be read: %s", exc)
            report["error"] = str(exc)[:300]
            return report
        report["pending"] = max(0, len(ranges) - self.per_run)
        for first, last in ranges[: self.per_run]:
            built = yield from self._one(scope, first, last, report)
            report["built" if built else "failed"] += 1
        return report

    def _one(self, scope: Scope, first: int, last: int, report: SegmentReport) -> Flow[bool]:
        try:
            snapshot = yield from call(
                self.store.segment_snapshot, self.store.asegment_snapshot, scope, first, last
            )
            text, facts = EMPTY_RANGE, []
            if snapshot.events:
                written = yield from self._summary(snapshot)
                if written is None:
                    report["error"] = f"the summarizer failed on seqs {first}-{last}"
                    return False
                document = SummaryDocument.parse(written).with_event_ids(
                    {event.seq: event.event_id for event in snapshot.events}
                )
                text = written
                facts = [f for f in document.key_facts if first <= f.source_seq <= last]
            yield from call(
                self.store.put_segment,
                self.store.aput_segment,
                snapshot,
                summary_text=text,
                key_facts=facts,
                summarizer_id=self.summarizer.id,
                summary_tokens=self.counter.count_text(text),
                metadata={"events": len(snapshot.events)},
            )
        except ContextManagementError as exc:
            log.warning("ctx-langgraph: segment %d-%d not built: %s", first, last, exc)
            report["error"] = str(exc)[:300]
            return False
        return True

    def _summary(self, snapshot: CoverageSnapshot) -> Flow[str | None]:
        plan = SummaryPlan(
            summarizer=self.summarizer,
            fallback=self.fallback,
            attempts=self.attempts,
            fallback_s=self.timeout_s,
            cap=self.cap,
            counter=self.counter,
            backing_off=False,
            must_fit=False,  # a segment can wait: no fallback, the range stays pending
            estimate=0,
            usable=0,
        )
        run = Attempts({}, time.monotonic() + self.timeout_s)
        written = yield from write_summary(plan, None, snapshot, run, _no_backoff)
        return written.text


def _no_backoff() -> Any:
    return None
