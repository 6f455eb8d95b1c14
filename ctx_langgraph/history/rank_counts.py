"""What a ranked search counts over a branch before it scores: the visible events that pass
the filters, per speaker's name. A store keeps these counts (:class:`RankCounts`) stamped with
the thread's creation time, edit counter and head seq: a grown branch counts only what was
appended since, an edit counts again from the start."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctx_langgraph.history.branches import Branch, Lineage, branch_map, lineage, missing_branch
from ctx_langgraph.history.rows import BRANCH_COLS
from ctx_langgraph.history.types import DEFAULT_BRANCH, Scope
from ctx_langgraph.storage.statements import Op, Stmt, marks

__all__ = [
    "DEFAULT_COUNT_ENTRIES",
    "PEOPLE",
    "RankCounts",
    "Stamp",
    "Stamped",
    "read_stamped",
    "speaker_counts",
]

PEOPLE = ("human", "ai")
"""The roles whose messages count their speaker's name."""
DEFAULT_COUNT_ENTRIES = 1024
"""Counts a store keeps at most (one per thread, branch and filter searched; a few hundred bytes
each)."""

_BRANCH = ", ".join(f"b.{column.strip()}" for column in BRANCH_COLS.split(","))


@dataclass(frozen=True)
class Stamp:
    """What a thread's events and vectors were read at: its creation time (``incarnation``),
    its edit counter and its vector version."""

    incarnation: str
    edit_version: int
    vector_version: int


@dataclass(frozen=True)
class Stamped:
    """A branch row, its lineage, and its thread's :class:`Stamp` (None: no thread row)."""

    branch: Branch
    chain: Lineage
    stamp: Stamp | None


def read_stamped(scope: Scope) -> Op[Stamped | None]:
    """The scope's branch, its lineage and its thread's stamp; None for the not-yet-written
    default branch (ScopeError for another missing branch)."""
    row = yield Stmt(
        f"SELECT {_BRANCH}, t.edit_version, t.created_at, t.vector_version FROM ctx_branches b "
        "LEFT JOIN ctx_threads t ON t.tenant = b.tenant AND t.thread_id = b.thread_id "
        "WHERE b.tenant = ? AND b.thread_id = ? AND b.branch = ?",
        (scope.tenant, scope.thread_id, scope.branch),
        "one",
    )
    if row is None:
        if scope.branch == DEFAULT_BRANCH:
            return None
        raise missing_branch(scope)
    branch = Branch.from_row(row[:7])
    stamp = None if row[8] is None else Stamp(str(row[8]), int(row[7] or 0), int(row[9] or 0))
    if branch.parent is None:
        return Stamped(branch, [(branch.name, None)], stamp)
    branches = yield from branch_map(scope)
    return Stamped(branch, lineage(branches, branch.name), stamp)


@dataclass(frozen=True)
class _Counted:
    incarnation: str
    edit_version: int
    head_seq: int
    speakers: tuple[tuple[str | None, int], ...]


class RankCounts:
    """A store's counts by (tenant, thread, branch, filter), least recently used out first."""

    def __init__(self, max_entries: int = DEFAULT_COUNT_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[Any, ...], _Counted] = OrderedDict()
        self._lock = threading.Lock()
        self.passes = 0
        """Counts made over the whole branch (the others counted only what was appended)."""

    def get(self, key: tuple[Any, ...]) -> _Counted | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[Any, ...], entry: _Counted) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)


def _count(
    scope: Scope, where: Sequence[str], args: Sequence[Any], after: int | None, head: int
) -> Op[tuple[dict[str | None, int], int | None]]:
    """(messages per speaker, None for the others) of the filtered events up to the branch's
    ``head`` (after ``after`` on the branch itself when given), and the thread's edit counter
    as the same statement saw it (None when nothing matched)."""
    people = marks(len(PEOPLE))
    bound = ["(e.branch <> ? OR e.seq <= ?)"]
    bound_args: list[Any] = [scope.branch, head]
    if after is not None:
        bound, bound_args = ["e.branch = ?", "e.seq > ?", "e.seq <= ?"], [scope.branch, after, head]
    rows = yield Stmt(
        f"SELECT CASE WHEN e.role IN ({people}) THEN e.name END AS speaker, count(*), "
        "(SELECT t.edit_version FROM ctx_threads t WHERE t.tenant = ? AND t.thread_id = ?) "
        f"FROM ctx_events e WHERE {' AND '.join([*where, *bound])} GROUP BY speaker",
        (*PEOPLE, scope.tenant, scope.thread_id, *args, *bound_args),
        "all",
    )
    counts = {row[0]: int(row[1]) for row in rows}
    return counts, (int(rows[0][2] or 0) if rows else None)


def speaker_counts(
    scope: Scope,
    found: Stamped,
    where: Sequence[str],
    args: Sequence[Any],
    cache: RankCounts | None,
) -> Op[dict[str | None, int]]:
    """The branch's filtered events counted per speaker's name (None: no person's name), from
    ``cache`` at the same stamp plus what was appended since, or counted whole."""
    head, stamp = found.branch.head_seq, found.stamp
    key = (scope.tenant, scope.thread_id, scope.branch, " AND ".join(where), tuple(args))
    entry = None if cache is None or stamp is None else cache.get(key)
    usable = (
        entry is not None
        and stamp is not None
        and (entry.incarnation, entry.edit_version) == (stamp.incarnation, stamp.edit_version)
        and entry.head_seq <= head
    )
    if entry is not None and usable:
        counts = dict(entry.speakers)
        if entry.head_seq < head:
            added, seen = yield from _count(scope, where, args, entry.head_seq, head)
            for name, count in added.items():
                counts[name] = counts.get(name, 0) + count
            if seen is not None and seen != entry.edit_version:
                return counts  # an edit landed meanwhile: used once, not kept
    else:
        counts, seen = yield from _count(scope, where, args, None, head)
        if cache is not None:
            cache.passes += 1
        if stamp is None or seen not in (None, stamp.edit_version):
            return counts
    if cache is not None and stamp is not None:
        speakers = tuple(counts.items())
        cache.put(key, _Counted(stamp.incarnation, stamp.edit_version, head, speakers))
    return counts
