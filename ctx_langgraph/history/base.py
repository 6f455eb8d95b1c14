"""The history store interface, shared by the SQLite and PostgreSQL backends.

Every public method has an ``a``-prefixed async twin. Both build the same operation (a pure
generator from ``_ops``) and hand it to the backend's sync or async runner, so the logic exists
once; a backend implements only :meth:`HistoryStore._execute` and :meth:`HistoryStore._aexecute`.
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from langchain_core.messages import BaseMessage

from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.history import _ops
from ctx_langgraph.history._serde import message_to_row
from ctx_langgraph.history._sql import SCHEMA_VERSION, Dialect, Stmt
from ctx_langgraph.history.types import (
    AppendResult,
    BranchInfo,
    CompactionCheckpoint,
    CoverageSnapshot,
    HistoryEvent,
    KeyFact,
    Scope,
    SearchPage,
)
from ctx_langgraph.threads import ops as _thread_ops
from ctx_langgraph.threads.document import export_scope

if TYPE_CHECKING:
    from ctx_langgraph.memory import LongTermMemory

__all__ = ["EditListener", "HistoryStore"]


@runtime_checkable
class EditListener(Protocol):
    """Told after events are deleted, hidden or revised, or a thread is deleted (``kind`` is
    ``"deleted"``, ``"hidden"``, ``"revised"`` or ``"thread_deleted"``), so what was derived
    from them elsewhere goes too. :class:`~ctx_langgraph.memory.LongTermMemory` is one."""

    def events_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...

    async def aevents_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...


T = TypeVar("T")
Self = TypeVar("Self", bound="HistoryStore")


@dataclass(frozen=True)
class _Call(Generic[T]):
    """An operation ready to run, and whether it writes."""

    op: _ops.Op[T]
    write: bool
    checked: bool = True
    """Check the schema version first (everything but setup)."""


def drive(op: _ops.Op[T], execute: Callable[[Stmt], Any]) -> T:
    """Run an operation generator with a synchronous statement executor."""
    try:
        stmt = next(op)
        while True:
            stmt = op.send(execute(stmt))
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        op.close()


async def adrive(op: _ops.Op[T], execute: Callable[[Stmt], Awaitable[Any]]) -> T:
    """Run an operation generator with an asynchronous statement executor."""
    try:
        stmt = next(op)
        while True:
            stmt = op.send(await execute(stmt))
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        op.close()


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _checkpoint_id(candidate: CompactionCheckpoint | str) -> str:
    return candidate.id if isinstance(candidate, CompactionCheckpoint) else candidate


class HistoryStore(abc.ABC):
    """Raw history, compaction checkpoints, their active pointer, search (docs/design.md §4).

    Use :class:`~ctx_langgraph.history.SQLiteHistoryStore` (embedded default) or
    :class:`~ctx_langgraph.history.PostgresHistoryStore`; both pass the same conformance suite.
    Call :meth:`setup` once to create or migrate the tables.
    """

    dialect: Dialect

    def __init__(self, *, clock: Callable[[], dt.datetime] = _utcnow) -> None:
        self._clock = clock
        self._schema_checked = False
        self._edit_listeners: list[EditListener] = []

    def add_edit_listener(self, listener: EditListener) -> None:
        """Tell ``listener`` about every delete, hide and revision made through this store
        object, after it commits (adding the same listener twice is a no-op)."""
        if not any(existing is listener for existing in self._edit_listeners):
            self._edit_listeners.append(listener)

    def _tell(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None:
        if event_ids or kind == "thread_deleted":
            for listener in self._edit_listeners:
                listener.events_edited(scope, event_ids, kind)

    async def _atell(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None:
        if event_ids or kind == "thread_deleted":
            for listener in self._edit_listeners:
                await listener.aevents_edited(scope, event_ids, kind)

    @staticmethod
    def _revised(results: list[AppendResult]) -> list[str]:
        return [r.event_id for r in results if r.status == "revised"]

    # ------------------------------------------------------------------ backend hooks

    @abc.abstractmethod
    def _execute(self, op: _ops.Op[T], *, write: bool) -> T:
        """Run ``op`` in one transaction (a write transaction when ``write``)."""

    @abc.abstractmethod
    async def _aexecute(self, op: _ops.Op[T], *, write: bool) -> T:
        """Async twin of :meth:`_execute`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connections."""

    async def aclose(self) -> None:
        self.close()

    # ------------------------------------------------------------------ running

    def _schema_error(self, version: int) -> HistoryStoreError | None:
        if version == SCHEMA_VERSION:
            return None
        if version < SCHEMA_VERSION:
            return HistoryStoreError(
                f"the {self.dialect.name} history store schema is at version {version}, this "
                f"ctx-langgraph needs version {SCHEMA_VERSION}: call setup() (or asetup()) first"
            )
        return HistoryStoreError(
            f"the {self.dialect.name} history store schema is at version {version}, newer than "
            f"this ctx-langgraph understands ({SCHEMA_VERSION}); upgrade ctx-langgraph"
        )

    def _run(self, call: _Call[T]) -> T:
        if call.checked and not self._schema_checked:
            error = self._schema_error(
                self._execute(_ops.schema_version(self.dialect), write=False)
            )
            if error:
                raise error
            self._schema_checked = True
        return self._execute(call.op, write=call.write)

    async def _arun(self, call: _Call[T]) -> T:
        if call.checked and not self._schema_checked:
            version = await self._aexecute(_ops.schema_version(self.dialect), write=False)
            error = self._schema_error(version)
            if error:
                raise error
            self._schema_checked = True
        return await self._aexecute(call.op, write=call.write)

    # ------------------------------------------------------------------ context managers

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self: Self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ operations (built once)

    def _setup(self) -> _Call[int]:
        return _Call(_ops.setup(self.dialect), write=True, checked=False)

    def _append(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage] | BaseMessage,
        created_at: dt.datetime | Sequence[dt.datetime] | None,
    ) -> _Call[list[AppendResult]]:
        scope = checked_scope(scope)
        if isinstance(messages, BaseMessage):
            messages = [messages]
        rows = [message_to_row(message) for message in messages]
        now = self._clock()
        if created_at is None:
            created = [now] * len(rows)
        elif isinstance(created_at, dt.datetime):
            created = [created_at] * len(rows)
        else:
            created = list(created_at)
            if len(created) != len(rows):
                raise ValueError(f"got {len(rows)} messages but {len(created)} created_at values")
        for when in created:
            if not isinstance(when, dt.datetime):
                raise TypeError(f"created_at must be a datetime, got {type(when).__name__}")
            try:  # stored as UTC and read back as a UTC datetime
                when.astimezone(dt.timezone.utc)
            except OverflowError:
                raise ValueError(
                    f"created_at {when.isoformat()} is outside the years 1 to 9999 in UTC"
                ) from None
        return _Call(_ops.append(self.dialect, scope, rows, created, now), write=True)

    def _search(self, scope: Scope | str, **filters: Any) -> _Call[SearchPage]:
        roles = filters.pop("roles", None)
        if isinstance(roles, str):
            roles = (roles,)
        flt = _ops.SearchFilter(roles=tuple(roles or ()), **filters)
        return _Call(_ops.search(self.dialect, checked_scope(scope), flt), write=False)

    def _create_candidate(
        self, snapshot: CoverageSnapshot, **content: Any
    ) -> _Call[CompactionCheckpoint]:
        content["key_facts"] = tuple(content.get("key_facts") or ())
        return _Call(
            _ops.create_candidate(
                self.dialect, snapshot, _ops.CandidateContent(**content), self._clock()
            ),
            write=True,
        )

    # ------------------------------------------------------------------ public API: schema

    def setup(self) -> int:
        """Create or migrate the tables (idempotent, safe to call from several processes).

        Returns:
            The schema version now in the database.
        """
        version = self._run(self._setup())
        self._schema_checked = True
        return version

    async def asetup(self) -> int:
        """Async twin of :meth:`setup`."""
        version = await self._arun(self._setup())
        self._schema_checked = True
        return version

    # ------------------------------------------------------------------ public API: events

    def append(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage] | BaseMessage,
        *,
        created_at: dt.datetime | Sequence[dt.datetime] | None = None,
    ) -> list[AppendResult]:
        """Record messages at the end of a branch, in one transaction.

        Idempotent by message id: a message already recorded (here or, for a branch, in the
        shared part of its parent) with the same content is a ``duplicate`` and keeps its seq;
        with changed content it becomes a new ``revision`` of the same seq. New messages get
        consecutive seqs with no gap, even with concurrent appenders.

        Args:
            scope: the branch to append to, or a bare thread id.
            messages: LangChain messages; one without an id gets a fresh UUID.
            created_at: when the messages happened (one value, or one per message); now by default.

        Returns:
            One :class:`AppendResult` per message, in order.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     [r.seq for r in store.append("t1", [HumanMessage("hi", id="m1"), HumanMessage("yo", id="m2")])]
            ...     store.append("t1", [HumanMessage("hi", id="m1")])[0].status
            [1, 2]
            'duplicate'
        """
        results = self._run(self._append(scope, messages, created_at))
        if self._edit_listeners and (revised := self._revised(results)):
            self._tell(checked_scope(scope), revised, "revised")
        return results

    async def aappend(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage] | BaseMessage,
        *,
        created_at: dt.datetime | Sequence[dt.datetime] | None = None,
    ) -> list[AppendResult]:
        """Async twin of :meth:`append`."""
        results = await self._arun(self._append(scope, messages, created_at))
        if self._edit_listeners and (revised := self._revised(results)):
            await self._atell(checked_scope(scope), revised, "revised")
        return results

    def read_events(
        self,
        scope: Scope | str,
        *,
        from_seq: int = 1,
        to_seq: int | None = None,
        limit: int | None = None,
        include_hidden: bool = False,
    ) -> list[HistoryEvent]:
        """The branch's events (inherited ones included) from ``from_seq`` on, in seq order."""
        op = _ops.read_events(
            self.dialect, checked_scope(scope), from_seq, to_seq, limit, include_hidden
        )
        return self._run(_Call(op, write=False))

    async def aread_events(
        self,
        scope: Scope | str,
        *,
        from_seq: int = 1,
        to_seq: int | None = None,
        limit: int | None = None,
        include_hidden: bool = False,
    ) -> list[HistoryEvent]:
        """Async twin of :meth:`read_events`."""
        op = _ops.read_events(
            self.dialect, checked_scope(scope), from_seq, to_seq, limit, include_hidden
        )
        return await self._arun(_Call(op, write=False))

    def get_event(
        self, scope: Scope | str, event_id: str, *, include_hidden: bool = False
    ) -> HistoryEvent | None:
        """One event by message id in the branch's view, or None."""
        op = _ops.get_event(self.dialect, checked_scope(scope), event_id, include_hidden)
        return self._run(_Call(op, write=False))

    async def aget_event(
        self, scope: Scope | str, event_id: str, *, include_hidden: bool = False
    ) -> HistoryEvent | None:
        """Async twin of :meth:`get_event`."""
        op = _ops.get_event(self.dialect, checked_scope(scope), event_id, include_hidden)
        return await self._arun(_Call(op, write=False))

    def event_revisions(
        self, scope: Scope | str, event_id: str
    ) -> list[tuple[int, dict[str, Any]]]:
        """Earlier revisions of an event, oldest first, as (revision, message record)."""
        op = _ops.event_revisions(self.dialect, checked_scope(scope), event_id)
        return self._run(_Call(op, write=False))

    async def aevent_revisions(
        self, scope: Scope | str, event_id: str
    ) -> list[tuple[int, dict[str, Any]]]:
        """Async twin of :meth:`event_revisions`."""
        op = _ops.event_revisions(self.dialect, checked_scope(scope), event_id)
        return await self._arun(_Call(op, write=False))

    def edits_since(self, scope: Scope | str, version: int) -> list[tuple[int, str, int, str]]:
        """The thread's edit log after edit version ``version`` (every branch), oldest first, as
        ``(edit_version, branch, seq, kind)`` with ``kind`` ``"hide"``, ``"show"``,
        ``"delete"`` or ``"revise"``. ``branch_info(...).edit_version`` is the newest version.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("a", id="m1"), HumanMessage("b", id="m2")])
            ...     _ = store.delete_events("t", ["m2"])
            ...     store.edits_since("t", 0)
            [(1, 'main', 2, 'delete')]
        """
        return self._run(
            _Call(_ops.edits_since(self.dialect, checked_scope(scope), version), write=False)
        )

    async def aedits_since(
        self, scope: Scope | str, version: int
    ) -> list[tuple[int, str, int, str]]:
        """Async twin of :meth:`edits_since`."""
        op = _ops.edits_since(self.dialect, checked_scope(scope), version)
        return await self._arun(_Call(op, write=False))

    def hide_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> int:
        """Hide events from reads and search (kept for audit); returns how many changed.

        An event inherited from a parent branch is one shared row: hiding it hides it in every
        branch that shares it. Candidates covering a hidden event become stale.
        """
        ids = _ops.id_list("event_ids", event_ids)
        op = _ops.hide_events(self.dialect, checked_scope(scope), ids, self._clock())
        changed = self._run(_Call(op, write=True))
        self._tell(checked_scope(scope), ids, "hidden")
        return changed

    async def ahide_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> int:
        """Async twin of :meth:`hide_events`."""
        ids = _ops.id_list("event_ids", event_ids)
        op = _ops.hide_events(self.dialect, checked_scope(scope), ids, self._clock())
        changed = await self._arun(_Call(op, write=True))
        await self._atell(checked_scope(scope), ids, "hidden")
        return changed

    def show_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> int:
        """Make hidden events visible again; returns how many changed."""
        ids = _ops.id_list("event_ids", event_ids)
        op = _ops.show_events(self.dialect, checked_scope(scope), ids, self._clock())
        return self._run(_Call(op, write=True))

    async def ashow_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> int:
        """Async twin of :meth:`show_events`."""
        ids = _ops.id_list("event_ids", event_ids)
        op = _ops.show_events(self.dialect, checked_scope(scope), ids, self._clock())
        return await self._arun(_Call(op, write=True))

    def delete_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> int:
        """Delete events and their earlier revisions for good; returns how many were deleted.

        Seqs are never reused. Candidates covering a deleted event become stale.
        """
        ids = _ops.id_list("event_ids", event_ids)
        op = _ops.delete_events(self.dialect, checked_scope(scope), ids, self._clock())
        changed = self._run(_Call(op, write=True))
        self._tell(checked_scope(scope), ids, "deleted")
        return changed

    async def adelete_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> int:
        """Async twin of :meth:`delete_events`."""
        ids = _ops.id_list("event_ids", event_ids)
        op = _ops.delete_events(self.dialect, checked_scope(scope), ids, self._clock())
        changed = await self._arun(_Call(op, write=True))
        await self._atell(checked_scope(scope), ids, "deleted")
        return changed

    # ------------------------------------------------------------------ public API: branches

    def create_branch(self, scope: Scope, from_branch: str, fork_seq: int) -> BranchInfo:
        """Fork ``from_branch`` after ``fork_seq`` into ``scope.branch``.

        The new branch reads the parent's events up to ``fork_seq`` (shared, not copied) and its
        own after that; its seqs continue at ``fork_seq + 1``. Its active summary starts as the
        newest summary on the parent's chain that covers only shared events. Creating the same
        branch again with the same parent and fork point is a no-op.
        """
        parent = checked_scope(checked_scope(scope).on_branch(from_branch))
        op = _ops.create_branch(
            self.dialect, checked_scope(scope), parent.branch, fork_seq, self._clock()
        )
        return self._run(_Call(op, write=True))

    async def acreate_branch(self, scope: Scope, from_branch: str, fork_seq: int) -> BranchInfo:
        """Async twin of :meth:`create_branch`."""
        parent = checked_scope(checked_scope(scope).on_branch(from_branch))
        op = _ops.create_branch(
            self.dialect, checked_scope(scope), parent.branch, fork_seq, self._clock()
        )
        return await self._arun(_Call(op, write=True))

    def branch_info(self, scope: Scope | str) -> BranchInfo | None:
        """The branch's lineage, head seq and active pointer, or None if it has no row yet."""
        return self._run(_Call(_ops.branch_info(self.dialect, checked_scope(scope)), write=False))

    async def abranch_info(self, scope: Scope | str) -> BranchInfo | None:
        """Async twin of :meth:`branch_info`."""
        return await self._arun(
            _Call(_ops.branch_info(self.dialect, checked_scope(scope)), write=False)
        )

    def list_branches(self, scope: Scope | str) -> list[BranchInfo]:
        """Every branch of the scope's thread."""
        return self._run(_Call(_ops.list_branches(self.dialect, checked_scope(scope)), write=False))

    async def alist_branches(self, scope: Scope | str) -> list[BranchInfo]:
        """Async twin of :meth:`list_branches`."""
        return await self._arun(
            _Call(_ops.list_branches(self.dialect, checked_scope(scope)), write=False)
        )

    # ------------------------------------------------------------------ public API: search

    def search(
        self,
        scope: Scope | str,
        query: str | None = None,
        *,
        min_seq: int | None = None,
        max_seq: int | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        roles: Sequence[str] | str | None = None,
        tool_name: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        newest_first: bool = False,
    ) -> SearchPage:
        """Find visible events of a branch, one page at a time, in seq order.

        ``query`` matches events containing every word of it (full-text: SQLite FTS5,
        PostgreSQL tsvector). The other filters narrow by seq range, time range
        (``since <= created_at < until``), role and tool name (tool results of, and AI calls
        to, that tool). Pass a page's ``next_cursor`` back to get the next page; pages never
        repeat or skip a hit, even while events are appended.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"order {n} shipped", id=f"m{n}") for n in range(5)])
            ...     page = store.search("t", "shipped", limit=3)
            ...     [hit.seq for hit in page.hits], page.has_more
            ...     [hit.seq for hit in store.search("t", "shipped", limit=3, cursor=page.next_cursor).hits]
            ([1, 2, 3], True)
            [4, 5]
        """
        call = self._search(
            scope,
            query=query,
            min_seq=min_seq,
            max_seq=max_seq,
            since=since,
            until=until,
            roles=roles,
            tool_name=tool_name,
            limit=limit,
            cursor=cursor,
            newest_first=newest_first,
        )
        return self._run(call)

    async def asearch(
        self,
        scope: Scope | str,
        query: str | None = None,
        *,
        min_seq: int | None = None,
        max_seq: int | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        roles: Sequence[str] | str | None = None,
        tool_name: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        newest_first: bool = False,
    ) -> SearchPage:
        """Async twin of :meth:`search`."""
        call = self._search(
            scope,
            query=query,
            min_seq=min_seq,
            max_seq=max_seq,
            since=since,
            until=until,
            roles=roles,
            tool_name=tool_name,
            limit=limit,
            cursor=cursor,
            newest_first=newest_first,
        )
        return await self._arun(call)

    # ------------------------------------------------------------------ public API: compaction

    def snapshot(self, scope: Scope | str, through_seq: int) -> CoverageSnapshot:
        """Fix the span a new summary will cover: from the active summary's cursor + 1 through
        ``through_seq``. Summarize ``snapshot.events`` (plus the active summary), then call
        :meth:`create_candidate` and :meth:`commit_candidate`."""
        return self._run(
            _Call(_ops.snapshot(self.dialect, checked_scope(scope), through_seq), write=False)
        )

    async def asnapshot(self, scope: Scope | str, through_seq: int) -> CoverageSnapshot:
        """Async twin of :meth:`snapshot`."""
        return await self._arun(
            _Call(_ops.snapshot(self.dialect, checked_scope(scope), through_seq), write=False)
        )

    def create_candidate(
        self,
        snapshot: CoverageSnapshot,
        *,
        summary_text: str | None,
        key_facts: Sequence[KeyFact] = (),
        first_kept_event_id: str | None = None,
        summarizer_id: str | None = None,
        summary_tokens: int | None = None,
        format_version: int = 1,
        provider_state: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> CompactionCheckpoint:
        """Store a candidate summary built from ``snapshot`` (status ``candidate``, not yet active).

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(10)])
            ...     snap = store.snapshot("t", through_seq=6)
            ...     cand = store.create_candidate(snap, summary_text="Steps 0-5 done.")
            ...     active = store.commit_candidate(cand)
            ...     active.status, active.generation, active.covered_through_seq
            ('active', 1, 6)
        """
        call = self._create_candidate(
            snapshot,
            summary_text=summary_text,
            key_facts=key_facts,
            first_kept_event_id=first_kept_event_id,
            summarizer_id=summarizer_id,
            summary_tokens=summary_tokens,
            format_version=format_version,
            provider_state=provider_state,
            metadata=metadata,
        )
        return self._run(call)

    async def acreate_candidate(
        self,
        snapshot: CoverageSnapshot,
        *,
        summary_text: str | None,
        key_facts: Sequence[KeyFact] = (),
        first_kept_event_id: str | None = None,
        summarizer_id: str | None = None,
        summary_tokens: int | None = None,
        format_version: int = 1,
        provider_state: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> CompactionCheckpoint:
        """Async twin of :meth:`create_candidate`."""
        call = self._create_candidate(
            snapshot,
            summary_text=summary_text,
            key_facts=key_facts,
            first_kept_event_id=first_kept_event_id,
            summarizer_id=summarizer_id,
            summary_tokens=summary_tokens,
            format_version=format_version,
            provider_state=provider_state,
            metadata=metadata,
        )
        return await self._arun(call)

    def commit_candidate(self, candidate: CompactionCheckpoint | str) -> CompactionCheckpoint:
        """Make a candidate the active summary, by compare-and-swap on the active generation.

        In one transaction: the branch's active pointer moves to the candidate, the candidate
        becomes ``active`` and the previous one ``superseded``. Committing an already active
        candidate again returns it unchanged.

        Raises:
            CompactionConflict: another candidate was committed since the snapshot (this one is
                marked ``failed``).
            StaleCandidate: an event at or below the covered seq was revised, hidden or deleted
                since the snapshot (this one is marked ``failed``).
        """
        op = _ops.commit_candidate(self.dialect, _checkpoint_id(candidate), self._clock())
        return self._run(_Call(op, write=True))

    async def acommit_candidate(
        self, candidate: CompactionCheckpoint | str
    ) -> CompactionCheckpoint:
        """Async twin of :meth:`commit_candidate`."""
        op = _ops.commit_candidate(self.dialect, _checkpoint_id(candidate), self._clock())
        return await self._arun(_Call(op, write=True))

    def mark_failed(
        self, candidate: CompactionCheckpoint | str, reason: str
    ) -> CompactionCheckpoint:
        """Mark a candidate ``failed`` with a reason; the active summary is untouched."""
        op = _ops.mark_failed(self.dialect, _checkpoint_id(candidate), reason)
        return self._run(_Call(op, write=True))

    async def amark_failed(
        self, candidate: CompactionCheckpoint | str, reason: str
    ) -> CompactionCheckpoint:
        """Async twin of :meth:`mark_failed`."""
        op = _ops.mark_failed(self.dialect, _checkpoint_id(candidate), reason)
        return await self._arun(_Call(op, write=True))

    def get_active(self, scope: Scope | str) -> CompactionCheckpoint | None:
        """The branch's active summary (possibly inherited from its parent), or None."""
        return self._run(_Call(_ops.get_active(self.dialect, checked_scope(scope)), write=False))

    async def aget_active(self, scope: Scope | str) -> CompactionCheckpoint | None:
        """Async twin of :meth:`get_active`."""
        return await self._arun(
            _Call(_ops.get_active(self.dialect, checked_scope(scope)), write=False)
        )

    def get_checkpoint(self, checkpoint_id: str) -> CompactionCheckpoint | None:
        """One summary version by id, whatever its status."""
        return self._run(_Call(_ops.get_checkpoint(self.dialect, checkpoint_id), write=False))

    async def aget_checkpoint(self, checkpoint_id: str) -> CompactionCheckpoint | None:
        """Async twin of :meth:`get_checkpoint`."""
        return await self._arun(
            _Call(_ops.get_checkpoint(self.dialect, checkpoint_id), write=False)
        )

    def list_versions(self, scope: Scope | str) -> list[CompactionCheckpoint]:
        """Every summary version created on the branch, newest generation first."""
        return self._run(_Call(_ops.list_versions(self.dialect, checked_scope(scope)), write=False))

    async def alist_versions(self, scope: Scope | str) -> list[CompactionCheckpoint]:
        """Async twin of :meth:`list_versions`."""
        return await self._arun(
            _Call(_ops.list_versions(self.dialect, checked_scope(scope)), write=False)
        )

    def delete_thread(self, scope: Scope | str, *, ledger: bool = False) -> dict[str, int]:
        """Forget a thread: its events and their revisions, edit log, summary versions, branches
        and thread row, all branches at once, in one transaction (the branch of ``scope`` does
        not matter). With ``ledger`` its usage ledger rows go too (by default they stay, for
        billing). Returns the rows deleted per table.

        LangGraph's checkpoints are not here: delete them with the checkpointer's own
        ``delete_thread(thread_id)``. Edit listeners (a wired
        :class:`~ctx_langgraph.memory.LongTermMemory`) delete the thread's memories and purge
        those derived from it.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("hello", id="m1")])
            ...     store.delete_thread("t")["ctx_events"], store.read_events("t")
            (1, [])
        """
        deleted = self._run(
            _Call(_thread_ops.delete_thread(checked_scope(scope), ledger=ledger), write=True)
        )
        self._tell(checked_scope(scope), [], "thread_deleted")
        return deleted

    async def adelete_thread(self, scope: Scope | str, *, ledger: bool = False) -> dict[str, int]:
        """Async twin of :meth:`delete_thread`."""
        op = _thread_ops.delete_thread(checked_scope(scope), ledger=ledger)
        deleted = await self._arun(_Call(op, write=True))
        await self._atell(checked_scope(scope), [], "thread_deleted")
        return deleted

    def export_thread(
        self, scope: Scope | str, *, ledger: bool = True, memory: LongTermMemory | None = None
    ) -> dict[str, Any]:
        """Everything this store remembers of a thread, as one JSON-ready document: every
        branch, every event (hidden ones marked ``visible: false``) with its earlier revisions,
        the edit log, every summary version with its status and key facts, the active pointers,
        and (``ledger``) its usage ledger rows. Deleted events are gone and are not in it. With
        ``memory``, the thread's long-term memories (its own and those derived from it, any
        status) are in ``"memories"``.
        :meth:`import_thread` writes it back, into this or another store.

        Raises:
            ScopeError: the thread has no history.

        Example:
            >>> import json
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("hello", id="m1")])
            ...     document = json.loads(json.dumps(store.export_thread("t")))
            >>> document["format"], [e["message"]["data"]["content"] for e in document["events"]]
            ('ctx-langgraph/thread', ['hello'])
            >>> with SQLiteHistoryStore.from_path(":memory:") as fresh:
            ...     _ = fresh.setup()
            ...     fresh.import_thread(document)["events"], fresh.read_events("t")[0].text
            (1, 'hello')
        """
        op = _thread_ops.export_thread(
            self.dialect, checked_scope(scope), self._clock(), ledger=ledger
        )
        document = self._run(_Call(op, write=False))
        if memory is not None:
            document["memories"] = memory.export_thread(checked_scope(scope))
        return document

    async def aexport_thread(
        self, scope: Scope | str, *, ledger: bool = True, memory: LongTermMemory | None = None
    ) -> dict[str, Any]:
        """Async twin of :meth:`export_thread`."""
        op = _thread_ops.export_thread(
            self.dialect, checked_scope(scope), self._clock(), ledger=ledger
        )
        document = await self._arun(_Call(op, write=False))
        if memory is not None:
            document["memories"] = await memory.aexport_thread(checked_scope(scope))
        return document

    def import_thread(
        self,
        document: dict[str, Any],
        *,
        into: Scope | str | None = None,
        memory: LongTermMemory | None = None,
    ) -> dict[str, int]:
        """Write a document made by :meth:`export_thread` as a thread of this store (its own
        tenant and thread id, or ``into``'s), in one transaction. The thread must have no
        history yet; summary version ids are kept, so one export goes into one database once.
        With ``memory``, the document's memories are written to it too (count in ``"memories"``).

        Raises:
            ScopeError: the thread already has history.
            DocumentError: the document is not an export this version reads, or a field of it
                is missing, mistyped or inconsistent (the error names its path); the whole
                document is checked first, so nothing was written.
        """
        target = checked_scope(into) if into is not None else export_scope(document)
        counts = self._run(
            _Call(_thread_ops.import_thread(self.dialect, document, target), write=True)
        )
        if memory is not None:
            counts["memories"] = memory.import_records(document.get("memories") or [], into=target)
        return counts

    async def aimport_thread(
        self,
        document: dict[str, Any],
        *,
        into: Scope | str | None = None,
        memory: LongTermMemory | None = None,
    ) -> dict[str, int]:
        """Async twin of :meth:`import_thread`."""
        target = checked_scope(into) if into is not None else export_scope(document)
        op = _thread_ops.import_thread(self.dialect, document, target)
        counts = await self._arun(_Call(op, write=True))
        if memory is not None:
            memories = document.get("memories") or []
            counts["memories"] = await memory.aimport_records(memories, into=target)
        return counts

    def prune_versions(self, scope: Scope | str, *, keep: int) -> int:
        """Delete the branch's superseded, failed and invalid versions beyond the ``keep`` newest.

        The active version, and any version another branch still uses as its active summary,
        are never deleted. Returns how many versions were deleted.
        """
        op = _ops.prune_versions(self.dialect, checked_scope(scope), keep, self._clock())
        return self._run(_Call(op, write=True))

    async def aprune_versions(self, scope: Scope | str, *, keep: int) -> int:
        """Async twin of :meth:`prune_versions`."""
        op = _ops.prune_versions(self.dialect, checked_scope(scope), keep, self._clock())
        return await self._arun(_Call(op, write=True))
