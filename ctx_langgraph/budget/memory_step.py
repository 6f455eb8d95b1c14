"""Step 1c of ``ctx_budget``, and its share of step 5: long-term memory learns from the user's new
messages, is recalled into the view under its own budget, and gives up what the rest of the
request needs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from ctx_langgraph.budget.measure import estimate_view, fingerprint
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings
from ctx_langgraph.core.call_scope import calls_in
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.core.streaming import not_streamed
from ctx_langgraph.errors import MemoryExtractionError, MemoryStoreError
from ctx_langgraph.memory.store import LongTermMemory, MemoryChange, place_memory
from ctx_langgraph.memory.types import MemoryRecord, MemoryScopes
from ctx_langgraph.state import FlatContext, MemoryReport
from ctx_langgraph.view.markers import MEMORY_FLAG, is_memory_message, is_synthetic

__all__ = ["UnstreamedMemory", "fit_memory", "learn_and_recall"]

log = logging.getLogger("ctx_langgraph.budget.node")


@dataclass(frozen=True)
class UnstreamedMemory:
    """The memory's ``observe`` with its model calls kept out of the message stream and booked
    under the run's scope."""

    memory: LongTermMemory
    scope: Scope

    def observe(
        self, scopes: MemoryScopes, messages: list[BaseMessage], *, seqs: dict[str, int]
    ) -> list[MemoryChange]:
        with not_streamed(), calls_in(self.scope):
            return self.memory.observe(scopes, messages, seqs=seqs)

    async def aobserve(
        self, scopes: MemoryScopes, messages: list[BaseMessage], *, seqs: dict[str, int]
    ) -> list[MemoryChange]:
        with not_streamed(), calls_in(self.scope):
            return await self.memory.aobserve(scopes, messages, seqs=seqs)


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
        try:
            unstreamed = UnstreamedMemory(memory, turn.scope)
            changes = yield from call(
                unstreamed.observe, unstreamed.aobserve, scopes, said, seqs=seqs
            )
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
