"""Usage: normalization across providers, streaming accumulation, the ledger, the callback
handler, and the ``ctx_usage`` node (docs/design.md §7)."""

from ctx_langgraph.usage.accumulator import UsageAccumulator
from ctx_langgraph.usage.ledger import (
    PURPOSES,
    BookedDelta,
    LedgerRecord,
    UsageLedger,
    UsageTotals,
    call_key_for,
)
from ctx_langgraph.usage.normalize import detect_format, normalize_usage
from ctx_langgraph.usage.prices import DEFAULT_PRICES, ModelPrice, PriceTable
from ctx_langgraph.usage.types import COUNT_FIELDS, NormalizedUsage, UsageStatus

__all__ = [
    "COUNT_FIELDS",
    "DEFAULT_PRICES",
    "PURPOSES",
    "BookedDelta",
    "LedgerRecord",
    "ModelPrice",
    "NormalizedUsage",
    "PriceTable",
    "UsageAccumulator",
    "UsageLedger",
    "UsageStatus",
    "UsageTotals",
    "call_key_for",
    "detect_format",
    "normalize_usage",
]
