"""What the inspector reads from the stores: read-only, and bounded by what one page shows (one
page of the timeline, the newest lookups; per thread its summaries, segments, ledger rows and
memories)."""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctx_langgraph.errors import HistoryStoreError, ScopeError
from ctx_langgraph.history import (
    BranchInfo,
    CompactionCheckpoint,
    HistoryEvent,
    HistoryStore,
    Scope,
)
from ctx_langgraph.history.types import Segment, ThreadRow
from ctx_langgraph.storage.migrations import SCHEMA_VERSION
from ctx_langgraph.usage.booking import LedgerRecord
from ctx_langgraph.usage.ledger import UsageLedger

if TYPE_CHECKING:
    from ctx_langgraph.memory import LongTermMemory

PAGE_SIZE = 200
"""Seqs on one page of the timeline."""

LOOKUPS_SHOWN = 50
"""The newest history lookups a thread's page shows."""

CALLS_SHOWN = 50
"""The newest calls a thread's page shows whole (the plot and the totals count them all)."""

PAIR_REACH = 40
"""Seqs read beyond each edge of a timeline page, to pair a call with its result there."""


@dataclass(frozen=True)
class CallRow:
    """One model call of the usage ledger, with the make-up of its request when recorded."""

    call_key: str
    purpose: str
    provider: str
    model: str
    status: str
    input_total: int | None
    cache_read: int | None
    output: int | None
    cost: float | None
    cacheable_prefix: int | None
    makeup: dict[str, int] | None
    created_at: dt.datetime | None


@dataclass(frozen=True)
class CallPoint:
    """One call as the plot and the totals need it: its booking time for summarizer calls only,
    the window and trigger its make-up names (None when not recorded)."""

    purpose: str
    input_total: int | None
    cost: float | None
    created_at: dt.datetime | None
    window: int | None = None
    trigger: int | None = None


@dataclass(frozen=True)
class LookupRow:
    """One history lookup: the seq of its result, of the reply that asked (when found), its
    arguments and its result."""

    seq: int
    call_seq: int | None
    arguments: dict[str, Any]
    result: str


@dataclass(frozen=True)
class Timeline:
    """One page of a thread's raw history: its events, its deleted seqs (with the edit version
    that deleted them) and the events within :data:`PAIR_REACH` seqs around it."""

    page: int
    pages: int
    first_seq: int
    last_seq: int
    events: list[HistoryEvent]
    deleted: dict[int, int]
    neighbours: list[HistoryEvent]


@dataclass
class ThreadData:
    """Everything one thread's page shows, but the timeline."""

    scope: Scope
    info: BranchInfo
    branches: list[BranchInfo]
    versions: list[CompactionCheckpoint]
    """Every summary version, oldest generation first."""
    segments: list[Segment]
    points: list[CallPoint]
    """Every call of the branch, oldest first."""
    calls: list[CallRow]
    """The newest :data:`CALLS_SHOWN` calls whole, oldest first."""
    lookups: list[LookupRow]
    memories: list[dict[str, Any]] | None
    """The thread's long-term memory records (None: no memory store given)."""
    event_count: int
    hidden: set[int]
    """The hidden seqs (from the edit log)."""
    edits: list[tuple[int, str, int, str]]
    """The edit log of the branch's lineage: ``(edit_version, branch, seq, kind)``."""
    lookup_tool: str

    @functools.cached_property
    def summary_points(self) -> list[CallPoint]:
        """The summarizer's calls (purpose ``summary``), oldest first."""
        return [point for point in self.points if point.purpose == "summary"]

    @functools.cached_property
    def active(self) -> CompactionCheckpoint | None:
        """The active summary version, if any."""
        return next((v for v in self.versions if v.id == self.info.active_checkpoint_id), None)

    @property
    def covered_through(self) -> int:
        """The last seq the active summary covers (0: none)."""
        return self.active.covered_through_seq if self.active else 0


def check_schema(store: HistoryStore) -> None:
    """Check the store is at the schema this version reads (the inspector never migrates it).

    Raises:
        HistoryStoreError: the database is not a history store, or at another schema version.
    """
    version = store.schema_version()
    if version == 0:
        raise HistoryStoreError("not a ctx-langgraph history store (no ctx_migrations table)")
    if version > SCHEMA_VERSION:
        raise HistoryStoreError(
            f"the history store is at schema version {version}, newer than this ctx-langgraph "
            f"reads ({SCHEMA_VERSION}); inspect it with the ctx-langgraph that wrote it"
        )
    if version < SCHEMA_VERSION:
        raise HistoryStoreError(
            f"the history store is at schema version {version}, older than this ctx-langgraph "
            f"reads ({SCHEMA_VERSION}); the inspector only reads, so run store.setup() (or the "
            "agent) once to upgrade it"
        )


def list_threads(store: HistoryStore, tenant: str, limit: int = 500) -> list[ThreadRow]:
    """The tenant's threads, newest first (at most ``limit``)."""
    return store.list_threads(tenant, limit=limit)


def _point(record: LedgerRecord) -> CallPoint:
    makeup = record.makeup or {}
    return CallPoint(
        record.purpose,
        record.usage.input_total,
        record.cost,
        record.created_at if record.purpose == "summary" else None,
        window=makeup.get("window"),
        trigger=makeup.get("trigger"),
    )


def _call(record: LedgerRecord) -> CallRow:
    usage = record.usage
    return CallRow(
        call_key=record.call_key,
        purpose=record.purpose,
        provider=usage.provider,
        model=usage.model or "",
        status=record.status,
        input_total=usage.input_total,
        cache_read=usage.cache_read,
        output=usage.output,
        cost=record.cost,
        cacheable_prefix=record.cacheable_prefix,
        makeup=record.makeup,
        created_at=record.created_at,
    )


def _hidden(edits: Sequence[tuple[int, str, int, str]]) -> set[int]:
    """The seqs whose last hide, show or delete in the edit log was a hide."""
    last = {seq: kind for _, _, seq, kind in edits if kind in ("hide", "show", "delete")}
    return {seq for seq, kind in last.items() if kind == "hide"}


def _lookups(store: HistoryStore, scope: Scope, tool: str) -> list[LookupRow]:
    page = store.search(scope, roles="tool", tool_name=tool, limit=LOOKUPS_SHOWN, newest_first=True)
    lookups = []
    for result in page.hits:
        call_id = result.tool_call_ids[0] if result.tool_call_ids else None
        asked = store.read_events(
            scope, from_seq=max(1, result.seq - 40), to_seq=result.seq, include_hidden=True
        )
        call_seq, arguments = next(
            (
                (event.seq, dict(call.get("args") or {}))
                for event in reversed(asked)
                for call in event.content.get("data", {}).get("tool_calls") or []
                if call.get("id") == call_id
            ),
            (None, {}),
        )
        lookups.append(LookupRow(result.seq, call_seq, arguments, result.text))
    return lookups


def _lineage_names(branches: Sequence[BranchInfo], name: str | None) -> set[str]:
    by_name = {b.scope.branch: b for b in branches}
    names: set[str] = set()
    while name is not None and name in by_name and name not in names:
        names.add(name)
        name = by_name[name].parent_branch
    return names


def read_thread(
    store: HistoryStore,
    scope: Scope,
    *,
    memory: LongTermMemory | None = None,
    lookup_tool: str = "history_lookup",
) -> ThreadData:
    """One thread's summaries, segments, calls, lookups and memories (not its timeline).

    Raises:
        ScopeError: the store has no history for the thread (or this branch of it).
    """
    info = store.branch_info(scope)
    if info is None:
        raise ScopeError(
            f"no history for thread {scope.thread_id!r} (tenant {scope.tenant!r}, "
            f"branch {scope.branch!r}) in this store"
        )
    branches = store.list_branches(scope)
    lineage = _lineage_names(branches, scope.branch)
    edits = [edit for edit in store.edits_since(scope, 0) if edit[1] in lineage]
    records = UsageLedger(store).records(scope, branch=scope.branch)
    return ThreadData(
        scope=scope,
        info=info,
        branches=branches,
        versions=sorted(store.list_versions(scope), key=lambda v: (v.generation, v.created_at)),
        segments=store.segments(scope, statuses=("active", "invalid", "superseded")),
        points=[_point(record) for record in records],
        calls=[_call(record) for record in records[-CALLS_SHOWN:]],
        lookups=_lookups(store, scope, lookup_tool),
        memories=None if memory is None else memory.export_thread(scope),
        event_count=info.head_seq,
        hidden=_hidden(edits),
        edits=edits,
        lookup_tool=lookup_tool,
    )


def page_of(seq: int) -> int:
    """The timeline page that holds ``seq`` (pages count from 1)."""
    return max(1, math.ceil(seq / PAGE_SIZE))


def read_timeline(store: HistoryStore, data: ThreadData, page: int | None = None) -> Timeline:
    """One page of the thread's raw history (hidden events included), the last page by default."""
    pages = page_of(data.info.head_seq)
    page = pages if page is None else min(max(1, page), pages)
    first = (page - 1) * PAGE_SIZE + 1
    last = min(page * PAGE_SIZE, data.info.head_seq)

    def read(start: int, end: int) -> list[HistoryEvent]:
        return store.read_events(data.scope, from_seq=start, to_seq=end, include_hidden=True)

    deleted = {
        seq: version
        for version, _, seq, kind in data.edits
        if kind == "delete" and first <= seq <= last
    }
    before = read(max(1, first - PAIR_REACH), first - 1) if first > 1 else []
    neighbours = [*before, *read(last + 1, last + PAIR_REACH)]
    return Timeline(page, pages, first, last, read(first, last), deleted, neighbours)
