"""The compare-and-swap append of a write that extends a branch: recorded when the branch ends
at the event the writer last saw; a replay's messages are duplicates, another timeline's diverge
(or fork the branch at the last event both share)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import replace

from ctx_langgraph.history.branches import Lineage, create_branch, lineage_clause, lock_branch
from ctx_langgraph.history.events import known_events, write_plan
from ctx_langgraph.history.rows import EventRow
from ctx_langgraph.history.types import AppendOutcome, Scope
from ctx_langgraph.storage.codec import load_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt

__all__ = ["append_after"]


def append_after(
    d: Dialect,
    scope: Scope,
    rows: Sequence[EventRow],
    created: Sequence[dt.datetime],
    now: dt.datetime,
    after: str | None,
    *,
    fork: bool = False,
    active: str | None = None,
) -> Op[AppendOutcome]:
    """Record ``rows`` when the branch ends at the event ``after`` (or never held it), and read
    the branch after them: a compare-and-swap on the branch's head (see
    :meth:`~ctx_langgraph.history.HistoryStore.append_after`)."""
    branch, chain = yield from lock_branch(d, scope, now, create=True, edits=True)
    ids = [row.event_id for row in rows]
    known = yield from known_events(scope, chain, [*ids, after] if after is not None else ids)
    seen = known.get(after) if after is not None else None
    forked_from: str | None = None
    if seen is not None and branch.head_seq > seen.seq:
        shared, ends = yield from _replayed(scope, chain, seen.seq, rows)
        if not ends:
            if not fork:
                return AppendOutcome([], None, diverged=True)
            fork_seq = shared[-1] if shared else seen.seq
            forked = scope.on_branch(f"{scope.branch}~{fork_seq}-{uuid.uuid4().hex[:8]}")
            yield from create_branch(
                d, forked, scope.branch, fork_seq, now, follow=True, active=active
            )
            forked_from, scope = scope.branch, forked
            branch, chain = yield from lock_branch(d, scope, now, create=False, edits=True)
            known = yield from known_events(scope, chain, ids)
    plan, version = yield from write_plan(d, scope, branch, rows, created, known, now)
    edits = branch.edit_version if version is None else version
    head = replace(branch.info(d, scope), head_seq=plan.head_seq, edit_version=edits)
    return AppendOutcome(plan.results, head, forked_from=forked_from)


def _replayed(
    scope: Scope, chain: Lineage, after_seq: int, rows: Sequence[EventRow]
) -> Op[tuple[list[int], bool]]:
    """The seqs of the branch's events after ``after_seq`` that are the leading ``rows`` (same
    id and content), and whether the branch ends with them (a replay)."""
    clause, params = lineage_clause(chain)
    stored = yield Stmt(
        "SELECT e.seq, e.event_id, e.content_hash FROM ctx_events e WHERE e.tenant = ? AND "
        f"e.thread_id = ? AND {clause} AND e.seq > ? ORDER BY e.seq LIMIT ?",
        (scope.tenant, scope.thread_id, *params, after_seq, len(rows) + 1),
        "all",
    )
    shared: list[int] = []
    for (seq, event_id, content_hash), row in zip(stored, rows, strict=False):
        if load_text(event_id) != row.event_id or bytes(content_hash) != bytes(row.content_hash):
            break
        shared.append(int(seq))
    return shared, len(shared) == len(stored)
