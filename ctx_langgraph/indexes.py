"""What the two indexes over a thread's history report in the ``context`` channel: the segment
index (``context["compaction"]["segments"]``) and the vector index (``context["index"]``).
Re-exported by :mod:`ctx_langgraph.state`, which types the whole channel."""

from __future__ import annotations

from typing_extensions import NotRequired, TypedDict

__all__ = ["IndexReport", "SegmentReport"]


class SegmentReport(TypedDict):
    """``context["compaction"]["segments"]``: the segment index's build after a compaction."""

    built: int
    """Segments summarized and stored."""
    failed: int
    """Ranges tried and left for the next build (the summarizer or the store failed, or an
    edit raced the build)."""
    pending: int
    """Ranges still waiting (at most two are built per compaction)."""
    error: NotRequired[str]
    """The last problem met."""
    background: NotRequired[bool]
    """The build runs in the background (``precompact_at`` is set): its counts are not known
    yet."""


class IndexReport(TypedDict, total=False):
    """``context["index"]``: the history store's vector index after the turn (``ctx_usage``
    embeds the events that await a vector; docs/design.md §4)."""

    embedded: int
    """Events embedded after this turn."""
    pending: int
    """Events still without a vector (a failure, or more than one call embeds): they are
    found by words only until embedded, on a later turn."""
    tokens: int
    """Tokens of this turn's embedding calls (booked in the usage ledger, purpose
    ``embedding``)."""
    error: str | None
    """Why embedding stopped (the model failed or timed out, or the store did)."""
    seconds: float
    """Time spent embedding."""
    background: bool
    """Embedding runs in the background (``precompact_at`` is set): counts not known yet."""
