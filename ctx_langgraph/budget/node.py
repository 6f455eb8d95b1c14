"""The ``ctx_budget`` node and its router: before every model call it records, reconciles,
caps, estimates and decides, each step a small function of its own module, and ends with the
state update (the view, and ``context``'s report) (docs/design.md §2, §5).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import RemoveMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph.budget.counters import (
    ApproximateCounter,
    CountCache,
    TokenCounter,
    calibration_report,
    default_counter,
    thread_counter,
)
from ctx_langgraph.budget.edits import (
    apply_store_summary,
    fit_memory,
    learn_and_recall,
    note_server_compaction,
    pin_rules,
    project_for_provider,
    reconcile_edits,
    record,
    repair_view,
)
from ctx_langgraph.budget.estimate import BudgetEstimate
from ctx_langgraph.budget.measure import bump_epoch, count_exactly, decide, estimate_request
from ctx_langgraph.budget.prefix_step import measure_prefix
from ctx_langgraph.budget.trim import (
    apply_replacements,
    cap_tool_results,
    clear_old_tool_results,
    fit_step_results,
)
from ctx_langgraph.budget.turn import BudgetPass, BudgetSettings, LateBooker
from ctx_langgraph.config import ContextConfig, ResolvedBudget
from ctx_langgraph.core.digest import extend_digest
from ctx_langgraph.core.effects import Flow, arun, run
from ctx_langgraph.core.scope import scope_from_config
from ctx_langgraph.core.streaming import keep_out_of_message_stream
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.providers import defer_to_server, provider_key
from ctx_langgraph.providers.count import ProviderCountHook
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import (
    BudgetReport,
    FlatContext,
    PendingRequest,
    RecordedDigest,
    packed,
    unpack,
)
from ctx_langgraph.storage.required import require_store
from ctx_langgraph.view.markers import is_flagged, is_lookup_tool, is_synthetic

__all__ = ["BudgetNode", "make_budget_node", "make_budget_router"]

log = logging.getLogger("ctx_langgraph.budget.node")


@dataclass
class BudgetNode:
    """The ``ctx_budget`` node (use :func:`make_budget_node`); configuration only, shared by
    every thread of a compiled graph."""

    store: HistoryStore
    config: ContextConfig = field(default_factory=ContextConfig)
    model: Any = None
    tools: Sequence[Any] = ()
    counter: TokenCounter | None = None
    compact_node: str | None = "ctx_compact"
    cache: CountCache = field(default_factory=CountCache)
    """Per-message counts (safe to share between threads)."""
    provider_count: ProviderCountHook | None = None
    exact_count_above: float = 0.9
    """Fraction of the usable window above which ``provider_count`` is asked."""
    system_prompt: str | None = None
    pinned_rules: PinnedRules | None = None
    memory: LongTermMemory | None = None
    book_late: LateBooker | None = None

    def __post_init__(self) -> None:
        if self.memory is not None:
            # deletes, hides and revisions made through this store invalidate derived memories
            self.store.add_edit_listener(self.memory)
        counter = self.counter = self.counter or default_counter(self.model)
        # a provider that compacts server-side does so at its threshold: ours is the window
        self.budget: ResolvedBudget = defer_to_server(self.config.resolve(self.model), self.model)
        schemas = [convert_to_openai_tool(tool) for tool in self.tools]
        overhead_text = json.dumps(schemas, sort_keys=True, default=str)
        overhead_tokens = counter.count_tools(schemas) if schemas else 0
        system_prompt_tokens = 0
        if self.system_prompt:
            system_prompt_tokens = counter.count_message(SystemMessage(self.system_prompt))
            overhead_tokens += system_prompt_tokens
            overhead_text += "\n" + self.system_prompt
        model_id = getattr(self.model, "model_name", None) or getattr(self.model, "model", None)
        self.settings = BudgetSettings(
            store=self.store,
            config=self.config,
            budget=self.budget,
            counter=counter,
            cache=self.cache,
            tools=self.tools,
            compact_node=self.compact_node,
            provider_count=self.provider_count,
            exact_count_above=self.exact_count_above,
            pinned_rules=self.pinned_rules,
            memory=self.memory,
            overhead_text=overhead_text,
            overhead_tokens=overhead_tokens,
            model_id=str(model_id or ""),
            provider=provider_key(self.model),
            system_prompt_tokens=system_prompt_tokens,
            lookup_tools=frozenset(str(t.name) for t in self.tools if is_lookup_tool(t)),
            book_late=self.book_late,
        )
        self._warn_if_compaction_cannot_settle()

    @property
    def overhead_tokens(self) -> int:
        """Tokens every request carries besides the messages (tool schemas, system prompt)."""
        return self.settings.overhead_tokens

    def _warn_if_compaction_cannot_settle(self) -> None:
        s, budget = self.settings, self.budget
        summary_cap = s.summary_allowance()
        memory_cap = s.memory_allowance() if self.memory is not None else 0
        floor = s.overhead_tokens + summary_cap + budget.keep_recent_tokens + memory_cap
        if floor > budget.trigger:
            log.warning(
                "ctx-langgraph: a compacted request can be %d tokens (tools and prompt %d + summary "
                "with its artifact trail up to %d + kept tail %d + memory up to %d), above the "
                "trigger %d: compaction could run on every turn. Lower keep_recent_tokens, "
                "summary_max_tokens, artifact_trail_tokens or the memory's max_tokens, set "
                "artifact_trail_room='inside', or raise the window.",
                floor,
                s.overhead_tokens,
                summary_cap,
                budget.keep_recent_tokens,
                memory_cap,
                budget.trigger,
            )

    def start(self, state: Mapping[str, Any], config: RunnableConfig | None) -> BudgetPass:
        """The working data of one pass (a run asking for another branch drops the state's)."""
        context = unpack(state.get("context"))
        reasons: list[str] = []
        wanted_branch = ((config or {}).get("configurable") or {}).get("ctx_branch")
        current = context.get("branch")
        # (a branch forked from the run's one, ``{branch}~{seq}-{id}``, stays the thread's)
        if (
            wanted_branch
            and current not in (None, wanted_branch)
            and not (str(current).startswith(f"{wanted_branch}~"))
        ):
            reasons.append("branch switch")
            context["branch"] = wanted_branch
        messages = state.get("messages") or []
        return BudgetPass(
            messages=messages,
            state_messages=messages,
            context=context,
            given=dict(context),
            run_config=config,
            scope=scope_from_config(config, dict(context)),
            counter=thread_counter(self.settings.counter, context),
            epoch=int(context.get("projection_epoch", 0)),
            reasons=reasons,
        )

    def flow(self, state: Mapping[str, Any], config: RunnableConfig | None) -> Flow[dict[str, Any]]:
        """One pass: the steps of the per-turn flow, in order (docs/design.md §2)."""
        s = self.settings
        turn = self.start(state, config)
        yield from record(s, turn)
        yield from reconcile_edits(s, turn)
        yield from pin_rules(s, turn)
        note_server_compaction(turn)
        yield from learn_and_recall(s, turn)
        yield from apply_store_summary(s, turn)
        yield from project_for_provider(s, turn)
        repair_view(turn)
        cap_tool_results(s, turn)
        clear_old_tool_results(s, turn)
        fit_step_results(s, turn)
        apply_replacements(turn)
        bump_epoch(s, turn)
        estimate_request(s, turn)
        fit_memory(s, turn)
        yield from count_exactly(s, turn)
        decide(s, turn)
        measure_prefix(s, turn)
        return budget_update(s, turn)

    # the node's messages are the view projected again, never a new turn: kept out of
    # ``stream_mode="messages"``
    def invoke(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return keep_out_of_message_stream(packed(run(self.flow(state, config))), config)

    async def ainvoke(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return keep_out_of_message_stream(packed(await arun(self.flow(state, config))), config)


def make_budget_node(
    store: HistoryStore,
    *,
    config: ContextConfig | None = None,
    model: Any = None,
    tools: Sequence[Any] = (),
    counter: TokenCounter | None = None,
    compact_node: str | None = "ctx_compact",
    provider_count: ProviderCountHook | None = None,
    system_prompt: str | None = None,
    pinned_rules: PinnedRules | None = None,
    memory: LongTermMemory | None = None,
    book_late: LateBooker | None = None,
    name: str = "ctx_budget",
) -> Runnable[Any, Any]:
    """The ``ctx_budget`` node, for ``builder.add_node("ctx_budget", make_budget_node(store, ...))``.

    Args:
        store: the history store that records every message.
        config: the budget knobs (the window may come from ``model``'s profile).
        model: the chat model the graph calls (its name picks the counter; its profile the window).
        tools: the tools bound to the model (their schemas are part of every request).
        counter: overrides the counter picked from the model name.
        compact_node: the node the router sends over-trigger requests to; None when there is none.
        provider_count: a provider count hook asked for an exact count near the limit.
        system_prompt: a system prompt the model node prepends itself (counted as overhead).
        pinned_rules: :class:`~ctx_langgraph.rules.PinnedRules` kept first in the view.
        memory: :class:`~ctx_langgraph.memory.LongTermMemory` learning from the user's messages,
            its records loaded into the view under their own budget.
        book_late: ``answer_booker(ledger)`` (:func:`ctx_langgraph.usage.node.answer_booker`):
            books an answer ``ctx_usage`` never booked.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> from ctx_langgraph.budget import TiktokenCounter
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> node = make_budget_node(store, config=ContextConfig(context_window=8_000, output_reserve=1_000),
        ...                         counter=TiktokenCounter("gpt-4o"), compact_node=None)
        >>> update = node.invoke({"messages": [HumanMessage("hello", id="h1")]}, {"configurable": {"thread_id": "t"}})
        >>> update["context"]["report"]["budget"]["method"], update["context"]["report"]["budget"]["input_tokens"], update["context"]["report"]["budget"]["decision"]
        ('recount', 8, 'proceed')
        >>> [e.event_id for e in store.read_events("t")]
        ['h1']
    """
    require_store(store, where="make_budget_node(store=...)", expected=HistoryStore)
    node = BudgetNode(
        store,
        config=config or ContextConfig(),
        model=model,
        tools=tools,
        counter=counter,
        compact_node=compact_node,
        provider_count=provider_count,
        system_prompt=system_prompt,
        pinned_rules=pinned_rules,
        memory=memory,
        book_late=book_late,
    )
    # LangGraph's own node wrapper: inspects the signature once, not on every call
    return RunnableCallable(node.invoke, node.ainvoke, name=name)


def make_budget_router(
    model_node: str, compact_node: str = "ctx_compact"
) -> Callable[[dict[str, Any]], str]:
    """The conditional edge after ``ctx_budget``: to ``compact_node`` when the budget said so,
    to ``END`` when a requested compaction was served and the model has nothing to answer
    (``done``), else to the model node. Its path map is ``[compact_node, model_node, END]``.

    Examples:
        >>> route = make_budget_router("model")
        >>> [route({"context": {"budget": {"decision": d}}}) for d in ("proceed", "compact", "done")]
        ['model', 'ctx_compact', '__end__']
    """

    def route(state: dict[str, Any]) -> str:
        decision = (unpack(state.get("context")).get("budget") or {}).get("decision")
        if decision == "done":
            return END
        return compact_node if decision in ("compact", "precompact") else model_node

    return route


def budget_update(s: BudgetSettings, turn: BudgetPass) -> dict[str, Any]:
    """The node's return value: the ``context`` report, and the messages when the view changed."""
    context, estimate = turn.context, turn.estimate
    assert estimate is not None
    last_recorded = next(
        (m.id for m in reversed(turn.messages) if m.id and not is_synthetic(m)),
        turn.recorded_through,
    )
    report: FlatContext = {
        "projection_epoch": turn.epoch,
        "recorded_through_id": last_recorded,
        "fingerprint": turn.fingerprint,
        "branch": turn.scope.branch,
        "budget": _budget_report(s, turn, estimate),
        "budget_passes": int(context.get("budget_passes") or 0) + 1,
    }
    if s.memory is not None:
        report["memory"] = turn.memory_info
    report["request"] = _pending_request(turn, estimate)
    if turn.makeup is not None:
        report["request"]["makeup"] = turn.makeup
    counter = turn.counter
    if isinstance(counter, ApproximateCounter):
        report["calibration"] = calibration_report(counter)
        counted = turn.view[-estimate.counted_messages :] if estimate.counted_messages else []
        words = counter.message_word_chars(counted)
        if estimate.method == "recount":
            words += counter.word_chars(s.overhead_text)
        report["request"]["counted_word_chars"] = words
        report["calibrated_with"] = context.get("calibrated_with")
    report["recorded_digest"] = _recorded_digest(turn, last_recorded)
    if turn.cache is not None:
        report["cache"] = turn.cache
    if turn.compaction is not None:
        report["compaction"] = turn.compaction
    update: dict[str, Any] = {"context": report}
    if turn.rewritten:
        update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *turn.view]
    elif turn.replacements:
        update["messages"] = list(turn.replacements.values())
    given = turn.given
    for key, value in context.items():  # what a step changed that the report does not say
        if key not in report and (key not in given or given[key] is not value):
            report[key] = value  # type: ignore[literal-required]
    return update


def _budget_report(s: BudgetSettings, turn: BudgetPass, estimate: BudgetEstimate) -> BudgetReport:
    budget = s.budget
    report: BudgetReport = {
        **estimate.to_json(),  # type: ignore[typeddict-item]
        "decision": turn.decision,
        "epoch_bumped_for": turn.reasons,
        "trigger": budget.trigger,
        "target": budget.target,
        "usable": budget.usable,
        "window": budget.context_window,
        "output_reserve": budget.output_reserve,
        "counter": turn.counter.id,
        "generation": int(turn.context.get("active_generation", 0)),
    }
    if turn.fallback:
        report["summarizer"] = "fallback"
    return report


def _pending_request(turn: BudgetPass, estimate: BudgetEstimate) -> PendingRequest:
    view = turn.view
    return {
        "epoch": turn.epoch,
        "input_through_message_id": view[-1].id if view else None,
        "estimate": estimate.input_tokens,
        "method": estimate.method,
        "measured_baseline": estimate.measured_baseline,
        "counted_tokens": estimate.appended
        if estimate.method == "baseline"
        else estimate.input_tokens,
    }


def _recorded_digest(turn: BudgetPass, last_recorded: str | None) -> RecordedDigest:
    """What the next pass checks edits by id against: the checksum of the recorded part of the
    state."""
    base: dict[str, Any] | None = None
    if turn.rewritten or turn.replacements:
        view = turn.view
        upto = next((i + 1 for i in range(len(view) - 1, -1, -1) if view[i].id == last_recorded), 0)
        added = [m for m in view[:upto] if m.id and not is_flagged(m)]
    else:
        if turn.prefix:
            base = {"first": turn.prefix[0].id, "count": len(turn.prefix), "value": turn.checksum}
        added = [m for m in turn.fresh if m.id]
    return extend_digest(base, added)  # type: ignore[return-value]
