"""The ``ctx_compact`` node: summarize the oldest uncovered span and commit it atomically.

Protocol (docs/design.md §6, the order matters for crash recovery):

1. choose the cut in the working view (:func:`~ctx_langgraph.compaction.choose_cut`);
2. take a fixed snapshot of the span from the store (active cursor + 1 .. the cut);
3. summarize ``active summary + the whole span`` (in ordered batches when it does not fit the
   summarizer's window), validate (real token length <= cap, sections, key-fact sources) and
   retry within a bounded count and time; an invalid summary is never truncated and committed;
4. create the candidate, commit it by compare-and-swap in the store;
5. only then rewrite the graph state: the summary message (stable id) + the tail, the projection
   epoch bumped, the baseline dropped.

On failure the old summary stays active and nothing is removed. A failure is never sticky: when
the request still fits, the node proceeds and ``ctx_budget`` tries again after a backoff (by model
calls and time, doubling per failure in a row: ``context["compaction"]`` shows the failures and
when the next try is due); when it would not fit, the offline
:class:`~ctx_langgraph.compaction.ExtractiveSummarizer` covers the span instead (``"fallback"`` in
``context["compaction"]``, and a warning in the log), and the cut goes deeper than
``keep_recent_tokens`` when the kept tail alone is too much. Only when the fallback fails too does
the node raise :class:`~ctx_langgraph.errors.CompactionFailed`. On a conflict (another worker
committed first) the state is rewritten to the winner's summary.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.utils.runnable import RunnableCallable  # type: ignore[attr-defined]  # re-exported by langgraph

from ctx_langgraph._flow import arun_flow, run_flow
from ctx_langgraph.budget.counters import CountCache, TokenCounter, default_counter
from ctx_langgraph.compaction.cut import CutPoint, choose_cut, first_coverable
from ctx_langgraph.compaction.format import SummaryDocument, validate_summary
from ctx_langgraph.compaction.summarizers import ExtractiveSummarizer, Summarizer, SummaryRequest
from ctx_langgraph.compaction.view import SUMMARY_MESSAGE_ID, rewrite_view, summary_message
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.scope import scope_from_config
from ctx_langgraph.core.streaming import not_streamed
from ctx_langgraph.errors import (
    CompactionConflict,
    CompactionFailed,
    ProviderCompactionError,
    StaleCandidate,
)
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import CompactionCheckpoint, CoverageSnapshot, HistoryEvent, Scope
from ctx_langgraph.providers import (
    OPENAI_RESPONSES,
    CompactionBackend,
    ProviderCompaction,
    provider_key,
)
from ctx_langgraph.usage.ledger import UsageLedger

__all__ = ["SUMMARY_MESSAGE_ID", "CompactNode", "make_compact_node", "summary_message"]

log = logging.getLogger(__name__)
_FALLBACK_MIN_S = 30.0
"""The least time the offline fallback summarizer gets, whatever ``compaction_timeout_s`` is."""
# --------------------------------------------------------------------------- I/O requests


@dataclass(frozen=True)
class _GetEvent:
    scope: Scope
    event_id: str


@dataclass(frozen=True)
class _Snapshot:
    scope: Scope
    through_seq: int


@dataclass(frozen=True)
class _Active:
    scope: Scope


@dataclass(frozen=True)
class _Summarize:
    summarizer: Summarizer
    request: SummaryRequest
    timeout_s: float


@dataclass(frozen=True)
class _Create:
    snapshot: CoverageSnapshot
    text: str
    document: SummaryDocument
    first_kept_event_id: str | None
    summarizer_id: str
    summary_tokens: int
    provider_state: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Commit:
    candidate: CompactionCheckpoint


@dataclass(frozen=True)
class _ProviderCompact:
    messages: list[BaseMessage]


@dataclass(frozen=True)
class _Book:
    scope: Scope
    result: ProviderCompaction


@dataclass(frozen=True)
class _Prune:
    scope: Scope
    keep: int


@dataclass(frozen=True)
class _Pending:
    scope: Scope


_Request = (
    _GetEvent
    | _Snapshot
    | _Active
    | _Summarize
    | _Create
    | _Commit
    | _Prune
    | _Pending
    | _ProviderCompact
    | _Book
)


def _batches(
    events: Sequence[HistoryEvent], tokens: Sequence[int], budget: int
) -> list[list[HistoryEvent]]:
    """Ordered batches of events whose tokens fit ``budget`` each (a giant event gets its own)."""
    batches: list[list[HistoryEvent]] = [[]]
    used = 0
    for event, count in zip(events, tokens, strict=True):
        if batches[-1] and used + count > budget:
            batches.append([])
            used = 0
        batches[-1].append(event)
        used += count
    return [batch for batch in batches if batch]


@dataclass
class CompactNode:
    """The ``ctx_compact`` node (use :func:`make_compact_node`)."""

    store: HistoryStore
    config: ContextConfig = field(default_factory=ContextConfig)
    summarizer: Summarizer = field(default_factory=ExtractiveSummarizer)
    model: Any = None
    counter: TokenCounter | None = None
    cache: CountCache = field(default_factory=CountCache)
    ledger: UsageLedger | None = None
    """Where a provider compaction's usage is booked (purpose ``compaction``)."""
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.counter = self.counter or default_counter(self.model)
        self.fallback: Summarizer = ExtractiveSummarizer()
        """Takes over when the configured summarizer fails and the request would not fit."""
        self.budget = self.config.resolve(self.model)
        self.cap = min(self.config.summary_max_tokens, max(64, self.budget.target // 2))
        self.provider = provider_key(self.model)
        backend = self.config.compaction_backend
        self.backend: CompactionBackend | None = None if backend == "local" else backend
        if self.backend is not None and self.backend.provider != self.provider:
            log.warning(
                "ctx-langgraph: compaction_backend %s is for %s, but the model speaks %s: "
                "only the readable summary is used",
                self.backend.id,
                self.backend.provider,
                self.provider,
            )

    # ------------------------------------------------------------------ the flow (written once)

    def flow(
        self, state: dict[str, Any], config: RunnableConfig | None, *, commit: bool = True
    ) -> Generator[_Request, Any, dict[str, Any]]:
        """The compaction protocol; with ``commit=False`` it stops after storing the candidate
        (the background pre-compaction) and returns ``{"candidate_id": ...}``."""
        counter = self.counter
        assert counter is not None
        messages: Sequence[BaseMessage] = state.get("messages") or []
        context: dict[str, Any] = dict(state.get("context") or {})
        scope = scope_from_config(config, context)
        epoch = int(context.get("projection_epoch", 0))
        # where this attempt happened: the budget does not send the same view back to a failed compaction
        attempt_info: dict[str, Any] = {
            "epoch": epoch,
            "at_message_id": messages[-1].id if messages else None,
        }
        estimate = int((context.get("budget") or {}).get("total") or 0)
        # a request over the usable window cannot wait for the configured summarizer: the
        # offline one covers the span if it fails (at once while it is backing off)
        must_fit = commit and estimate > self.budget.usable
        backing_off = (context.get("budget") or {}).get("summarizer") == "fallback"
        keep_recent = self.budget.keep_recent_tokens
        if must_fit:  # the kept tail alone may be too much: cut deeper
            keep_recent = max(0, keep_recent - (estimate - self.budget.target))
        server = context.get("server_compaction") or {}
        server_at = next(
            (i for i, m in enumerate(messages) if server and m.id == server.get("message_id")),
            None,
        )
        cut: CutPoint | None
        start = first_coverable(messages)
        if server_at is not None and server_at > start:
            # the provider compacted everything before this reply: cover exactly that
            cut = CutPoint(start, server_at, "server", 0, 0)
        else:
            cut = choose_cut(
                messages,
                [self.cache.count(counter, m) for m in messages],
                keep_recent_tokens=keep_recent,
            )
        if cut is None and context.get("rebuild"):
            # an edit took the summary away and the view is too short to cut: cover the store's
            # history before the view, keeping the whole view verbatim
            start = first_coverable(messages)
            first = messages[start] if start < len(messages) else None
            found = (yield _GetEvent(scope, str(first.id))) if first and first.id else None
            if first is None or found is None or found.seq <= 1:
                return {
                    "context": {
                        "rebuild": False,
                        "compaction": {**attempt_info, "status": "nothing_to_cover"},
                    }
                }
            through_seq, first_kept_id, cut_kind = found.seq - 1, str(first.id), "rebuild"
        elif cut is None:
            return {"context": {"compaction": {**attempt_info, "status": "nothing_to_cover"}}}
        else:
            last_covered = messages[cut.index - 1]
            event = (yield _GetEvent(scope, str(last_covered.id))) if last_covered.id else None
            if event is None:
                return {
                    "context": {
                        "compaction": {
                            **attempt_info,
                            "status": "not_recorded",
                            "error": f"message {last_covered.id!r} is not in the history store",
                        }
                    }
                }
            through_seq, first_kept_id, cut_kind = event.seq, str(messages[cut.index].id), cut.kind

        problems: list[str] = []
        attempts = 0
        deadline = time.monotonic() + self.config.compaction_timeout_s
        for _round in range(3):  # a conflict or a stale snapshot: start again from the new state
            active: CompactionCheckpoint | None = yield _Active(scope)
            if active is not None and active.covered_through_seq >= through_seq:
                return self._rewrite(messages, context, active, epoch, attempt_info, "reconciled")
            if commit:
                # a candidate pre-built in the background on this summary: commit it if still valid
                pending: list[CompactionCheckpoint] = yield _Pending(scope)
                view_ids = {m.id for m in messages}
                for early in pending:
                    # usable only on the same summary, and only if its tail boundary is in this view
                    if (
                        early.parent_id == (active.id if active else None)
                        and early.first_kept_event_id in view_ids
                    ):
                        try:
                            committed_early: CompactionCheckpoint = yield _Commit(early)
                        except (CompactionConflict, StaleCandidate) as exc:
                            problems.append(f"precomputed: {type(exc).__name__}"[:300])
                            continue
                        return self._rewrite(
                            messages,
                            context,
                            committed_early,
                            epoch,
                            attempt_info,
                            "committed_precomputed",
                        )
            try:
                snapshot: CoverageSnapshot = yield _Snapshot(scope, through_seq)
            except ValueError:
                # another worker committed a summary covering this span since `active` was read
                newer: CompactionCheckpoint | None = yield _Active(scope)
                if newer is None or newer.covered_through_seq < through_seq:
                    raise
                return self._rewrite(messages, context, newer, epoch, attempt_info, "reconciled")
            previous = (
                SummaryDocument.parse(active.summary_text)
                if active and active.summary_text
                else None
            )
            used = self.summarizer
            text = None
            backoff: dict[str, Any] = {}  # the configured summarizer's failures in a row
            if not backing_off:
                while attempts < self.config.compaction_attempts and time.monotonic() < deadline:
                    attempts += 1
                    text = yield from self._attempt(used, previous, snapshot, deadline, problems)
                    if text is not None:
                        break
                backoff = {
                    "summarizer_backoff": None if text is not None else self._backoff(context)
                }
            if text is None and (must_fit or backing_off):
                used = self.fallback
                attempt_info["fallback"] = used.id
                log.warning(
                    "ctx-langgraph: the summarizer %s failed or is backing off and the request "
                    "would not fit (%d tokens > %d usable): the %s summarizer covers the span",
                    self.summarizer.id,
                    estimate,
                    self.budget.usable,
                    used.id,
                )
                attempts += 1
                # (offline and bounded: only a loaded machine makes it slow, so it gets time)
                fallback_s = max(_FALLBACK_MIN_S, self.config.compaction_timeout_s)
                text = yield from self._attempt(
                    used, previous, snapshot, time.monotonic() + fallback_s, problems
                )
            if text is None:
                return self._failed(attempt_info, attempts, problems, estimate, backoff)
            # the text carries seqs only: restore each key fact's event id (this span, earlier spans)
            event_ids = {
                f.source_seq: f.source_event_id
                for f in (active.key_facts if active else ())
                if f.source_event_id
            }
            event_ids.update({e.seq: e.event_id for e in snapshot.events})
            document = SummaryDocument.parse(text).with_event_ids(event_ids)
            provider_state = yield from self._provider_state(
                scope, messages, cut, cut_kind, server, attempt_info
            )
            candidate: CompactionCheckpoint = yield _Create(
                snapshot,
                text,
                document,
                first_kept_id,
                used.id,
                counter.count_text(text),
                provider_state,
            )
            if not commit:
                return {"candidate_id": candidate.id}
            try:
                committed: CompactionCheckpoint = yield _Commit(candidate)
            except (CompactionConflict, StaleCandidate) as exc:
                problems.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            attempt_info.update(attempts=attempts, cut=cut_kind, summarizer=used.id)
            if problems:
                attempt_info["problems"] = problems[-5:]
            if self.config.summary_versions_keep is not None:
                attempt_info["pruned_versions"] = yield _Prune(
                    scope, self.config.summary_versions_keep
                )
            done = self._rewrite(messages, context, committed, epoch, attempt_info, "committed")
            done["context"].update(backoff)
            return done
        return self._failed(attempt_info, attempts, problems, estimate, {})

    def _attempt(
        self,
        summarizer: Summarizer,
        previous: SummaryDocument | None,
        snapshot: CoverageSnapshot,
        deadline: float,
        problems: list[str],
    ) -> Generator[_Request, Any, str | None]:
        """One summarizer attempt: its valid text, or None with the problem noted."""
        number = len(problems) + 1
        try:
            text: object = yield from self._summarize(summarizer, previous, snapshot, deadline)
        except Exception as exc:  # the summarizer raised or timed out: a failed attempt
            problems.append(
                f"attempt {number} ({summarizer.id}): {type(exc).__name__}: {exc}"[:300]
            )
            return None
        if not isinstance(text, str):
            problems.append(
                f"attempt {number} ({summarizer.id}): returned {type(text).__name__}, not text"
            )
            return None
        found = validate_summary(
            text,
            cap_tokens=self.cap,
            counter=self.counter,  # type: ignore[arg-type]
            covered_through_seq=snapshot.covered_through_seq,
        )
        if found:
            problems.append(f"attempt {number} ({summarizer.id}): " + "; ".join(found)[:300])
            return None
        return text

    def _provider_state(
        self,
        scope: Scope,
        messages: Sequence[BaseMessage],
        cut: CutPoint | None,
        cut_kind: str,
        server: dict[str, Any],
        attempt_info: dict[str, Any],
    ) -> Generator[_Request, Any, dict[str, Any] | None]:
        """The provider's own window for the span, next to the readable summary: the item a
        server-side compaction put in a reply, or the compact endpoint's window. A provider
        failure leaves it out (the readable summary is committed all the same)."""
        if cut_kind == "server":
            item = dict(server.get("item") or {})
            model = str(getattr(self.model, "model_name", None) or "")
            result = ProviderCompaction(OPENAI_RESPONSES, "server", model, [item])
            attempt_info["provider"] = {"kind": "server", "status": "recorded"}
            return {**result.state(), "in_message": server.get("message_id")}
        if self.backend is None or self.backend.provider != self.provider or cut is None:
            return None
        # the whole window before the cut, an earlier compaction's window included (the
        # system prompt goes with each request, not into the compacted conversation)
        span = [m for m in messages[: cut.index] if m.type != "system"]
        try:
            compacted: ProviderCompaction = yield _ProviderCompact(span)
        except ProviderCompactionError as exc:
            log.warning("ctx-langgraph: %s; the readable summary stands alone", exc)
            attempt_info["provider"] = {"status": "failed", "error": str(exc)[:300]}
            return None
        attempt_info["provider"] = {
            "kind": compacted.kind,
            "status": "compacted",
            "window_items": len(compacted.window),
            "response_id": compacted.response_id,
        }
        if compacted.usage is not None and self.ledger is not None:
            yield _Book(scope, compacted)
        return compacted.state()

    def _summarize(
        self,
        summarizer: Summarizer,
        previous: SummaryDocument | None,
        snapshot: CoverageSnapshot,
        deadline: float,
    ) -> Generator[_Request, Any, str]:
        """Previous summary + the whole span, in ordered batches when it exceeds the summarizer's window."""
        counter = self.counter
        assert counter is not None
        events = list(snapshot.events)
        window = getattr(summarizer, "window_tokens", None)
        batches = [events]
        if window:
            room = window - self.cap - (counter.count_text(previous.render()) if previous else 0)
            room = max(room, window // 4)
            batches = _batches(events, [counter.count_text(e.text) + 8 for e in events], room) or [
                events
            ]
        text = ""
        for batch in batches:
            request = SummaryRequest(
                previous=previous,
                events=batch,
                covered_through_seq=batch[-1].seq if batch else snapshot.covered_through_seq,
                cap_tokens=self.cap,
                counter=counter,
            )
            text = yield _Summarize(summarizer, request, max(0.001, deadline - time.monotonic()))
            if batch is not batches[-1]:
                previous = SummaryDocument.parse(
                    text
                )  # the rolling summary carries into the next batch
        return text

    def _rewrite(
        self,
        messages: Sequence[BaseMessage],
        context: dict[str, Any],
        checkpoint: CompactionCheckpoint,
        epoch: int,
        attempt_info: dict[str, Any],
        status: str,
    ) -> dict[str, Any]:
        """The state after a commit: system prompt + summary message + the uncovered tail."""
        view, removed = rewrite_view(messages, checkpoint, self.provider)
        return {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *view],
            "context": {
                "projection_epoch": epoch + 1,
                "baseline": None,
                "rebuild": False,
                "server_compaction": None,
                "projected_for": self.provider,
                "active_checkpoint_id": checkpoint.id,
                "active_generation": checkpoint.generation,
                "covered_through_seq": checkpoint.covered_through_seq,
                "compaction": {
                    **attempt_info,
                    "status": status,
                    "generation": checkpoint.generation,
                    "covered_through_seq": checkpoint.covered_through_seq,
                    "summary_tokens": checkpoint.summary_tokens,
                    "removed_messages": removed,
                },
            },
        }

    def _backoff(self, context: dict[str, Any]) -> dict[str, Any]:
        """When the configured summarizer is tried again after one more failure in a row: after
        a doubling number of model calls and seconds (``compaction_backoff_s``)."""
        failures = int((context.get("summarizer_backoff") or {}).get("failures") or 0) + 1
        step = 2 ** min(failures - 1, 5)
        wait_s = self.config.compaction_backoff_s * step
        passes = int(context.get("budget_passes") or 0)
        log.warning(
            "ctx-langgraph: the summarizer %s failed (%d compactions in a row); it is tried "
            "again after %d model calls and %.0fs",
            self.summarizer.id,
            failures,
            step + 1,
            wait_s,
        )
        return {
            "failures": failures,
            "retry_after_pass": passes + 1 + step,
            "retry_at": time.time() + wait_s,
        }

    def _failed(
        self,
        attempt_info: dict[str, Any],
        attempts: int,
        problems: list[str],
        estimate: int,
        backoff: dict[str, Any],
    ) -> dict[str, Any]:
        if estimate > self.budget.usable:  # the fallback failed too: nothing left to try
            raise CompactionFailed(
                attempts=attempts, problems=problems, estimate=estimate, usable=self.budget.usable
            )
        log.warning(
            "ctx-langgraph: compaction failed, proceeding uncompacted (the request fits): %s",
            problems[-1:] or problems,
        )
        failed = {
            **attempt_info,
            "status": "failed",
            "attempts": attempts,
            "problems": problems[-5:],
        }
        return {"context": {"compaction": failed, **backoff}}

    # ------------------------------------------------------------------ sync and async shells

    def _booking(self, request: _Book) -> tuple[str, Any, dict[str, Any]]:
        from ctx_langgraph.usage import normalize_usage

        result = request.result
        usage = normalize_usage(result.usage or {}, provider="openai")
        key = f"openai:compact:{result.response_id or result.created_at}"
        return key, usage, {"scope": request.scope, "purpose": "compaction"}

    def _serve(self, request: _Request) -> Any:
        store = self.store
        if isinstance(request, _ProviderCompact):
            assert self.backend is not None
            return self.backend.compact(request.messages)
        if isinstance(request, _Book):
            assert self.ledger is not None
            key, usage, options = self._booking(request)
            return self.ledger.record(key, usage, **options)
        if isinstance(request, _GetEvent):
            return store.get_event(request.scope, request.event_id)
        if isinstance(request, _Snapshot):
            return store.snapshot(request.scope, request.through_seq)
        if isinstance(request, _Active):
            return store.get_active(request.scope)
        if isinstance(request, _Summarize):
            # (not a `with` block: its exit would wait for a summarizer that hangs)
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
            try:
                # the run's context (its config and callbacks: the ledger handler) goes along,
                # tagged so that the summary is not streamed as if it were the agent's reply
                with not_streamed():
                    run = contextvars.copy_context().run
                future = pool.submit(run, request.summarizer.summarize, request.request)
                try:
                    return future.result(timeout=request.timeout_s)
                except concurrent.futures.TimeoutError:
                    raise TimeoutError(
                        f"summarizer took longer than {request.timeout_s:.1f}s"
                    ) from None
            finally:
                pool.shutdown(wait=False)
        if isinstance(request, _Prune):
            return store.prune_versions(request.scope, keep=request.keep)
        if isinstance(request, _Pending):
            return [v for v in store.list_versions(request.scope) if v.status == "candidate"]
        if isinstance(request, _Create):
            return store.create_candidate(
                request.snapshot,
                summary_text=request.text,
                key_facts=request.document.key_facts,
                first_kept_event_id=request.first_kept_event_id,
                summarizer_id=request.summarizer_id,
                summary_tokens=request.summary_tokens,
                provider_state=request.provider_state,
            )
        return store.commit_candidate(request.candidate)

    async def _aserve(self, request: _Request) -> Any:
        store = self.store
        if isinstance(request, _ProviderCompact):
            assert self.backend is not None
            return await self.backend.acompact(request.messages)
        if isinstance(request, _Book):
            assert self.ledger is not None
            key, usage, options = self._booking(request)
            return await self.ledger.arecord(key, usage, **options)
        if isinstance(request, _GetEvent):
            return await store.aget_event(request.scope, request.event_id)
        if isinstance(request, _Snapshot):
            return await store.asnapshot(request.scope, request.through_seq)
        if isinstance(request, _Active):
            return await store.aget_active(request.scope)
        if isinstance(request, _Summarize):
            try:
                with not_streamed():  # (the task wait_for makes copies this context)
                    pending = asyncio.ensure_future(request.summarizer.asummarize(request.request))
                return await asyncio.wait_for(pending, request.timeout_s)
            except asyncio.TimeoutError:
                raise TimeoutError(
                    f"summarizer took longer than {request.timeout_s:.1f}s"
                ) from None
        if isinstance(request, _Prune):
            return await store.aprune_versions(request.scope, keep=request.keep)
        if isinstance(request, _Pending):
            return [v for v in await store.alist_versions(request.scope) if v.status == "candidate"]
        if isinstance(request, _Create):
            return await store.acreate_candidate(
                request.snapshot,
                summary_text=request.text,
                key_facts=request.document.key_facts,
                first_kept_event_id=request.first_kept_event_id,
                summarizer_id=request.summarizer_id,
                summary_tokens=request.summary_tokens,
                provider_state=request.provider_state,
            )
        return await store.acommit_candidate(request.candidate)

    @staticmethod
    def _precompacting(state: dict[str, Any]) -> dict[str, Any] | None:
        context = state.get("context") or {}
        if (context.get("budget") or {}).get("decision") != "precompact":
            return None
        return {
            "context": {
                "precompaction": {
                    "epoch": int(context.get("projection_epoch", 0)),
                    "status": "started",
                }
            }
        }

    def _background_done(self, outcome: Any) -> None:
        log.debug("ctx-langgraph: background summary candidate: %s", outcome)

    def invoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started = self._precompacting(state)
        if started is not None:

            def build() -> None:
                try:
                    self._background_done(
                        run_flow(self.flow(state, config, commit=False), self._serve)
                    )
                except Exception as exc:  # a background attempt never breaks the run
                    log.warning("ctx-langgraph: background pre-compaction failed: %s", exc)

            run = contextvars.copy_context().run  # the run's config and callbacks go along
            threading.Thread(target=run, args=(build,), name="ctx-precompact", daemon=True).start()
            return started
        return run_flow(self.flow(state, config), self._serve)

    async def ainvoke(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started = self._precompacting(state)
        if started is not None:

            async def build() -> None:
                try:
                    self._background_done(
                        await arun_flow(self.flow(state, config, commit=False), self._aserve)
                    )
                except Exception as exc:
                    log.warning("ctx-langgraph: background pre-compaction failed: %s", exc)

            task = asyncio.get_running_loop().create_task(build())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return started
        return await arun_flow(self.flow(state, config), self._aserve)


def make_compact_node(
    store: HistoryStore,
    *,
    config: ContextConfig | None = None,
    summarizer: Summarizer | None = None,
    model: Any = None,
    counter: TokenCounter | None = None,
    ledger: UsageLedger | None = None,
    name: str = "ctx_compact",
) -> Runnable[Any, Any]:
    """The ``ctx_compact`` node, for ``builder.add_node("ctx_compact", make_compact_node(store, ...))``.

    Route ``ctx_budget`` to it with :func:`~ctx_langgraph.budget.make_budget_router`, and from it
    back to ``ctx_budget`` (the estimate is redone on the compacted view).

    Args:
        store: the history store (the same one ``ctx_budget`` records into).
        config: the same :class:`~ctx_langgraph.config.ContextConfig` as ``ctx_budget``.
        summarizer: an :class:`~ctx_langgraph.compaction.LLMSummarizer` or the offline
            :class:`~ctx_langgraph.compaction.ExtractiveSummarizer` (the default).
        model: the chat model the graph calls (for its window and token counter).
        counter: overrides the counter picked from the model name.
        ledger: where the usage of a provider compaction (``config.compaction_backend``) is
            booked, with purpose ``compaction``.
    """
    node = CompactNode(
        store,
        config or ContextConfig(),
        summarizer or ExtractiveSummarizer(),
        model,
        counter,
        ledger=ledger,
    )
    # LangGraph's own node wrapper: inspects the signature once, not on every call
    return RunnableCallable(node.invoke, node.ainvoke, name=name)
