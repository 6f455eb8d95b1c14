"""Step 7 of ``ctx_budget``: how much of the request about to be sent a prompt cache can read.

The request (the tool schemas and system prompt the model node adds, then the view) is measured
against the previous request sent on the thread, whose part digests ``context["cache"]`` keeps:
``prefix_tokens`` leading tokens are identical (:func:`~ctx_langgraph.budget.prefix.cacheable_prefix`),
``moved_by`` names the first part that differs when the previous request is not a prefix of this
one (``summary``: a compaction committed; ``memory``, ``pinned rules``, ``cleared tool result``,
``tools or system prompt``, or the kind of message that changed). A pass that routes to
compaction sends nothing, so it keeps the report (and the digests) of the last request sent.

The same parts give the request's make-up (:mod:`ctx_langgraph.makeup`,
``context["request"]["makeup"]``): each part's count added to the part of the request it is
(system, pinned rules, tools, memory, summary and its artifact trail, lookup results, the
tail), against the estimate. Nothing is counted again but the trail, once per summary text (a
cached count).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from ctx_langgraph.budget.prefix import RequestShape, cacheable_prefix, request_shape, shared_parts
from ctx_langgraph.budget.turn import BudgetSettings, Turn
from ctx_langgraph.history.types import ARTIFACT_TRAIL_HEADING
from ctx_langgraph.makeup import MAKEUP_PARTS
from ctx_langgraph.state import CacheReport, RequestMakeup
from ctx_langgraph.view.markers import (
    CAPPED_FLAG,
    CLEARED_FLAG,
    PINNED_FLAG,
    is_lookup_result,
    is_memory_message,
    is_summary,
)

__all__ = ["measure_prefix", "moved_by", "request_makeup"]

_TRAIL_SECTION = f"\n## {ARTIFACT_TRAIL_HEADING}\n"
"""How the artifact trail starts inside a summary text (its last section, ``with_trail``)."""


def _label(message: BaseMessage) -> str:
    if is_summary(message):
        return "summary"
    if is_memory_message(message):
        return "memory"
    kwargs = message.additional_kwargs
    if kwargs.get(PINNED_FLAG):
        return "pinned rules"
    if kwargs.get(CLEARED_FLAG):
        return "cleared tool result"
    if kwargs.get(CAPPED_FLAG):
        return "capped tool result"
    return f"{message.type} message"


def moved_by(
    previous: Sequence[str] | None,
    shape: RequestShape,
    view: Sequence[BaseMessage],
    has_overhead: bool,
) -> str | None:
    """What moved the cacheable prefix: the first part of the request that differs from the
    previous request, or None when the previous request is a prefix of this one (or there was
    none)."""
    if not previous:
        return None
    shared = shared_parts(previous, shape.digests)
    if shared == len(previous):
        return None
    if shared == len(shape.digests):
        return "removed messages"
    if has_overhead:
        if shared == 0:
            return "tools or system prompt"
        shared -= 1
    return _label(view[shared])


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


def _trail_tokens(s: BudgetSettings, turn: Turn, summary: BaseMessage) -> int:
    """The tokens of the artifact trail inside a summary message (0: it holds none)."""
    text = summary.content if isinstance(summary.content, str) else ""
    at = text.rfind(_TRAIL_SECTION)
    return 0 if at < 0 else s.cache.count_text(turn.counter, text[at + 1 :])


def request_makeup(
    s: BudgetSettings, turn: Turn, shape: RequestShape, has_overhead: bool, prefix: int
) -> RequestMakeup:
    """The request's tokens by part, from the counts of its ``shape`` (the overhead part, when
    there is one, then one per message of the view), against this pass's estimate.

    The overhead part is the tool schemas and the node's own system prompt as one count; the
    prompt's own count (taken when the node was built) goes to ``system``, the rest to
    ``tools``. A summary message's artifact trail (its last section) is counted apart, as
    text, and taken off the message's count."""
    assert turn.estimate is not None
    parts = dict.fromkeys(MAKEUP_PARTS, 0)
    counts = shape.tokens
    if has_overhead:
        prompt = min(s.system_prompt_tokens, counts[0])
        parts["system"] += prompt
        parts["tools"] += counts[0] - prompt
        counts = counts[1:]
    for message, tokens in zip(turn.view, counts, strict=True):
        part = _part(message, s.lookup_tools)
        if part == "summary":
            trail = min(tokens, _trail_tokens(s, turn, message))
            parts["trail"] += trail
            tokens -= trail
        parts[part] += tokens
    estimate = turn.estimate.input_tokens
    return RequestMakeup(
        system=parts["system"],
        pinned=parts["pinned"],
        tools=parts["tools"],
        memory=parts["memory"],
        summary=parts["summary"],
        trail=parts["trail"],
        lookup=parts["lookup"],
        tail=parts["tail"],
        adjustment=estimate - sum(parts.values()),
        estimate=estimate,
        reserve=s.budget.output_reserve,
        window=s.budget.context_window,
        prefix=prefix,
        generation=int(turn.context.get("active_generation", 0)),
        covered_through=int(turn.context.get("covered_through_seq", 0)),
    )


def measure_prefix(s: BudgetSettings, turn: Turn) -> None:
    """``turn.cache``: the request about to be sent against the thread's previous one; and
    ``turn.makeup``, its tokens by part."""
    if turn.decision != "proceed":
        return
    has_overhead = bool(s.tools or s.overhead_tokens)
    shape = request_shape(
        turn.view,
        turn.counter,
        system=s.overhead_text if has_overhead else None,  # the schemas and prompt as one part
        cache=s.cache,
        overhead_tokens=s.overhead_tokens,
    )
    previous = (turn.context.get("cache") or {}).get("digests")
    prefix = cacheable_prefix(previous, shape)
    total = shape.input_tokens
    turn.cache = CacheReport(
        prefix_tokens=prefix,
        input_tokens=total,
        ratio=round(prefix / total, 4) if total else None,
        moved_by=moved_by(previous, shape, turn.view, has_overhead),
        digests=list(shape.digests),
    )
    turn.makeup = request_makeup(s, turn, shape, has_overhead, prefix)
