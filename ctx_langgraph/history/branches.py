"""Branch operations: lineage (which rows a branch reads), create, info, list, and the branch
row lock every write takes first."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctx_langgraph.errors import HistoryStoreError, ScopeError
from ctx_langgraph.history.args import integer_arg
from ctx_langgraph.history.rows import BRANCH_COLS
from ctx_langgraph.history.types import DEFAULT_BRANCH, BranchInfo, Scope, ThreadRow
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt

__all__ = [
    "THREAD_TABLES",
    "Branch",
    "Lineage",
    "branch_info",
    "branch_map",
    "create_branch",
    "delete_thread",
    "lineage",
    "lineage_clause",
    "list_branches",
    "lock_branch",
    "missing_branch",
    "read_branch",
    "select_branch",
]


@dataclass(frozen=True)
class Branch:
    """A branch row: its parent and fork point, head seq and active summary pointer."""

    name: str
    parent: str | None
    fork_seq: int | None
    head_seq: int
    active_id: str | None
    active_generation: int
    created_at: Any
    edit_version: int = 0
    """The thread's edit counter, when the row was read with it (``edits=True``)."""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Branch:
        return cls(
            row[0],
            row[1],
            None if row[2] is None else int(row[2]),
            int(row[3]),
            row[4],
            int(row[5]),
            row[6],
            int(row[7] or 0) if len(row) > 7 else 0,
        )

    def info(self, d: Dialect, scope: Scope) -> BranchInfo:
        return BranchInfo(
            scope=scope.on_branch(self.name),
            parent_branch=self.parent,
            fork_seq=self.fork_seq,
            head_seq=self.head_seq,
            active_checkpoint_id=self.active_id,
            active_generation=self.active_generation,
            created_at=d.from_ts(self.created_at),
            edit_version=self.edit_version,
        )


Lineage = list[tuple[str, "int | None"]]


def lineage(branches: dict[str, Branch], name: str) -> Lineage:
    """The (branch, highest visible seq) pairs a branch reads: itself unbounded, then each
    ancestor up to the lowest fork point on the way.

    Examples:
        >>> b = {"main": Branch("main", None, None, 9, None, 0, 0),
        ...      "a": Branch("a", "main", 5, 8, None, 0, 0),
        ...      "b": Branch("b", "a", 7, 7, None, 0, 0)}
        >>> lineage(b, "b")
        [('b', None), ('a', 7), ('main', 5)]
    """
    chain: Lineage = []
    bound: int | None = None
    current: str | None = name
    while current is not None:
        if any(seen == current for seen, _ in chain):
            raise HistoryStoreError(f"branch lineage of {name!r} has a cycle at {current!r}")
        branch = branches[current]
        chain.append((current, bound))
        if branch.parent is None:
            break
        fork = int(branch.fork_seq or 0)
        bound = fork if bound is None else min(bound, fork)
        current = branch.parent
    return chain


def lineage_clause(chain: Lineage, alias: str = "e") -> tuple[str, list[Any]]:
    """(SQL condition, params) selecting the rows of ``chain`` from events aliased ``alias``."""
    parts: list[str] = []
    params: list[Any] = []
    for name, bound in chain:
        if bound is None:
            parts.append(f"{alias}.branch = ?")
            params.append(name)
        else:
            parts.append(f"({alias}.branch = ? AND {alias}.seq <= ?)")
            params.extend([name, bound])
    return "(" + " OR ".join(parts) + ")", params


def select_branch(d: Dialect, scope: Scope, *, lock: bool, edits: bool = False) -> Stmt:
    """The statement reading the scope's branch row (locked for the transaction when ``lock``;
    with the thread's edit counter when ``edits``)."""
    edit_version = (
        ", (SELECT t.edit_version FROM ctx_threads t WHERE t.tenant = ctx_branches.tenant "
        "AND t.thread_id = ctx_branches.thread_id)"
        if edits
        else ""
    )
    return Stmt(
        f"SELECT {BRANCH_COLS}{edit_version} FROM ctx_branches "
        "WHERE tenant = ? AND thread_id = ? AND branch = ?" + (d.for_update if lock else ""),
        (scope.tenant, scope.thread_id, scope.branch),
        "one",
    )


def branch_map(scope: Scope) -> Op[dict[str, Branch]]:
    """Every branch row of the scope's thread, by name."""
    rows = yield Stmt(
        f"SELECT {BRANCH_COLS} FROM ctx_branches WHERE tenant = ? AND thread_id = ?",
        (scope.tenant, scope.thread_id),
        "all",
    )
    return {row[0]: Branch.from_row(row) for row in rows}


def _with_lineage(scope: Scope, branch: Branch) -> Op[tuple[Branch, Lineage]]:
    if branch.parent is None:
        return branch, [(branch.name, None)]
    branches = yield from branch_map(scope)
    return branch, lineage(branches, branch.name)


def missing_branch(scope: Scope) -> ScopeError:
    """The error for a branch that does not exist (the default branch always may)."""
    return ScopeError(
        f"branch {scope.branch!r} of thread {scope.thread_id!r} (tenant {scope.tenant!r}) does not "
        "exist; create it with create_branch(scope, from_branch, fork_seq)"
    )


def lock_branch(
    d: Dialect, scope: Scope, now: dt.datetime, *, create: bool, edits: bool = False
) -> Op[tuple[Branch, Lineage]]:
    """Lock the scope's branch row for this transaction (creating the default branch of a new
    thread when ``create``); returns it with its lineage (and the thread's edit counter when
    ``edits``)."""
    row = yield select_branch(d, scope, lock=True, edits=edits)
    if row is None:
        if not (create and scope.branch == DEFAULT_BRANCH):
            raise missing_branch(scope)
        yield Stmt(
            "INSERT INTO ctx_threads (tenant, thread_id, edit_version, created_at) VALUES (?, ?, 0, ?) "
            "ON CONFLICT DO NOTHING",
            (scope.tenant, scope.thread_id, d.ts(now)),
        )
        yield Stmt(
            "INSERT INTO ctx_branches (tenant, thread_id, branch, head_seq, active_generation, created_at) "
            "VALUES (?, ?, ?, 0, 0, ?) ON CONFLICT DO NOTHING",
            (scope.tenant, scope.thread_id, scope.branch, d.ts(now)),
        )
        row = yield select_branch(d, scope, lock=True, edits=edits)
    return (yield from _with_lineage(scope, Branch.from_row(row)))


def read_branch(d: Dialect, scope: Scope) -> Op[tuple[Branch, Lineage] | None]:
    """The branch and its lineage, or None for the not-yet-written default branch."""
    row = yield select_branch(d, scope, lock=False)
    if row is None:
        if scope.branch == DEFAULT_BRANCH:
            return None
        raise missing_branch(scope)
    return (yield from _with_lineage(scope, Branch.from_row(row)))


def branch_info(d: Dialect, scope: Scope) -> Op[BranchInfo | None]:
    # one statement: ctx_budget reads this on every turn (the thread's edit counter with it)
    """The branch's row and the thread's edit version, or None if it has no row yet."""
    row = yield Stmt(
        f"SELECT {BRANCH_COLS}, (SELECT t.edit_version FROM ctx_threads t WHERE "
        "t.tenant = b.tenant AND t.thread_id = b.thread_id) FROM ctx_branches b "
        "WHERE b.tenant = ? AND b.thread_id = ? AND b.branch = ?",
        (scope.tenant, scope.thread_id, scope.branch),
        "one",
    )
    if row is None:
        return None
    info = Branch.from_row(row).info(d, scope)
    return replace(info, edit_version=int(row[7] or 0))


def list_branches(d: Dialect, scope: Scope) -> Op[list[BranchInfo]]:
    """Every branch of the scope's thread, by name."""
    branches = yield from branch_map(scope)
    return [branches[name].info(d, scope) for name in sorted(branches)]


def list_threads(d: Dialect, tenant: str, limit: int) -> Op[list[ThreadRow]]:
    """The tenant's threads, newest first (at most ``limit``)."""
    rows = yield Stmt(
        "SELECT thread_id, count(*), max(head_seq), max(active_generation), min(created_at) "
        "FROM ctx_branches WHERE tenant = ? GROUP BY thread_id "
        "ORDER BY min(created_at) DESC, thread_id LIMIT ?",
        (tenant, limit),
        "all",
    )
    return [
        ThreadRow(str(r[0]), int(r[1]), int(r[2] or 0), int(r[3] or 0), d.from_ts(r[4]))
        for r in rows
    ]


def _inherited_checkpoint(
    scope: Scope, parent: Branch, fork_seq: int
) -> Op[tuple[str | None, int]]:
    """The newest version on the parent's chain of active summaries that covers only shared events."""
    if parent.active_id is None:
        return None, 0
    rows = yield Stmt(
        "SELECT id, parent_id, covered_through_seq, generation FROM ctx_checkpoints "
        "WHERE tenant = ? AND thread_id = ? AND status IN ('active', 'superseded')",
        (scope.tenant, scope.thread_id),
        "all",
    )
    versions = {row[0]: row for row in rows}
    current = versions.get(parent.active_id)
    while current is not None and int(current[2]) > fork_seq:
        current = versions.get(current[1]) if current[1] else None
    return (None, 0) if current is None else (current[0], int(current[3]))


def _followed_checkpoint(
    scope: Scope, parent: Branch, fork_seq: int, active: str | None
) -> Op[tuple[str | None, int]]:
    """``active`` (the summary the forking state uses) when it is a committed version the fork
    shares: on the parent's lineage, covering only shared events; else none."""
    if active is None:
        return None, 0
    row = yield Stmt(
        "SELECT branch, covered_through_seq, generation FROM ctx_checkpoints WHERE tenant = ? "
        "AND thread_id = ? AND id = ? AND status IN ('active', 'superseded')",
        (scope.tenant, scope.thread_id, active),
        "one",
    )
    if row is None or int(row[1]) > fork_seq:
        return None, 0
    _, chain = yield from _with_lineage(scope, parent)
    shared = any(
        name == row[0] and (bound is None or int(row[1]) <= bound) for name, bound in chain
    )
    return (active, int(row[2])) if shared else (None, 0)


def create_branch(
    d: Dialect,
    scope: Scope,
    from_branch: str,
    fork_seq: int,
    now: dt.datetime,
    *,
    follow: bool = False,
    active: str | None = None,
) -> Op[BranchInfo]:
    """Fork ``from_branch`` after ``fork_seq`` into ``scope.branch`` (see
    :meth:`~ctx_langgraph.history.HistoryStore.create_branch`). With ``follow``, its active
    summary is ``active`` (the forking state's), when that version covers only shared events,
    else none: never one the state does not show."""
    fork_seq = integer_arg("fork_seq", fork_seq)
    return _create_branch(d, scope, from_branch, fork_seq, now, follow, active)


def _create_branch(
    d: Dialect,
    scope: Scope,
    from_branch: str,
    fork_seq: int,
    now: dt.datetime,
    follow: bool = False,
    active: str | None = None,
) -> Op[BranchInfo]:
    if scope.branch == from_branch:
        raise ScopeError(f"a branch cannot be forked from itself ({scope})")
    parent, _ = yield from lock_branch(d, scope.on_branch(from_branch), now, create=True)
    if not 0 <= fork_seq <= parent.head_seq:
        raise ScopeError(
            f"fork_seq {fork_seq} is outside branch {from_branch!r} of {scope.thread_id!r}, "
            f"whose events run from 1 to {parent.head_seq}"
        )
    existing = yield select_branch(d, scope, lock=True)
    if existing is not None:
        branch = Branch.from_row(existing)
        if branch.parent == from_branch and branch.fork_seq == fork_seq:
            return branch.info(d, scope)
        raise ScopeError(
            f"branch {scope.branch!r} of {scope.thread_id!r} already exists, forked from "
            f"{branch.parent!r} at seq {branch.fork_seq}, not from {from_branch!r} at seq {fork_seq}"
        )
    if follow:
        active_id, generation = yield from _followed_checkpoint(scope, parent, fork_seq, active)
    else:
        active_id, generation = yield from _inherited_checkpoint(scope, parent, fork_seq)
    yield Stmt(
        "INSERT INTO ctx_branches (tenant, thread_id, branch, parent_branch, fork_seq, head_seq, "
        "active_checkpoint_id, active_generation, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            scope.tenant,
            scope.thread_id,
            scope.branch,
            from_branch,
            fork_seq,
            fork_seq,
            active_id,
            generation,
            d.ts(now),
        ),
    )
    return BranchInfo(scope, from_branch, fork_seq, fork_seq, active_id, generation, now)


THREAD_TABLES = (
    "ctx_event_vectors",
    "ctx_event_revisions",
    "ctx_event_edits",
    "ctx_events",
    "ctx_checkpoints",
    "ctx_segments",
    "ctx_branches",
    "ctx_threads",
)
"""Every history table that holds a thread's rows, children first."""


def delete_thread(scope: Scope) -> Op[dict[str, int]]:
    """Every history row of one thread (all its branches); returns the rows deleted per table."""
    deleted: dict[str, int] = {}
    for table in THREAD_TABLES:
        deleted[table] = yield Stmt(
            f"DELETE FROM {table} WHERE tenant = ? AND thread_id = ?",
            (scope.tenant, scope.thread_id),
            "rowcount",
        )
    return deleted
