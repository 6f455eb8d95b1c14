"""The ``ctx_budget`` node and its router: record, cap, estimate, decide (docs/design.md §2, §5).

Before every model call the node:

1. records every message not yet in the history store (idempotent; the summary message and our
   own previews are never recorded), then keeps the view in step with the store: edits made
   there (1a), a provider's server-side compaction (1b), long-term memory learned and recalled
   (1c), a summary another worker committed (1d), and the projection for the model's provider
   (1e: a provider's opaque window, or the readable summary after a switch), and keeps every tool
   call paired with its result (1f: a stand-in result for a dangling call, a stray result left
   out; the store keeps what happened);
2. caps a new tool result above ``tool_output_cap_tokens``: the original stays in the history
   store, the state gets a head/tail preview with a handle the history lookup can page through;
3. clears old tool results to placeholders when ``clear_tool_results_keep`` is set (persisted in
   the state, so the prompt prefix stays stable from turn to turn);
4. bumps the projection epoch when the prefix the baseline measured changed (an edited message,
   cleared results, a changed system prompt, tool set or model);
5. estimates the next request (measured baseline + appended, or a recount of the bounded view);
6. decides: ``compact`` above the trigger, ``proceed`` otherwise, and raises
   :class:`~ctx_langgraph.errors.ContextBudgetExceeded` when nothing can make the request fit.

The estimate and its breakdown go to ``context["budget"]``, visible in Studio and notebooks.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph._flow import arun_flow, run_flow
from ctx_langgraph.budget.counters import (
    ApproximateCounter,
    CountCache,
    TokenCounter,
    default_counter,
)
from ctx_langgraph.budget.estimate import BudgetEstimate, estimate_next_request
from ctx_langgraph.budget.provider_count import ProviderCountHook
from ctx_langgraph.compaction.repair import repair_tool_pairs
from ctx_langgraph.compaction.view import rewrite_view
from ctx_langgraph.config import ContextConfig, ResolvedBudget
from ctx_langgraph.core.digest import digest, extend_digest
from ctx_langgraph.core.scope import scope_from_config
from ctx_langgraph.core.streaming import not_streamed
from ctx_langgraph.errors import (
    ContextBudgetExceeded,
    EventConflict,
    MemoryExtractionError,
    MemoryStoreError,
    ProviderCountError,
)
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import BranchInfo, HistoryEvent, Scope
from ctx_langgraph.memory.store import LongTermMemory, place_memory
from ctx_langgraph.memory.types import MemoryRecord, MemoryScopes
from ctx_langgraph.providers import provider_key, server_compaction_item
from ctx_langgraph.rules import PinnedRules, pin
from ctx_langgraph.view.markers import (
    CAPPED_FLAG,
    CLEARED_FLAG,
    MEMORY_FLAG,
    SUMMARY_FLAG,
    is_flagged,
    is_lookup_result,
    is_memory_message,
    is_summary,
    is_synthetic,
)

__all__ = ["BudgetNode", "make_budget_node", "make_budget_router"]


def _fingerprint(messages: Sequence[BaseMessage], overhead: str, model_id: str) -> str:
    """Hash of what every request starts with: the leading system prompt, the tools, the model."""
    system = [
        str(m.content)
        for m in itertools.takewhile(lambda m: m.type == "system", messages)
        if not is_summary(m)
    ]
    hashed = hashlib.blake2b(json.dumps([system, overhead, model_id]).encode(), digest_size=12)
    return hashed.hexdigest()


def _preview(
    message: ToolMessage, text: str, counter: TokenCounter, cap: int, seq: int | None
) -> ToolMessage:
    """Head and tail of an oversized tool result, with a handle to the original (recorded under
    the message's id; a preview capped again keeps the original's numbers)."""
    budget_chars = max(200, cap * 3)  # about cap tokens of ordinary text
    head, tail = text[: budget_chars // 2], text[-budget_chars // 4 :]
    earlier = message.additional_kwargs.get(CAPPED_FLAG) or {}
    original = int(earlier.get("original_tokens") or counter.count_text(text))
    seq = seq if seq is not None else earlier.get("seq")
    handle = f"history:{message.id}"
    body = (
        f"{head}\n\n[... tool output capped: {original:,} tokens"
        + ("" if earlier else f", {len(text):,} characters")
        + f". The full result is kept as {handle}"
        + (f" (seq {seq})" if seq else "")
        + f'; page through it by calling history_lookup with handle="{handle}". Last part '
        f"follows ...]\n\n{tail}"
    )
    return message.model_copy(
        update={
            "content": body,
            "additional_kwargs": {
                **message.additional_kwargs,
                CAPPED_FLAG: {"handle": handle, "seq": seq, "original_tokens": original},
            },
        }
    )


def _cleared(message: ToolMessage, tokens: int, seq: int | None) -> ToolMessage:
    handle = f"history:{message.id}"
    return message.model_copy(
        update={
            "content": f"[tool result cleared to save context: {tokens:,} tokens; kept as {handle}"
            + (f" (seq {seq})" if seq else "")
            + f'; read it again by calling history_lookup with handle="{handle}"]',
            "additional_kwargs": {
                **message.additional_kwargs,
                CLEARED_FLAG: {"handle": handle, "tokens": tokens},
            },
        }
    )


@dataclass(frozen=True)
class _Record:
    scope: Scope
    messages: list[BaseMessage]


@dataclass(frozen=True)
class _ExactCount:
    messages: Sequence[BaseMessage]


@dataclass(frozen=True)
class _Head:
    scope: Scope


@dataclass(frozen=True)
class _GetEvent:
    scope: Scope
    event_id: str


@dataclass(frozen=True)
class _Read:
    scope: Scope
    from_seq: int
    to_seq: int
    include_hidden: bool = False


@dataclass(frozen=True)
class _Fork:
    scope: Scope
    parent: str
    fork_seq: int


@dataclass(frozen=True)
class _ActiveSummary:
    scope: Scope


@dataclass(frozen=True)
class _LoadRules:
    pass


@dataclass(frozen=True)
class _Observe:
    scopes: MemoryScopes
    messages: list[BaseMessage]
    seqs: dict[str, int]


@dataclass(frozen=True)
class _Recall:
    scopes: MemoryScopes
    query: str


@dataclass(frozen=True)
class _EditsSince:
    scope: Scope
    since: int


@dataclass(frozen=True)
class _Invalidate:
    scope: Scope
    seqs: list[int]


_Request = (
    _Record
    | _ExactCount
    | _Head
    | _ActiveSummary
    | _GetEvent
    | _Read
    | _Fork
    | _LoadRules
    | _Observe
    | _Recall
    | _EditsSince
    | _Invalidate
)
log = logging.getLogger(__name__)


@dataclass
class BudgetNode:
    """The ``ctx_budget`` node (use :func:`make_budget_node`)."""

    store: HistoryStore
    config: ContextConfig = field(default_factory=ContextConfig)
    model: Any = None
    tools: Sequence[Any] = ()
    counter: TokenCounter | None = None
    compact_node: str | None = "ctx_compact"
    cache: CountCache = field(default_factory=CountCache)
    provider_count: ProviderCountHook | None = None
    """Asked for an exact count when the estimate is near the limit (``exact_count_above``)."""
    exact_count_above: float = 0.9
    """Fraction of the usable window above which ``provider_count`` is asked."""
    system_prompt: str | None = None
    """A system prompt the model node adds to every request itself (not kept in the state)."""
    pinned_rules: PinnedRules | None = None
    """Rules kept first in the view on every turn (never recorded, never summarized)."""
    memory: LongTermMemory | None = None
    """Long-term memory: fed the user's new messages, recalled into the view every turn."""

    def __post_init__(self) -> None:
        if self.memory is not None:
            # deletes, hides and revisions made through this store invalidate derived memories
            self.store.add_edit_listener(self.memory)
        self.counter = self.counter or default_counter(self.model)
        self.budget: ResolvedBudget = self.config.resolve(self.model)
        schemas = [convert_to_openai_tool(tool) for tool in self.tools]
        # what every request carries besides the messages: the tool schemas and a system prompt
        # the model node adds itself (counted as overhead, and part of the fingerprint)
        self.overhead_text = json.dumps(schemas, sort_keys=True, default=str)
        self.overhead_tokens = self.counter.count_tools(schemas) if schemas else 0
        if self.system_prompt:
            self.overhead_tokens += self.counter.count_message(SystemMessage(self.system_prompt))
            self.overhead_text += "\n" + self.system_prompt
        self.model_id = str(
            getattr(self.model, "model_name", None) or getattr(self.model, "model", None) or ""
        )
        self.provider = provider_key(self.model)
        budget = self.budget
        summary_cap = min(self.config.summary_max_tokens, max(64, budget.target // 2))
        memory_cap = self._memory_allowance() if self.memory is not None else 0
        floor = self.overhead_tokens + summary_cap + budget.keep_recent_tokens + memory_cap
        if floor > budget.trigger:
            log.warning(
                "ctx-langgraph: a compacted request can be %d tokens (tools and prompt %d + summary "
                "up to %d + kept tail %d + memory up to %d), above the trigger %d: compaction "
                "could run on every turn. Lower keep_recent_tokens, summary_max_tokens or the "
                "memory's max_tokens, or raise the window.",
                floor,
                self.overhead_tokens,
                summary_cap,
                budget.keep_recent_tokens,
                memory_cap,
                budget.trigger,
            )

    # ------------------------------------------------------------------ the flow (written once)

    def flow(
        self, state: dict[str, Any], config: RunnableConfig | None
    ) -> Generator[_Request, Any, dict[str, Any]]:
        counter = self.counter
        assert counter is not None
        messages: Sequence[BaseMessage] = state.get("messages") or []
        context: dict[str, Any] = dict(state.get("context") or {})
        epoch = int(context.get("projection_epoch", 0))
        reasons: list[str] = []
        wanted_branch = ((config or {}).get("configurable") or {}).get("ctx_branch")
        if wanted_branch and context.get("branch") not in (None, wanted_branch):
            # the run asks for another branch than the state was built on: its baseline is foreign
            reasons.append("branch switch")
            context["branch"] = wanted_branch
        scope = scope_from_config(config, context)
        self._restore_calibration(counter, context)

        # 1. record what the store has not seen (scan back to the last recorded message)
        start = 0
        recorded_through = context.get("recorded_through_id")
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].id == recorded_through:
                start = index + 1
                break
        # (previews of capped or cleared results stand for events recorded under their id)
        recorded = [m for m in messages[start:] if not is_synthetic(m)]
        fresh = [m for m in recorded if not is_flagged(m)]
        # a message recorded before and since replaced by id with other content (add_messages
        # replaces by id: an edit sent with the input, or update_state) is recorded as a revision
        prefix = [m for m in messages[:start] if m.id and not is_flagged(m)]
        checksum = digest(prefix)
        saved = context.get("recorded_digest") or {}
        revised_in_state: list[BaseMessage] = []
        if (
            saved.get("first") == (prefix[0].id if prefix else None)
            and saved.get("count") == len(prefix)
            and saved.get("value") != checksum
        ):
            revised_in_state = yield from self._edited_in_state(scope, prefix)
        if fresh and recorded_through is not None:
            # The store's branch may have moved past what this state recorded. Replaying the same
            # messages (a resumed run) is fine; different ones mean the state was forked from an
            # older checkpoint (time travel, update_state, Studio's edit-and-rerun): they start a
            # new branch at the fork point, sharing the earlier events and summaries, never seeing
            # the other timeline's.
            known = yield _GetEvent(scope, str(recorded_through))
            head = yield _Head(scope)
            if known is not None and head is not None and head.head_seq > known.seq:
                after = yield _Read(scope, known.seq + 1, known.seq + len(recorded))
                # the store may hold only the first of them (a run that died after recording
                # part of a turn): those must be the same messages; the rest are new
                overlap = min(len(recorded), head.head_seq - known.seq)
                replay = len(after) == overlap and all(
                    event.event_id == message.id
                    and (is_flagged(message) or event.content == message_to_dict(message))
                    for event, message in zip(after, recorded[:overlap], strict=True)
                )
                if not replay:
                    fork = scope.on_branch(f"{scope.branch}~{known.seq}-{uuid.uuid4().hex[:8]}")
                    yield _Fork(fork, scope.branch, known.seq)
                    scope = fork
                    context["branch"] = fork.branch
                    reasons.append("fork")
        results = (yield _Record(scope, fresh)) if fresh else []
        if revised_in_state:
            try:
                results += yield _Record(scope, revised_in_state)
            except EventConflict as exc:  # an event this branch shares with its parent
                log.warning("ctx-langgraph: an edited message was not recorded: %s", exc)
                context["record_error"] = str(exc)[:300]
        by_id = {r.event_id: r for r in results}
        if any(r.status == "revised" for r in results):
            reasons.append("edited message")

        # 1a. an event was deleted, hidden or revised in the store since this state last looked:
        # the view drops it (or takes the revision), and a summary that covered it goes too
        rewritten = False
        head = yield _Head(scope)
        edits = head.edit_version if head is not None else 0
        if head is not None and context.get("edit_version") not in (None, edits):
            if self.memory is not None:
                # edits made elsewhere (another process, a store without this memory attached)
                # reach the memory here: what their events taught it is invalidated
                edited = yield _EditsSince(scope, int(context["edit_version"]))
                sources = [seq for _version, _branch, seq, kind in edited if kind != "show"]
                try:
                    yield _Invalidate(scope, sources)
                except MemoryStoreError as exc:
                    log.warning("ctx-langgraph: long-term memory not invalidated: %s", exc)
            messages, dropped_summary = yield from self._reconcile_edits(scope, messages, head)
            rewritten = True
            reasons.append("history edited")
            if dropped_summary:
                context.update(
                    active_checkpoint_id=head.active_checkpoint_id,
                    active_generation=head.active_generation,
                    covered_through_seq=0,
                    rebuild=True,  # history before the view has no summary: compact it again
                )
        context["edit_version"] = edits
        if self.pinned_rules is not None:
            rules = yield _LoadRules()
            messages, changed = pin(messages, rules)
            if changed:
                rewritten = True
                reasons.append("pinned rules changed")

        # 1b. a reply carrying a server-side compaction item (OpenAI's context_management):
        # the provider compacted everything before it; ctx_compact records that coverage.
        # (ctx_usage records a reply as it arrives: it saw the first append)
        first_seen = [m for m in fresh if m.id in by_id and by_id[m.id].status == "appended"]
        reply = context.get("recorded_reply") or {}
        if reply.get("status") == "appended" and reply.get("id") not in by_id:
            recorded_reply = next((m for m in reversed(messages) if m.id == reply["id"]), None)
            first_seen += [recorded_reply] if recorded_reply is not None else []
        for message in first_seen:
            item = server_compaction_item(message)
            if item is not None:
                context["server_compaction"] = {"message_id": message.id, "item": item}
                reasons.append("provider compacted")

        # 1c. long-term memory: learn from the user's new messages, recall into the view
        records: list[MemoryRecord] | None = None
        memory_info: dict[str, Any] = {}
        if self.memory is not None:
            memory_scopes = self.memory.scopes(config, scope)
            said = [
                m
                for m in fresh
                if m.type == "human" and m.id in by_id and by_id[m.id].status != "duplicate"
            ]
            if said:
                seqs = {str(m.id): by_id[m.id].seq for m in said if m.id}
                try:
                    changes = yield _Observe(memory_scopes, said, seqs)
                    memory_info["changes"] = [
                        {"action": c.action, "id": c.record.id, "superseded": list(c.superseded)}
                        for c in changes
                    ]
                except (MemoryExtractionError, MemoryStoreError) as exc:
                    log.warning("ctx-langgraph: long-term memory not updated: %s", exc)
                    memory_info["error"] = str(exc)
            query = next(
                (m.text for m in reversed(messages) if m.type == "human" and not is_synthetic(m)),
                "",
            )
            try:
                records = yield _Recall(memory_scopes, query)
            except MemoryStoreError as exc:  # the view keeps the memory it had
                log.warning("ctx-langgraph: long-term memory not loaded: %s", exc)
                memory_info["error"] = str(exc)
            if records is not None:
                loaded = self.memory.render(records, counter, self._memory_allowance())
                messages, changed = place_memory(messages, loaded)
                if changed:
                    rewritten = True
                    reasons.append("memory changed")

        # 1d. the store is the source of truth: a summary committed there but missing from the state
        # (a crash between the store commit and the checkpoint, or another worker) is applied now
        if head is not None and head.active_generation > int(context.get("active_generation", 0)):
            active = yield _ActiveSummary(scope)
            if active is not None and any(m.id == active.first_kept_event_id for m in messages):
                messages, _removed = rewrite_view(messages, active, self.provider)
                rewritten = True
                reasons.append("state reconciled with the store")
                context["projected_for"] = self.provider
                context.update(
                    active_checkpoint_id=active.id,
                    active_generation=active.generation,
                    covered_through_seq=active.covered_through_seq,
                )

        # 1e. the model's provider changed since the view was projected: its opaque window (or
        # the readable summary, when the thread comes back to the provider that has a window)
        # is swapped for this provider's projection of the active summary
        projected = context.get("projected_for")
        if projected is not None and projected != self.provider and head is not None:
            active = yield _ActiveSummary(scope)
            if active is not None:
                messages, _removed = rewrite_view(messages, active, self.provider)
                rewritten = True
                reasons.append(f"provider changed ({projected} -> {self.provider})")
            context["projected_for"] = self.provider

        # 1f. the view is provider-valid whatever the input: a dangling tool call gets a stand-in
        # result, a stray tool result leaves the view (the store keeps both as they happened)
        messages, repairs = repair_tool_pairs(messages)
        if repairs:
            rewritten = True
            reasons.append("tool calls repaired")
            totals = dict(context.get("repairs") or {})
            context["repairs"] = {
                "dangling_tool_calls": int(totals.get("dangling_tool_calls", 0))
                + repairs.dangling_tool_calls,
                "orphan_tool_results": int(totals.get("orphan_tool_results", 0))
                + repairs.orphan_tool_results,
            }

        # 2. cap oversized new tool results
        replacements: dict[str, BaseMessage] = {}
        cap = self.config.tool_output_cap_tokens
        if cap is not None:  # a result the window cannot hold next to the rest is capped too
            cap = min(cap, max(64, self.budget.usable // 4))
        # (after a provider rejected the view as too long and no cut was left, every result in
        # the view is capped to the smaller cap it asks for: the originals stay in the store)
        shrink = context.pop("shrink_tool_results", None)
        candidates = fresh if shrink is None else messages
        if shrink is not None:
            cap = min(cap or int(shrink), int(shrink))
        for message in candidates:
            if (
                cap
                and isinstance(message, ToolMessage)
                and message.id
                and (message.id in by_id or shrink is not None)
                and not message.additional_kwargs.get(CLEARED_FLAG)
                and not is_lookup_result(message)  # a lookup page is bounded by its own cap
                and self.cache.count(counter, message) > cap
            ):
                seq = by_id[message.id].seq if message.id in by_id else None
                replacements[message.id] = _preview(message, message.text, counter, cap, seq)

        # 3. clear old tool results, keeping the last K
        keep = self.config.clear_tool_results_keep
        if keep is not None:
            tool_results = [m for m in messages if isinstance(m, ToolMessage) and m.id]
            for message in tool_results[: max(0, len(tool_results) - keep)]:
                if not message.additional_kwargs.get(CLEARED_FLAG):
                    seq = by_id[message.id].seq if message.id in by_id else None
                    replacements[str(message.id)] = _cleared(
                        message, self.cache.count(counter, message), seq
                    )
            if any(r.additional_kwargs.get(CLEARED_FLAG) for r in replacements.values()):
                reasons.append("tool results cleared")
        view = (
            [replacements.get(str(m.id), m) if m.id else m for m in messages]
            if replacements
            else messages
        )

        # 4. invalidate the baseline when the measured prefix changed
        fingerprint = _fingerprint(view, self.overhead_text, self.model_id)
        if context.get("fingerprint") not in (None, fingerprint):
            reasons.append("system prompt, tools or model changed")
        if reasons:
            epoch += 1
            context["projection_epoch"] = epoch

        # 5. estimate, 6. decide
        estimate = self._estimate(view, context)
        if records is not None:
            # memory never pushes a request over the budget: it gives up what the rest needs
            view, estimate, shrunk = self._fit_memory(view, estimate, records, context)
            if shrunk:
                rewritten = True
                fingerprint = _fingerprint(view, self.overhead_text, self.model_id)
                if "memory changed" not in reasons:  # (the estimate is a recount already)
                    reasons.append("memory changed")
                    epoch += 1
                    context["projection_epoch"] = epoch
            memory_message = next((m for m in view if is_memory_message(m)), None)
            memory_info["loaded"] = (
                memory_message.additional_kwargs[MEMORY_FLAG]["items"] if memory_message else 0
            )
            memory_info["tokens"] = (
                self.cache.count(counter, memory_message) if memory_message else 0
            )
        if (
            self.provider_count is not None
            and estimate.total >= self.exact_count_above * self.budget.usable
        ):
            exact = yield _ExactCount(view)
            if exact is not None:
                estimate = replace(
                    estimate,
                    input_tokens=int(exact),
                    margin=self.config.margin(int(exact)),
                    method="provider",
                )
        decision, fallback = self._decide(view, estimate, context)
        last_recorded = next(
            (m.id for m in reversed(messages) if m.id and not is_synthetic(m)), recorded_through
        )
        update_context: dict[str, Any] = {
            "projection_epoch": epoch,
            "recorded_through_id": last_recorded,
            "fingerprint": fingerprint,
            "branch": scope.branch,
            "budget": {
                **estimate.to_json(),
                "decision": decision,
                "epoch_bumped_for": reasons,
                "trigger": self.budget.trigger,
                "target": self.budget.target,
                "usable": self.budget.usable,
                "window": self.budget.context_window,
                "output_reserve": self.budget.output_reserve,
                "counter": counter.id,
                "generation": int(context.get("active_generation", 0)),  # of the active summary
                **({"summarizer": "fallback"} if fallback else {}),
            },
            "budget_passes": int(context.get("budget_passes") or 0) + 1,
            **({"memory": memory_info} if self.memory is not None else {}),
            "request": {
                "epoch": epoch,
                "input_through_message_id": view[-1].id if view else None,
                "estimate": estimate.input_tokens,
                "method": estimate.method,
                "measured_baseline": estimate.measured_baseline,
                # what the counter itself guessed (the rest was measured): calibration compares it
                "counted_tokens": estimate.appended
                if estimate.method == "baseline"
                else estimate.input_tokens,
            },
        }
        if isinstance(counter, ApproximateCounter):
            update_context["calibration"] = {
                "chars_per_token": counter.chars_per_token,
                "count": counter.calibrations,
            }
            counted = view[-estimate.counted_messages :] if estimate.counted_messages else []
            words = counter.message_word_chars(counted)
            if estimate.method == "recount":
                words += counter.word_chars(self.overhead_text)
            update_context["request"]["counted_word_chars"] = words
            update_context["calibrated_with"] = context.get("calibrated_with")
        # what the next pass checks edits by id against: the recorded part of the state (the
        # checksum of this pass extended by what it recorded, or recounted over a new view)
        base: dict[str, Any] | None = None
        if rewritten or replacements:
            upto = next(
                (i + 1 for i in range(len(view) - 1, -1, -1) if view[i].id == last_recorded), 0
            )
            added = [m for m in view[:upto] if m.id and not is_flagged(m)]
        else:
            if prefix:
                base = {"first": prefix[0].id, "count": len(prefix), "value": checksum}
            added = [m for m in fresh if m.id]
        update_context["recorded_digest"] = extend_digest(base, added)
        update: dict[str, Any] = {"context": update_context}
        if rewritten:
            update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *view]
            for key in ("active_checkpoint_id", "active_generation", "covered_through_seq"):
                if key in context:
                    update_context[key] = context[key]
        elif replacements:
            update["messages"] = list(replacements.values())
        for key in ("edit_version", "rebuild", "server_compaction", "projected_for", "repairs"):
            if key in context:
                update_context[key] = context[key]
        return update

    def _estimate(self, view: Sequence[BaseMessage], context: dict[str, Any]) -> BudgetEstimate:
        assert self.counter is not None
        estimate = estimate_next_request(
            view,
            context=context,
            counter=self.counter,
            cache=self.cache,
            tool_tokens=self.overhead_tokens,
            margin=self.config.margin,
        )
        cleared = int((context.get("provider_edits") or {}).get("cleared_input_tokens") or 0)
        if cleared and estimate.method == "recount":
            # the provider clears these again on the next request (the client keeps them); it
            # clears tool results only, so never more than the view holds of them
            results = sum(
                self.cache.count(self.counter, m) for m in view if isinstance(m, ToolMessage)
            )
            tokens = max(0, estimate.input_tokens - min(cleared, results))
            estimate = replace(
                estimate,
                input_tokens=tokens,
                margin=self.config.margin(tokens),
                provider_cleared=estimate.input_tokens - tokens,
            )
        return estimate

    def _memory_allowance(self) -> int:
        """The memory message's budget: its own cap, and never more than a quarter of the window."""
        assert self.memory is not None
        return min(self.memory.max_tokens, max(0, self.budget.usable // 4))

    def _fit_memory(
        self,
        view: Sequence[BaseMessage],
        estimate: BudgetEstimate,
        records: list[MemoryRecord],
        context: dict[str, Any],
    ) -> tuple[list[BaseMessage], BudgetEstimate, bool]:
        """Shrink (or drop) the memory message until the request fits the usable window."""
        assert self.memory is not None and self.counter is not None
        view = list(view)
        shrunk = False
        for _ in range(4):
            current = next((m for m in view if is_memory_message(m)), None)
            if current is None or estimate.total <= self.budget.usable:
                break
            room = self.cache.count(self.counter, current) - (estimate.total - self.budget.usable)
            smaller = self.memory.render(records, self.counter, room - 1) if room > 16 else None
            view, _changed = place_memory(view, smaller)
            shrunk = True
            estimate = self._estimate(view, {**context, "projection_epoch": -1})
        return view, estimate, shrunk

    def _edited_in_state(
        self, scope: Scope, prefix: Sequence[BaseMessage]
    ) -> Generator[_Request, Any, list[BaseMessage]]:
        """The recorded messages whose content in the state differs from the store's (one range
        read from the oldest of them)."""
        first: HistoryEvent | None = None
        for probe in prefix:
            first = yield _GetEvent(scope, str(probe.id))
            if first is not None:
                break
        if first is None:
            return []
        head = yield _Head(scope)
        rows = yield _Read(scope, first.seq, head.head_seq if head else first.seq)
        stored = {row.event_id: row for row in rows}
        return [
            m
            for m in prefix
            if (event := stored.get(str(m.id))) is not None and event.content != message_to_dict(m)
        ]

    def _reconcile_edits(
        self, scope: Scope, messages: Sequence[BaseMessage], head: BranchInfo
    ) -> Generator[_Request, Any, tuple[list[BaseMessage], bool]]:
        """The view without deleted or hidden events, with revised ones as stored now, and
        without a summary the store no longer has active. Returns it and whether the summary
        was dropped."""

        def recorded(message: BaseMessage) -> bool:
            return bool(message.id) and message.type != "system" and not is_synthetic(message)

        # one range read from the view's oldest surviving message to the head (the view is the
        # thread's tail), instead of one lookup per message
        stored: dict[str, HistoryEvent] = {}
        for probe in filter(recorded, messages):
            first: HistoryEvent | None = yield _GetEvent(scope, str(probe.id))
            if first is not None:
                rows = yield _Read(scope, first.seq, head.head_seq, include_hidden=True)
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
            if not recorded(message):
                kept.append(message)
                continue
            event = stored.get(str(message.id))
            if event is None:  # outside the range read: deleted, or out of seq order
                event = yield _GetEvent(scope, str(message.id))
            if event is None or not event.visible:
                continue  # deleted or hidden: it leaves the view
            if not is_flagged(message) and event.content != message_to_dict(message):
                kept.append(event.message)  # revised: the view takes the stored revision
            else:
                kept.append(message)
        return kept, dropped_summary

    def _restore_calibration(self, counter: TokenCounter, context: dict[str, Any]) -> None:
        """Carry the approximate counter's calibration in the state, and learn from a new baseline.

        The signal is exactly what the estimate guessed: for a baseline-method request, the
        tokens of the appended messages (new measured input - previous measured input) against
        their approximate count; for a recount, the whole request.
        """
        if not isinstance(counter, ApproximateCounter):
            return
        saved = context.get("calibration") or {}
        if saved.get("count", 0) > counter.calibrations:
            counter.chars_per_token = float(saved["chars_per_token"])
            counter.calibrations = int(saved["count"])
        baseline = context.get("baseline") or {}
        request = context.get("request") or {}
        reply_id = baseline.get("reply_message_id")
        if (
            not reply_id
            or reply_id == context.get("calibrated_with")
            or not request.get("counted_tokens")
        ):
            return
        measured = int(baseline.get("measured_input_tokens") or 0)
        if request.get("method") == "baseline":
            measured -= int(request.get("measured_baseline") or 0)
        if measured > 0:
            counter.calibrate(
                measured_tokens=measured,
                estimated_tokens=int(request["counted_tokens"]),
                word_chars=int(request.get("counted_word_chars") or 0),
            )
            self.cache = CountCache(self.cache.max_entries)  # counts of the old ratio are stale
        context["calibrated_with"] = reply_id

    def _decide(
        self, view: Sequence[BaseMessage], estimate: BudgetEstimate, context: dict[str, Any]
    ) -> tuple[str, bool]:
        """The decision, and whether the configured summarizer is backing off after failures."""
        budget = self.budget
        last = context.get("compaction") or {}
        # a compaction that did not commit on this very view is not retried in a loop...
        tried = (
            last.get("epoch") == int(context.get("projection_epoch", 0))
            and last.get("at_message_id") == (view[-1].id if view else None)
            and last.get("status") != "committed"
        )
        # ...and after a failure the next try waits (model calls and time, see CompactNode)
        backoff = context.get("summarizer_backoff") or {}
        backing_off = bool(backoff) and (
            int(context.get("budget_passes") or 0) < int(backoff.get("retry_after_pass") or 0)
            or time.time() < float(backoff.get("retry_at") or 0)
        )
        can_compact = self.compact_node is not None and not tried
        if context.get("rebuild") and can_compact and not backing_off:
            return (
                "compact",
                False,
            )  # an edit took the summary away: rebuild it from the raw history
        if context.get("server_compaction") and can_compact and not backing_off:
            return "compact", False  # the provider compacted: record the coverage it implies
        if estimate.total <= budget.trigger:
            started = (context.get("precompaction") or {}).get("epoch")
            if (
                budget.precompact is not None
                and self.compact_node is not None
                and estimate.total > budget.precompact
                and started != int(context.get("projection_epoch", 0))
                and not backing_off
            ):
                return "precompact", False  # ctx_compact builds a candidate in the background
            return "proceed", False
        # what compaction can never remove: system messages, overhead and the newest message
        counter = self.counter
        assert counter is not None
        pinned = [m for m in view if m.type == "system" and not is_summary(m)] + list(view[-1:])
        largest = max((self.cache.count(counter, m) for m in view), default=0)
        floor = self.overhead_tokens + sum(self.cache.count(counter, m) for m in pinned)
        if floor + self.config.margin(floor) > budget.usable:
            raise ContextBudgetExceeded(
                estimate=estimate.total,
                usable=budget.usable,
                window=budget.context_window,
                reserve=budget.output_reserve,
                largest=largest,
                advice="No cut can make this request fit: even with all history compacted, the system "
                "prompt, the tool schemas and the newest message are over the usable window. Shorten "
                "the newest message or the system prompt, lower tool_output_cap_tokens, or use a "
                "model with a larger window.",
            )
        if can_compact:
            if not backing_off:
                return "compact", False
            if estimate.total > budget.usable:
                return "compact", True  # cannot wait: the offline summarizer covers the span
        if estimate.total <= budget.usable:
            return "proceed", False  # over the trigger but fits: compaction waits or is not wired
        raise ContextBudgetExceeded(
            estimate=estimate.total,
            usable=budget.usable,
            window=budget.context_window,
            reserve=budget.output_reserve,
            largest=largest,
            advice="No cut can make this request fit"
            if self.compact_node is not None
            else "Compaction is not wired (compact_node=None)"
            + f" (last compaction: {last.get('status', 'not tried')}, "
            f"{'; '.join(last.get('problems') or [])[:300] or 'no problem noted'}): lower "
            "keep_recent_tokens or tool_output_cap_tokens, or use a model with a larger window.",
        )

    # ------------------------------------------------------------------ sync and async shells

    def _serve(self, request: _Request) -> Any:
        if isinstance(request, _EditsSince):
            return self.store.edits_since(request.scope, request.since)
        if isinstance(request, _Invalidate):
            assert self.memory is not None
            return self.memory.invalidate_events(request.scope, seqs=request.seqs)
        if isinstance(request, _Observe):
            assert self.memory is not None
            with not_streamed():  # a model-backed extractor is not the agent's reply
                return self.memory.observe(request.scopes, request.messages, seqs=request.seqs)
        if isinstance(request, _Recall):
            assert self.memory is not None
            return self.memory.recall(request.scopes, request.query)
        if isinstance(request, _LoadRules):
            assert self.pinned_rules is not None
            return self.pinned_rules.load()
        if isinstance(request, _Record):
            return self.store.append(request.scope, request.messages)
        if isinstance(request, _Head):
            return self.store.branch_info(request.scope)
        if isinstance(request, _GetEvent):
            return self.store.get_event(request.scope, request.event_id, include_hidden=True)
        if isinstance(request, _Read):
            return self.store.read_events(
                request.scope,
                from_seq=request.from_seq,
                to_seq=request.to_seq,
                include_hidden=request.include_hidden,
            )
        if isinstance(request, _Fork):
            return self.store.create_branch(request.scope, request.parent, request.fork_seq)
        if isinstance(request, _ActiveSummary):
            return self.store.get_active(request.scope)
        assert self.provider_count is not None
        try:
            return self.provider_count.count_request(request.messages, self.tools)
        except ProviderCountError as exc:
            log.warning("ctx-langgraph: %s", exc)
            return None

    async def _aserve(self, request: _Request) -> Any:
        if isinstance(request, _EditsSince):
            return await self.store.aedits_since(request.scope, request.since)
        if isinstance(request, _Invalidate):
            assert self.memory is not None
            return await self.memory.ainvalidate_events(request.scope, seqs=request.seqs)
        if isinstance(request, _Observe):
            assert self.memory is not None
            with not_streamed():
                return await self.memory.aobserve(
                    request.scopes, request.messages, seqs=request.seqs
                )
        if isinstance(request, _Recall):
            assert self.memory is not None
            return await self.memory.arecall(request.scopes, request.query)
        if isinstance(request, _LoadRules):
            assert self.pinned_rules is not None
            return await self.pinned_rules.aload()
        if isinstance(request, _Record):
            return await self.store.aappend(request.scope, request.messages)
        if isinstance(request, _Head):
            return await self.store.abranch_info(request.scope)
        if isinstance(request, _GetEvent):
            return await self.store.aget_event(request.scope, request.event_id, include_hidden=True)
        if isinstance(request, _Read):
            return await self.store.aread_events(
                request.scope,
                from_seq=request.from_seq,
                to_seq=request.to_seq,
                include_hidden=request.include_hidden,
            )
        if isinstance(request, _Fork):
            return await self.store.acreate_branch(request.scope, request.parent, request.fork_seq)
        if isinstance(request, _ActiveSummary):
            return await self.store.aget_active(request.scope)
        assert self.provider_count is not None
        try:
            return await self.provider_count.acount_request(request.messages, self.tools)
        except ProviderCountError as exc:
            log.warning("ctx-langgraph: %s", exc)
            return None

    def invoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return run_flow(self.flow(state, config), self._serve)

    async def ainvoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return await arun_flow(self.flow(state, config), self._aserve)


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
        provider_count: a provider count hook (``AnthropicCountHook``, ``OpenAIResponsesCountHook``)
            asked for an exact count only near the limit; on failure the local estimate stands.
        system_prompt: a system prompt the model node prepends to every request itself (it is
            not in the state): counted as overhead like the tool schemas.
        pinned_rules: :class:`~ctx_langgraph.rules.PinnedRules` kept as the view's first
            message on every turn (re-read each turn, never recorded or summarized).
        memory: :class:`~ctx_langgraph.memory.LongTermMemory`: the user's new messages go
            through its extractor; its live records for the run's thread, user
            (``configurable["user_id"]``) and project are loaded as a system message after
            the leading system messages, under its own token budget, counted in the estimate,
            and shrunk or dropped before it could push a request over the usable window.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from ctx_langgraph.budget import TiktokenCounter
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> node = make_budget_node(store, config=ContextConfig(context_window=8_000, output_reserve=1_000),
        ...                         counter=TiktokenCounter("gpt-4o"), compact_node=None)
        >>> update = node.invoke({"messages": [HumanMessage("hello", id="h1")]}, {"configurable": {"thread_id": "t"}})
        >>> update["context"]["budget"]["method"], update["context"]["budget"]["input_tokens"], update["context"]["budget"]["decision"]
        ('recount', 8, 'proceed')
        >>> [e.event_id for e in store.read_events("t")]
        ['h1']
    """
    node = BudgetNode(
        store,
        config or ContextConfig(),
        model,
        tools,
        counter,
        compact_node,
        provider_count=provider_count,
        system_prompt=system_prompt,
        pinned_rules=pinned_rules,
        memory=memory,
    )
    # LangGraph's own node wrapper: inspects the signature once, not on every call
    return RunnableCallable(node.invoke, node.ainvoke, name=name)


def make_budget_router(
    model_node: str, compact_node: str = "ctx_compact"
) -> Callable[[dict[str, Any]], str]:
    """The conditional edge after ``ctx_budget``: to ``compact_node`` when the budget said so,
    else to the model node."""

    def route(state: dict[str, Any]) -> str:
        decision = ((state.get("context") or {}).get("budget") or {}).get("decision")
        return compact_node if decision in ("compact", "precompact") else model_node

    return route
