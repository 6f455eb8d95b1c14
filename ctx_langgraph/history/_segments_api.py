"""The history store's public segment-index methods (snapshot of a range, storing its summary,
reading the index), each a thin call of one operation of :mod:`ctx_langgraph.history.segments`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import segments as segment_ops
from ctx_langgraph.history._store import StoreBase
from ctx_langgraph.history.types import CoverageSnapshot, KeyFact, Scope, Segment
from ctx_langgraph.storage.statements import Op

__all__ = ["SegmentsAPI"]


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
