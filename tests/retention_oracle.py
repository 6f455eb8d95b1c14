"""The retention policy, computed apart from ``ctx_langgraph.retention``: what the
acceptance test (``test_retention_acceptance.py``) holds the implementation's decisions to."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from ctx_langgraph.retention import CheckpointDecision, RetentionPolicy, RetentionReport

Key = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id)"""
INTERRUPT = "__interrupt__"


@dataclass(frozen=True)
class Saved:
    """One checkpoint as the saver listed it before pruning."""

    key: Key
    parent_id: str | None
    created_at: dt.datetime
    root_id: str | None
    """``metadata["parents"][""]``: the root checkpoint a subgraph call started from."""
    writes: tuple[str, ...]
    """The channels of its writes, sorted."""
    versions: frozenset[tuple[str, str]]
    channel_values: dict[str, Any]

    @classmethod
    def of(cls, t: CheckpointTuple) -> Saved:
        c = t.config["configurable"]
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        return cls(
            (c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"]),
            parent,
            dt.datetime.fromisoformat(t.checkpoint["ts"]),
            (t.metadata.get("parents") or {}).get(""),
            tuple(sorted(w[1] for w in t.pending_writes or ())),
            frozenset((ch, str(v)) for ch, v in t.checkpoint["channel_versions"].items()),
            t.checkpoint["channel_values"],
        )


def expected_kept(
    saved: Iterable[Saved], policy: RetentionPolicy, now: dt.datetime
) -> dict[Key, frozenset[str]]:
    """The kept checkpoints and every rule that keeps each, per thread and namespace (newest
    first by checkpoint id):

    - ``latest``: the newest; ``keep_last``: among the newest ``keep_last``;
    - ``keep_within``: created within ``keep_within`` of ``now``;
    - ``pending_writes``: has writes and no child (a run that can resume), plus ``interrupt``
      when one of them is on ``__interrupt__``;
    - ``fork_point``: has two or more children and is the parent of a kept checkpoint, applied
      transitively (the parent's parent, ...: any such ancestor of a kept checkpoint).

    A subgraph call's namespace (with ":") whose root checkpoint is not kept goes entirely.
    """
    groups: dict[tuple[str, str], list[Saved]] = defaultdict(list)
    for s in saved:
        groups[s.key[:2]].append(s)
    why: dict[Key, set[str]] = {}
    for group in groups.values():
        group.sort(key=lambda s: s.key[2], reverse=True)
        children = Counter(s.parent_id for s in group)
        for rank, s in enumerate(group):
            reasons = why[s.key] = set()
            if rank == 0:
                reasons.add("latest")
            if rank < policy.keep_last:
                reasons.add("keep_last")
            if policy.keep_within is not None and s.created_at >= now - policy.keep_within:
                reasons.add("keep_within")
            if s.writes and not children[s.key[2]]:
                reasons.add("pending_writes")
                if INTERRUPT in s.writes:
                    reasons.add("interrupt")
        by_id = {s.key[2]: s for s in group}
        for s in [s for s in group if why[s.key]]:
            parent = by_id.get(s.parent_id or "")
            while parent is not None:
                if children[parent.key[2]] >= 2:
                    why[parent.key].add("fork_point")
                parent = by_id.get(parent.parent_id or "")
    for (thread, ns), group in groups.items():
        if ":" in ns and any(not why.get((thread, "", str(s.root_id))) for s in group):
            for s in group:
                why[s.key] = set()
    return {key: frozenset(reasons) for key, reasons in why.items() if reasons}


def policy_mismatches(
    report: RetentionReport,
    saved: dict[Key, Saved],
    expected: dict[Key, frozenset[str]],
    label: str,
) -> list[str]:
    """Where the report's decisions differ from :func:`expected_kept` (empty: none)."""
    problems: list[str] = []
    got: dict[Key, CheckpointDecision] = {
        (d.thread_id, d.checkpoint_ns, d.checkpoint_id): d for d in report.decisions
    }
    if len(got) != len(report.decisions):
        problems.append(f"{label}: {len(report.decisions) - len(got)} duplicate decisions")
    if set(got) != set(saved):
        problems.append(
            f"{label}: decisions for {len(got)} checkpoints, {len(saved)} saved "
            f"(missing {sorted(set(saved) - set(got))[:3]}, unknown {sorted(set(got) - set(saved))[:3]})"
        )
    for key in sorted(set(got) & set(saved)):
        decision, want = got[key], expected.get(key)
        if decision.kept != (want is not None):
            problems.append(
                f"{label}: {key} kept={decision.kept} reasons={decision.reasons}, the policy says "
                f"kept={want is not None} {sorted(want or ())}"
            )
        elif want is not None and set(decision.reasons) != want:
            problems.append(f"{label}: {key} reasons {decision.reasons}, expected {sorted(want)}")
        if decision.parent_id != saved[key].parent_id:
            problems.append(f"{label}: {key} parent {decision.parent_id} != {saved[key].parent_id}")
        born = decision.created_at
        if born is None or abs((born - saved[key].created_at).total_seconds()) > 1:
            problems.append(f"{label}: {key} created_at {born} != {saved[key].created_at}")
    return problems


def decision_set(report: RetentionReport) -> set[tuple[Any, ...]]:
    return {
        (d.thread_id, d.checkpoint_ns, d.checkpoint_id, d.parent_id, d.kept, frozenset(d.reasons))
        for d in report.decisions
    }


def kept_keys(report: RetentionReport) -> set[Key]:
    return {(d.thread_id, d.checkpoint_ns, d.checkpoint_id) for d in report.kept}
