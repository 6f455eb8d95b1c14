"""Step 2 of ``ctx_budget``: cap a new tool result above ``tool_output_cap_tokens`` to a head/tail
preview (the original stays in the store), and shorten alike the results of one step that together
overflow the room the window leaves them (docs/design.md §2).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.budget.counters import REPLY_PRIMING
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.view.markers import CAPPED_FLAG, CLEARED_FLAG, is_lookup_result, is_summary
from ctx_langgraph.view.tool_results import capped

__all__ = [
    "apply_replacements",
    "cap_tool_results",
    "fit_step_results",
    "replaced",
    "shares",
    "step_in_progress",
]

MIN_CAP = 64
"""The smallest cap a tool result is given."""


def _cap(s: BudgetSettings, shrink: int | None) -> int | None:
    """The cap of this pass: the configured one, at most a quarter of the usable window, and the
    smaller cap the overflow recovery asks for."""
    cap = s.config.tool_output_cap_tokens
    if cap is not None:
        cap = min(cap, max(64, s.budget.usable // 4))
    if shrink is not None:
        cap = min(cap or int(shrink), int(shrink))
    return cap


def cap_tool_results(s: BudgetSettings, turn: BudgetPass) -> None:
    """2. Cap oversized new tool results (every result of the view, when the overflow recovery
    asks for a smaller cap)."""
    shrink = turn.context.pop("shrink_tool_results", None)
    cap = _cap(s, shrink)
    if not cap:
        return
    by_id, counter = turn.by_id, turn.counter
    for message in turn.fresh if shrink is None else turn.messages:
        if (
            isinstance(message, ToolMessage)
            and message.id
            and (message.id in by_id or shrink is not None)
            and not message.additional_kwargs.get(CLEARED_FLAG)
            and not is_lookup_result(message)  # a lookup page is bounded by its own cap
            and s.cache.count(counter, message) > cap
        ):
            turn.replacements[message.id] = _preview(s, turn, message, cap)


def _preview(s: BudgetSettings, turn: BudgetPass, message: ToolMessage, cap: int) -> ToolMessage:
    """The head/tail preview of ``message`` in at most ``cap`` tokens (cut shorter while its
    count is over, down to :data:`MIN_CAP`)."""
    seq = turn.by_id[message.id].seq if message.id in turn.by_id else None
    earlier = message.additional_kwargs.get(CAPPED_FLAG) or {}
    original = earlier.get("original_tokens") or turn.counter.count_text(message.text)
    target = cap
    for _ in range(6):
        preview = capped(message, message.text, target, seq, original_tokens=original)
        tokens = s.cache.count(turn.counter, preview)
        if tokens <= cap or target <= MIN_CAP:
            break
        target = max(MIN_CAP, min(target - 1, target * cap // tokens))
    return preview


def shares(sizes: Sequence[int], room: int) -> list[int | None]:
    """Caps for results that together must fit ``room``: those under an equal share stay whole
    (None), the others share alike what those leave (never below :data:`MIN_CAP`).

    Examples:
        >>> shares([100, 2_000, 3_000], 10_000)  # they fit: nothing to cut
        [None, None, None]
        >>> shares([100, 2_000, 3_000, 3_000], 4_000)
        [None, 1300, 1300, 1300]
    """
    caps: list[int | None] = [None] * len(sizes)
    if sum(sizes) <= room:
        return caps
    order = sorted(range(len(sizes)), key=lambda index: sizes[index])
    left = room
    for position, index in enumerate(order):
        share = left // (len(order) - position)
        if sizes[index] > share:  # this one and every larger one share what is left
            for larger in order[position:]:
                caps[larger] = max(MIN_CAP, share)
            break
        left -= sizes[index]
    return caps


def step_in_progress(view: Sequence[BaseMessage]) -> int | None:
    """The index of the AI message whose tool results end the view; None when it does not end so.

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> calls = [{"name": "f", "args": {}, "id": "c1"}, {"name": "g", "args": {}, "id": "c2"}]
        >>> view = [HumanMessage("q"), AIMessage("", tool_calls=calls),
        ...         ToolMessage("r1", tool_call_id="c1"), ToolMessage("r2", tool_call_id="c2")]
        >>> step_in_progress(view), step_in_progress(view[:1])
        (1, None)
    """
    begin = len(view)
    while begin > 0 and isinstance(view[begin - 1], ToolMessage):
        begin -= 1
    caller = view[begin - 1] if 0 < begin < len(view) else None
    if isinstance(caller, AIMessage) and (caller.tool_calls or caller.invalid_tool_calls):
        return begin - 1
    return None


def fit_step_results(s: BudgetSettings, turn: BudgetPass) -> None:
    """2b. The results of the step in progress share the room under the trigger (the usable
    window without compaction) left by what a compaction cannot remove (overhead, leading system
    messages, the earlier conversation at most a summary's size, the calling AI message):
    results that together overflow it are shortened alike, whatever their own cap (lookup pages
    and cleared results keep their size)."""
    view = replaced(turn)
    begin = step_in_progress(view)
    if begin is None:
        return
    counter = turn.counter

    def count(message: BaseMessage) -> int:
        return s.cache.count(counter, message)

    lead = 0
    while lead < begin and (view[lead].type == "system" or is_summary(view[lead])):
        lead += 1
    system = sum(count(m) for m in view[:lead] if not is_summary(m))
    earlier = sum(count(m) for m in view[:lead] if is_summary(m))
    earlier += sum(count(m) for m in view[lead:begin])
    if s.compact_node is not None:
        earlier = min(earlier, s.summary_allowance())
    floor = s.overhead_tokens + REPLY_PRIMING + system + earlier + count(view[begin])
    limit = s.budget.trigger if s.compact_node is not None else s.budget.usable
    room = limit - s.config.margin(limit) - floor
    results = [m for m in view[begin + 1 :] if isinstance(m, ToolMessage) and m.id]
    fixed = [m for m in results if is_lookup_result(m) or m.additional_kwargs.get(CLEARED_FLAG)]
    movable = [m for m in results if m not in fixed]
    caps = shares([count(m) for m in movable], room - sum(count(m) for m in fixed))
    originals = {str(m.id): m for m in turn.messages if isinstance(m, ToolMessage)}
    shortened = False
    for message, cap in zip(movable, caps, strict=True):
        if cap is None or count(message) <= cap:
            continue
        preview = _preview(s, turn, originals.get(str(message.id), message), cap)
        if count(preview) >= count(message):
            continue  # as short as a preview gets
        turn.replacements[str(message.id)] = preview
        shortened = shortened or message.id not in turn.by_id
    if shortened:  # results the last request held are shorter now: the baseline is stale
        turn.reasons.append("tool results of one step shortened to fit the window")


def apply_replacements(turn: BudgetPass) -> None:
    """The view the estimate counts: the messages with their capped or cleared copies."""
    turn.view = replaced(turn) if turn.replacements else turn.messages


def replaced(turn: BudgetPass) -> list[BaseMessage]:
    """The messages with this pass's replacements so far."""
    return [turn.replacements.get(str(m.id), m) if m.id else m for m in turn.messages]
