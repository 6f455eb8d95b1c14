"""Checkpoint retention: prune old LangGraph checkpoints by policy (docs/design.md §9).

Every super-step writes a checkpoint, and the default ``messages`` channel stores the whole list
again each time, so a long thread's checkpoints grow much faster than its conversation. The
open-source savers can delete a whole thread, and only ``PostgresSaver`` can prune (keep the
latest, or nothing). :class:`CheckpointRetention` keeps, per thread and checkpoint namespace:

- ``latest``: the newest checkpoint (the one a run resumes from);
- ``keep_last``: the newest ``keep_last`` checkpoints;
- ``keep_within``: every checkpoint created within ``keep_within`` of now;
- ``pending_writes``: a checkpoint with writes and no child yet, a run that can still resume
  (``interrupt`` is added when one of those writes is an interrupt);
- ``fork_point``: an ancestor of a kept checkpoint with two or more children, where
  ``update_state`` on an old checkpoint (or a replay from it) started another timeline.

Everything else is removed, with its writes and, where blobs are stored apart (PostgreSQL,
``InMemorySaver``), the blobs no kept checkpoint references. A kept checkpoint whose parent is
removed is left with no parent, as ``PostgresSaver.prune`` does. A subgraph call's namespace
goes with the root checkpoint it started from. Threads that use a ``DeltaChannel`` are refused
(:class:`~ctx_langgraph.errors.RetentionError`): their values are rebuilt from older checkpoints.

The history store is never touched: raw history, summary versions and the active summary
pointer live in their own tables, so a thread pruned to its last checkpoint still answers
history lookups for its first turn.

Each thread is pruned in one transaction. On PostgreSQL it reads one ``REPEATABLE READ``
snapshot, so what a run saves meanwhile is neither seen nor deleted.
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
