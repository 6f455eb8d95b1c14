"""Summary operations: the coverage snapshot, candidates and their compare-and-swap commit,
failed attempts, the active summary, versions, pruning."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctx_langgraph.errors import (
    CompactionConflict,
    CoverageUnavailable,
    HistoryStoreError,
    StaleCandidate,
)
from ctx_langgraph.history.args import integer_arg, text_arg
from ctx_langgraph.history.branches import (
    Branch,
    Lineage,
    lineage_clause,
    lock_branch,
    missing_branch,
    read_branch,
    select_branch,
)
from ctx_langgraph.history.events import read_events
from ctx_langgraph.history.rows import CHECKPOINT_COLS, checkpoint_from_row, stored_optional
from ctx_langgraph.history.types import (
    DEFAULT_BRANCH,
    CheckpointStatus,
    CompactionCheckpoint,
    CoverageSnapshot,
    HistoryEvent,
    KeyFact,
    Scope,
)
from ctx_langgraph.storage.codec import json_text, store_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import DeferredError, Op, Stmt, marks

__all__ = [
    "CandidateContent",
    "checkpoint_values",
    "commit_candidate",
    "create_candidate",
    "get_active",
    "get_checkpoint",
    "list_versions",
    "mark_failed",
    "prune_versions",
    "range_hash",
    "record_failed",
    "snapshot",
]


def range_hash(events: Sequence[HistoryEvent]) -> str:
    """A digest of the (seq, event id, revision) of every event a summary covers."""
    digest = hashlib.sha256()
    for event in events:
        line = f"{event.seq}\x1f{event.event_id}\x1f{event.revision}\x1e"
        digest.update(line.encode("utf-8", "surrogatepass"))  # any id, surrogates included
    return digest.hexdigest()


def _select_checkpoint(checkpoint_id: str) -> Stmt:
    return Stmt(
        f"SELECT {CHECKPOINT_COLS} FROM ctx_checkpoints WHERE id = ?",
        (store_text(text_arg("checkpoint id", checkpoint_id)),),
        "one",
    )


def get_checkpoint(d: Dialect, checkpoint_id: str) -> Op[CompactionCheckpoint | None]:
    """One summary version by id, whatever its status, or None."""
    row = yield _select_checkpoint(checkpoint_id)
    return None if row is None else checkpoint_from_row(d, row)


def snapshot(d: Dialect, scope: Scope, through_seq: int) -> Op[CoverageSnapshot]:
    """Fix the span a new summary will cover (see
    :meth:`~ctx_langgraph.history.HistoryStore.snapshot`).

    Raises:
        CoverageUnavailable: the thread has no events, or ``through_seq`` is not after what
            the active summary covers and at most the branch head.
    """
    return _snapshot(d, scope, integer_arg("through_seq", through_seq))


def _snapshot(d: Dialect, scope: Scope, through_seq: int) -> Op[CoverageSnapshot]:
    # the edit counter is read first: an edit in between can only cause a needless rebuild
    version_row = yield Stmt(
        "SELECT edit_version FROM ctx_threads WHERE tenant = ? AND thread_id = ?",
        (scope.tenant, scope.thread_id),
        "one",
    )
    found = yield from read_branch(d, scope)
    if found is None or version_row is None:
        raise CoverageUnavailable(scope, through_seq=through_seq)
    branch, _ = found
    covered = 0
    if branch.active_id is not None:
        row = yield _select_checkpoint(branch.active_id)
        covered = int(row[7])
    if not covered < through_seq <= branch.head_seq:
        raise CoverageUnavailable(
            scope, through_seq=through_seq, covered_through_seq=covered, head_seq=branch.head_seq
        )
    events = yield from read_events(d, scope, covered + 1, through_seq, None, False)
    return CoverageSnapshot(
        scope=scope,
        base_checkpoint_id=branch.active_id,
        base_generation=branch.active_generation,
        first_seq=covered + 1,
        covered_through_seq=through_seq,
        events=tuple(events),
        source_revision=int(version_row[0]),
        range_hash=range_hash(events),
    )


@dataclass(frozen=True)
class CandidateContent:
    """What a candidate summary says (the arguments of ``create_candidate``)."""

    summary_text: str | None
    key_facts: tuple[KeyFact, ...] = ()
    first_kept_event_id: str | None = None
    summarizer_id: str | None = None
    summary_tokens: int | None = None
    format_version: int = 1
    provider_state: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


def create_candidate(
    d: Dialect, snap: CoverageSnapshot, content: CandidateContent, now: dt.datetime
) -> Op[CompactionCheckpoint]:
    """Store a candidate summary built from ``snap`` (status ``candidate``)."""
    if content.summary_text is None and content.provider_state is None:
        raise ValueError("a compaction candidate needs summary_text or provider_state")
    for fact in content.key_facts:
        if not 1 <= fact.source_seq <= snap.covered_through_seq:
            raise ValueError(
                f"key fact {fact.text!r} cites seq {fact.source_seq}, outside the covered range "
                f"1..{snap.covered_through_seq}"
            )
    checkpoint = _version(snap, content, now, "candidate")
    yield _insert(d, snap, checkpoint)
    return checkpoint


def record_failed(
    d: Dialect, snap: CoverageSnapshot, content: CandidateContent, error: str, now: dt.datetime
) -> Op[CompactionCheckpoint]:
    """Store a compaction attempt without summary: a ``failed`` version of ``snap``'s span with
    ``error`` saying why; nothing else changes."""
    if content.summary_text is not None or content.provider_state is not None:
        raise ValueError("a failed compaction attempt records no summary_text or provider_state")
    reason = text_arg("error", error)
    checkpoint = replace(_version(snap, content, now, "failed"), key_facts=(), error=reason)
    yield _insert(d, snap, checkpoint)
    return checkpoint


def _version(
    snap: CoverageSnapshot, content: CandidateContent, now: dt.datetime, status: CheckpointStatus
) -> CompactionCheckpoint:
    """A new summary version of the span ``snap`` fixed, one generation above its base."""
    return CompactionCheckpoint(
        id=str(uuid.uuid4()),
        scope=snap.scope,
        generation=snap.base_generation + 1,
        parent_id=snap.base_checkpoint_id,
        first_seq=snap.first_seq,
        covered_through_seq=snap.covered_through_seq,
        first_kept_event_id=content.first_kept_event_id,
        source_revision=snap.source_revision,
        range_hash=snap.range_hash,
        summary_text=content.summary_text,
        provider_state=content.provider_state,
        format_version=content.format_version,
        summarizer_id=content.summarizer_id,
        key_facts=content.key_facts,
        summary_tokens=content.summary_tokens,
        status=status,
        error=None,
        created_at=now,
        committed_at=None,
        metadata=dict(content.metadata or {}),
    )


def _insert(d: Dialect, snap: CoverageSnapshot, checkpoint: CompactionCheckpoint) -> Stmt:
    return Stmt(
        f"INSERT INTO ctx_checkpoints ({CHECKPOINT_COLS}) VALUES ({marks(22)})",
        checkpoint_values(d, (snap.scope.tenant, snap.scope.thread_id), checkpoint),
    )


def checkpoint_values(d: Dialect, key: tuple[str, str], c: CompactionCheckpoint) -> tuple[Any, ...]:
    """A summary version's ``ctx_checkpoints`` row (``CHECKPOINT_COLS``), in the thread ``key``
    (tenant, thread id) on the version's own branch."""
    return (
        c.id,
        *key,
        c.scope.branch,
        c.generation,
        c.parent_id,
        c.first_seq,
        c.covered_through_seq,
        stored_optional(c.first_kept_event_id),
        c.source_revision,
        c.range_hash,
        stored_optional(c.summary_text),
        None if c.provider_state is None else json.dumps(c.provider_state),
        c.format_version,
        stored_optional(c.summarizer_id),
        json_text([fact.to_json() for fact in c.key_facts]),
        c.summary_tokens,
        c.status,
        stored_optional(c.error),
        json.dumps(c.metadata),
        d.ts(c.created_at),
        None if c.committed_at is None else d.ts(c.committed_at),
    )


def _fail(checkpoint_id: str, reason: str) -> Stmt:
    return Stmt(
        "UPDATE ctx_checkpoints SET status = 'failed', error = ? WHERE id = ? AND status = 'candidate'",
        (store_text(text_arg("reason", reason)), store_text(checkpoint_id)),
        "rowcount",
    )


def commit_candidate(d: Dialect, checkpoint_id: str, now: dt.datetime) -> Op[CompactionCheckpoint]:
    """Make a candidate the branch's active summary, by compare-and-swap on the active
    generation (see :meth:`~ctx_langgraph.history.HistoryStore.commit_candidate`)."""
    row = yield _select_checkpoint(checkpoint_id)
    if row is None:
        raise HistoryStoreError(f"no compaction checkpoint with id {checkpoint_id!r}")
    candidate = checkpoint_from_row(d, row)
    scope = candidate.scope
    branch, chain = yield from lock_branch(d, scope, now, create=False)
    if candidate.status == "active" and branch.active_id == candidate.id:
        return candidate
    if candidate.status != "candidate":
        raise HistoryStoreError(
            f"checkpoint {checkpoint_id} of {scope} is {candidate.status}; only a candidate can be committed"
        )
    yield from _refuse_conflict(checkpoint_id, candidate, branch)
    yield from _refuse_stale(d, checkpoint_id, candidate, chain)
    yield from _swap_active(d, checkpoint_id, candidate, branch, now)
    return replace(candidate, status="active", committed_at=now)


def _conflict(
    checkpoint_id: str, candidate: CompactionCheckpoint, branch: Branch
) -> CompactionConflict:
    return CompactionConflict(
        candidate.scope,
        candidate_id=checkpoint_id,
        expected_generation=candidate.generation - 1,
        actual_generation=branch.active_generation,
    )


def _refuse_conflict(
    checkpoint_id: str, candidate: CompactionCheckpoint, branch: Branch
) -> Op[None]:
    """Another candidate was committed since the snapshot: this one fails (committed), then
    the conflict is raised."""
    if (
        branch.active_generation != candidate.generation - 1
        or branch.active_id != candidate.parent_id
    ):
        yield _fail(checkpoint_id, f"conflict: active generation became {branch.active_generation}")
        raise DeferredError(_conflict(checkpoint_id, candidate, branch))


def _refuse_stale(
    d: Dialect, checkpoint_id: str, candidate: CompactionCheckpoint, chain: Lineage
) -> Op[None]:
    """An event the candidate covers was edited since the snapshot: it fails (committed), then
    :class:`~ctx_langgraph.errors.StaleCandidate` is raised."""
    scope = candidate.scope
    version_row = yield Stmt(
        "SELECT edit_version FROM ctx_threads WHERE tenant = ? AND thread_id = ?" + d.for_share,
        (scope.tenant, scope.thread_id),
        "one",
    )
    if int(version_row[0]) == candidate.source_revision:
        return
    clause, clause_params = lineage_clause(chain)
    edit = yield Stmt(
        "SELECT e.seq, e.kind, e.edit_version FROM ctx_event_edits e WHERE e.tenant = ? AND "
        f"e.thread_id = ? AND e.edit_version > ? AND e.seq <= ? AND {clause} "
        "ORDER BY e.edit_version LIMIT 1",
        (
            scope.tenant,
            scope.thread_id,
            candidate.source_revision,
            candidate.covered_through_seq,
            *clause_params,
        ),
        "one",
    )
    if edit is not None:
        reason = (
            f"event seq {edit[0]} (covered range ends at seq {candidate.covered_through_seq}) "
            f"had a {edit[1]} edit after the snapshot"
        )
        yield _fail(checkpoint_id, f"stale: {reason}")
        raise DeferredError(StaleCandidate(scope, candidate_id=checkpoint_id, reason=reason))


def _swap_active(
    d: Dialect,
    checkpoint_id: str,
    candidate: CompactionCheckpoint,
    branch: Branch,
    now: dt.datetime,
) -> Op[None]:
    """Move the branch's active pointer to the candidate if its generation is still the one the
    candidate was built on; the previous active version becomes ``superseded``."""
    scope = candidate.scope
    swapped = yield Stmt(
        "UPDATE ctx_branches SET active_checkpoint_id = ?, active_generation = ? "
        "WHERE tenant = ? AND thread_id = ? AND branch = ? AND active_generation = ?",
        (
            candidate.id,
            candidate.generation,
            scope.tenant,
            scope.thread_id,
            scope.branch,
            candidate.generation - 1,
        ),
        "rowcount",
    )
    if swapped != 1:
        raise _conflict(checkpoint_id, candidate, branch)
    if branch.active_id is not None:
        yield Stmt(
            "UPDATE ctx_checkpoints SET status = 'superseded' WHERE id = ? AND status = 'active' "
            "AND tenant = ? AND thread_id = ? AND branch = ?",
            (branch.active_id, scope.tenant, scope.thread_id, scope.branch),
        )
    yield Stmt(
        "UPDATE ctx_checkpoints SET status = 'active', committed_at = ? WHERE id = ?",
        (d.ts(now), candidate.id),
    )


def mark_failed(d: Dialect, checkpoint_id: str, reason: str) -> Op[CompactionCheckpoint]:
    """Mark a candidate ``failed`` with a reason; the active summary is untouched."""
    changed = yield _fail(checkpoint_id, reason)
    row = yield _select_checkpoint(checkpoint_id)
    if row is None:
        raise HistoryStoreError(f"no compaction checkpoint with id {checkpoint_id!r}")
    checkpoint = checkpoint_from_row(d, row)
    if not changed and checkpoint.status != "failed":
        raise HistoryStoreError(
            f"checkpoint {checkpoint_id} is {checkpoint.status}; only a candidate can be marked failed"
        )
    return checkpoint


def get_active(d: Dialect, scope: Scope) -> Op[CompactionCheckpoint | None]:
    """The branch's active summary (possibly inherited from its parent), or None."""
    row = yield select_branch(d, scope, lock=False)
    if row is None:
        if scope.branch != DEFAULT_BRANCH:
            raise missing_branch(scope)
        return None
    branch = Branch.from_row(row)
    if branch.active_id is None:
        return None
    return (yield from get_checkpoint(d, branch.active_id))


def list_versions(d: Dialect, scope: Scope) -> Op[list[CompactionCheckpoint]]:
    """Every summary version created on the branch, newest generation first."""
    rows = yield Stmt(
        f"SELECT {CHECKPOINT_COLS} FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? AND branch = ? "
        "ORDER BY generation DESC, created_at DESC",
        (scope.tenant, scope.thread_id, scope.branch),
        "all",
    )
    return [checkpoint_from_row(d, row) for row in rows]


def prune_versions(d: Dialect, scope: Scope, keep: int, now: dt.datetime) -> Op[int]:
    """Delete the branch's superseded, failed and invalid versions beyond the ``keep`` newest
    (failed attempts counted apart), except those some branch still uses as active."""
    if integer_arg("keep", keep) < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    return _prune_versions(d, scope, keep, now)


def _prune_versions(d: Dialect, scope: Scope, keep: int, now: dt.datetime) -> Op[int]:
    yield from lock_branch(d, scope, now, create=False)
    rows = yield Stmt(
        "SELECT id, CASE WHEN summary_text IS NULL AND provider_state IS NULL "
        "AND status = 'failed' THEN 1 ELSE 0 END FROM ctx_checkpoints "
        "WHERE tenant = ? AND thread_id = ? AND branch = ? "
        "AND status IN ('superseded', 'failed', 'invalid') ORDER BY created_at DESC, generation DESC",
        (scope.tenant, scope.thread_id, scope.branch),
        "all",
    )
    in_use = yield Stmt(
        "SELECT active_checkpoint_id FROM ctx_branches WHERE tenant = ? AND thread_id = ? "
        "AND active_checkpoint_id IS NOT NULL",
        (scope.tenant, scope.thread_id),
        "all",
    )
    used = {row[0] for row in in_use}
    doomed = [
        (row[0],)
        for attempt in (0, 1)
        for row in [row for row in rows if int(row[1]) == attempt][keep:]
        if row[0] not in used
    ]
    if doomed:
        yield Stmt("DELETE FROM ctx_checkpoints WHERE id = ?", many=doomed)
    return len(doomed)
