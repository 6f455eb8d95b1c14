"""Segment operations: snapshot a history range, store its summary (compare-and-swap on the
range's content), read the index, prune superseded rows. Segments are different ranges, never
versions of one summary; rebuilding a range adds a row of the next ``generation``."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctx_langgraph.errors import CoverageUnavailable, StaleCandidate
from ctx_langgraph.history.args import integer_arg
from ctx_langgraph.history.branches import lock_branch, read_branch
from ctx_langgraph.history.events import invalidate_segments, read_events
from ctx_langgraph.history.rows import SEGMENT_COLS, segment_from_row, stored_optional
from ctx_langgraph.history.summaries import range_hash
from ctx_langgraph.history.types import CoverageSnapshot, KeyFact, Scope, Segment
from ctx_langgraph.storage.codec import json_text, store_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt, marks

__all__ = [
    "SegmentContent",
    "invalidate_segments",
    "list_segments",
    "prune_segments",
    "put_segment",
    "segment_snapshot",
    "segment_values",
]

_SCOPE = "tenant = ? AND thread_id = ? AND branch = ?"


def _scope_params(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant, scope.thread_id, scope.branch)


def segment_snapshot(
    d: Dialect, scope: Scope, first_seq: int, last_seq: int
) -> Op[CoverageSnapshot]:
    """Fix the range a segment will summarize: its visible events, the thread's edit counter
    and the range's hash (``base_checkpoint_id`` is None: a segment has no parent).

    Raises:
        CoverageUnavailable: the thread has no events.
        ValueError: the range is empty or reaches past the branch head.
    """
    first, last = integer_arg("first_seq", first_seq), integer_arg("last_seq", last_seq)
    version_row = yield Stmt(
        "SELECT edit_version FROM ctx_threads WHERE tenant = ? AND thread_id = ?",
        (scope.tenant, scope.thread_id),
        "one",
    )
    found = yield from read_branch(d, scope)
    if found is None or version_row is None:
        raise CoverageUnavailable(scope, through_seq=last)
    if not 1 <= first <= last <= found[0].head_seq:
        raise ValueError(
            f"segment range {first}..{last} is not within {scope}'s seqs 1..{found[0].head_seq}"
        )
    events = yield from read_events(d, scope, first, last, None, False)
    return CoverageSnapshot(
        scope=scope,
        base_checkpoint_id=None,
        base_generation=0,
        first_seq=first,
        covered_through_seq=last,
        events=tuple(events),
        source_revision=int(version_row[0]),
        range_hash=range_hash(events),
    )


@dataclass(frozen=True)
class SegmentContent:
    """What a segment says (the arguments of ``put_segment``)."""

    summary_text: str
    key_facts: tuple[KeyFact, ...] = ()
    summarizer_id: str | None = None
    summary_tokens: int | None = None
    metadata: dict[str, Any] | None = None


def segment_values(d: Dialect, segment: Segment) -> tuple[Any, ...]:
    """A segment's ``ctx_segments`` row (:data:`SEGMENT_COLS`)."""
    return (
        segment.id,
        segment.scope.tenant,
        segment.scope.thread_id,
        segment.scope.branch,
        segment.first_seq,
        segment.last_seq,
        segment.generation,
        segment.source_revision,
        segment.range_hash,
        stored_optional(segment.summary_text),
        json_text([fact.to_json() for fact in segment.key_facts]),
        stored_optional(segment.summarizer_id),
        segment.summary_tokens,
        segment.status,
        stored_optional(segment.error),
        json.dumps(segment.metadata),
        d.ts(segment.created_at),
    )


def put_segment(
    d: Dialect, snap: CoverageSnapshot, content: SegmentContent, now: dt.datetime
) -> Op[Segment]:
    """Store the segment of ``snap``'s range as active, superseding any row of an overlapping
    range, if the range still holds what the snapshot read.

    Raises:
        StaleCandidate: an event of the range was revised, hidden, deleted or added since the
            snapshot (nothing is written: summarize a new snapshot).
        ValueError: a key fact cites a seq outside the range.
    """
    scope, first, last = snap.scope, snap.first_seq, snap.covered_through_seq
    for fact in content.key_facts:
        if not first <= fact.source_seq <= last:
            raise ValueError(
                f"key fact {fact.text!r} cites seq {fact.source_seq}, outside the segment "
                f"{first}..{last}"
            )
    yield from lock_branch(d, scope, now, create=False)  # serialized with edits of the branch
    events = yield from read_events(d, scope, first, last, None, False)
    if range_hash(events) != snap.range_hash:
        raise StaleCandidate(
            scope,
            candidate_id=f"segment {first}-{last}",
            reason=f"an event of seqs {first}..{last} changed since the snapshot",
        )
    row = yield Stmt(
        f"SELECT max(generation) FROM ctx_segments WHERE {_SCOPE} AND first_seq <= ? "
        "AND last_seq >= ?",
        (*_scope_params(scope), last, first),
        "one",
    )
    yield Stmt(
        f"UPDATE ctx_segments SET status = 'superseded' WHERE {_SCOPE} AND first_seq <= ? "
        "AND last_seq >= ? AND status IN ('active', 'invalid')",
        (*_scope_params(scope), last, first),
    )
    segment = Segment(
        id=str(uuid.uuid4()),
        scope=scope,
        first_seq=first,
        last_seq=last,
        generation=int(row[0] or 0) + 1 if row is not None else 1,
        source_revision=snap.source_revision,
        range_hash=snap.range_hash,
        summary_text=content.summary_text,
        key_facts=content.key_facts,
        summarizer_id=content.summarizer_id,
        summary_tokens=content.summary_tokens,
        status="active",
        error=None,
        created_at=now,
        metadata=dict(content.metadata or {}),
    )
    yield Stmt(
        f"INSERT INTO ctx_segments ({SEGMENT_COLS}) VALUES ({marks(17)})",
        segment_values(d, segment),
    )
    return segment


def list_segments(
    d: Dialect, scope: Scope, statuses: Sequence[str] = ("active",)
) -> Op[list[Segment]]:
    """The branch's segments of these statuses, oldest range first."""
    wanted = [store_text(status) for status in statuses]
    if not wanted:
        return []
    rows = yield Stmt(
        f"SELECT {SEGMENT_COLS} FROM ctx_segments WHERE {_SCOPE} "
        f"AND status IN ({marks(len(wanted))}) ORDER BY first_seq, generation",
        (*_scope_params(scope), *wanted),
        "all",
    )
    return [segment_from_row(d, row) for row in rows]


def prune_segments(scope: Scope, keep: int) -> Op[int]:
    """Delete the branch's superseded segments beyond the ``keep`` newest of each range start;
    active and invalid ones (the index, and what awaits a rebuild) stay."""
    rows = yield Stmt(
        f"SELECT id, first_seq FROM ctx_segments WHERE {_SCOPE} AND status = 'superseded' "
        "ORDER BY first_seq, generation DESC",
        _scope_params(scope),
        "all",
    )
    seen: dict[int, int] = {}
    doomed: list[tuple[str]] = []
    for segment_id, first_seq in rows:
        seen[first_seq] = seen.get(first_seq, 0) + 1
        if seen[first_seq] > keep:
            doomed.append((segment_id,))
    if doomed:
        yield Stmt("DELETE FROM ctx_segments WHERE id = ?", many=doomed)
    return len(doomed)
