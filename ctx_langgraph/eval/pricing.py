"""What a replay would cost at a provider's list prices, with and without its prompt cache,
and the share of its input a prompt cache could read.

The evaluation meters every strategy with one tokenizer; this module prices those counts with
one :class:`~ctx_langgraph.usage.ModelPrice` (``gpt-4o`` from the package's
:data:`~ctx_langgraph.usage.DEFAULT_PRICES` by default: input, cached input and output per 1M
tokens). The replay's answer calls pay their cacheable prefix at the cached-input price and the
rest at the input price; the summarizer's calls the same way with their own cache reads (0 for
a standalone summarization request). ``cost_usd_uncached`` prices the same calls with no cache
at all, so the saving shows.

:func:`phase_costs` splits a phase's cost (the replay's, or the question phase's) three ways:
the answer calls, the history lookup's results inside them (retrieval), and the summarizer's
calls; the three add up to the phase's cost. A lookup result is the newest part of the request
that reads it, so its tokens are priced as the request's uncached input first (the part after
the cacheable prefix), and only what is left of them at the cached-input price.

Examples:
    >>> price = PriceTable.default().price_for("gpt-4o")
    >>> costs = replay_costs({"input_tokens_total": 1_000_000, "cacheable_prefix_tokens": 800_000,
    ...     "output_tokens_total": 10_000, "summarizer_input_tokens": 0,
    ...     "summarizer_cache_read_tokens": 0, "summarizer_output_tokens": 0}, price)
    >>> costs["cost_usd"], costs["cost_usd_uncached"]
    (1.6, 2.6)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ctx_langgraph.usage.prices import ModelPrice, PriceTable

__all__ = [
    "PHASE_COST_KEYS",
    "PRICE_MODEL",
    "CallTokens",
    "eval_price",
    "phase_costs",
    "prefix_ratio",
    "price_settings",
    "replay_costs",
]

PRICE_MODEL = "gpt-4o"
"""The model whose list prices the evaluation's cost columns use."""


def eval_price(model: str = PRICE_MODEL) -> ModelPrice:
    """The price the evaluation's cost columns use (the package's default price table)."""
    price = PriceTable.default().price_for(model)
    if price is None:
        raise ValueError(f"the default price table has no price for {model!r}")
    return price


def price_settings(model: str = PRICE_MODEL) -> dict[str, Any]:
    """The stated price table of a report: USD per 1M tokens."""
    price = eval_price(model)
    return {
        "model": model,
        "input": price.input,
        "cached_input": price.input if price.cached_input is None else price.cached_input,
        "output": price.output,
    }


def _cost(price: ModelPrice, input_tokens: int, cached: int, output: int) -> float:
    cached_rate = price.input if price.cached_input is None else price.cached_input
    micro_usd = (input_tokens - cached) * price.input + cached * cached_rate + output * price.output
    return micro_usd / 1_000_000


def prefix_ratio(prefix_tokens: float, input_tokens: float) -> float | None:
    """Cacheable prefix tokens over input tokens (None without input), 4 decimals.

    Examples:
        >>> prefix_ratio(850, 1000), prefix_ratio(0, 0)
        (0.85, None)
    """
    return round(prefix_tokens / input_tokens, 4) if input_tokens else None


def replay_costs(metrics: Mapping[str, Any], price: ModelPrice) -> dict[str, float]:
    """``cost_usd`` and ``cost_usd_uncached`` of a run's replay phase: its answer calls and
    its summarizer calls, from the run's token metrics."""
    answer = (
        int(metrics["input_tokens_total"]),
        int(metrics["cacheable_prefix_tokens"]),
        int(metrics["output_tokens_total"]),
    )
    summary = (
        int(metrics["summarizer_input_tokens"]),
        int(metrics["summarizer_cache_read_tokens"]),
        int(metrics["summarizer_output_tokens"]),
    )
    cached = _cost(price, *answer) + _cost(price, *summary)
    uncached = _cost(price, answer[0], 0, answer[2]) + _cost(price, summary[0], 0, summary[2])
    return {"cost_usd": round(cached, 6), "cost_usd_uncached": round(uncached, 6)}


PHASE_COST_KEYS = ("cost_answer_usd", "cost_retrieval_usd", "cost_summary_usd", "cost_usd")
"""A phase's cost, split (:func:`phase_costs`); the question phase's carry ``question_``."""


@dataclass(frozen=True)
class CallTokens:
    """One model call's tokens, as the harness meters them."""

    input: int
    cached: int
    """Input tokens a prompt cache would read (the cacheable prefix)."""
    output: int
    retrieval: int = 0
    """Input tokens that are history lookup results."""


def phase_costs(
    calls: Iterable[CallTokens],
    summarizer: tuple[int, int, int],
    price: ModelPrice,
    prefix: str = "",
) -> dict[str, float]:
    """USD of one phase: its answer calls (lookup results left out), the lookup results in
    them, its summarizer calls (``(input, cache reads, output)`` tokens), and their sum, keyed
    :data:`PHASE_COST_KEYS` with ``prefix`` (``"question_"`` for the question phase).

    Examples:
        >>> price = PriceTable.default().price_for("gpt-4o")
        >>> phase_costs([CallTokens(1_000_000, 600_000, 0, retrieval=500_000)], (0, 0, 0), price)
        {'cost_answer_usd': 0.625, 'cost_retrieval_usd': 1.125, 'cost_summary_usd': 0.0, 'cost_usd': 1.75}
    """
    tokens = [0, 0, 0, 0, 0]  # input, cached, output, retrieval, retrieval read from cache
    for call in calls:
        fresh = min(call.retrieval, call.input - call.cached)
        for index, value in enumerate(
            (call.input, call.cached, call.output, call.retrieval, call.retrieval - fresh)
        ):
            tokens[index] += value
    inputs, cached, output, retrieval, reused = tokens
    answer = _cost(price, inputs - retrieval, cached - reused, output)
    looked_up = _cost(price, retrieval, reused, 0)
    summary = _cost(price, *summarizer)
    total = _cost(price, inputs, cached, output) + summary  # as replay_costs adds it up
    values = (answer, looked_up, summary, total)
    return {
        f"{prefix}{key}": round(value, 6)
        for key, value in zip(PHASE_COST_KEYS, values, strict=True)
    }
