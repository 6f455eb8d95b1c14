"""Step 7 of ``ctx_budget``: how much of the request about to be sent a prompt cache can read
(``context["cache"]``: the prefix shared with the thread's previous request, and what moved it),
and the request's tokens by part (``context["request"]["makeup"]``, :mod:`ctx_langgraph.makeup`).
A pass that routes to compaction sends nothing and keeps the last request's report.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import BaseMessage

from ctx_langgraph.budget.prefix import (
    RequestShape,
    cacheable_prefix,
    message_digest,
    overhead_digest,
    request_shape,
    shared_parts,
)
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.history.types import ARTIFACT_TRAIL_HEADING
from ctx_langgraph.makeup import MAKEUP_PARTS
from ctx_langgraph.state import CacheReport, RequestMakeup
from ctx_langgraph.view.markers import (
    CAPPED_FLAG,
    CLEARED_FLAG,
    INPUTS_CLEARED_FLAG,
    MEMORY_FLAG,
    PINNED_FLAG,
    SUMMARY_FLAG,
    is_lookup_result,
    is_memory_message,
    is_summary,
)

__all__ = ["measure_prefix", "moved_by", "request_makeup"]

_TRAIL_SECTION = f"\n## {ARTIFACT_TRAIL_HEADING}\n"


_LABELS = (
    (SUMMARY_FLAG, "summary"),
    (MEMORY_FLAG, "memory"),
    (PINNED_FLAG, "pinned rules"),
    (CLEARED_FLAG, "cleared tool result"),
    (INPUTS_CLEARED_FLAG, "cleared tool call"),
    (CAPPED_FLAG, "capped tool result"),
)


def _label(message: BaseMessage) -> str:
    kwargs = message.additional_kwargs
    return next((label for flag, label in _LABELS if kwargs.get(flag)), f"{message.type} message")


def moved_by(
    previous: Sequence[str] | None,
    shape: RequestShape,
    view: Sequence[BaseMessage],
    has_overhead: bool,
) -> str | None:
    """The first part of the request that differs from the previous request; None when that is
    a prefix of this one (or there was none)."""
    if not previous:
        return None
    shared = shared_parts(previous, shape.digests)
    return None if shared == len(previous) else _moved_label(shared, shape, view, has_overhead)


def _part(message: BaseMessage, lookup_tools: frozenset[str]) -> str:
    """The make-up part a message of the view counts in."""
    if is_summary(message):
        return "summary"
    if is_memory_message(message):
        return "memory"
    if message.additional_kwargs.get(PINNED_FLAG):
        return "pinned"
    if message.type == "system":
        return "system"
    if message.type == "tool" and (is_lookup_result(message) or message.name in lookup_tools):
        return "lookup"
    return "tail"


def request_makeup(
    s: BudgetSettings, turn: BudgetPass, shape: RequestShape, has_overhead: bool, prefix: int
) -> RequestMakeup:
    """The request's tokens by part, from the counts of its ``shape`` (the overhead, split into
    the node's prompt and the tools, then one per message; a summary's trail counted apart)."""
    parts = dict.fromkeys(MAKEUP_PARTS, 0)
    counts = shape.tokens
    if has_overhead:
        prompt = min(s.system_prompt_tokens, counts[0])
        parts["system"] += prompt
        parts["tools"] += counts[0] - prompt
        counts = counts[1:]
    for message, tokens in zip(turn.view, counts, strict=True):
        part = _part(message, s.lookup_tools)
        text = message.content if part == "summary" and isinstance(message.content, str) else ""
        if (at := text.rfind(_TRAIL_SECTION)) >= 0:  # the artifact trail, its last section
            trail = min(tokens, s.cache.count_text(turn.counter, text[at + 1 :]))
            parts["trail"] += trail
            tokens -= trail
        parts[part] += tokens
    return _makeup(s, turn, parts, prefix)


@functools.lru_cache(maxsize=64)
def _overhead_part(text: str) -> str:
    """The overhead part's digest (a node's tool schemas and prompt: a few distinct texts)."""
    return overhead_digest(system=text)


def _head(s: BudgetSettings, turn: BudgetPass, has_overhead: bool) -> list[str]:
    """The digests of the overhead (when there is one) and of the leading non-conversation
    messages."""
    head = [_overhead_part(s.overhead_text)] if has_overhead else []
    view, conversation = turn.view, ("tail", "lookup")
    length = next(
        (i for i, m in enumerate(view) if _part(m, frozenset()) in conversation), len(view)
    )
    return head + [message_digest(m) for m in view[:length]]


def _grown_from(previous: CacheReport, turn: BudgetPass, head: list[str]) -> int | None:
    """Where the new messages start when the request is the previous one with messages appended
    (this pass changed nothing before them, same leading parts, same last message); else None."""
    count, through = previous.get("messages"), previous.get("through")
    view = turn.view
    if previous.get("head") != head or turn.rewritten or turn.reasons or not isinstance(count, int):
        return None
    if count > len(view) or (count and view[count - 1].id != through):
        return None
    if turn.replacements and not set(turn.replacements) <= {m.id for m in view[count:]}:
        return None
    request = turn.context.get("request") or {}
    if request.get("makeup") is None or request.get("input_through_message_id") != through:
        return None
    return count


def _first_change(
    previous: CacheReport,
    turn: BudgetPass,
    shape: RequestShape,
    head: list[str],
    has_overhead: bool,
) -> int | None:
    """The first part of the request that differs from the previous request (None: that is a
    prefix of it): in the leading parts by digest, in the conversation by what this pass changed."""
    old = previous.get("head") or []
    for index, (mine, theirs) in enumerate(zip(head, old, strict=False)):
        if mine != theirs:
            return index
    if len(head) != len(old):
        return min(len(head), len(old))
    offset = int(has_overhead)
    view, state = turn.view, turn.state_messages
    found = [i for i, (a, b) in enumerate(zip(view, state, strict=False)) if a is not b][:1]
    if len(view) != len(state) and not found:
        found = [min(len(view), len(state))]
    revised = {key for key, result in turn.by_id.items() if result.status == "revised"}
    found += [i for i, m in enumerate(view) if m.id in revised][:1]
    count = int(previous.get("messages") or 0)
    if count > len(view) or (count and view[count - 1].id != previous.get("through")):
        found.append(len(head) - offset)  # messages went missing: the conversation moved
    first = min(found, default=None)
    if first is None or first >= count:
        return None
    return first + offset


def measure_prefix(s: BudgetSettings, turn: BudgetPass) -> None:
    """``turn.cache`` and ``turn.makeup`` of the request about to be sent (a plain turn measured
    by its new messages only, a changed request whole)."""
    if turn.decision != "proceed":
        return
    has_overhead = bool(s.tools or s.overhead_tokens)
    view = turn.view
    head = _head(s, turn, has_overhead)
    previous: CacheReport = turn.context.get("cache") or {}
    start = _grown_from(previous, turn, head)
    moved: str | None = None
    if start is not None:
        new = request_shape(view[start:], turn.counter, cache=s.cache)
        prefix = int(previous.get("input_tokens") or 0)
        total = prefix + new.input_tokens
        turn.makeup = _grown_makeup(s, turn, view[start:], new, prefix)
    else:
        shape = request_shape(
            view,
            turn.counter,
            system=s.overhead_text if has_overhead else None,
            cache=s.cache,
            overhead_tokens=s.overhead_tokens,
        )
        total = shape.input_tokens
        if "digests" in previous:  # an older version's report
            prefix = cacheable_prefix(previous["digests"], shape)
            moved = moved_by(previous["digests"], shape, view, has_overhead)
        elif previous:
            first = _first_change(previous, turn, shape, head, has_overhead)
            count = int(previous.get("messages") or 0) + int(has_overhead)
            prefix = sum(shape.tokens[: count if first is None else first])
            moved = None if first is None else _moved_label(first, shape, view, has_overhead)
        else:
            prefix = 0
        turn.makeup = request_makeup(s, turn, shape, has_overhead, prefix)
    turn.cache = CacheReport(
        prefix_tokens=prefix,
        input_tokens=total,
        ratio=round(prefix / total, 4) if total else None,
        moved_by=moved,
        head=head,
        messages=len(view),
        through=view[-1].id if view else None,
    )


def _moved_label(
    first: int, shape: RequestShape, view: Sequence[BaseMessage], has_overhead: bool
) -> str:
    """The name of the request's part ``first`` (the overhead first)."""
    if first >= len(shape.digests):
        return "removed messages"
    if has_overhead:
        if first == 0:
            return "tools or system prompt"
        first -= 1
    return _label(view[first])


def _grown_makeup(
    s: BudgetSettings,
    turn: BudgetPass,
    new: Sequence[BaseMessage],
    shape: RequestShape,
    prefix: int,
) -> RequestMakeup:
    """The previous request's make-up with the new messages' counts added."""
    before: Mapping[str, Any] = (turn.context.get("request") or {}).get("makeup") or {}
    parts = {part: int(before.get(part) or 0) for part in MAKEUP_PARTS}
    for message, tokens in zip(new, shape.tokens, strict=True):
        parts[_part(message, s.lookup_tools)] += tokens
    return _makeup(s, turn, parts, prefix)


def _makeup(
    s: BudgetSettings, turn: BudgetPass, parts: dict[str, int], prefix: int
) -> RequestMakeup:
    assert turn.estimate is not None
    estimate = turn.estimate.input_tokens
    return cast(
        RequestMakeup,
        {
            **parts,
            "adjustment": estimate - sum(parts.values()),
            "estimate": estimate,
            "reserve": s.budget.output_reserve,
            "window": s.budget.context_window,
            "prefix": prefix,
            "generation": int(turn.context.get("active_generation", 0)),
            "covered_through": int(turn.context.get("covered_through_seq", 0)),
            "trigger": s.budget.trigger,
        },
    )
