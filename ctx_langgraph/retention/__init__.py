"""Checkpoint retention: prune old LangGraph checkpoints by policy (docs/design.md §9).

:class:`CheckpointRetention` keeps, per thread and checkpoint namespace, the ``latest``
checkpoint, the newest ``keep_last``, those created ``keep_within`` of now, those with
``pending_writes`` (``interrupt``), and the ``fork_point`` ancestors of kept ones; everything
else goes with its writes and unreferenced blobs, one transaction per thread. Threads using a
``DeltaChannel`` are refused, and the history store is never touched.
"""

from ctx_langgraph.retention.hooks import AsyncRetentionHook, RetentionHook
from ctx_langgraph.retention.policy import (
    CheckpointDecision,
    RetentionPolicy,
    created_at,
    decide,
    parse_age,
)
from ctx_langgraph.retention.prune import CheckpointRetention
from ctx_langgraph.retention.report import RetentionReport

__all__ = [
    "AsyncRetentionHook",
    "CheckpointDecision",
    "CheckpointRetention",
    "RetentionHook",
    "RetentionPolicy",
    "RetentionReport",
    "created_at",
    "decide",
    "parse_age",
]
