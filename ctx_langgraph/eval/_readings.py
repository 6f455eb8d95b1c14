"""Reading ``metrics.json``: numbers, the strategies in order, and the question categories."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

__all__ = [
    "CATEGORY_LABELS",
    "category_entry",
    "category_label",
    "is_number",
    "number",
    "question_categories",
    "strategy_entries",
]

CATEGORY_LABELS: dict[str, str] = {
    "1": "1 multi-hop",
    "2": "2 temporal",
    "3": "3 open-domain",
    "4": "4 single-hop",
    "5": "5 adversarial",
}
"""Display names of LoCoMo's numbered question categories; other categories show verbatim."""


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number(value: object) -> float:
    if is_number(value):
        return float(value)
    return math.nan


def strategy_entries(metrics: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    strategies: Mapping[str, Any] = metrics.get("strategies") or {}
    return {str(name): entry or {} for name, entry in strategies.items()}


def category_key(order: Sequence[str]) -> Callable[[str], tuple[int, int]]:
    def key(category: str) -> tuple[int, int]:
        if category.isdigit():
            return (0, int(category))
        return (1, order.index(category))

    return key


def question_categories(strategies: Mapping[str, Mapping[str, Any]]) -> list[str]:
    seen: list[str] = []
    for entry in strategies.values():
        for category in entry.get("by_category") or {}:
            if str(category) not in seen:
                seen.append(str(category))
    return sorted(seen, key=category_key(seen))


def category_entry(entry: Mapping[str, Any], category: str) -> Mapping[str, Any] | None:
    by_category: Mapping[Any, Any] = entry.get("by_category") or {}
    for key, value in by_category.items():
        if str(key) == category:
            found: Mapping[str, Any] = value or {}
            return found
    return None


def category_label(category: str) -> str:
    return CATEGORY_LABELS.get(category, category)
