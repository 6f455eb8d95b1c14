"""Prices per model, for the cost column of the usage ledger."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ctx_langgraph.usage.types import NormalizedUsage

__all__ = ["DEFAULT_PRICES", "ModelPrice", "PriceTable"]


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens. ``cached_input`` and ``cache_write`` default to ``input``."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, usage: NormalizedUsage) -> float | None:
        """The call's cost, or None when a count it needs is unknown."""
        if usage.input_uncached is None or usage.output is None:
            return None
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        micro_usd = (
            usage.input_uncached * self.input
            + (usage.cache_read or 0) * cached
            + (usage.cache_write or 0) * write
            + usage.output * self.output
        )
        return micro_usd / 1_000_000


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o": ModelPrice(input=2.50, cached_input=1.25, output=10.00),
    "gpt-4o-mini": ModelPrice(input=0.15, cached_input=0.075, output=0.60),
    "gpt-4.1": ModelPrice(input=2.00, cached_input=0.50, output=8.00),
    "gpt-4.1-mini": ModelPrice(input=0.40, cached_input=0.10, output=1.60),
    "gpt-4.1-nano": ModelPrice(input=0.10, cached_input=0.025, output=0.40),
    "gpt-5": ModelPrice(input=1.25, cached_input=0.125, output=10.00),
    "gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.00),
    "gpt-5-nano": ModelPrice(input=0.05, cached_input=0.005, output=0.40),
    "o3": ModelPrice(input=2.00, cached_input=0.50, output=8.00),
    "o4-mini": ModelPrice(input=1.10, cached_input=0.275, output=4.40),
    "claude-opus-4": ModelPrice(input=15.00, cached_input=1.50, cache_write=18.75, output=75.00),
    "claude-sonnet-4": ModelPrice(input=3.00, cached_input=0.30, cache_write=3.75, output=15.00),
    "claude-3-7-sonnet": ModelPrice(input=3.00, cached_input=0.30, cache_write=3.75, output=15.00),
    "claude-3-5-haiku": ModelPrice(input=0.80, cached_input=0.08, cache_write=1.00, output=4.00),
    "claude-haiku-4-5": ModelPrice(input=1.00, cached_input=0.10, cache_write=1.25, output=5.00),
    "gemini-2.5-pro": ModelPrice(input=1.25, cached_input=0.31, output=10.00),
    "gemini-2.5-flash": ModelPrice(input=0.30, cached_input=0.075, output=2.50),
}
"""2025 list prices in USD per 1M tokens (standard tier) of common models, by model-name
prefix: the :meth:`PriceTable.default` table."""


class PriceTable:
    """Model prices by the longest matching model-name prefix (``gpt-4o-2024-08-06`` is priced as
    ``gpt-4o``); a model with no price costs ``None``, never 0.

    Examples:
        >>> from ctx_langgraph.usage import NormalizedUsage
        >>> table = PriceTable.default().with_prices({"my-model": ModelPrice(input=1.0, output=2.0)})
        >>> table.cost(NormalizedUsage(input_total=1000, input_uncached=1000, output=500, model="my-model-v2"))
        0.002
        >>> table.cost(NormalizedUsage(input_total=1, input_uncached=1, output=1, model="mystery")) is None
        True
    """

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None) -> None:
        self._prices = dict(prices or {})

    @classmethod
    def default(cls) -> PriceTable:
        """The built-in list prices (:data:`DEFAULT_PRICES`)."""
        return cls(DEFAULT_PRICES)

    def with_prices(self, prices: Mapping[str, ModelPrice]) -> PriceTable:
        """A copy with more or replaced prices."""
        return PriceTable({**self._prices, **prices})

    def price_for(self, model: str | None) -> ModelPrice | None:
        if not model:
            return None
        name = model.lower().split("/")[-1]  # "openai/gpt-4o" -> "gpt-4o"
        matches = [prefix for prefix in self._prices if name.startswith(prefix.lower())]
        return self._prices[max(matches, key=len)] if matches else None

    def cost(self, usage: NormalizedUsage) -> float | None:
        price = self.price_for(usage.model)
        return None if price is None else price.cost(usage)
