"""The make-up of a request: its input tokens split into the parts the budget counts.

``ctx_budget`` writes it for the request it lets through (``context["request"]["makeup"]``),
``ctx_usage`` books it in the usage ledger's ``makeup`` column, a thread export carries it. The
parts are counted by the prefix measure (:mod:`ctx_langgraph.budget.prefix`);
``sum(parts) + adjustment == estimate``, exactly.

Examples:
    >>> makeup: RequestMakeup = {"system": 12, "pinned": 0, "tools": 90, "memory": 0,
    ...     "summary": 300, "trail": 40, "lookup": 0, "tail": 800, "adjustment": -2,
    ...     "estimate": 1240, "reserve": 1000, "window": 8000, "prefix": 400}
    >>> makeup_problem(makeup) is None, makeup_from_json(makeup_json(makeup)) == makeup
    (True, True)
    >>> makeup_problem({**makeup, "tail": 801})
    'system + pinned + tools + memory + summary + trail + lookup + tail + adjustment is 1241, not the estimate 1240'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from typing_extensions import NotRequired, TypedDict

__all__ = [
    "HELD_KEYS",
    "MAKEUP_KEYS",
    "MAKEUP_PARTS",
    "RequestMakeup",
    "makeup_from_json",
    "makeup_json",
    "makeup_problem",
]

MAKEUP_PARTS: Final = (
    "system",
    "pinned",
    "tools",
    "memory",
    "summary",
    "trail",
    "lookup",
    "tail",
)
"""The parts of a request, in the order they stack (each a token count, >= 0)."""
MAKEUP_KEYS: Final = (*MAKEUP_PARTS, "adjustment", "estimate", "reserve", "window", "prefix")
"""Every key a make-up must have, in the order it is written."""
HELD_KEYS: Final = ("generation", "covered_through", "trigger")
"""Optional keys ``ctx_budget`` adds after :data:`MAKEUP_KEYS`."""


class RequestMakeup(TypedDict):
    """A request's input tokens by part, with the estimate and the room they are measured
    against: plain ints, every key present (``sum(parts) + adjustment == estimate``)."""

    system: int
    """Other system messages of the view, plus the system prompt the model node adds."""
    pinned: int
    """The pinned-rule messages."""
    tools: int
    """The tool schemas the model node sends."""
    memory: int
    """The long-term memory message."""
    summary: int
    """The summary message (or a provider's compacted window), without its artifact trail."""
    trail: int
    """The artifact trail inside the summary message (0: none)."""
    lookup: int
    """History lookup results in the view."""
    tail: int
    """Every other message: the verbatim conversation since the summary."""
    adjustment: int
    """``estimate`` minus the parts above (may be negative)."""
    estimate: int
    """The budget's estimate of the request's input tokens, margin excluded."""
    reserve: int
    """The output reserve (tokens kept free for the reply)."""
    window: int
    """The model's context window."""
    prefix: int
    """Leading tokens identical to the thread's previous request (prompt-cacheable)."""
    generation: NotRequired[int]
    """The generation of the active summary the request held (0: none yet)."""
    covered_through: NotRequired[int]
    """The last seq that summary covers (0: none)."""
    trigger: NotRequired[int]
    """The budget's trigger in tokens when the request was let through."""


def makeup_problem(value: object) -> str | None:
    """What keeps ``value`` from being a make-up (every key of :data:`MAKEUP_KEYS`, ints, all
    but ``adjustment`` at least 0, summing to the estimate), or None when it is one."""
    if not isinstance(value, Mapping):
        return f"expected a mapping of token counts, got {type(value).__name__}"
    missing = [key for key in MAKEUP_KEYS if key not in value]
    if missing:
        return f"missing {', '.join(missing)}"
    for key, count in value.items():
        if isinstance(count, bool) or not isinstance(count, int):
            return f"{key}: expected an int, got {type(count).__name__}"
        if key in MAKEUP_KEYS and key != "adjustment" and count < 0:
            return f"{key}: expected at least 0, got {count}"
    counted = sum(int(value[key]) for key in MAKEUP_PARTS) + int(value["adjustment"])
    if counted != value["estimate"]:
        return (
            f"{' + '.join((*MAKEUP_PARTS, 'adjustment'))} is {counted}, not the estimate "
            f"{value['estimate']}"
        )
    return None


def makeup_json(makeup: Mapping[str, int]) -> str:
    """The make-up as the ledger stores it: compact JSON, keys in :data:`MAKEUP_KEYS` order."""
    ordered = {key: makeup[key] for key in (*MAKEUP_KEYS, *HELD_KEYS) if key in makeup}
    ordered.update({key: count for key, count in makeup.items() if key not in ordered})
    return json.dumps(ordered, separators=(",", ":"))


def makeup_from_json(text: str | None) -> dict[str, int] | None:
    """A stored make-up read back; None for none or for anything but a JSON object of ints."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or any(
        isinstance(count, bool) or not isinstance(count, int) for count in value.values()
    ):
        return None
    return value
