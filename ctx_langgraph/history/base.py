"""The history store interface, shared by the SQLite and PostgreSQL backends.

Every public method has an ``a``-prefixed async twin: both run the same flow, whose operations
(pure generators of :mod:`~ctx_langgraph.history.events`, :mod:`~ctx_langgraph.history.branches`,
:mod:`~ctx_langgraph.history.search`, :mod:`~ctx_langgraph.history.summaries`...) run on the
database the store holds (``store.db``); a backend is the store over another database.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, replace
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

from langchain_core.messages import BaseMessage
from typing_extensions import Self

from ctx_langgraph.core.effects import Call, Flow, arun, call, run
from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.errors import EmbeddingError
from ctx_langgraph.history import branches as branch_ops
from ctx_langgraph.history import events as event_ops
from ctx_langgraph.history import extend
from ctx_langgraph.history import rank as rank_ops
from ctx_langgraph.history import search as search_ops
from ctx_langgraph.history import segments as segment_ops
from ctx_langgraph.history import summaries as summary_ops
from ctx_langgraph.history import vectors as vector_ops
from ctx_langgraph.history.args import id_list, text_arg
from ctx_langgraph.history.index import (
    SEARCH_MODES,
    IndexConfig,
    SearchMode,
    VectorIndex,
    encode_vectors,
    vector_index,
)
from ctx_langgraph.history.rank_counts import RankCounts
from ctx_langgraph.history.rows import message_to_row
from ctx_langgraph.history.types import (
    DEFAULT_TENANT,
    AppendOutcome,
    AppendResult,
    BranchInfo,
    CompactionCheckpoint,
    CoverageSnapshot,
    HistoryEvent,
    KeyFact,
    Scope,
    SearchPage,
    Segment,
    ThreadRow,
)
from ctx_langgraph.history.vector_cache import VectorCache
from ctx_langgraph.history.vectors import RankedHits
from ctx_langgraph.storage.runner import Database
from ctx_langgraph.storage.statements import Op

__all__ = ["DEFAULT_EMBED_LIMIT", "EditListener", "EmbedReport", "EmbeddingLedger", "HistoryStore"]

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def flow_method(flow: Callable[Concatenate[S, P], Flow[R]]) -> Callable[Concatenate[S, P], R]:
    """The method that runs the flow ``flow`` builds synchronously."""

    @functools.wraps(flow)
    def method(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return run(flow(self, *args, **kwargs))

    return method


def async_twin(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The async twin of a :func:`flow_method`: the same flow, run async."""
    flow: Callable[..., Flow[R]] = method.__wrapped__  # type: ignore[attr-defined]

    @functools.wraps(flow)
    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await arun(flow(self, *args, **kwargs))

    twin.__name__ = twin.__qualname__ = f"a{method.__name__}"
    twin.__doc__ = f"Async twin of :meth:`{method.__name__}`."
    return twin


@runtime_checkable
class EditListener(Protocol):
    """Told after events are deleted, hidden or revised, or a thread is deleted (``kind`` is
    ``"deleted"``, ``"hidden"``, ``"revised"`` or ``"thread_deleted"``), so what was derived
    from them elsewhere goes too. :class:`~ctx_langgraph.memory.LongTermMemory` is one."""

    def events_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...

    async def aevents_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...


log = logging.getLogger("ctx_langgraph.history")

DEFAULT_EMBED_LIMIT = 512
"""Events one :meth:`~HistoryStore.embed_pending` call embeds at most (the rest stay pending)."""


@dataclass(frozen=True)
class EmbedReport:
    """What one :meth:`~HistoryStore.embed_pending` did: events embedded, events still pending
    (without vectors of the index's model), tokens of its calls, the error that stopped it
    (the events it did not embed stay pending) and the seconds it took."""

    embedded: int = 0
    pending: int = 0
    tokens: int = 0
    error: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 4)}


@runtime_checkable
class EmbeddingLedger(Protocol):
    """Where embedding calls are booked (:class:`~ctx_langgraph.usage.UsageLedger` is one):
    the op that books a call, run on the ledger's own database (``db``)."""

    db: Any

    def embedding_booking(
        self,
        call_key: str,
        *,
        scope: Scope | str,
        model: str,
        tokens: int,
        texts: int,
        estimated: bool = False,
    ) -> Any: ...


def _book(
    ledger: EmbeddingLedger,
    scope: Scope,
    index: VectorIndex,
    batch: list[vector_ops.PendingEvent],
    tokens: int,
    exact: bool,
) -> Flow[None]:
    """Book one embedding call: its key is the batch's events and revisions, so booking the
    same batch twice books it once."""
    digest = hashlib.sha256(
        ",".join(f"{event.pk}.{event.revision}" for event in batch).encode()
    ).hexdigest()[:24]
    op = ledger.embedding_booking(
        f"embed:{index.key}:{digest}",
        scope=scope,
        model=index.model,
        tokens=tokens,
        texts=len(batch),
        estimated=not exact,
    )
    try:
        yield from call(ledger.db.run, ledger.db.arun, op, write=True)
    except Exception as exc:  # the vectors are written: a ledger failure is only logged
        log.warning("ctx-langgraph: an embedding call was not booked: %s", exc)


Created = dt.datetime | Sequence[dt.datetime] | None


class _Unset:
    """No ``after`` given: a plain append."""


_UNSET = _Unset()


def _checkpoint_id(candidate: CompactionCheckpoint | str) -> str:
    return candidate.id if isinstance(candidate, CompactionCheckpoint) else candidate


class HistoryStore:
    """Raw history, compaction checkpoints, their active pointer, search (docs/design.md §4).

    Use :class:`~ctx_langgraph.history.SQLiteHistoryStore` (embedded default) or
    :class:`~ctx_langgraph.history.PostgresHistoryStore`; both pass the same conformance suite.
    Call :meth:`setup` once to create or migrate the tables.
    """

    _edit_listeners: tuple[EditListener, ...] = ()

    def __init__(self, db: Database) -> None:
        self.db = db
        """The database the store's operations run on (one transaction each)."""

    @property
    def clock(self) -> Callable[[], dt.datetime]:
        """What "now" is for the rows this store writes (the database's clock)."""
        return self.db.clock

    def _op(self, op: Op[T], write: bool = False) -> Call[T]:
        """The effect running ``op`` on the store's database, in one transaction."""
        return Call(self.db.run, self.db.arun, (op,), {"write": write})

    @flow_method
    def setup(self) -> Flow[int]:
        """Create or migrate the tables (idempotent, safe to call from several processes).

        Returns:
            The schema version now in the database.
        """
        return (yield from call(self.db.setup, self.db.asetup))

    asetup = async_twin(setup)

    @flow_method
    def schema_version(self) -> Flow[int]:
        """The schema version the database is at (0: no tables yet), read without the check
        every other operation makes first (:meth:`setup` migrates it)."""
        return (yield from call(self.db.schema_version, self.db.aschema_version))

    aschema_version = async_twin(schema_version)

    @flow_method
    def close(self) -> Flow[None]:
        """Release the database's connections."""
        yield from call(self.db.close, self.db.aclose)

    aclose = async_twin(close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def add_edit_listener(self, listener: EditListener) -> None:
        """Tell ``listener`` about every delete, hide and revision made through this store
        object, after it commits (adding the same listener twice is a no-op)."""
        if not any(existing is listener for existing in self._edit_listeners):
            self._edit_listeners = (*self._edit_listeners, listener)

    def _notify(self, scope: Scope, event_ids: Sequence[str], kind: str) -> Flow[None]:
        """Tell the edit listeners that ``event_ids`` of ``scope`` were edited (``kind`` as
        :class:`EditListener` says); nothing is told of an empty edit but ``thread_deleted``."""
        if event_ids or kind == "thread_deleted":
            for listener in self._edit_listeners:
                yield from call(
                    listener.events_edited, listener.aevents_edited, scope, event_ids, kind
                )

    notify_edited = flow_method(_notify)
    anotify_edited = async_twin(notify_edited)

    index: VectorIndex | None = None
    _vector_cache: VectorCache | None = None

    @property
    def vector_cache(self) -> VectorCache:
        """The vectors of recently searched threads (256 MB at most; see
        :mod:`~ctx_langgraph.history.vector_cache`)."""
        if self._vector_cache is None:
            self._vector_cache = VectorCache()
        return self._vector_cache

    def use_index(self, index: IndexConfig | VectorIndex | None) -> Self:
        """Search this store by meaning too: ``index`` like LangGraph's store index,
        ``{"embed": <Embeddings or "provider:model">, "dims": N}`` (see
        :class:`~ctx_langgraph.history.index.IndexConfig`); None turns it off. Returns the
        store. The stores' ``from_path`` and ``from_conn_string`` take ``index=`` too.

        Examples:
            >>> from langchain_core.embeddings import DeterministicFakeEmbedding
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> store = SQLiteHistoryStore.from_path(":memory:")
            >>> store.use_index({"embed": DeterministicFakeEmbedding(size=16), "dims": 16}).index.key
            'DeterministicFakeEmbedding@16'
            >>> store.close()
        """
        self.index = vector_index(index)
        return self

    def search_mode(self, mode: SearchMode | None) -> SearchMode:
        """``mode`` checked; None is ``hybrid`` with an index, else ``keyword``.

        Raises:
            ValueError: an unknown mode, or ``semantic``/``hybrid`` on a store without index.
        """
        if mode is None:
            return "keyword" if self.index is None else "hybrid"
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")
        if mode != "keyword" and self.index is None:
            raise ValueError(
                f"mode={mode!r} needs a vector index: open the store with index="
                "{'embed': ..., 'dims': N}"
            )
        return mode

    @flow_method
    def embed_pending(
        self,
        scope: Scope | str,
        *,
        limit: int = DEFAULT_EMBED_LIMIT,
        ledger: EmbeddingLedger | None = None,
    ) -> Flow[EmbedReport]:
        """Embed the thread's visible events that have no vector of the index's model for
        their current text (new, revised, shown again, or made by another model), at most
        ``limit``, in batches; with ``ledger`` (a :class:`~ctx_langgraph.usage.UsageLedger`:
        ``ctx_usage`` and the lookup pass theirs) each call is booked there, purpose
        ``embedding``. Never raises for the model: a failure or timeout stops it, leaves the
        rest pending and is in the report.

        Examples:
            >>> from langchain_core.embeddings import DeterministicFakeEmbedding
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> index = {"embed": DeterministicFakeEmbedding(size=16), "dims": 16}
            >>> with SQLiteHistoryStore.from_path(":memory:", index=index) as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("The order id is A-1042", id="m1")])
            ...     report = store.embed_pending("t")
            ...     report.embedded, report.pending, report.error
            (1, 0, None)
        """
        scope = checked_scope(scope)
        index = self.index
        if index is None:
            return EmbedReport()
        started = time.monotonic()
        events, pending = yield from self._op(
            vector_ops.pending_events(scope, index.key, max(1, limit))
        )
        embedded = tokens = 0
        error: str | None = None
        for start in range(0, len(events), index.batch_size):
            batch = events[start : start + index.batch_size]
            units = [
                [] if e.copy else vector_ops.embed_units(e.text, e.role, e.name, index.text_chars)
                for e in batch
            ]
            texts = [text for unit in units for text in unit]
            try:
                vectors = (
                    (yield from call(index.embed_texts, index.aembed_texts, texts)) if texts else []
                )
            except EmbeddingError as exc:
                error = str(exc)[:300]
                log.warning("ctx-langgraph: embedding %d event(s) failed: %s", len(batch), error)
                break
            counted, exact = index.count_tokens(texts) if texts else (0, True)
            blobs, at = [], 0
            for unit in units:  # an event's vectors, one after the other
                blobs.append(b"".join(encode_vectors(vectors[at : at + len(unit)])))
                at += len(unit)
            each = counted // max(1, len(texts))
            rows = [
                (event, each * len(unit), blob)
                for event, unit, blob in zip(batch, units, blobs, strict=True)
            ]
            written = yield from self._op(
                vector_ops.put_event_vectors(scope, index.key, rows), write=True
            )
            embedded += written
            tokens += counted
            if ledger is not None and texts:
                yield from _book(ledger, scope, index, batch, counted, exact)
        return EmbedReport(
            embedded, max(0, pending - embedded), tokens, error, time.monotonic() - started
        )

    aembed_pending = async_twin(embed_pending)

    def _query_vector(self, query: str) -> Flow[tuple[list[float] | None, str | None]]:
        assert self.index is not None
        try:
            vector = yield from call(self.index.embed_query, self.index.aembed_query, query)
        except EmbeddingError as exc:
            log.warning("ctx-langgraph: a search fell back to words: %s", exc)
            return None, str(exc)[:300]
        return vector, None

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
        op = event_ops.read_events(
            self.db.dialect, checked_scope(scope), from_seq, to_seq, limit, include_hidden
        )
        return (yield from self._op(op))

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
        self, kind: str, scope: Scope | str, event_ids: Sequence[str] | str, told: str | None
    ) -> Flow[int]:
        """Hide, show or delete ``event_ids``; the edit listeners hear ``told``."""
        ids = id_list("event_ids", event_ids)
        op = event_ops.edit_visibility(
            self.db.dialect, checked_scope(scope), ids, self.clock(), kind=kind
        )
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
        return (yield from self._edit("hide", scope, event_ids, "hidden"))

    ahide_events = async_twin(hide_events)

    @flow_method
    def show_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> Flow[int]:
        """Make hidden events visible again; returns how many changed."""
        return (yield from self._edit("show", scope, event_ids, None))

    ashow_events = async_twin(show_events)

    @flow_method
    def delete_events(self, scope: Scope | str, event_ids: Sequence[str] | str) -> Flow[int]:
        """Delete events and their earlier revisions for good; returns how many were deleted.

        Seqs are never reused. Candidates covering a deleted event become stale.
        """
        return (yield from self._edit("delete", scope, event_ids, "deleted"))

    adelete_events = async_twin(delete_events)

    @flow_method
    def create_branch(self, scope: Scope, from_branch: str, fork_seq: int) -> Flow[BranchInfo]:
        """Fork ``from_branch`` after ``fork_seq`` into ``scope.branch``.

        The new branch reads the parent's events up to ``fork_seq`` (shared, not copied) and its
        own after that; its seqs continue at ``fork_seq + 1``. Its active summary starts as the
        newest summary on the parent's chain that covers only shared events. Creating the same
        branch again with the same parent and fork point is a no-op.
        """
        parent = checked_scope(checked_scope(scope).on_branch(from_branch))
        op = branch_ops.create_branch(
            self.db.dialect, checked_scope(scope), parent.branch, fork_seq, self.clock()
        )
        return (yield from self._op(op, write=True))

    acreate_branch = async_twin(create_branch)

    @flow_method
    def branch_info(self, scope: Scope | str) -> Flow[BranchInfo | None]:
        """The branch's lineage, head seq and active pointer, or None if it has no row yet."""
        return (yield from self._op(branch_ops.branch_info(self.db.dialect, checked_scope(scope))))

    abranch_info = async_twin(branch_info)

    @flow_method
    def list_branches(self, scope: Scope | str) -> Flow[list[BranchInfo]]:
        """Every branch of the scope's thread."""
        return (
            yield from self._op(branch_ops.list_branches(self.db.dialect, checked_scope(scope)))
        )

    alist_branches = async_twin(list_branches)

    @flow_method
    def list_threads(
        self, tenant: str = DEFAULT_TENANT, *, limit: int = 500
    ) -> Flow[list[ThreadRow]]:
        """The tenant's threads, newest first (at most ``limit``)."""
        return (yield from self._op(branch_ops.list_threads(self.db.dialect, tenant, limit)))

    alist_threads = async_twin(list_threads)

    @flow_method
    def delete_thread(self, scope: Scope | str) -> Flow[dict[str, int]]:
        """Forget a thread's history: its events and their revisions, edit log, summary
        versions, branches and thread row, all branches at once, in one transaction (the branch
        of ``scope`` does not matter). Returns the rows deleted per table. The usage ledger's
        rows stay: :func:`ctx_langgraph.threads.delete_thread` deletes those too on request.

        LangGraph's checkpoints are not here: delete them with the checkpointer's own
        ``delete_thread(thread_id)``. Edit listeners (a wired
        :class:`~ctx_langgraph.memory.LongTermMemory`) delete the thread's memories and purge
        those derived from it.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("hello", id="m1")])
            ...     store.delete_thread("t")["ctx_events"], store.read_events("t")
            (1, [])
        """
        deleted = yield from self._op(branch_ops.delete_thread(checked_scope(scope)), write=True)
        yield from self._notify(checked_scope(scope), [], "thread_deleted")
        return deleted

    adelete_thread = async_twin(delete_thread)

    _rank_counts: RankCounts | None = None

    @property
    def rank_counts(self) -> RankCounts:
        """What ranked searches counted over the branches they searched, kept up to date by
        counting only what was appended since (see :mod:`~ctx_langgraph.history.rank_counts`)."""
        if self._rank_counts is None:
            self._rank_counts = RankCounts()
        return self._rank_counts

    @flow_method
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
    ) -> Flow[SearchPage]:
        """Find visible events of a branch, one page at a time, in seq order.

        ``query`` matches events containing every word of it (full-text: SQLite FTS5,
        PostgreSQL tsvector). The other filters narrow by seq range, time range
        (``since <= created_at < until``), role and tool name (tool results of, and AI calls
        to, that tool). Pass a page's ``next_cursor`` back to get the next page; pages never
        repeat or skip a hit, even while events are appended.

        Examples:
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
        roles = (roles,) if isinstance(roles, str) else tuple(roles or ())
        flt = search_ops.SearchFilter(
            query, min_seq, max_seq, since, until, roles, tool_name, limit, cursor, newest_first
        )
        return (yield from self._op(search_ops.search(self.db.dialect, checked_scope(scope), flt)))

    asearch = async_twin(search)

    @flow_method
    def rank(
        self,
        scope: Scope | str,
        query: str,
        *,
        limit: int = 20,
        min_seq: int | None = None,
        max_seq: int | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        roles: Sequence[str] | str = (),
        tool_name: str | None = None,
        mode: SearchMode | None = None,
    ) -> Flow[RankedHits]:
        """Visible events of a branch by relevance to ``query``, best first.

        ``mode`` (default: ``hybrid`` when the store has a vector index, else ``keyword``):

        - ``keyword``: the events having any word of the query, by BM25;
        - ``semantic``: the filtered events with vectors, by the best cosine with the query's;
        - ``hybrid``: both fused, ``0.5 * bm25 / best_bm25 + 0.5 * cosine``
          (:data:`~ctx_langgraph.history.vectors.KEYWORD_WEIGHT`).

        The result is a :class:`~ctx_langgraph.history.vectors.RankedHits` (a list) that says
        its ``mode``, how many filtered events had no vector yet (``unembedded``) and why it
        fell back to words when the query could not be embedded (``problem``).

        Words match by stem ("went" finds "go"); glue words ("the", "what", ...) are left out.
        Rare words outweigh common ones, shorter events rank first at equal counts, ties rank
        the newest first; a person's message counts its speaker's ``name`` as one more word.
        Scores are computed in Python, the same on every backend (docs/design.md §4); per word
        the newest :data:`~ctx_langgraph.history.rank.CANDIDATES_PER_STEM` matches are read.
        The filters are :meth:`search`'s; ``limit`` hits at most come back.

        Raises:
            ValueError: the query has no word besides glue words, or more than 32 distinct
                ones; a filter is out of range (as :meth:`search` says).
            TypeError: an argument of the wrong type, named.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> texts = ["we go hiking on Sunday", "the hike went well", "a parade", "hiking again"]
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(t, id=f"m{n}") for n, t in enumerate(texts)])
            ...     [hit.event.seq for hit in store.rank("t", "where did we go")]
            ...     [hit.event.seq for hit in store.rank("t", "going hiking")]
            [2, 1]
            [2, 1, 4]
        """
        chosen = self.search_mode(mode)
        vector, problem = (
            (None, None) if chosen == "keyword" else (yield from self._query_vector(query))
        )
        roles = (roles,) if isinstance(roles, str) else tuple(roles or ())
        flt = search_ops.SearchFilter(None, min_seq, max_seq, since, until, roles, tool_name, limit)
        d, counts = self.db.dialect, self.rank_counts
        if chosen == "keyword" or vector is None:
            ranked = rank_ops.RankQuery(query, flt)
            hits = yield from self._op(rank_ops.rank(d, checked_scope(scope), ranked, counts))
            return RankedHits(hits, "keyword", 0, problem)
        assert self.index is not None
        semantic = vector_ops.SemanticQuery(
            query, vector, self.index.key, self.index.dims, chosen, flt
        )
        op = vector_ops.semantic_rank(d, checked_scope(scope), semantic, self.vector_cache, counts)
        return (yield from self._op(op))

    arank = async_twin(rank)

    @flow_method
    def snapshot(self, scope: Scope | str, through_seq: int) -> Flow[CoverageSnapshot]:
        """Fix the span a new summary will cover: from the active summary's cursor + 1 through
        ``through_seq``. Summarize ``snapshot.events`` (plus the active summary), then call
        :meth:`create_candidate` and :meth:`commit_candidate`."""
        op = summary_ops.snapshot(self.db.dialect, checked_scope(scope), through_seq)
        return (yield from self._op(op))

    asnapshot = async_twin(snapshot)

    @flow_method
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
    ) -> Flow[CompactionCheckpoint]:
        """Store a candidate summary built from ``snapshot`` (status ``candidate``, not yet active).

        Examples:
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
        content = summary_ops.CandidateContent(
            summary_text,
            tuple(key_facts or ()),
            first_kept_event_id,
            summarizer_id,
            summary_tokens,
            format_version,
            provider_state,
            metadata,
        )
        op = summary_ops.create_candidate(self.db.dialect, snapshot, content, self.clock())
        return (yield from self._op(op, write=True))

    acreate_candidate = async_twin(create_candidate)

    @flow_method
    def commit_candidate(self, candidate: CompactionCheckpoint | str) -> Flow[CompactionCheckpoint]:
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
        op = summary_ops.commit_candidate(self.db.dialect, _checkpoint_id(candidate), self.clock())
        return (yield from self._op(op, write=True))

    acommit_candidate = async_twin(commit_candidate)

    @flow_method
    def mark_failed(
        self, candidate: CompactionCheckpoint | str, reason: str
    ) -> Flow[CompactionCheckpoint]:
        """Mark a candidate ``failed`` with a reason; the active summary is untouched."""
        op = summary_ops.mark_failed(self.db.dialect, _checkpoint_id(candidate), reason)
        return (yield from self._op(op, write=True))

    amark_failed = async_twin(mark_failed)

    @flow_method
    def record_failed(
        self,
        snapshot: CoverageSnapshot,
        *,
        error: str,
        summarizer_id: str | None = None,
        first_kept_event_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Flow[CompactionCheckpoint]:
        """Record a compaction attempt that produced no summary: a ``failed`` version of the
        span ``snapshot`` fixed (its seqs, one generation above the active summary), with no
        text and ``error`` saying why. The active summary and every other version stay as
        they are; :meth:`prune_versions` keeps ``keep`` failed attempts apart from the
        summaries it keeps.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(10)])
            ...     failed = store.record_failed(store.snapshot("t", 6), error="timed out")
            ...     failed.status, failed.first_seq, failed.covered_through_seq, store.get_active("t")
            ('failed', 1, 6, None)
        """
        content = summary_ops.CandidateContent(
            None,
            first_kept_event_id=first_kept_event_id,
            summarizer_id=summarizer_id,
            metadata=metadata,
        )
        op = summary_ops.record_failed(self.db.dialect, snapshot, content, error, self.clock())
        return (yield from self._op(op, write=True))

    arecord_failed = async_twin(record_failed)

    @flow_method
    def get_active(self, scope: Scope | str) -> Flow[CompactionCheckpoint | None]:
        """The branch's active summary (possibly inherited from its parent), or None."""
        return (yield from self._op(summary_ops.get_active(self.db.dialect, checked_scope(scope))))

    aget_active = async_twin(get_active)

    @flow_method
    def get_checkpoint(self, checkpoint_id: str) -> Flow[CompactionCheckpoint | None]:
        """One summary version by id, whatever its status."""
        return (yield from self._op(summary_ops.get_checkpoint(self.db.dialect, checkpoint_id)))

    aget_checkpoint = async_twin(get_checkpoint)

    @flow_method
    def list_versions(self, scope: Scope | str) -> Flow[list[CompactionCheckpoint]]:
        """Every summary version created on the branch, newest generation first."""
        return (
            yield from self._op(summary_ops.list_versions(self.db.dialect, checked_scope(scope)))
        )

    alist_versions = async_twin(list_versions)

    @flow_method
    def prune_versions(self, scope: Scope | str, *, keep: int) -> Flow[int]:
        """Delete the branch's superseded, failed and invalid versions beyond the ``keep`` newest
        (failed attempts without a summary counted apart, ``keep`` of them kept too), and the
        segment index's superseded rows beyond the ``keep`` newest of each range.

        The active version, and any version another branch still uses as its active summary,
        are never deleted. Returns how many versions were deleted.
        """
        return (yield from self._op(self._prune(scope, keep), write=True))

    aprune_versions = async_twin(prune_versions)

    def _prune(self, scope: Scope | str, keep: int) -> Op[int]:
        scope = checked_scope(scope)
        pruned = yield from summary_ops.prune_versions(self.db.dialect, scope, keep, self.clock())
        return pruned + (yield from segment_ops.prune_segments(scope, keep))

    @flow_method
    def segment_snapshot(
        self, scope: Scope | str, first_seq: int, last_seq: int
    ) -> Flow[CoverageSnapshot]:
        """Fix a range a segment will summarize: its visible events, the thread's edit counter
        and the range's hash. Summarize ``snapshot.events``, then call :meth:`put_segment`.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"step {n}", id=f"m{n}") for n in range(10)])
            ...     snap = store.segment_snapshot("t", 1, 5)
            ...     segment = store.put_segment(snap, summary_text="Steps 0-4.")
            ...     [(s.first_seq, s.last_seq, s.status) for s in store.segments("t")]
            [(1, 5, 'active')]
        """
        op = segment_ops.segment_snapshot(
            self.db.dialect, checked_scope(scope), first_seq, last_seq
        )
        return (yield from self._op(op))

    asegment_snapshot = async_twin(segment_snapshot)

    @flow_method
    def put_segment(
        self,
        snapshot: CoverageSnapshot,
        *,
        summary_text: str,
        key_facts: Sequence[KeyFact] = (),
        summarizer_id: str | None = None,
        summary_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Flow[Segment]:
        """Store the summary of ``snapshot``'s range as an active segment, superseding any
        segment of an overlapping range, if the range still holds what the snapshot read.

        Raises:
            StaleCandidate: an event of the range changed since the snapshot (nothing written).
            ValueError: a key fact cites a seq outside the range.
        """
        content = segment_ops.SegmentContent(
            summary_text, tuple(key_facts or ()), summarizer_id, summary_tokens, metadata
        )
        op = segment_ops.put_segment(self.db.dialect, snapshot, content, self.clock())
        return (yield from self._op(op, write=True))

    aput_segment = async_twin(put_segment)

    @flow_method
    def segments(
        self, scope: Scope | str, *, statuses: Sequence[str] = ("active",)
    ) -> Flow[list[Segment]]:
        """The branch's segments of these statuses (``active``, ``invalid``, ``superseded``),
        oldest range first."""
        op = segment_ops.list_segments(self.db.dialect, checked_scope(scope), statuses)
        return (yield from self._op(op))

    asegments = async_twin(segments)
