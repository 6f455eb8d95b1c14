"""The history store's public event methods (append, read, revisions, the edit log, hide, show,
delete), each a thin call of one operation of :mod:`ctx_langgraph.history.events`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from ctx_langgraph.core.effects import Flow
from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import events as event_ops
from ctx_langgraph.history import extend
from ctx_langgraph.history._store import StoreBase, async_twin, flow_method
from ctx_langgraph.history.args import id_list, text_arg
from ctx_langgraph.history.rows import message_to_row
from ctx_langgraph.history.types import AppendOutcome, AppendResult, HistoryEvent, Scope
from ctx_langgraph.storage.statements import Op

__all__ = ["EventsAPI"]

T = TypeVar("T")
Created = dt.datetime | Sequence[dt.datetime] | None


class _Unset:
    """No ``after`` given: a plain append."""


_UNSET = _Unset()


class EventsAPI(StoreBase):
    """Append, read and edit a branch's events."""

    def _tell_revised(self, scope: Scope | str, results: list[AppendResult]) -> Flow[None]:
        """The edit listeners hear of the events an append revised."""
        revised = [r.event_id for r in results if r.status == "revised"]
        if self._edit_listeners and revised:
            yield from self._notify(checked_scope(scope), revised, "revised")

    def _append(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage] | BaseMessage,
        created_at: Created,
        after: str | _Unset | None = _UNSET,
        fork: bool = False,
        active: str | None = None,
    ) -> Op[Any]:
        """The append operation (with ``after``: :func:`~ctx_langgraph.history.extend.append_after`'s)."""
        scope = checked_scope(scope)
        if isinstance(messages, BaseMessage):
            messages = [messages]
        rows = [message_to_row(message) for message in messages]
        now = self.clock()
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
        if isinstance(after, _Unset):
            return event_ops.append(self.db.dialect, scope, rows, created, now)
        after = None if after is None else text_arg("after", after)
        active = None if active is None else text_arg("active", active)
        return extend.append_after(
            self.db.dialect, scope, rows, created, now, after, fork=bool(fork), active=active
        )

    @flow_method
    def append(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage] | BaseMessage,
        *,
        created_at: Created = None,
    ) -> Flow[list[AppendResult]]:
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

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     [r.seq for r in store.append("t1", [HumanMessage("hi", id="m1"), HumanMessage("yo", id="m2")])]
            ...     store.append("t1", [HumanMessage("hi", id="m1")])[0].status
            [1, 2]
            'duplicate'
        """
        results: list[AppendResult] = yield from self._op(
            self._append(scope, messages, created_at), write=True
        )
        yield from self._tell_revised(scope, results)
        return results

    aappend = async_twin(append)

    @flow_method
    def append_after(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage],
        *,
        after: str | None,
        created_at: Created = None,
        fork: bool = False,
        active: str | None = None,
        then: Op[Any] | None = None,
    ) -> Flow[AppendOutcome]:
        """Record messages that follow the event ``after`` (a turn's new messages after the
        last one recorded), and read the branch after them, in one transaction: a
        compare-and-swap on the branch's head.

        The branch may already hold the first of the messages after ``after`` (same ids and
        content) and nothing else: a replay (a resumed or re-run turn), whose messages are
        ``duplicate`` and the rest appended. When it holds other events after ``after``
        (another timeline went on from there), nothing is written and the outcome says
        ``diverged``; with ``fork=True`` the messages start a new branch instead, forked at the
        last event the two timelines share (``outcome.head.scope`` names it,
        ``outcome.forked_from`` the branch it came from). The fork's active summary is
        ``active``, the one the writer's state shows (None: it shows none), when that version
        covers only shared events, else none: a fork never starts with a summary of the other
        timeline the state does not show. An ``after`` the branch never held, or None,
        appends as :meth:`append` does. ``then``, an operation of the same database (a
        booking: ``UsageLedger.booking``), runs after the append in the same transaction; its
        value is ``outcome.value``.

        Examples:
            >>> from langchain_core.messages import AIMessage, HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     first = store.append_after("t1", [HumanMessage("hi", id="h1")], after=None)
            ...     second = store.append_after("t1", [AIMessage("yo", id="a1")], after="h1")
            ...     again = store.append_after("t1", [AIMessage("other", id="a2")], after="h1")
            ...     forked = store.append_after("t1", [AIMessage("other", id="a2")], after="h1", fork=True)
            ...     [r.seq for r in second.results], second.head.head_seq, again.diverged
            ...     forked.forked_from, forked.head.scope.branch.startswith("main~1-"), forked.results[0].seq
            ([2], 2, True)
            ('main', True, 2)
        """
        op = self._after_then(scope, messages, created_at, after, fork, active, then)
        outcome: AppendOutcome = yield from self._op(op, write=True)
        yield from self._tell_revised(
            outcome.head.scope if outcome.head else scope, outcome.results
        )
        return outcome

    aappend_after = async_twin(append_after)

    def _after_then(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage],
        created_at: Created,
        after: str | None,
        fork: bool,
        active: str | None,
        then: Op[Any] | None,
    ) -> Op[AppendOutcome]:
        outcome: AppendOutcome = yield from self._append(
            scope, messages, created_at, after, fork, active
        )
        if then is None:
            return outcome
        if outcome.diverged:  # nothing written: nor is what was to follow
            then.close()
            return outcome
        value = yield from then
        return replace(outcome, value=value)

    @flow_method
    def append_then(
        self,
        scope: Scope | str,
        messages: Sequence[BaseMessage],
        then: Op[T],
        *,
        created_at: Created = None,
    ) -> Flow[tuple[list[AppendResult], T]]:
        """:meth:`append`, then the operation ``then`` of the same database, in one transaction
        (a reply recorded with its usage booked: ``UsageLedger.booking``). Either both are
        written or neither.

        Examples:
            >>> from langchain_core.messages import AIMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> from ctx_langgraph.usage import NormalizedUsage, UsageLedger
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     booking = UsageLedger(store).booking("k1", NormalizedUsage(input_total=9, output=2), scope="t1")
            ...     results, booked = store.append_then("t1", [AIMessage("ok", id="a1")], booking)
            ...     results[0].status, booked.reason
            ('appended', 'new')
        """
        results, value = yield from self._op(
            self._then(scope, messages, created_at, then), write=True
        )
        yield from self._tell_revised(scope, results)
        return results, value

    aappend_then = async_twin(append_then)

    def _then(
        self, scope: Scope | str, messages: Sequence[BaseMessage], created_at: Created, then: Op[T]
    ) -> Op[tuple[list[AppendResult], T]]:
        results: list[AppendResult] = yield from self._append(scope, messages, created_at)
        value = yield from then
        return results, value

    @flow_method
    def read_events(
        self,
        scope: Scope | str,
        *,
        from_seq: int = 1,
        to_seq: int | None = None,
        limit: int | None = None,
        include_hidden: bool = False,
    ) -> Flow[list[HistoryEvent]]:
        """The branch's events (inherited ones included) from ``from_seq`` on, in seq order."""
        return (
            yield from self._op(
                event_ops.read_events(
                    self.db.dialect, checked_scope(scope), from_seq, to_seq, limit, include_hidden
                )
            )
        )

    aread_events = async_twin(read_events)

    @flow_method
    def get_event(
        self, scope: Scope | str, event_id: str, *, include_hidden: bool = False
    ) -> Flow[HistoryEvent | None]:
        """One event by message id in the branch's view, or None."""
        op = event_ops.get_event(self.db.dialect, checked_scope(scope), event_id, include_hidden)
        return (yield from self._op(op))

    aget_event = async_twin(get_event)

    @flow_method
    def event_revisions(
        self, scope: Scope | str, event_id: str
    ) -> Flow[list[tuple[int, dict[str, Any]]]]:
        """Earlier revisions of an event, oldest first, as (revision, message record)."""
        op = event_ops.event_revisions(self.db.dialect, checked_scope(scope), event_id)
        return (yield from self._op(op))

    aevent_revisions = async_twin(event_revisions)

    @flow_method
    def edits_since(
        self, scope: Scope | str, version: int
    ) -> Flow[list[tuple[int, str, int, str]]]:
        """The thread's edit log after edit version ``version`` (every branch), oldest first, as
        ``(edit_version, branch, seq, kind)`` with ``kind`` ``"hide"``, ``"show"``,
        ``"delete"`` or ``"revise"``. ``branch_info(...).edit_version`` is the newest version.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("a", id="m1"), HumanMessage("b", id="m2")])
            ...     _ = store.delete_events("t", ["m2"])
            ...     store.edits_since("t", 0)
            [(1, 'main', 2, 'delete')]
        """
        return (yield from self._op(event_ops.edits_since(checked_scope(scope), version)))

    aedits_since = async_twin(edits_since)

    def _edit(
        self, edit: Any, scope: Scope | str, event_ids: Sequence[str] | str, told: str | None
    ) -> Flow[int]:
        """Run the visibility edit ``edit`` on ``event_ids``; the listeners hear ``told``."""
        ids = id_list("event_ids", event_ids)
        op = edit(self.db.dialect, checked_scope(scope), ids, self.clock())
        changed: int = yield from self._op(op, write=True)
        if told is not None:
            yield from self._notify(checked_scope(scope), ids, told)
        return changed

    @flow_method
    def hide_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> Flow[int]:
        """Hide events from reads and search (kept for audit); returns how many changed.

        An event inherited from a parent branch is one shared row: hiding it hides it in every
        branch that shares it. Candidates covering a hidden event become stale.
        """
        return (yield from self._edit(event_ops.hide_events, scope, event_ids, "hidden"))

    ahide_events = async_twin(hide_events)

    @flow_method
    def show_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> Flow[int]:
        """Make hidden events visible again; returns how many changed."""
        return (yield from self._edit(event_ops.show_events, scope, event_ids, None))

    ashow_events = async_twin(show_events)

    @flow_method
    def delete_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> Flow[int]:
        """Delete events and their earlier revisions for good; returns how many were deleted.

        Seqs are never reused. Candidates covering a deleted event become stale.
        """
        return (yield from self._edit(event_ops.delete_events, scope, event_ids, "deleted"))

    adelete_events = async_twin(delete_events)
