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

import functools
from collections.abc import Mapping, Sequence
from typing import Any

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
    if kwargs.get(INPUTS_CLEARED_FLAG):
        return "cleared tool call"
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


def _trail_tokens(s: BudgetSettings, turn: BudgetPass, summary: BaseMessage) -> int:
    """The tokens of the artifact trail inside a summary message (0: it holds none)."""
    text = summary.content if isinstance(summary.content, str) else ""
    at = text.rfind(_TRAIL_SECTION)
    return 0 if at < 0 else s.cache.count_text(turn.counter, text[at + 1 :])


def request_makeup(
    s: BudgetSettings, turn: BudgetPass, shape: RequestShape, has_overhead: bool, prefix: int
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
    return _makeup(s, turn, parts, prefix)


def _head_length(view: Sequence[BaseMessage]) -> int:
    """How many leading messages are not the conversation: system prompts, pinned rules, the
    memory message, the summary (what a compaction, a recall or a new prompt rewrites)."""
    for index, message in enumerate(view):
        if not (
            message.type == "system"
            or is_summary(message)
            or is_memory_message(message)
            or message.additional_kwargs.get(PINNED_FLAG)
        ):
            return index
    return len(view)


@functools.lru_cache(maxsize=64)
def _overhead_part(text: str) -> str:
    """The overhead part's digest (the tool schemas and prompt of a node: a few distinct texts)."""
    return overhead_digest(system=text)


def _head(s: BudgetSettings, turn: BudgetPass, has_overhead: bool) -> list[str]:
    """The digests of the request's leading parts: the overhead, when there is one, then the
    leading messages that are not the conversation."""
    head = [_overhead_part(s.overhead_text)] if has_overhead else []
    return head + [message_digest(m) for m in turn.view[: _head_length(turn.view)]]


def _grown_from(previous: CacheReport, turn: BudgetPass, head: list[str]) -> int | None:
    """Where the request's new messages start when it is the previous request with messages
    appended (None when that cannot be told without measuring it whole).

    It is, when this pass changed nothing in the view before them (no rewrite, no edit, no
    cleared result, no epoch move: an edit by id is noticed by the recorded digest), the
    leading parts are the same, and the previous request's last message is where it was."""
    count, through = previous.get("messages"), previous.get("through")
    view = turn.view
    if previous.get("head") != head or turn.rewritten or turn.reasons or not isinstance(count, int):
        return None
    if count > len(view) or (count and view[count - 1].id != through):
        return None
    if turn.replacements and not set(turn.replacements) <= {m.id for m in view[count:]}:
        return None  # (a result capped as it arrives is a new part, not a change)
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
    """The first part of the request (measured whole) that differs from the previous request,
    None when the previous request is a prefix of it.

    The previous request is kept as its leading parts' digests, its length and its last
    message: a difference in the leading parts is found by digest; one in the conversation is
    what this pass changed (a rewrite, a replaced result, a revision by id), found by identity;
    a conversation that lost the previous request's last message moved from its start."""
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
    """``turn.cache``: the request about to be sent against the thread's previous one; and
    ``turn.makeup``, its tokens by part.

    A request that is the previous one with messages appended (a plain turn) is measured by
    its new messages only; one that changed is measured whole."""
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
            system=s.overhead_text if has_overhead else None,  # the schemas and prompt as one part
            cache=s.cache,
            overhead_tokens=s.overhead_tokens,
        )
        total = shape.input_tokens
        if "digests" in previous:  # a report of an older version: measured by its digests
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
    """The name of the request's part ``first`` (its parts' index, the overhead first)."""
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
    """The previous request's make-up with the new messages' counts added to their parts."""
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
        trigger=s.budget.trigger,
    )
