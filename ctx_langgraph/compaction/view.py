"""The working view after a summary (re-exported from :mod:`ctx_langgraph.view.summary`)."""

from ctx_langgraph.view.summary import (
    SUMMARY_MESSAGE_ID,
    project_checkpoint,
    rewrite_view,
    strip_opaque,
    summary_message,
)

__all__ = [
    "SUMMARY_MESSAGE_ID",
    "project_checkpoint",
    "rewrite_view",
    "strip_opaque",
    "summary_message",
]
