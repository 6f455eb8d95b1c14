"""Normalized usage: one meaning per field, whatever the provider said."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, cast

from typing_extensions import TypedDict

from ctx_langgraph.storage.tables.usage import COUNT_COLUMNS

__all__ = [
    "COUNT_FIELDS",
    "NormalizedUsage",
    "Provider",
    "UsageCounts",
    "UsageStatus",
    "embedding_usage",
]

Provider = Literal["openai", "anthropic", "google", "langchain", "unknown"]
UsageStatus = Literal["complete", "partial", "unknown"]
"""``complete`` (final, input and output known), ``partial`` (some counts known, or not final
yet) or ``unknown`` (no count known; counted in the ledger's ``unknown_calls``)."""

COUNT_FIELDS = COUNT_COLUMNS
"""The token counts of :class:`NormalizedUsage`, in the order the ledger stores them."""


class UsageCounts(TypedDict):
    """The six token counts, as keyword arguments of :class:`NormalizedUsage`."""

    input_total: int | None
    input_uncached: int | None
    cache_read: int | None
    cache_write: int | None
    output: int | None
    reasoning: int | None


@dataclass(frozen=True)
class NormalizedUsage:
    """Token usage of one model call, in provider-independent terms: a count the provider did
    not report is ``None``, never 0; ``input_total = input_uncached + cache_read + cache_write``
    when all are known; ``output`` includes ``reasoning``."""

    input_total: int | None = None
    """Every input token of the request, cached or not: the context the call occupied."""
    input_uncached: int | None = None
    """Input tokens neither read from nor written to a prompt cache."""
    cache_read: int | None = None
    """Input tokens read from a prompt cache (billed at the cached-input rate)."""
    cache_write: int | None = None
    """Input tokens written to a prompt cache (billed at the cache-write rate)."""
    output: int | None = None
    """Generated tokens, reasoning included."""
    reasoning: int | None = None
    """The reasoning / thinking part of ``output``, when the provider reports it."""
    provider: Provider = "unknown"
    model: str | None = None
    response_id: str | None = None
    complete: bool = True
    """False for a provisional value (a stream still running) or a call that ended early."""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The payload the numbers came from, as the provider sent it."""

    def counts(self) -> UsageCounts:
        """The token counts by field name."""
        return cast(UsageCounts, {name: getattr(self, name) for name in COUNT_FIELDS})

    @property
    def known(self) -> bool:
        """Whether any count is known at all."""
        return any(getattr(self, name) is not None for name in COUNT_FIELDS)

    @property
    def status(self) -> UsageStatus:
        """``complete`` (final, input and output known), ``partial`` or ``unknown``."""
        if not self.known:
            return "unknown"
        if self.complete and self.input_total is not None and self.output is not None:
            return "complete"
        return "partial"

    def merged_over(self, older: NormalizedUsage) -> NormalizedUsage:
        """This value with the fields it does not know taken from ``older`` (missing is not zero)."""
        updates: dict[str, Any] = {
            name: getattr(older, name)
            for name in (*COUNT_FIELDS, "model", "response_id")
            if getattr(self, name) is None
        }
        if self.provider == "unknown":
            updates["provider"] = older.provider
        return replace(self, **updates) if updates else self

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (``raw`` included)."""
        return {
            f.name: (dict(self.raw) if f.name == "raw" else getattr(self, f.name))
            for f in fields(self)
        }


def embedding_usage(model: str, tokens: int, texts: int, estimated: bool) -> NormalizedUsage:
    """The usage of one embedding call: ``tokens`` of input, none cached, no output."""
    return NormalizedUsage(
        input_total=tokens,
        input_uncached=tokens,
        cache_read=0,
        cache_write=0,
        output=0,
        model=model,
        raw={"texts": texts, "estimated": estimated},
    )
