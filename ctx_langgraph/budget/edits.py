"""Steps 1-1f of ``ctx_budget``: record every message the history store has not seen, then keep
the view in step with the store, its source of truth (docs/design.md §2, §3): edits made there,
pinned rules, server-side compaction, long-term memory (learned, recalled, and fitted to the
budget in step 5), a summary committed elsewhere, the provider's projection, a valid view.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, message_to_dict

from ctx_langgraph.budget.measure import estimate_view, fingerprint
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.core.call_scope import calls_in
from ctx_langgraph.core.digest import digest
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.streaming import not_streamed
from ctx_langgraph.core.timestamps import batch_times
from ctx_langgraph.errors import EventConflict, MemoryExtractionError, MemoryStoreError
from ctx_langgraph.history.types import AppendResult, BranchInfo, HistoryEvent, Scope
from ctx_langgraph.memory.store import MemoryChange, place_memory
from ctx_langgraph.memory.types import MemoryRecord
from ctx_langgraph.state import FlatContext, MemoryReport
from ctx_langgraph.view.markers import (
    MEMORY_FLAG,
    SUMMARY_FLAG,
    is_flagged,
    is_memory_message,
    is_summary,
    is_synthetic,
)
from ctx_langgraph.view.pinned import pin
from ctx_langgraph.view.provider_items import compaction_iterations, server_compaction
from ctx_langgraph.view.repair import needs_repair, repair_tool_pairs
from ctx_langgraph.view.summary import rewrite_view

__all__ = [
    "apply_store_summary",
    "fit_memory",
    "learn_and_recall",
    "note_server_compaction",
    "pin_rules",
    "project_for_provider",
    "reconcile_edits",
    "record",
    "repair_view",
]

log = logging.getLogger("ctx_langgraph.budget.node")


def reconcile_edits(s: BudgetSettings, turn: BudgetPass) -> Flow[None]:
    """1a. Events deleted, hidden or revised in the store leave the view (or are revised), and
    so does a summary that covered them or that the store no longer has."""
    context = turn.context
    if turn.head is None:  # (recording this pass's messages read it already)
        turn.head = yield from call(s.store.branch_info, s.store.abranch_info, turn.scope)
    head = turn.head
    edits = head.edit_version if head is not None else 0
    since = context.get("edit_version")
    edited = head is not None and since not in (None, edits)
    # the store no longer has the view's summary (pruned or invalidated; a newer one is 1d's)
    lost = (
        head is not None
        and head.active_checkpoint_id != context.get("active_checkpoint_id")
        and head.active_generation <= int(context.get("active_generation", 0))
    )
    if head is not None and (edited or lost):
        if edited and s.memory is not None:
            # edits made elsewhere reach the memory here
            log_rows = yield from call(
                s.store.edits_since, s.store.aedits_since, turn.scope, int(since or 0)
            )
            sources = [seq for _version, _branch, seq, kind in log_rows if kind != "show"]
            try:
                yield from call(
                    s.memory.invalidate_events,
                    s.memory.ainvalidate_events,
                    turn.scope,
                    seqs=sources,
                )
            except MemoryStoreError as exc:
                log.warning("ctx-langgraph: long-term memory not invalidated: %s", exc)
        turn.messages, dropped_summary = yield from _without_edited(
            s, turn.scope, turn.messages, head
        )
        turn.note("history edited" if edited else "summary no longer in the store")
        if dropped_summary or lost:
            context["active_checkpoint_id"] = head.active_checkpoint_id
            context["active_generation"] = head.active_generation
            context["covered_through_seq"] = 0
        if dropped_summary:
            context["rebuild"] = True  # compact the history before the view again
    context["edit_version"] = edits


def pin_rules(s: BudgetSettings, turn: BudgetPass) -> Flow[None]:
    """The pinned rules, re-read every turn, first in the view."""
    if s.pinned_rules is None:
        return
    rules: str | None = yield from call(s.pinned_rules.load, s.pinned_rules.aload)
    turn.messages, changed = pin(turn.messages, rules)
    if changed:
        turn.note("pinned rules changed")


def note_server_compaction(turn: BudgetPass) -> None:
    """1b. A reply carrying a server-side compaction item: ``ctx_compact`` records the coverage
    it implies (a reply ``ctx_usage`` recorded counts as first seen here too)."""
    by_id = turn.by_id
    first_seen = [m for m in turn.fresh if m.id in by_id and by_id[m.id].status == "appended"]
    reply = turn.context.get("recorded_reply") or {}
    if reply.get("status") == "appended" and reply.get("id") not in by_id:
        recorded_reply = next((m for m in reversed(turn.messages) if m.id == reply["id"]), None)
        first_seen += [recorded_reply] if recorded_reply is not None else []
    for message in first_seen:
        found = server_compaction(message)
        if found is not None:
            provider, item = found
            outputs = [e.get("output_tokens") for e in compaction_iterations(message)]
            turn.context["server_compaction"] = {
                "message_id": message.id,
                "item": item,
                "provider": provider,
                "item_tokens": outputs[-1] if outputs and isinstance(outputs[-1], int) else None,
                "model": message.response_metadata.get("model_name"),
            }
            turn.reasons.append("provider compacted")


def apply_store_summary(s: BudgetSettings, turn: BudgetPass) -> Flow[None]:
    """1d. A summary committed in the store but missing from the state is applied."""
    context, head = turn.context, turn.head
    if head is None or head.active_generation <= int(context.get("active_generation", 0)):
        return
    active = yield from call(s.store.get_active, s.store.aget_active, turn.scope)
    if active is not None and any(m.id == active.first_kept_event_id for m in turn.messages):
        turn.messages, _removed = rewrite_view(turn.messages, active, s.provider)
        turn.note("state reconciled with the store")
        context["projected_for"] = s.provider
        context["active_checkpoint_id"] = active.id
        context["active_generation"] = active.generation
        context["covered_through_seq"] = active.covered_through_seq


def project_for_provider(s: BudgetSettings, turn: BudgetPass) -> Flow[None]:
    """1e. The model's provider changed since the view was projected: the active summary is
    projected again for it."""
    projected = turn.context.get("projected_for")
    if projected is None or projected == s.provider or turn.head is None:
        return
    active = yield from call(s.store.get_active, s.store.aget_active, turn.scope)
    if active is not None:
        turn.messages, _removed = rewrite_view(turn.messages, active, s.provider)
        turn.note(f"provider changed ({projected} -> {s.provider})")
    turn.context["projected_for"] = s.provider


def repair_view(turn: BudgetPass) -> None:
    """1f. A dangling tool call gets a stand-in result, a stray tool result leaves the view."""
    checked = _sent_before(turn)
    if checked and not needs_repair(turn.messages[checked:]):
        return
    turn.messages, repairs = repair_tool_pairs(turn.messages)
    if not repairs:
        return
    turn.note("tool calls repaired")
    totals = turn.context.get("repairs") or {"dangling_tool_calls": 0, "orphan_tool_results": 0}
    turn.context["repairs"] = {
        "dangling_tool_calls": int(totals.get("dangling_tool_calls", 0))
        + repairs.dangling_tool_calls,
        "orphan_tool_results": int(totals.get("orphan_tool_results", 0))
        + repairs.orphan_tool_results,
    }


def _sent_before(turn: BudgetPass) -> int:
    """How many leading messages of the view are the last request sent, unchanged since (0:
    not known)."""
    context = turn.context
    cache = context.get("cache") or {}
    sent: Mapping[str, Any] = (context.get("request") or {}).get("makeup") or {}
    count, messages = cache.get("messages"), turn.messages
    if turn.rewritten or turn.reasons or not isinstance(count, int) or count > len(messages):
        return 0
    if sent.get("generation") != int(context.get("active_generation", 0)):
        return 0
    return count if count and messages[count - 1].id == cache.get("through") else 0


def _recorded(message: BaseMessage) -> bool:
    return bool(message.id) and message.type != "system" and not is_synthetic(message)


def _without_edited(
    s: BudgetSettings, scope: Scope, messages: Sequence[BaseMessage], head: BranchInfo
) -> Flow[tuple[list[BaseMessage], bool]]:
    """The view without deleted or hidden events, with revised ones as stored now, and without
    a summary the store no longer has active; and whether the summary was dropped."""
    stored = yield from _stored(s, scope, list(filter(_recorded, messages)), head.head_seq, True)
    kept: list[BaseMessage] = []
    dropped_summary = False
    for message in messages:
        if is_summary(message):
            flag = message.additional_kwargs.get(SUMMARY_FLAG) or {}
            if flag.get("checkpoint_id") == head.active_checkpoint_id:
                kept.append(message)
            else:
                dropped_summary = True
            continue
        if not _recorded(message):
            kept.append(message)
            continue
        event = stored.get(str(message.id))
        if event is None:  # outside the range read: deleted, or out of seq order
            event = yield from call(
                s.store.get_event, s.store.aget_event, scope, str(message.id), include_hidden=True
            )
        if event is None or not event.visible:
            continue
        revised = not is_flagged(message) and event.content != message_to_dict(message)
        kept.append(event.message if revised else message)
    return kept, dropped_summary


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
    turn.prefix = prefix = [m for m in messages[:start] if m.id and not is_flagged(m)]
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
    at = next((i for i in range(len(messages) - 2, -1, -1) if messages[i].id == through), None)
    reply = None if at is None else messages[at + 1]
    if not isinstance(reply, AIMessage) or not reply.id or all(m is not reply for m in turn.fresh):
        return None
    return None if context.get("last_usage_message_id") == reply.id else reply


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
    stored = yield from _stored(s, scope, prefix, None, False)
    return [
        m
        for m in prefix
        if (event := stored.get(str(m.id))) is not None and not _same_content(event, m)
    ]


def learn_and_recall(s: BudgetSettings, turn: BudgetPass) -> Flow[None]:
    """1c. Learn from the user's new messages, recall the live records into the view."""
    memory = s.memory
    if memory is None:
        return
    info = turn.memory_info
    scopes = memory.scopes(turn.run_config, turn.scope)
    by_id = turn.by_id
    said = [
        m
        for m in turn.fresh
        if m.type == "human" and m.id in by_id and by_id[m.id].status != "duplicate"
    ]
    if said:
        seqs = {str(m.id): by_id[m.id].seq for m in said if m.id}

        # (its model calls kept out of the message stream, booked under the run's scope)
        def observe() -> list[MemoryChange]:
            with not_streamed(), calls_in(turn.scope):
                return memory.observe(scopes, said, seqs=seqs)

        async def aobserve() -> list[MemoryChange]:
            with not_streamed(), calls_in(turn.scope):
                return await memory.aobserve(scopes, said, seqs=seqs)

        try:
            changes = yield from call(observe, aobserve)
            info["changes"] = [
                {"action": c.action, "id": c.record.id, "superseded": list(c.superseded)}
                for c in changes
            ]
        except (MemoryExtractionError, MemoryStoreError) as exc:
            log.warning("ctx-langgraph: long-term memory not updated: %s", exc)
            info["error"] = str(exc)
    query = _recall_query(turn)
    try:
        turn.records = yield from call(memory.recall, memory.arecall, scopes, query)
    except MemoryStoreError as exc:
        log.warning("ctx-langgraph: long-term memory not loaded: %s", exc)
        info["error"] = str(exc)
    if turn.records is not None:
        loaded = memory.render(turn.records, turn.counter, s.memory_allowance())
        turn.messages, changed = place_memory(turn.messages, loaded)
        if changed:
            turn.note("memory changed")


def _recall_query(turn: BudgetPass) -> str:
    """What the records are ranked by: the user's latest message when the summary last moved,
    held between compactions so the memory message does not move the cached prefix every turn."""
    held: MemoryReport = turn.context.get("memory") or {}
    generation = int(turn.context.get("active_generation", 0))
    query = held.get("query")
    if query is None or held.get("generation") != generation:
        query = next(
            (m.text for m in reversed(turn.messages) if m.type == "human" and not is_synthetic(m)),
            "",
        )
    turn.memory_info["query"], turn.memory_info["generation"] = query, generation
    return query


def fit_memory(s: BudgetSettings, turn: BudgetPass) -> None:
    """5. Memory never pushes a request over the budget: it gives up what the rest needs."""
    if turn.records is None:
        return
    assert turn.estimate is not None
    shrunk = _shrink_memory(s, turn, turn.records)
    if shrunk:
        turn.rewritten = True
        turn.fingerprint = fingerprint(turn.view, s.overhead_text, s.model_id)
        if "memory changed" not in turn.reasons:
            turn.reasons.append("memory changed")
            turn.epoch += 1
            turn.context["projection_epoch"] = turn.epoch
    message = next((m for m in turn.view if is_memory_message(m)), None)
    turn.memory_info["loaded"] = message.additional_kwargs[MEMORY_FLAG]["items"] if message else 0
    turn.memory_info["tokens"] = s.cache.count(turn.counter, message) if message else 0


def _shrink_memory(s: BudgetSettings, turn: BudgetPass, records: list[MemoryRecord]) -> bool:
    """Shrink (or drop) the memory message until the request fits the usable window."""
    assert s.memory is not None and turn.estimate is not None
    view: Sequence[BaseMessage] = turn.view
    estimate = turn.estimate
    shrunk = False
    for _ in range(4):
        current = next((m for m in view if is_memory_message(m)), None)
        if current is None or estimate.total <= s.budget.usable:
            break
        room = s.cache.count(turn.counter, current) - (estimate.total - s.budget.usable)
        smaller = s.memory.render(records, turn.counter, room - 1) if room > 16 else None
        view, _changed = place_memory(view, smaller)
        shrunk = True
        recount: FlatContext = {**turn.context, "projection_epoch": -1}
        estimate = estimate_view(s, turn.counter, view, recount)
    turn.view, turn.estimate = list(view), estimate
    return shrunk


def _stored(
    s: BudgetSettings,
    scope: Scope,
    messages: Sequence[BaseMessage],
    to_seq: int | None,
    include_hidden: bool,
) -> Flow[dict[str, HistoryEvent]]:
    """The stored events, by id, in one range read from the first of ``messages`` the store has
    to ``to_seq`` (None: the branch's head)."""
    for probe in messages:
        first = yield from call(
            s.store.get_event, s.store.aget_event, scope, str(probe.id), include_hidden=True
        )
        if first is not None:
            if to_seq is None:
                head = yield from call(s.store.branch_info, s.store.abranch_info, scope)
                to_seq = head.head_seq if head else first.seq
            rows = yield from call(
                s.store.read_events,
                s.store.aread_events,
                scope,
                from_seq=first.seq,
                to_seq=to_seq,
                include_hidden=include_hidden,
            )
            return {row.event_id: row for row in rows}
    return {}
