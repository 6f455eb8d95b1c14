"""The history store's public summary methods (snapshot, candidates, compare-and-swap commit,
failed marks and failed attempts, the active summary, versions, pruning) and segment-index
methods (snapshot of a range, storing its summary, reading the index), each a thin call of one
operation of :mod:`ctx_langgraph.history.summaries` or :mod:`ctx_langgraph.history.segments`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctx_langgraph.core.effects import Flow
from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import segments as segment_ops
from ctx_langgraph.history import summaries as summary_ops
from ctx_langgraph.history._store import StoreBase, async_twin, flow_method
from ctx_langgraph.history.types import (
    CompactionCheckpoint,
    CoverageSnapshot,
    KeyFact,
    Scope,
    Segment,
)
from ctx_langgraph.storage.statements import Op

__all__ = ["SegmentsAPI", "SummariesAPI"]


def _checkpoint_id(candidate: CompactionCheckpoint | str) -> str:
    return candidate.id if isinstance(candidate, CompactionCheckpoint) else candidate


class SummariesAPI(StoreBase):
    """Compaction checkpoints: build, commit and read summary versions."""

    @flow_method
    def snapshot(self, scope: Scope | str, through_seq: int) -> Flow[CoverageSnapshot]:
        """Fix the span a new summary will cover: from the active summary's cursor + 1 through
        ``through_seq``. Summarize ``snapshot.events`` (plus the active summary), then call
        :meth:`create_candidate` and :meth:`commit_candidate`."""
        return (
            yield from self._op(
                summary_ops.snapshot(self.db.dialect, checked_scope(scope), through_seq)
            )
        )

    asnapshot = async_twin(snapshot)

    def _create_candidate(
        self, snapshot: CoverageSnapshot, **content: Any
    ) -> Op[CompactionCheckpoint]:
        content["key_facts"] = tuple(content.get("key_facts") or ())
        return summary_ops.create_candidate(
            self.db.dialect, snapshot, summary_ops.CandidateContent(**content), self.clock()
        )

    @flow_method
    def create_candidate(
        self,
        snapshot: CoverageSnapshot,
        *,
        summary_text: str | None,
        key_facts: Sequence[KeyFact] = (),
        first_kept_event_id: str | None = None,
        summarizer_id: str | None = None,
        summary_tokens: int | None = None,
        format_version: int = 1,
        provider_state: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Flow[CompactionCheckpoint]:
        """Store a candidate summary built from ``snapshot`` (status ``candidate``, not yet active).

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(10)])
            ...     snap = store.snapshot("t", through_seq=6)
            ...     cand = store.create_candidate(snap, summary_text="Steps 0-5 done.")
            ...     active = store.commit_candidate(cand)
            ...     active.status, active.generation, active.covered_through_seq
            ('active', 1, 6)
        """
        call = self._create_candidate(
            snapshot,
            summary_text=summary_text,
            key_facts=key_facts,
            first_kept_event_id=first_kept_event_id,
            summarizer_id=summarizer_id,
            summary_tokens=summary_tokens,
            format_version=format_version,
            provider_state=provider_state,
            metadata=metadata,
        )
        return (yield from self._op(call, write=True))

    acreate_candidate = async_twin(create_candidate)

    @flow_method
    def commit_candidate(self, candidate: CompactionCheckpoint | str) -> Flow[CompactionCheckpoint]:
        """Make a candidate the active summary, by compare-and-swap on the active generation.

        In one transaction: the branch's active pointer moves to the candidate, the candidate
        becomes ``active`` and the previous one ``superseded``. Committing an already active
        candidate again returns it unchanged.

        Raises:
            CompactionConflict: another candidate was committed since the snapshot (this one is
                marked ``failed``).
            StaleCandidate: an event at or below the covered seq was revised, hidden or deleted
                since the snapshot (this one is marked ``failed``).
        """
        op = summary_ops.commit_candidate(self.db.dialect, _checkpoint_id(candidate), self.clock())
        return (yield from self._op(op, write=True))

    acommit_candidate = async_twin(commit_candidate)

    @flow_method
    def mark_failed(
        self, candidate: CompactionCheckpoint | str, reason: str
    ) -> Flow[CompactionCheckpoint]:
        """Mark a candidate ``failed`` with a reason; the active summary is untouched."""
        op = summary_ops.mark_failed(self.db.dialect, _checkpoint_id(candidate), reason)
        return (yield from self._op(op, write=True))

    amark_failed = async_twin(mark_failed)

    def _record_failed(
        self,
        snapshot: CoverageSnapshot,
        error: str,
        summarizer_id: str | None,
        first_kept_event_id: str | None,
        metadata: dict[str, Any] | None,
    ) -> Op[CompactionCheckpoint]:
        content = summary_ops.CandidateContent(
            None,
            first_kept_event_id=first_kept_event_id,
            summarizer_id=summarizer_id,
            metadata=metadata,
        )
        return summary_ops.record_failed(self.db.dialect, snapshot, content, error, self.clock())

    @flow_method
    def record_failed(
        self,
        snapshot: CoverageSnapshot,
        *,
        error: str,
        summarizer_id: str | None = None,
        first_kept_event_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Flow[CompactionCheckpoint]:
        """Record a compaction attempt that produced no summary: a ``failed`` version of the
        span ``snapshot`` fixed (its seqs, one generation above the active summary), with no
        text and ``error`` saying why. The active summary and every other version stay as
        they are; :meth:`prune_versions` keeps ``keep`` failed attempts apart from the
        summaries it keeps.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(10)])
            ...     failed = store.record_failed(store.snapshot("t", 6), error="timed out")
            ...     failed.status, failed.first_seq, failed.covered_through_seq, store.get_active("t")
            ('failed', 1, 6, None)
        """
        op = self._record_failed(snapshot, error, summarizer_id, first_kept_event_id, metadata)
        return (yield from self._op(op, write=True))

    arecord_failed = async_twin(record_failed)

    @flow_method
    def get_active(self, scope: Scope | str) -> Flow[CompactionCheckpoint | None]:
        """The branch's active summary (possibly inherited from its parent), or None."""
        return (yield from self._op(summary_ops.get_active(self.db.dialect, checked_scope(scope))))

    aget_active = async_twin(get_active)

    @flow_method
    def get_checkpoint(self, checkpoint_id: str) -> Flow[CompactionCheckpoint | None]:
        """One summary version by id, whatever its status."""
        return (yield from self._op(summary_ops.get_checkpoint(self.db.dialect, checkpoint_id)))

    aget_checkpoint = async_twin(get_checkpoint)

    @flow_method
    def list_versions(self, scope: Scope | str) -> Flow[list[CompactionCheckpoint]]:
        """Every summary version created on the branch, newest generation first."""
        return (
            yield from self._op(summary_ops.list_versions(self.db.dialect, checked_scope(scope)))
        )

    alist_versions = async_twin(list_versions)

    @flow_method
    def prune_versions(self, scope: Scope | str, *, keep: int) -> Flow[int]:
        """Delete the branch's superseded, failed and invalid versions beyond the ``keep`` newest
        (failed attempts without a summary counted apart, ``keep`` of them kept too), and the
        segment index's superseded rows beyond the ``keep`` newest of each range.

        The active version, and any version another branch still uses as its active summary,
        are never deleted. Returns how many versions were deleted.
        """
        return (yield from self._op(self._prune(scope, keep), write=True))

    aprune_versions = async_twin(prune_versions)

    def _prune(self, scope: Scope | str, keep: int) -> Op[int]:
        scope = checked_scope(scope)
        pruned = yield from summary_ops.prune_versions(self.db.dialect, scope, keep, self.clock())
        return pruned + (yield from segment_ops.prune_segments(scope, keep))


class SegmentsAPI(StoreBase):
    """The segment index: summaries of separate history ranges, for the lookup (docs/design.md
    §8). Never loaded into a prompt by default."""

    @flow_method
    def segment_snapshot(
        self, scope: Scope | str, first_seq: int, last_seq: int
    ) -> Flow[CoverageSnapshot]:
        """Fix a range a segment will summarize: its visible events, the thread's edit counter
        and the range's hash. Summarize ``snapshot.events``, then call :meth:`put_segment`.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(10)])
            ...     snap = store.segment_snapshot("t", 1, 5)
            ...     segment = store.put_segment(snap, summary_text="Steps 0-4.")
            ...     [(s.first_seq, s.last_seq, s.status) for s in store.segments("t")]
            [(1, 5, 'active')]
        """
        op = segment_ops.segment_snapshot(
            self.db.dialect, checked_scope(scope), first_seq, last_seq
        )
        return (yield from self._op(op))

    asegment_snapshot = async_twin(segment_snapshot)

    def _put(self, snapshot: CoverageSnapshot, content: dict[str, Any]) -> Op[Segment]:
        content["key_facts"] = tuple(content.get("key_facts") or ())
        return segment_ops.put_segment(
            self.db.dialect, snapshot, segment_ops.SegmentContent(**content), self.clock()
        )

    @flow_method
    def put_segment(
        self,
        snapshot: CoverageSnapshot,
        *,
        summary_text: str,
        key_facts: Sequence[KeyFact] = (),
        summarizer_id: str | None = None,
        summary_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Flow[Segment]:
        """Store the summary of ``snapshot``'s range as an active segment, superseding any
        segment of an overlapping range, if the range still holds what the snapshot read.

        Raises:
            StaleCandidate: an event of the range changed since the snapshot (nothing written).
            ValueError: a key fact cites a seq outside the range.
        """
        content = {
            "summary_text": summary_text,
            "key_facts": key_facts,
            "summarizer_id": summarizer_id,
            "summary_tokens": summary_tokens,
            "metadata": metadata,
        }
        return (yield from self._op(self._put(snapshot, content), write=True))

    aput_segment = async_twin(put_segment)

    @flow_method
    def segments(
        self, scope: Scope | str, *, statuses: Sequence[str] = ("active",)
    ) -> Flow[list[Segment]]:
        """The branch's segments of these statuses (``active``, ``invalid``, ``superseded``),
        oldest range first."""
        return (
            yield from self._op(
                segment_ops.list_segments(self.db.dialect, checked_scope(scope), statuses)
            )
        )

    asegments = async_twin(segments)
