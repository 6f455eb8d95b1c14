"""What a prune kept and removed, and why."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctx_langgraph.core.table import format_table
from ctx_langgraph.errors import RetentionError
from ctx_langgraph.retention.policy import CheckpointDecision, RetentionPolicy, _Row, decide

__all__ = ["RetentionReport", "planned"]


@dataclass(frozen=True)
class RetentionReport:
    """What a prune kept and removed, and why.

    Examples:
        >>> report = RetentionReport(dry_run=True)
        >>> report.kept, report.removed, report.bytes_freed
        ((), (), 0)
    """

    dry_run: bool
    decisions: tuple[CheckpointDecision, ...] = ()
    removed_writes: int = 0
    removed_blobs: int = 0
    bytes_freed: int | None = 0
    """Bytes of the removed checkpoints, writes and blobs as stored (a dry run: what would be)."""
    threads: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    """Threads left alone, with the reason (a ``DeltaChannel``)."""

    @property
    def kept(self) -> tuple[CheckpointDecision, ...]:
        return tuple(d for d in self.decisions if d.kept)

    @property
    def removed(self) -> tuple[CheckpointDecision, ...]:
        return tuple(d for d in self.decisions if not d.kept)

    def merged(self, other: RetentionReport) -> RetentionReport:
        freed = (
            None
            if self.bytes_freed is None or other.bytes_freed is None
            else self.bytes_freed + other.bytes_freed
        )
        return RetentionReport(
            self.dry_run,
            self.decisions + other.decisions,
            self.removed_writes + other.removed_writes,
            self.removed_blobs + other.removed_blobs,
            freed,
            self.threads + other.threads,
            self.refused + other.refused,
        )

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        return {
            "dry_run": self.dry_run,
            "threads": list(self.threads),
            "kept": len(self.kept),
            "removed": len(self.removed),
            "removed_writes": self.removed_writes,
            "removed_blobs": self.removed_blobs,
            "bytes_freed": self.bytes_freed,
            "refused": list(self.refused),
            "decisions": [
                {
                    **dataclasses.asdict(d),
                    "created_at": d.created_at.isoformat() if d.created_at else None,
                    "reasons": list(d.reasons),
                }
                for d in self.decisions
            ],
        }

    def table(self, *, limit: int | None = 50) -> str:
        """Per thread and namespace: kept and removed counts with the reasons, then totals."""
        groups: dict[tuple[str, str], list[CheckpointDecision]] = defaultdict(list)
        for decision in self.decisions:
            groups[(decision.thread_id, decision.checkpoint_ns)].append(decision)
        rows = []
        for (thread, ns), decisions in sorted(groups.items())[:limit]:
            why: dict[str, int] = defaultdict(int)
            for d in decisions:
                for reason in d.reasons if d.kept else ():
                    why[reason] += 1
            rows.append(
                [
                    thread,
                    ns or "(root)",
                    f"{sum(d.kept for d in decisions):,}",
                    f"{sum(not d.kept for d in decisions):,}",
                    ", ".join(f"{k} {v}" for k, v in why.items()),
                ]
            )
        verb = "would free" if self.dry_run else "freed"
        freed = "unknown" if self.bytes_freed is None else f"{self.bytes_freed:,} bytes"
        lines = [
            format_table(["thread", "namespace", "kept", "removed", "kept because"], rows),
            f"{len(self.kept):,} kept, {len(self.removed):,} removed"
            + (
                ""
                if self.dry_run
                else f", {self.removed_writes:,} writes, {self.removed_blobs:,} blobs"
            )
            + f"; {verb} {freed}"
            + (" (dry run: nothing was deleted)" if self.dry_run else ""),
        ]
        if self.refused:
            lines.append("refused: " + "; ".join(self.refused))
        return "\n".join(lines)


def planned(
    thread_id: str, rows: Sequence[_Row], policy: RetentionPolicy, now: dt.datetime, dry_run: bool
) -> RetentionReport:
    """The policy's decisions on one thread's checkpoints, reported as a dry run would be (what
    would be freed); a thread that uses a ``DeltaChannel`` is refused."""
    if any(r.delta for r in rows):
        raise RetentionError(
            f"thread {thread_id!r} uses a DeltaChannel: its values are rebuilt from older "
            "checkpoints, so they cannot be pruned by age or count"
        )
    decisions = tuple(decide(thread_id, rows, policy, now))
    freed = sum(c.bytes for c in decisions if not c.kept)
    return RetentionReport(dry_run, decisions, bytes_freed=freed, threads=(thread_id,))
