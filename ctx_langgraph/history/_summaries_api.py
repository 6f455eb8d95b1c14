"""The history store's public summary methods (snapshot, candidates, compare-and-swap commit,
failed marks and failed attempts, the active summary, versions, pruning) and segment-index
methods (snapshot of a range, storing its summary, reading the index), each a thin call of one
operation of :mod:`ctx_langgraph.history.summaries` or :mod:`ctx_langgraph.history.segments`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import segments as segment_ops
from ctx_langgraph.history import summaries as summary_ops
from ctx_langgraph.history._store import StoreBase
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

    def snapshot(self, scope: Scope | str, through_seq: int) -> CoverageSnapshot:
        """Fix the span a new summary will cover: from the active summary's cursor + 1 through
        ``through_seq``. Summarize ``snapshot.events`` (plus the active summary), then call
        :meth:`create_candidate` and :meth:`commit_candidate`."""
        return self.db.run(summary_ops.snapshot(self.db.dialect, checked_scope(scope), through_seq))

    async def asnapshot(self, scope: Scope | str, through_seq: int) -> CoverageSnapshot:
        """Async twin of :meth:`snapshot`."""
        return await self.db.arun(
            summary_ops.snapshot(self.db.dialect, checked_scope(scope), through_seq)
        )

    def _create_candidate(
        self, snapshot: CoverageSnapshot, **content: Any
    ) -> Op[CompactionCheckpoint]:
        content["key_facts"] = tuple(content.get("key_facts") or ())
        return summary_ops.create_candidate(
            self.db.dialect, snapshot, summary_ops.CandidateContent(**content), self.clock()
        )

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
    ) -> CompactionCheckpoint:
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
        return self.db.run(call, write=True)

    async def acreate_candidate(
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
    ) -> CompactionCheckpoint:
        """Async twin of :meth:`create_candidate`."""
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
        return await self.db.arun(call, write=True)

    def commit_candidate(self, candidate: CompactionCheckpoint | str) -> CompactionCheckpoint:
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
        return self.db.run(op, write=True)

    async def acommit_candidate(
        self, candidate: CompactionCheckpoint | str
    ) -> CompactionCheckpoint:
        """Async twin of :meth:`commit_candidate`."""
        op = summary_ops.commit_candidate(self.db.dialect, _checkpoint_id(candidate), self.clock())
        return await self.db.arun(op, write=True)

    def mark_failed(
        self, candidate: CompactionCheckpoint | str, reason: str
    ) -> CompactionCheckpoint:
        """Mark a candidate ``failed`` with a reason; the active summary is untouched."""
        op = summary_ops.mark_failed(self.db.dialect, _checkpoint_id(candidate), reason)
        return self.db.run(op, write=True)

    async def amark_failed(
        self, candidate: CompactionCheckpoint | str, reason: str
    ) -> CompactionCheckpoint:
        """Async twin of :meth:`mark_failed`."""
        op = summary_ops.mark_failed(self.db.dialect, _checkpoint_id(candidate), reason)
        return await self.db.arun(op, write=True)

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

    def record_failed(
        self,
        snapshot: CoverageSnapshot,
        *,
        error: str,
        summarizer_id: str | None = None,
        first_kept_event_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> CompactionCheckpoint:
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
        return self.db.run(op, write=True)

    async def arecord_failed(
        self,
        snapshot: CoverageSnapshot,
        *,
        error: str,
        summarizer_id: str | None = None,
        first_kept_event_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> CompactionCheckpoint:
        """Async twin of :meth:`record_failed`."""
        op = self._record_failed(snapshot, error, summarizer_id, first_kept_event_id, metadata)
        return await self.db.arun(op, write=True)

    def get_active(self, scope: Scope | str) -> CompactionCheckpoint | None:
        """The branch's active summary (possibly inherited from its parent), or None."""
        return self.db.run(summary_ops.get_active(self.db.dialect, checked_scope(scope)))

    async def aget_active(self, scope: Scope | str) -> CompactionCheckpoint | None:
        """Async twin of :meth:`get_active`."""
        return await self.db.arun(summary_ops.get_active(self.db.dialect, checked_scope(scope)))

    def get_checkpoint(self, checkpoint_id: str) -> CompactionCheckpoint | None:
        """One summary version by id, whatever its status."""
        return self.db.run(summary_ops.get_checkpoint(self.db.dialect, checkpoint_id))

    async def aget_checkpoint(self, checkpoint_id: str) -> CompactionCheckpoint | None:
        """Async twin of :meth:`get_checkpoint`."""
        return await self.db.arun(summary_ops.get_checkpoint(self.db.dialect, checkpoint_id))

    def list_versions(self, scope: Scope | str) -> list[CompactionCheckpoint]:
        """Every summary version created on the branch, newest generation first."""
        return self.db.run(summary_ops.list_versions(self.db.dialect, checked_scope(scope)))

    async def alist_versions(self, scope: Scope | str) -> list[CompactionCheckpoint]:
        """Async twin of :meth:`list_versions`."""
        return await self.db.arun(summary_ops.list_versions(self.db.dialect, checked_scope(scope)))

    def prune_versions(self, scope: Scope | str, *, keep: int) -> int:
        """Delete the branch's superseded, failed and invalid versions beyond the ``keep`` newest
        (failed attempts without a summary counted apart, ``keep`` of them kept too), and the
        segment index's superseded rows beyond the ``keep`` newest of each range.

        The active version, and any version another branch still uses as its active summary,
        are never deleted. Returns how many versions were deleted.
        """
        return self.db.run(self._prune(scope, keep), write=True)

    async def aprune_versions(self, scope: Scope | str, *, keep: int) -> int:
        """Async twin of :meth:`prune_versions`."""
        return await self.db.arun(self._prune(scope, keep), write=True)

    def _prune(self, scope: Scope | str, keep: int) -> Op[int]:
        scope = checked_scope(scope)
        pruned = yield from summary_ops.prune_versions(self.db.dialect, scope, keep, self.clock())
        return pruned + (yield from segment_ops.prune_segments(scope, keep))


class SegmentsAPI(StoreBase):
    """The segment index: summaries of separate history ranges, for the lookup (docs/design.md
    §8). Never loaded into a prompt by default."""

    def segment_snapshot(
        self, scope: Scope | str, first_seq: int, last_seq: int
    ) -> CoverageSnapshot:
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
        return self.db.run(op)

    async def asegment_snapshot(
        self, scope: Scope | str, first_seq: int, last_seq: int
    ) -> CoverageSnapshot:
        """Async twin of :meth:`segment_snapshot`."""
        op = segment_ops.segment_snapshot(
            self.db.dialect, checked_scope(scope), first_seq, last_seq
        )
        return await self.db.arun(op)

    def _put(self, snapshot: CoverageSnapshot, content: dict[str, Any]) -> Op[Segment]:
        content["key_facts"] = tuple(content.get("key_facts") or ())
        return segment_ops.put_segment(
            self.db.dialect, snapshot, segment_ops.SegmentContent(**content), self.clock()
        )

    def put_segment(
        self,
        snapshot: CoverageSnapshot,
        *,
        summary_text: str,
        key_facts: Sequence[KeyFact] = (),
        summarizer_id: str | None = None,
        summary_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Segment:
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
        return self.db.run(self._put(snapshot, content), write=True)

    async def aput_segment(
        self,
        snapshot: CoverageSnapshot,
        *,
        summary_text: str,
        key_facts: Sequence[KeyFact] = (),
        summarizer_id: str | None = None,
        summary_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Segment:
        """Async twin of :meth:`put_segment`."""
        content = {
            "summary_text": summary_text,
            "key_facts": key_facts,
            "summarizer_id": summarizer_id,
            "summary_tokens": summary_tokens,
            "metadata": metadata,
        }
        return await self.db.arun(self._put(snapshot, content), write=True)

    def segments(
        self, scope: Scope | str, *, statuses: Sequence[str] = ("active",)
    ) -> list[Segment]:
        """The branch's segments of these statuses (``active``, ``invalid``, ``superseded``),
        oldest range first."""
        return self.db.run(
            segment_ops.list_segments(self.db.dialect, checked_scope(scope), statuses)
        )

    async def asegments(
        self, scope: Scope | str, *, statuses: Sequence[str] = ("active",)
    ) -> list[Segment]:
        """Async twin of :meth:`segments`."""
        op = segment_ops.list_segments(self.db.dialect, checked_scope(scope), statuses)
        return await self.db.arun(op)
