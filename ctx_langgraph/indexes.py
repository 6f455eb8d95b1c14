"""What the segment index and the vector index report in the ``context`` channel (re-exported
by :mod:`ctx_langgraph.state`)."""

from __future__ import annotations

from typing_extensions import NotRequired, TypedDict

__all__ = ["IndexReport", "SegmentReport"]


class SegmentReport(TypedDict):
    """``context["compaction"]["segments"]``: the segment index's build after a compaction."""

    built: int
    """Segments summarized and stored."""
    failed: int
    """Ranges tried and left for the next build."""
    pending: int
    """Ranges still waiting (at most two are built per compaction)."""
    error: NotRequired[str]
    """The last problem met."""
    background: NotRequired[bool]
    """The build runs in the background: its counts are not known yet."""


class IndexReport(TypedDict, total=False):
    """``context["index"]``: the history store's vector index after the turn (``ctx_usage``)."""

    embedded: int
    """Events embedded after this turn."""
    pending: int
    """Events still without a vector (found by words only until embedded)."""
    tokens: int
    """Tokens of this turn's embedding calls (booked as ``embedding``)."""
    error: str | None
    """Why embedding stopped."""
    seconds: float
    """Time spent embedding."""
    background: bool
    """Embedding runs in the background: counts not known yet."""
