"""What one usage event books, decided without I/O: the record as stored, and the signed
changes of the running totals (the new known values minus what was booked before).

:class:`~ctx_langgraph.usage.ledger.UsageLedger` reads the stored record under a row lock,
asks :func:`plan_booking` what to write, and writes it in the same transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ctx_langgraph.core.scope import Scope
from ctx_langgraph.usage.types import COUNT_FIELDS, NormalizedUsage, UsageStatus

__all__ = [
    "FINAL_VERSION",
    "TOTALS_COLUMNS",
    "BookingPlan",
    "BookingReason",
    "LedgerRecord",
    "StoredCall",
    "call_key_for",
    "ledger_record",
    "plan_booking",
]

FINAL_VERSION = 2
"""Version of a booking made when a call ended (provisional bookings use 1)."""

BookingReason = Literal["new", "update", "duplicate", "stale"]
TOTALS_COLUMNS = (
    "calls",
    "unknown_calls",
    *COUNT_FIELDS,
    "cost_nano_usd",
    "cost_unknown_calls",
    "cacheable_prefix",
)
"""The running totals of a group, each changed by a signed difference."""


@dataclass(frozen=True)
class LedgerRecord:
    """What the ledger holds for one call."""

    call_key: str
    scope: Scope
    purpose: str
    status: UsageStatus
    version: int
    usage: NormalizedUsage
    """The booked counts; ``usage.raw`` is the provider's payload for a partial or unknown
    record, ``{}`` for a complete one."""
    cost: float | None
    """USD, or None when the model has no price or a needed count is unknown."""
    cacheable_prefix: int | None = None
    """Leading input tokens identical to the thread's previous request, as the callback
    handler measured them (:mod:`ctx_langgraph.budget.prefix`), or None when not measured.
    Compare with ``usage.cache_read``, what the provider says its cache read."""
    makeup: dict[str, int] | None = None
    """The request's tokens by part as ``ctx_budget`` counted them
    (:class:`~ctx_langgraph.makeup.RequestMakeup`: ``system``, ``pinned``, ``tools``,
    ``memory``, ``summary``, ``trail``, ``lookup``, ``tail``, ``adjustment``, ``estimate``,
    ``reserve``, ``window``, ``prefix``, and ``generation`` / ``covered_through``: the summary
    the request held, ``trigger``: where compaction started), or None: not an answer call
    ``ctx_usage`` booked for the request it estimated."""
    created_at: dt.datetime | None = None
    """When the call was first booked, as the ledger read it back (None: not read back)."""


@dataclass(frozen=True)
class StoredCall:
    """A call's row as the ledger stores it (``version`` -1: a placeholder, nothing booked)."""

    purpose: str
    provider: str
    model: str
    status: str
    version: int
    counts: dict[str, int | None]
    cost_nano: int | None
    response_id: str | None
    raw: dict[str, Any]
    cacheable_prefix: int | None = None
    makeup: dict[str, int] | None = None
    created_at: dt.datetime | None = None

    @property
    def booked(self) -> bool:
        return self.version >= 0


def ledger_record(call_key: str, scope: Scope, stored: StoredCall) -> LedgerRecord:
    """The public record of a stored call."""
    usage = NormalizedUsage(
        **stored.counts,
        provider=stored.provider,  # type: ignore[arg-type]
        model=stored.model or None,
        response_id=stored.response_id,
        complete=stored.status == "complete",
        raw=stored.raw,
    )
    return LedgerRecord(
        call_key=call_key,
        scope=scope,
        purpose=stored.purpose,
        status=stored.status,  # type: ignore[arg-type]
        version=stored.version,
        usage=usage,
        cost=None if stored.cost_nano is None else stored.cost_nano / 1e9,
        cacheable_prefix=stored.cacheable_prefix,
        makeup=stored.makeup,
        created_at=stored.created_at,
    )


@dataclass(frozen=True)
class BookingPlan:
    stored: StoredCall
    reason: BookingReason
    adjustments: list[tuple[tuple[str, str, str], dict[str, int]]]
    """(purpose, provider, model) -> signed changes of the totals columns."""
    deltas: dict[str, int]
    cost_delta_nano: int

    def writes(self, old: StoredCall) -> bool:
        """The row is written: a booking, or a duplicate that brings the make-up or the
        cacheable prefix the row lacked."""
        return self.reason in ("new", "update") or self.stored != old


def _totals_row(stored: StoredCall, sign: int) -> dict[str, int]:
    row = {name: sign * (stored.counts[name] or 0) for name in COUNT_FIELDS}
    row["calls"] = sign
    row["unknown_calls"] = sign * (stored.status == "unknown")
    row["cost_nano_usd"] = sign * (stored.cost_nano or 0)
    row["cost_unknown_calls"] = sign * (stored.cost_nano is None)
    row["cacheable_prefix"] = sign * (stored.cacheable_prefix or 0)
    return row


def plan_booking(
    old: StoredCall,
    usage: NormalizedUsage,
    *,
    purpose: str,
    status: UsageStatus,
    version: int,
    cost_nano: Callable[[NormalizedUsage], int | None],
    cacheable_prefix: int | None = None,
    makeup: dict[str, int] | None = None,
) -> BookingPlan:
    """Decide, without I/O, what booking ``usage`` over the ``old`` record changes
    (``cacheable_prefix`` and ``makeup`` None keep the booked value, as an unknown count
    does). A duplicate or stale event books no counts, but fills in a make-up the record has
    not got (only ``ctx_usage`` knows it, whether a callback handler booked the same call
    before it or after), and a cacheable prefix it has not got (a handler that measures it, next
    to one that does not), that one with its share of the totals."""
    zero = dict.fromkeys(COUNT_FIELDS, 0)
    if old.booked and version <= old.version:
        kept = old if makeup is None or old.makeup is not None else replace(old, makeup=makeup)
        filled: list[tuple[tuple[str, str, str], dict[str, int]]] = []
        if cacheable_prefix is not None and old.cacheable_prefix is None:
            kept = replace(kept, cacheable_prefix=cacheable_prefix)  # a measure it lacked
            if cacheable_prefix:
                filled = [
                    ((old.purpose, old.provider, old.model), {"cacheable_prefix": cacheable_prefix})
                ]
        reason: BookingReason = "duplicate" if version == old.version else "stale"
        return BookingPlan(kept, reason, filled, zero, 0)
    previous = ledger_record("", Scope("_"), old).usage if old.booked else NormalizedUsage()
    merged = usage.merged_over(previous)  # a count this event does not know keeps its booked value
    stored = StoredCall(
        purpose=purpose,
        provider=merged.provider,
        model=merged.model or "",
        status=status,
        version=version,
        counts={name: getattr(merged, name) for name in COUNT_FIELDS},
        cost_nano=cost_nano(merged),
        response_id=merged.response_id,
        raw={} if status == "complete" else dict(usage.raw),
        cacheable_prefix=cacheable_prefix if cacheable_prefix is not None else old.cacheable_prefix,
        makeup=makeup if makeup is not None else old.makeup,
        created_at=old.created_at,
    )
    adjustments: dict[tuple[str, str, str], dict[str, int]] = {}
    for record, sign in ((old, -1), (stored, 1)):
        if sign == -1 and not record.booked:
            continue
        key = (record.purpose, record.provider, record.model)
        row = adjustments.setdefault(key, {})
        for column, value in _totals_row(record, sign).items():
            row[column] = row.get(column, 0) + value
    deltas = {
        name: (stored.counts[name] or 0) - ((old.counts[name] or 0) if old.booked else 0)
        for name in COUNT_FIELDS
    }
    cost_delta = (stored.cost_nano or 0) - ((old.cost_nano or 0) if old.booked else 0)
    changes = [(key, row) for key, row in adjustments.items() if any(row.values())]
    return BookingPlan(stored, "update" if old.booked else "new", changes, deltas, cost_delta)


def call_key_for(
    usage: NormalizedUsage, *, message_id: str | None = None, attempt_id: str | None = None
) -> str:
    """The ledger key of a call: provider and response id when known, else the message id,
    else a local attempt id.

    Examples:
        >>> from ctx_langgraph.usage import NormalizedUsage
        >>> call_key_for(NormalizedUsage(provider="openai", response_id="chatcmpl-1"))
        'openai:chatcmpl-1'
        >>> call_key_for(NormalizedUsage(), message_id="lc_run--42")
        'msg:lc_run--42'
    """
    if usage.response_id:
        return f"{usage.provider}:{usage.response_id}"
    if message_id:
        return f"msg:{message_id}"
    if attempt_id:
        return f"attempt:{attempt_id}"
    raise ValueError("a call needs a response id, a message id or an attempt id to be booked")
