"""``UsageLedger``: one record per real model call, running totals booked by difference.

Each :meth:`UsageLedger.record` books ``new known value - value already booked`` into the
running totals in the record's transaction: a duplicate books 0, provisional -> final the
difference, a correction (higher ``version``) possibly a negative one; an unknown count is
never added as 0. The provider's payload (``usage.raw``) is kept only on a partial or unknown
record.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typing_extensions import Required, TypedDict, Unpack

from ctx_langgraph.core.scope import Scope, ensure_scope
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.makeup import makeup_from_json, makeup_json, makeup_problem
from ctx_langgraph.storage.codec import load_text, store_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.required import require_store
from ctx_langgraph.storage.statements import Op, Stmt
from ctx_langgraph.usage.booking import (
    TOTALS_COLUMNS,
    BookingReason,
    LedgerRecord,
    StoredCall,
    call_key_for,
    ledger_record,
    plan_booking,
)
from ctx_langgraph.usage.ledger_rows import note_request_op
from ctx_langgraph.usage.prices import PriceTable
from ctx_langgraph.usage.types import COUNT_FIELDS, NormalizedUsage, UsageStatus, embedding_usage

__all__ = ["PURPOSES", "BookedDelta", "LedgerRecord", "UsageLedger", "UsageTotals", "call_key_for"]

PURPOSES = ("answer", "summary", "retry", "lookup", "memory", "other")
"""Purposes the package itself books; any other non-empty string is accepted too."""

GROUP_COLUMNS = ("tenant", "thread_id", "branch", "purpose", "provider", "model")

_CALL_COLS = (
    "call_key, tenant, thread_id, branch, purpose, provider, model, status, version, response_id, "
    + ", ".join(COUNT_FIELDS)
    + ", cost_nano_usd, raw, cacheable_prefix, makeup, created_at"
)


class BookingOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`UsageLedger.booking`."""

    scope: Required[Scope | str]
    purpose: str
    status: UsageStatus | None
    version: int
    cacheable_prefix: int | None
    makeup: Mapping[str, int] | None


@dataclass(frozen=True)
class BookedDelta:
    """What one :meth:`UsageLedger.record` changed in the running totals."""

    call_key: str
    reason: BookingReason
    """``new``, ``update`` (provisional -> final, correction), ``duplicate``, ``stale`` (0)."""
    deltas: dict[str, int]
    """Change of each token count in the totals (0 when unchanged or unknown)."""
    cost_delta: float
    record: LedgerRecord
    """The record as stored after this booking."""

    @property
    def applied(self) -> bool:
        return self.reason in ("new", "update")


@dataclass(frozen=True)
class UsageTotals:
    """Running totals for one group (``key`` holds the grouped columns)."""

    key: dict[str, str]
    calls: int
    unknown_calls: int
    counts: dict[str, int]
    """Sums of the known values of each token count."""
    cost: float
    """Sum of the known costs, USD."""
    cost_unknown_calls: int
    """Calls whose cost is unknown: when above 0, ``cost`` is a lower bound."""
    cacheable_prefix: int = 0
    """Sum of the measured cacheable prefixes (compare with ``counts["cache_read"]``)."""


def _stored_from_row(d: Dialect, row: Sequence[Any]) -> StoredCall:
    def number(value: Any) -> int | None:
        return None if value is None else int(value)

    return StoredCall(
        purpose=load_text(row[4]),
        provider=load_text(row[5]),
        model=load_text(row[6]),
        status=row[7],
        version=int(row[8]),
        response_id=None if row[9] is None else load_text(row[9]),
        counts={name: number(row[10 + i]) for i, name in enumerate(COUNT_FIELDS)},
        cost_nano=number(row[16]),
        raw=json.loads(row[17]),
        cacheable_prefix=number(row[18]),
        makeup=makeup_from_json(row[19]),
        created_at=d.from_ts(row[20]),
    )


_PLACEHOLDER = (
    "INSERT INTO ctx_usage_calls (call_key, tenant, thread_id, branch, purpose, provider, model, status, "
    "version, raw, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, '', 'unknown', -1, '{}', ?, ?) "
    "ON CONFLICT DO NOTHING"
)
_UPDATE_CALL = (
    "UPDATE ctx_usage_calls SET purpose = ?, provider = ?, model = ?, status = ?, version = ?, "
    "response_id = ?, "
    + ", ".join(f"{name} = ?" for name in COUNT_FIELDS)
    + ", cost_nano_usd = ?, raw = ?, cacheable_prefix = ?, makeup = ?, updated_at = ? "
    "WHERE call_key = ?"
)
_ADD_TO_TOTALS = (
    f"INSERT INTO ctx_usage_totals (tenant, thread_id, branch, purpose, provider, model, "
    f"{', '.join(TOTALS_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, {', '.join('?' * len(TOTALS_COLUMNS))}) "
    "ON CONFLICT (tenant, thread_id, branch, purpose, provider, model) DO UPDATE SET "
    + ", ".join(f"{c} = ctx_usage_totals.{c} + excluded.{c}" for c in TOTALS_COLUMNS)
)


def _record_op(
    d: Dialect,
    call_key: str,
    scope: Scope,
    usage: NormalizedUsage,
    now: dt.datetime,
    cost_nano: Callable[[NormalizedUsage], int | None],
    **event: Any,
) -> Op[BookedDelta]:
    """Book one event in the caller's transaction: lock the call's row (a placeholder row,
    version -1, makes the lock work for the first event too), plan, write the row and the
    totals' differences."""
    key = store_text(call_key)
    yield Stmt(
        _PLACEHOLDER,
        (
            key,
            scope.tenant,
            scope.thread_id,
            scope.branch,
            store_text(event["purpose"]),
            store_text(usage.provider),
            d.ts(now),
            d.ts(now),
        ),
    )
    row: Sequence[Any] = yield Stmt(
        f"SELECT {_CALL_COLS} FROM ctx_usage_calls WHERE call_key = ?" + d.for_update, (key,), "one"
    )
    owner, old = Scope(row[2], row[1], row[3]), _stored_from_row(d, row)
    plan = plan_booking(old, usage, cost_nano=cost_nano, **event)
    stored = plan.stored
    if plan.writes(old):
        yield Stmt(
            _UPDATE_CALL,
            (
                store_text(stored.purpose),
                store_text(stored.provider),
                store_text(stored.model),
                stored.status,
                stored.version,
                None if stored.response_id is None else store_text(stored.response_id),
                *(stored.counts[name] for name in COUNT_FIELDS),
                stored.cost_nano,
                json.dumps(stored.raw, default=str),
                stored.cacheable_prefix,
                None if stored.makeup is None else makeup_json(stored.makeup),
                d.ts(now),
                key,
            ),
        )
    for group, change in plan.adjustments:
        yield Stmt(
            _ADD_TO_TOTALS,
            (
                owner.tenant,
                owner.thread_id,
                owner.branch,
                *map(store_text, group),
                *(change.get(c, 0) for c in TOTALS_COLUMNS),
            ),
        )
    return BookedDelta(
        call_key=call_key,
        reason=plan.reason,
        deltas=plan.deltas,
        cost_delta=plan.cost_delta_nano / 1e9,
        record=ledger_record(call_key, owner, stored),
    )


def _records_op(d: Dialect, where: list[str], params: list[Any]) -> Op[list[LedgerRecord]]:
    """The booked calls matching ``where``, oldest first (``params`` may end with a LIMIT's)."""
    rows = yield Stmt(
        f"SELECT {_CALL_COLS} FROM ctx_usage_calls WHERE {' AND '.join([*where, 'version >= 0'])} "
        "ORDER BY created_at, call_key" + (" LIMIT ?" if len(params) > len(where) else ""),
        params,
        "all",
    )
    return [
        ledger_record(load_text(row[0]), Scope(row[2], row[1], row[3]), _stored_from_row(d, row))
        for row in rows
    ]


_TEXT_KEYS = frozenset({"purpose", "provider", "model"})


def _totals_op(
    scope: Scope | None, branch: str | None, by: tuple[str, ...]
) -> Op[list[UsageTotals]]:
    where, params = [], []
    if scope is not None:
        where += ["tenant = ?", "thread_id = ?"]
        params += [scope.tenant, scope.thread_id]
    if branch is not None:
        where.append("branch = ?")
        params.append(branch)
    group = ", ".join(by)
    rows = yield Stmt(
        f"SELECT {group + ', ' if by else ''}{', '.join(f'SUM({c})' for c in TOTALS_COLUMNS)} "
        "FROM ctx_usage_totals"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + (f" GROUP BY {group} ORDER BY {group}" if by else ""),
        params,
        "all",
    )
    totals = []
    for row in rows:
        named = dict(zip(TOTALS_COLUMNS, (int(v or 0) for v in row[len(by) :]), strict=True))
        if by or named["calls"]:
            key = {
                name: load_text(value) if name in _TEXT_KEYS and value is not None else value
                for name, value in zip(by, row[: len(by)], strict=True)
            }
            totals.append(
                UsageTotals(
                    key=key,
                    calls=named["calls"],
                    unknown_calls=named["unknown_calls"],
                    counts={name: named[name] for name in COUNT_FIELDS},
                    cost=named["cost_nano_usd"] / 1e9,
                    cost_unknown_calls=named["cost_unknown_calls"],
                    cacheable_prefix=named["cacheable_prefix"],
                )
            )
    return totals


class UsageLedger:
    """The usage ledger of a history store's database.

    Examples:
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> from ctx_langgraph.usage import UsageLedger, normalize_usage
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> ledger = UsageLedger(store)
        >>> provisional = normalize_usage({"input_tokens": 50, "cache_read_input_tokens": 18000,
        ...     "cache_creation_input_tokens": 1200, "output_tokens": 30}, provider="anthropic")
        >>> final = normalize_usage({"input_tokens": 50, "cache_read_input_tokens": 18000,
        ...     "cache_creation_input_tokens": 1200, "output_tokens": 120}, provider="anthropic")
        >>> ledger.record("anthropic:msg_1", provisional, scope="t1", status="partial", version=1).deltas["output"]
        30
        >>> ledger.record("anthropic:msg_1", final, scope="t1", version=2).deltas["output"]
        90
        >>> ledger.record("anthropic:msg_1", final, scope="t1", version=2).reason
        'duplicate'
        >>> [t.counts["input_total"] for t in ledger.totals("t1")], [t.counts["output"] for t in ledger.totals("t1")]
        ([19250], [120])
    """

    def __init__(self, store: HistoryStore, *, prices: PriceTable | None = None) -> None:
        require_store(store, where="UsageLedger(store=...)", expected=HistoryStore)
        self.store = store
        self.db = store.db
        """The store's database, so a booking can share the reply's transaction."""
        self.prices = prices if prices is not None else PriceTable.default()

    def _cost_nano(self, usage: NormalizedUsage) -> int | None:
        cost = self.prices.cost(usage)
        return None if cost is None else round(cost * 1e9)

    def record(
        self, call_key: str, usage: NormalizedUsage, **options: Unpack[BookingOptions]
    ) -> BookedDelta:
        """Record a call's usage and book the difference to what was booked for it before
        (the arguments of :meth:`booking`)."""
        return self.db.run(self.booking(call_key, usage, **options), write=True)

    async def arecord(
        self, call_key: str, usage: NormalizedUsage, **options: Unpack[BookingOptions]
    ) -> BookedDelta:
        """Async twin of :meth:`record`."""
        return await self.db.arun(self.booking(call_key, usage, **options), write=True)

    def booking(
        self,
        call_key: str,
        usage: NormalizedUsage,
        *,
        scope: Scope | str,
        purpose: str = "answer",
        status: UsageStatus | None = None,
        version: int = 0,
        cacheable_prefix: int | None = None,
        makeup: Mapping[str, int] | None = None,
    ) -> Op[BookedDelta]:
        """:meth:`record` as an operation, for a transaction of the ledger's database that
        writes something else too (``HistoryStore.append_then``: a reply and its usage).

        Args:
            call_key: the call's identity: ``"{provider}:{response_id}"``, or a local attempt id.
            usage: the normalized usage (counts it does not know keep their booked values).
            scope: the thread (and branch) the call belongs to.
            purpose: ``answer``, ``summary``, ``retry``, ``lookup``, ...
            status: ``complete``, ``partial`` or ``unknown``; derived from ``usage`` by default.
            version: orders the events of one call: a higher version replaces the record, an
                equal one is a duplicate (booked 0), a lower one is stale (booked 0).
            cacheable_prefix: the request's leading input tokens identical to the thread's
                previous request (:func:`~ctx_langgraph.budget.prefix.cacheable_prefix`); None
                keeps what was booked.
            makeup: the request's tokens by part (:class:`~ctx_langgraph.makeup.RequestMakeup`);
                None keeps what was booked, and a duplicate fills it in when the record has none.
        """
        if not call_key:
            raise ValueError("call_key must be a non-empty string")
        if not purpose:
            raise ValueError("purpose must be a non-empty string")
        if version < 0:
            raise ValueError(f"version must be >= 0, got {version}")
        if cacheable_prefix is not None and cacheable_prefix < 0:
            raise ValueError(f"cacheable_prefix must be >= 0, got {cacheable_prefix}")
        if makeup is not None and (problem := makeup_problem(makeup)) is not None:
            raise ValueError(f"makeup is not a request's make-up: {problem}")
        return _record_op(
            self.db.dialect,
            call_key,
            ensure_scope(scope),
            usage,
            self.db.clock(),
            self._cost_nano,
            purpose=purpose,
            status=status or usage.status,
            version=version,
            cacheable_prefix=cacheable_prefix,
            makeup=None if makeup is None else dict(makeup),
        )

    def embedding_booking(
        self,
        call_key: str,
        *,
        scope: Scope | str,
        model: str,
        tokens: int,
        texts: int,
        estimated: bool = False,
    ) -> Op[BookedDelta]:
        """The op booking one embedding call (purpose ``embedding``; a key booked: nothing)."""
        usage = embedding_usage(model, tokens, texts, estimated)
        return self.booking(call_key, usage, scope=scope, purpose="embedding")

    def _note_request(
        self, scope: Scope | str, digests: Sequence[str]
    ) -> Op[tuple[str, ...] | None]:
        return note_request_op(
            self.db.dialect, ensure_scope(scope), tuple(digests), self.db.clock()
        )

    def note_request(self, scope: Scope | str, digests: Sequence[str]) -> tuple[str, ...] | None:
        """Store ``digests`` as the part digests of the thread's last request and return the
        ones stored before (None: none), the request a call's cacheable prefix is measured
        against.

        Examples:
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
            >>> ledger = UsageLedger(store)
            >>> ledger.note_request("t", ["tools", "system", "hi"]) is None
            True
            >>> ledger.note_request("t", ["tools", "system", "hi", "hello"])
            ('tools', 'system', 'hi')
        """
        return self.db.run(self._note_request(scope, digests), write=True)

    async def anote_request(
        self, scope: Scope | str, digests: Sequence[str]
    ) -> tuple[str, ...] | None:
        """Async twin of :meth:`note_request`."""
        return await self.db.arun(self._note_request(scope, digests), write=True)

    def _get(self, call_key: str) -> Op[LedgerRecord | None]:
        found = yield from _records_op(self.db.dialect, ["call_key = ?"], [store_text(call_key)])
        return found[0] if found else None

    def get(self, call_key: str) -> LedgerRecord | None:
        """The record of one call, or None."""
        return self.db.run(self._get(call_key))

    async def aget(self, call_key: str) -> LedgerRecord | None:
        """Async twin of :meth:`get`."""
        return await self.db.arun(self._get(call_key))

    def _records_query(
        self, scope: Scope | str, branch: str | None, purpose: str | None, limit: int | None
    ) -> Op[list[LedgerRecord]]:
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        scope = ensure_scope(scope)
        where, params = ["tenant = ?", "thread_id = ?"], [scope.tenant, scope.thread_id]
        purpose = None if purpose is None else store_text(purpose)
        for column, value in (("branch", branch), ("purpose", purpose)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        return _records_op(self.db.dialect, where, [*params, limit] if limit else params)

    def records(
        self,
        scope: Scope | str,
        *,
        branch: str | None = None,
        purpose: str | None = None,
        limit: int | None = None,
    ) -> list[LedgerRecord]:
        """The calls booked for a thread (every branch unless ``branch``), oldest first.

        Examples:
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> from ctx_langgraph.usage import NormalizedUsage
            >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
            >>> ledger = UsageLedger(store)
            >>> for n, purpose in enumerate(["answer", "summary", "answer"]):
            ...     _ = ledger.record(f"call-{n}", NormalizedUsage(input_total=100 + n, output=5),
            ...                       scope="t", purpose=purpose)
            >>> [(r.call_key, r.purpose) for r in ledger.records("t", purpose="answer")]
            [('call-0', 'answer'), ('call-2', 'answer')]
        """
        return self.db.run(self._records_query(scope, branch, purpose, limit))

    async def arecords(
        self,
        scope: Scope | str,
        *,
        branch: str | None = None,
        purpose: str | None = None,
        limit: int | None = None,
    ) -> list[LedgerRecord]:
        """Async twin of :meth:`records`."""
        return await self.db.arun(self._records_query(scope, branch, purpose, limit))

    def _totals_query(
        self, scope: Scope | str | None, by: Sequence[str], branch: str | None
    ) -> Op[list[UsageTotals]]:
        by = tuple(by)
        unknown = [column for column in by if column not in GROUP_COLUMNS]
        if unknown:
            raise ValueError(f"cannot group usage totals by {unknown}; choose from {GROUP_COLUMNS}")
        return _totals_op(None if scope is None else ensure_scope(scope), branch, by)

    def totals(
        self, scope: Scope | str | None = None, *, by: Sequence[str] = (), branch: str | None = None
    ) -> list[UsageTotals]:
        """Running totals of a thread (every branch unless ``branch``), or of the whole ledger
        when ``scope`` is None, grouped by any of ``tenant, thread_id, branch, purpose,
        provider, model`` (one row without ``by``)."""
        return self.db.run(self._totals_query(scope, by, branch))

    async def atotals(
        self, scope: Scope | str | None = None, *, by: Sequence[str] = (), branch: str | None = None
    ) -> list[UsageTotals]:
        """Async twin of :meth:`totals`."""
        return await self.db.arun(self._totals_query(scope, by, branch))
