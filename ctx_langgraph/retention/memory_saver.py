"""The one place that reads and edits ``InMemorySaver``'s dictionaries (``storage``, ``writes``,
``blobs``), which LangGraph offers no way to prune; ``tests/test_boundaries.py`` pins their shape."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph.retention.policy import INTERRUPT_CHANNEL, RetentionPolicy, _Row
from ctx_langgraph.retention.report import RetentionReport, planned

__all__ = ["memory_prune", "memory_threads"]


def memory_threads(saver: InMemorySaver) -> list[str]:
    """Every thread the saver holds, in order."""
    return sorted(saver.storage)


def memory_prune(
    saver: InMemorySaver,
    thread_id: str,
    policy: RetentionPolicy,
    now: dt.datetime,
    dry_run: bool,
) -> RetentionReport:
    """The retention policy on one thread of the saver's dictionaries."""
    storage = saver.storage.get(thread_id, {})
    rows: list[_Row] = []
    versions: dict[tuple[str, str], dict[str, Any]] = {}
    for ns, checkpoints in storage.items():
        for checkpoint_id, (checkpoint, metadata, parent) in checkpoints.items():
            writes = saver.writes.get((thread_id, ns, checkpoint_id), {})
            loaded_metadata = saver.serde.loads_typed(metadata)
            parents = (loaded_metadata or {}).get("parents") or {}
            versions[(ns, checkpoint_id)] = dict(
                saver.serde.loads_typed(checkpoint).get("channel_versions") or {}
            )
            rows.append(
                _Row(
                    ns,
                    checkpoint_id,
                    parent,
                    len(checkpoint[1]) + len(metadata[1]),
                    len(writes),
                    sum(len(w[2][1]) for w in writes.values()),
                    any(w[1] == INTERRUPT_CHANNEL for w in writes.values()),
                    parents.get(""),
                    "counters_since_delta_snapshot" in (loaded_metadata or {}),
                )
            )
    plan = planned(thread_id, rows, policy, now, dry_run)
    if dry_run or not plan.removed:
        return plan
    decisions, freed = plan.decisions, plan.bytes_freed or 0
    writes_deleted = blobs_deleted = 0
    gone_ids = {(d.checkpoint_ns, d.checkpoint_id) for d in plan.removed}
    for ns, checkpoint_id in gone_ids:
        del storage[ns][checkpoint_id]
        writes_deleted += len(saver.writes.pop((thread_id, ns, checkpoint_id), {}))
    for decision in decisions:
        if decision.kept and (decision.checkpoint_ns, decision.parent_id) in gone_ids:
            checkpoint, metadata, _parent = storage[decision.checkpoint_ns][decision.checkpoint_id]
            storage[decision.checkpoint_ns][decision.checkpoint_id] = (checkpoint, metadata, None)
    live = {
        (ns, channel, str(version))
        for (ns, checkpoint_id), channels in versions.items()
        if (ns, checkpoint_id) not in gone_ids
        for channel, version in channels.items()
    }
    for key in [k for k in saver.blobs if k[0] == thread_id]:
        _thread, ns, channel, version = key
        if (ns, channel, str(version)) not in live:
            freed += len(saver.blobs.pop(key)[1])
            blobs_deleted += 1
    for ns in [ns for ns, checkpoints in storage.items() if not checkpoints]:
        del storage[ns]
    return replace(
        plan, removed_writes=writes_deleted, removed_blobs=blobs_deleted, bytes_freed=freed
    )
