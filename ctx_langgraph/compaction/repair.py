"""Tool-call pairing repair of the view (re-exported from :mod:`ctx_langgraph.view.repair`)."""

from ctx_langgraph.view.repair import (
    MISSING_RESULT,
    NOT_RUN,
    ViewRepairs,
    is_repair,
    repair_tool_pairs,
)

__all__ = ["MISSING_RESULT", "NOT_RUN", "ViewRepairs", "is_repair", "repair_tool_pairs"]
