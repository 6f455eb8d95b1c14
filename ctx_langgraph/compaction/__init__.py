"""Compaction: the rolling summary with a coverage cursor (DESIGN section 6)."""

from ctx_langgraph.compaction.cut import (
    CutPoint,
    choose_cut,
    first_coverable,
    pairing_problems,
    tool_groups,
)

__all__ = ["CutPoint", "choose_cut", "first_coverable", "pairing_problems", "tool_groups"]
