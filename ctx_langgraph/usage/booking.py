"""What one usage event books, decided without I/O: the record as stored and the signed
changes of the running totals, for :class:`~ctx_langgraph.usage.ledger.UsageLedger`."""

from __future__ import annotations

import datetime as dt
from collections import Counter
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
"""Version of a booking made when a call ended."""

BookingReason = Literal["new", "update", "duplicate", "stale"]
TOTALS_COLUMNS = (
    "calls",
    "unknown_calls",
    *COUNT_FIELDS,
    "cost_nano_usd",
    "cost_unknown_calls",
    "cacheable_prefix",
)


@dataclass(frozen=True)
class LedgerRecord:
    """What the ledger holds for one call."""

    call_key: str
    scope: Scope
    purpose: str
    status: UsageStatus
    version: int
    usage: NormalizedUsage
    """The booked counts (``raw``: the payload of a partial or unknown record, else ``{}``)."""
    cost: float | None
    """USD, or None when the model has no price or a needed count is unknown."""
    cacheable_prefix: int | None = None
    """Leading input tokens identical to the thread's previous request (None: not measured);
    compare with ``usage.cache_read``."""
    makeup: dict[str, int] | None = None
    """The request's tokens by part as ``ctx_budget`` counted them
    (:class:`~ctx_langgraph.makeup.RequestMakeup`), or None."""
    created_at: dt.datetime | None = None
    """When the call was first booked (None: not read back)."""


@dataclass(frozen=True)
class StoredCall:
    """A call's row (``version`` -1: a placeholder, nothing booked)."""

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
    return LedgerRecord(
        call_key=call_key,
        scope=scope,
        purpose=stored.purpose,
        status=stored.status,  # type: ignore[arg-type]
        version=stored.version,
        usage=_booked_usage(stored),
        cost=None if stored.cost_nano is None else stored.cost_nano / 1e9,
        cacheable_prefix=stored.cacheable_prefix,
        makeup=stored.makeup,
        created_at=stored.created_at,
    )


def _booked_usage(stored: StoredCall) -> NormalizedUsage:
    return NormalizedUsage(
        **stored.counts,
        provider=stored.provider,  # type: ignore[arg-type]
        model=stored.model or None,
        response_id=stored.response_id,
        complete=stored.status == "complete",
        raw=stored.raw,
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
        """Whether the row is written: a booking, or a duplicate filling in what it lacked."""
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
    """What booking ``usage`` over the ``old`` record changes (None keeps a booked value). A
    duplicate or stale event books no counts but fills in a make-up or cacheable prefix the
    record lacks (the prefix with its share of the totals)."""
    zero = dict.fromkeys(COUNT_FIELDS, 0)
    if old.booked and version <= old.version:
        kept = old if makeup is None or old.makeup is not None else replace(old, makeup=makeup)
        filled: list[tuple[tuple[str, str, str], dict[str, int]]] = []
        if cacheable_prefix is not None and old.cacheable_prefix is None:
            kept = replace(kept, cacheable_prefix=cacheable_prefix)
            if cacheable_prefix:
                filled = [
                    ((old.purpose, old.provider, old.model), {"cacheable_prefix": cacheable_prefix})
                ]
        reason: BookingReason = "duplicate" if version == old.version else "stale"
        return BookingPlan(kept, reason, filled, zero, 0)
    merged = usage.merged_over(_booked_usage(old) if old.booked else NormalizedUsage())
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
    adjustments: dict[tuple[str, str, str], Counter[str]] = {}
    for record, sign in ((old, -1), (stored, 1)) if old.booked else ((stored, 1),):
        key = (record.purpose, record.provider, record.model)
        adjustments.setdefault(key, Counter()).update(_totals_row(record, sign))
    before = old if old.booked else None
    deltas = {
        name: (stored.counts[name] or 0) - ((before and before.counts[name]) or 0)
        for name in COUNT_FIELDS
    }
    cost_delta = (stored.cost_nano or 0) - ((before and before.cost_nano) or 0)
    changes = [(key, dict(row)) for key, row in adjustments.items() if any(row.values())]
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
