"""The make-up of a request: its input tokens split into the parts the budget counts.

``ctx_budget`` writes it for the request it lets through to the model
(``context["request"]["makeup"]``, :mod:`ctx_langgraph.budget.prefix_step`); ``ctx_usage`` books
it with the reply that answers that request, in the usage ledger's ``makeup`` column (JSON text,
:class:`~ctx_langgraph.usage.booking.LedgerRecord` ``makeup``); a thread export carries it; a
page that draws a call as one stacked bar against the window reads it. One format for all of
them, defined here.

The parts are counted as the prefix measure counts the request (the tool schemas and system
prompt the model node adds, then each message of the view, :mod:`ctx_langgraph.budget.prefix`);
``estimate`` is what the budget estimated for the same request, and ``adjustment`` the
difference: ``sum(parts) + adjustment == estimate``, exactly.

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
"""Keys ``ctx_budget`` adds after :data:`MAKEUP_KEYS`: which summary the request held, where
its raw tail starts, and the trigger the request was checked against (optional: a make-up
written before them is still one)."""


class RequestMakeup(TypedDict):
    """A request's input tokens by part, with the estimate and the room they are measured
    against: plain ints, every key present (``sum(parts) + adjustment == estimate``)."""

    system: int
    """System messages of the view that are neither pinned rules, memory nor the summary,
    plus the system prompt the model node adds itself."""
    pinned: int
    """The pinned-rule messages."""
    tools: int
    """The tool schemas the model node sends."""
    memory: int
    """The long-term memory message."""
    summary: int
    """The summary message (a provider's own compacted window too), its artifact trail left
    out."""
    trail: int
    """The artifact trail inside the summary message (0: none)."""
    lookup: int
    """History lookup results in the view."""
    tail: int
    """Every other message: the verbatim conversation since the summary."""
    adjustment: int
    """``estimate`` minus the parts above (may be negative): the measured-minus-counted
    difference when the estimate started from the provider's measured input, the reply
    priming of a recount, what the provider's own count or context editing changed."""
    estimate: int
    """The budget's estimate of the request's input tokens, margin excluded
    (``context["budget"]["input_tokens"]`` of the pass that let it through)."""
    reserve: int
    """The output reserve (tokens kept free for the reply)."""
    window: int
    """The model's context window."""
    prefix: int
    """Leading tokens identical to the thread's previous request: what a prompt cache can
    read (``context["cache"]["prefix_tokens"]``)."""
    generation: NotRequired[int]
    """The generation of the active summary the request held (0: none yet)."""
    covered_through: NotRequired[int]
    """The last seq that summary covers: the request's raw tail starts after it (0: none)."""
    trigger: NotRequired[int]
    """The budget's trigger in tokens when the request was let through: compaction starts
    when the estimate plus its safety margin is above it (a page draws it as a line)."""


def makeup_problem(value: object) -> str | None:
    """What keeps ``value`` from being a make-up, or None when it is one: a mapping with every
    key of :data:`MAKEUP_KEYS` (more keys are allowed), each an int (the parts, the estimate,
    the reserve, the window and the prefix at least 0), whose parts and adjustment sum to the
    estimate."""
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
    """A stored make-up read back; None for none, and for text that is not a JSON object of
    ints (a reader never fails on it)."""
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
