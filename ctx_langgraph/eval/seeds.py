"""Variance across seeds: the whole evaluation once per seed, each figure's mean and spread.

With generated sessions each seed is its own dataset (:func:`session_seeds`). Every figure of a
strategy is computed per seed over that seed's conversations (as :func:`~ctx_langgraph.eval.
aggregate.aggregate` computes it), then reported as the mean across seeds with its minimum,
maximum and sample standard deviation (:class:`Spread`); the number of samples is the seeds,
the conversations of all seeds, and their questions. With one seed there is no spread to show:
``n`` is 1 and ``std`` is ``None``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from typing_extensions import TypedDict

from ctx_langgraph.eval._readings import is_number
from ctx_langgraph.eval.aggregate import ConversationRun, aggregate

__all__ = ["Samples", "Spread", "by_seed", "session_seeds", "spread"]


class Spread(TypedDict):
    """One figure across seeds."""

    mean: float | None
    min: float | None
    max: float | None
    std: float | None
    """Sample standard deviation (n - 1); ``None`` with fewer than two seeds."""
    n: int
    """Seeds with a value for the figure."""


class Samples(TypedDict):
    """How many samples a strategy's figures rest on."""

    seeds: int
    conversations: int
    """Conversations over every seed."""
    questions: int
    """Questions over every conversation of every seed."""


def session_seeds(seeds: Sequence[int], sessions: int) -> dict[int, list[int]]:
    """The generator seed of each session of each seed, no session shared between seeds.

    One seed ``s`` gives ``s, s + 1, ...`` (what ``--seed`` always gave); several seeds step
    by their span, so ``0, 1, 2`` with three sessions each are ``0, 3, 6``, ``1, 4, 7`` and
    ``2, 5, 8``.

    Examples:
        >>> session_seeds([4], 3)
        {4: [4, 5, 6]}
        >>> session_seeds([0, 1, 2], 2)
        {0: [0, 3], 1: [1, 4], 2: [2, 5]}
    """
    span = max(seeds) - min(seeds) + 1 if len(seeds) > 1 else 1
    return {seed: [seed + n * span for n in range(sessions)] for seed in seeds}


def spread(values: Sequence[float | int | None]) -> Spread:
    """Mean, minimum, maximum and sample standard deviation of the values that are numbers.

    Examples:
        >>> spread([0.5, 0.7, None, 0.6])
        {'mean': 0.6, 'min': 0.5, 'max': 0.7, 'std': 0.1, 'n': 3}
        >>> spread([12])
        {'mean': 12.0, 'min': 12.0, 'max': 12.0, 'std': None, 'n': 1}
    """
    numbers = [float(value) for value in values if is_number(value)]
    if not numbers:
        return Spread(mean=None, min=None, max=None, std=None, n=0)
    std = round(statistics.stdev(numbers), 6) if len(numbers) > 1 else None
    return Spread(
        mean=round(statistics.fmean(numbers), 6),
        min=min(numbers),
        max=max(numbers),
        std=std,
        n=len(numbers),
    )


def _scalars(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in figures.items()
        if value is None or (is_number(value) and key != "conversations")
    }


def by_seed(runs: Sequence[ConversationRun]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """One strategy's figures over ``runs`` of one or more seeds, and each seed's own.

    The first: :func:`~ctx_langgraph.eval.aggregate.aggregate` of every run (question
    categories and conversations over every seed), whose scalar figures are, with several
    seeds, the mean across seeds; ``spread`` holds each scalar figure's :class:`Spread` and
    ``samples`` the :class:`Samples`. The second: each seed's scalar figures."""
    groups: dict[int, list[ConversationRun]] = {}
    for run in runs:
        groups.setdefault(run.seed, []).append(run)
    per_seed = {seed: _scalars(aggregate(group)) for seed, group in sorted(groups.items())}
    out = aggregate(runs)
    spreads = {
        key: spread([figures.get(key) for figures in per_seed.values()]) for key in _scalars(out)
    }
    if len(per_seed) > 1:
        out.update({key: value["mean"] for key, value in spreads.items()})
    out["spread"] = spreads
    out["samples"] = Samples(
        seeds=len(per_seed),
        conversations=len(runs),
        questions=sum(len(run.questions) for run in runs),
    )
    return out, per_seed
