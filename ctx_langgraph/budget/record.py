"""Step 1 of ``ctx_budget``: record every message the history store has not seen (idempotent;
a message replaced by id is recorded as a revision, a forked state starts a branch), each at the
conversation's own time when it says (docs/design.md §2, §4).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, message_to_dict

from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.core.digest import digest
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.timestamps import batch_times
from ctx_langgraph.errors import EventConflict
from ctx_langgraph.history.types import AppendResult, HistoryEvent, Scope
from ctx_langgraph.view.markers import is_flagged

__all__ = ["record"]

log = logging.getLogger("ctx_langgraph.budget.node")


def record(s: BudgetSettings, turn: BudgetPass) -> Flow[None]:
    """Record the new messages (and the revisions of edited ones); fills ``turn.fresh``,
    ``turn.prefix``, ``turn.checksum`` and ``turn.by_id``."""
    context, messages = turn.context, turn.messages
    turn.recorded_through = recorded_through = context.get("recorded_through_id")
    start = next(
        (i + 1 for i in range(len(messages) - 1, -1, -1) if messages[i].id == recorded_through),
        0,
    )
    turn.fresh = fresh = [m for m in messages[start:] if not is_flagged(m)]
    turn.prefix = prefix = [
        m for m in messages[:start] if m.id and not (m.additional_kwargs and is_flagged(m))
    ]
    turn.checksum = checksum = digest(prefix)
    saved = context.get("recorded_digest")
    revised_in_state: list[BaseMessage] = []
    if (
        saved is not None
        and saved.get("first") == (prefix[0].id if prefix else None)
        and saved.get("count") == len(prefix)
        and saved.get("value") != checksum
    ):
        revised_in_state = yield from _edited_in_state(s, turn.scope, prefix)
    results: list[AppendResult] = []
    if fresh or recorded_through is not None:
        # a compare-and-swap on the branch's head: a state forked from an older checkpoint
        # starts a branch of its own at the last event both share
        booker, booking, database = s.book_late, None, None
        late = _unbooked_reply(turn) if booker is not None else None
        if late is not None and booker is not None:
            booking, database = booker(late, turn.scope)
            turn.context["last_usage_message_id"] = late.id
        outcome = yield from call(
            s.store.append_after,
            s.store.aappend_after,
            turn.scope,
            fresh,
            after=None if recorded_through is None else str(recorded_through),
            created_at=_created_at(s, turn, messages[start - 1] if start else None),
            fork=True,
            active=context.get("active_checkpoint_id"),
            then=booking if database is s.store.db else None,
        )
        if booking is not None and database is not None and database is not s.store.db:
            yield from call(database.run, database.arun, booking, write=True)
        results = outcome.results
        turn.head = outcome.head
        if outcome.forked_from is not None and outcome.head is not None:
            turn.scope = outcome.head.scope
            context["branch"] = turn.scope.branch
            turn.reasons.append("fork")
    if revised_in_state:
        try:
            results += yield from call(
                s.store.append, s.store.aappend, turn.scope, revised_in_state
            )
            turn.head = None  # the edit version moved: 1a reads the branch again
        except EventConflict as exc:  # an event this branch shares with its parent
            log.warning("ctx-langgraph: an edited message was not recorded: %s", exc)
            context["record_error"] = str(exc)[:300]
    turn.by_id = {r.event_id: r for r in results}
    if any(r.status == "revised" for r in results):
        turn.reasons.append("edited message")


def _unbooked_reply(turn: BudgetPass) -> AIMessage | None:
    """The model's answer to the last request (the new AI message right after the request's
    last message) when no ``ctx_usage`` booked it."""
    context = turn.context
    through = (context.get("request") or {}).get("input_through_message_id")
    if through is None or not turn.fresh:
        return None
    messages = turn.messages
    for index in range(len(messages) - 2, -1, -1):
        if messages[index].id == through:
            reply = messages[index + 1]
            fresh = any(m is reply for m in turn.fresh)
            if fresh and isinstance(reply, AIMessage) and reply.id:
                return None if context.get("last_usage_message_id") == reply.id else reply
            return None
    return None


def _created_at(
    s: BudgetSettings, turn: BudgetPass, previous: BaseMessage | None
) -> list[dt.datetime] | None:
    """When each new message was said; None when no message says (the store stamps them now)."""
    if not turn.fresh:
        return None
    times = batch_times(turn.fresh, previous=previous, source=s.config.timestamp)
    if times.problems:
        count = len(times.problems)
        log.warning(
            "ctx-langgraph: %d message time(s) could not be read, recorded with the time "
            "before them or now: %s",
            count,
            "; ".join(times.problems[:3]),
        )
        turn.context["record_warnings"] = int(turn.context.get("record_warnings") or 0) + count
    if not times.any_known:
        return None
    now = s.store.clock()
    return [now if when is None else when for when in times.times]


def _same_content(event: HistoryEvent, message: BaseMessage) -> bool:
    """The store holds this message's content (compared as the store's JSON encodes it too)."""
    content = message_to_dict(message)
    return event.content == content or _canonical(event.content) == _canonical(content)


def _canonical(content: object) -> str:
    return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)


def _edited_in_state(
    s: BudgetSettings, scope: Scope, prefix: Sequence[BaseMessage]
) -> Flow[list[BaseMessage]]:
    """The recorded messages whose content in the state differs from the store's."""
    first: HistoryEvent | None = None
    for probe in prefix:
        first = yield from call(
            s.store.get_event, s.store.aget_event, scope, str(probe.id), include_hidden=True
        )
        if first is not None:
            break
    if first is None:
        return []
    head = yield from call(s.store.branch_info, s.store.abranch_info, scope)
    to_seq = head.head_seq if head else first.seq
    rows = yield from call(
        s.store.read_events,
        s.store.aread_events,
        scope,
        from_seq=first.seq,
        to_seq=to_seq,
        include_hidden=False,
    )
    stored = {row.event_id: row for row in rows}
    return [
        m
        for m in prefix
        if (event := stored.get(str(m.id))) is not None and not _same_content(event, m)
    ]
