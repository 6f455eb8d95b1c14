"""Steps 1a-1f of ``ctx_budget``: keep the view in step with the history store, its source of
truth (docs/design.md §3): edits, pinned rules, server-side compaction, a summary committed
elsewhere, the provider's projection, and a view every provider accepts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict

from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.errors import MemoryStoreError
from ctx_langgraph.history.types import BranchInfo, HistoryEvent, Scope
from ctx_langgraph.view.markers import SUMMARY_FLAG, is_flagged, is_summary, is_synthetic
from ctx_langgraph.view.pinned import pin
from ctx_langgraph.view.provider_items import compaction_iterations, server_compaction
from ctx_langgraph.view.repair import needs_repair, repair_tool_pairs
from ctx_langgraph.view.summary import rewrite_view

__all__ = [
    "apply_store_summary",
    "note_server_compaction",
    "pin_rules",
    "project_for_provider",
    "reconcile_edits",
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
    # one range read from the view's oldest surviving message to the head
    stored: dict[str, HistoryEvent] = {}
    for probe in filter(_recorded, messages):
        first = yield from call(
            s.store.get_event, s.store.aget_event, scope, str(probe.id), include_hidden=True
        )
        if first is not None:
            rows = yield from call(
                s.store.read_events,
                s.store.aread_events,
                scope,
                from_seq=first.seq,
                to_seq=head.head_seq,
                include_hidden=True,
            )
            stored = {row.event_id: row for row in rows}
            break
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
