"""The store steps of ``ctx_compact``: snapshot, candidate, compare-and-swap commit, and the
provider's own window (docs/design.md §6)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from ctx_langgraph.compaction.format import SummaryDocument
from ctx_langgraph.compaction.span import Span
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.errors import (
    CompactionConflict,
    CoverageUnavailable,
    ProviderCompactionError,
    StaleCandidate,
)
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import CompactionCheckpoint, CoverageSnapshot
from ctx_langgraph.providers import OPENAI_RESPONSES, CompactionBackend, ProviderCompaction
from ctx_langgraph.state import CompactionReport, ServerCompaction
from ctx_langgraph.usage.ledger import UsageLedger
from ctx_langgraph.usage.normalize import normalize_usage

__all__ = [
    "ProviderWindow",
    "commit_candidate",
    "commit_precomputed",
    "create_candidate",
    "take_snapshot",
]

log = logging.getLogger(__name__)


def commit_precomputed(
    store: HistoryStore,
    scope: Scope,
    messages: Sequence[BaseMessage],
    active: CompactionCheckpoint | None,
    problems: list[str],
) -> Flow[CompactionCheckpoint | None]:
    """A candidate pre-built in the background on this summary, committed if still valid."""
    versions = yield from call(store.list_versions, store.alist_versions, scope)
    view_ids = {m.id for m in messages}
    for early in (v for v in versions if v.status == "candidate"):
        if (
            early.parent_id == (active.id if active else None)
            and early.first_kept_event_id in view_ids
        ):
            try:
                committed = yield from call(store.commit_candidate, store.acommit_candidate, early)
            except (CompactionConflict, StaleCandidate) as exc:
                problems.append(f"precomputed: {type(exc).__name__}"[:300])
                continue
            return committed
    return None


def take_snapshot(
    store: HistoryStore, scope: Scope, through_seq: int
) -> Flow[CoverageSnapshot | CompactionCheckpoint]:
    """A fixed snapshot of the span, or the newer active summary that covers it already."""
    try:
        snapshot = yield from call(store.snapshot, store.asnapshot, scope, through_seq)
    except CoverageUnavailable:
        newer = yield from call(store.get_active, store.aget_active, scope)
        if newer is None or newer.covered_through_seq < through_seq:
            raise
        return newer
    return snapshot


def create_candidate(
    store: HistoryStore,
    snapshot: CoverageSnapshot,
    text: str,
    active: CompactionCheckpoint | None,
    span: Span,
    summarizer_id: str,
    summary_tokens: int,
    provider_state: dict[str, Any] | None,
    metadata: dict[str, Any] | None = None,
) -> Flow[CompactionCheckpoint]:
    """The candidate checkpoint of the new summary, stored (not yet active)."""
    # the text carries seqs only: restore each key fact's event id
    event_ids = {
        f.source_seq: f.source_event_id
        for f in (active.key_facts if active else ())
        if f.source_event_id
    }
    event_ids.update({e.seq: e.event_id for e in snapshot.events})
    document = SummaryDocument.parse(text)
    for seq in sorted({f.source_seq for f in document.key_facts} - set(event_ids)):
        found = yield from call(
            store.read_events,
            store.aread_events,
            snapshot.scope,
            from_seq=seq,
            to_seq=seq,
            include_hidden=True,
        )
        event_ids.update({e.seq: e.event_id for e in found})
    document = document.with_event_ids(event_ids)
    candidate = yield from call(
        store.create_candidate,
        store.acreate_candidate,
        snapshot,
        summary_text=text,
        key_facts=document.key_facts,
        first_kept_event_id=span.first_kept_id,
        summarizer_id=summarizer_id,
        summary_tokens=summary_tokens,
        format_version=document.version,
        provider_state=provider_state,
        metadata=metadata,
    )
    return candidate


def commit_candidate(
    store: HistoryStore, candidate: CompactionCheckpoint, problems: list[str]
) -> Flow[CompactionCheckpoint | None]:
    """The compare-and-swap: the committed checkpoint, or None (the problem noted)."""
    try:
        committed = yield from call(store.commit_candidate, store.acommit_candidate, candidate)
    except (CompactionConflict, StaleCandidate) as exc:
        problems.append(f"{type(exc).__name__}: {exc}"[:300])
        return None
    return committed


@dataclass(frozen=True)
class ProviderWindow:
    """The provider's own window for the span, kept next to the readable summary."""

    model: Any
    provider: str | None
    backend: CompactionBackend | None
    ledger: UsageLedger | None

    def state(
        self,
        scope: Scope,
        messages: Sequence[BaseMessage],
        span: Span,
        server: ServerCompaction | None,
        info: CompactionReport,
    ) -> Flow[dict[str, Any] | None]:
        """The item a server-side compaction put in a reply, or the compact endpoint's window
        (None on a provider failure)."""
        if span.kind == "server":
            assert server is not None
            item = dict(server.get("item") or {})
            made_by = server.get("provider") or OPENAI_RESPONSES
            model = str(server.get("model") or getattr(self.model, "model_name", None) or "")
            tokens = server.get("item_tokens")
            usage = {"output_tokens": tokens} if isinstance(tokens, int) else None
            result = ProviderCompaction(made_by, "server", model, [item], usage=usage)
            info["provider"] = {"kind": "server", "status": "recorded", "provider": made_by}
            return {**result.state(), "in_message": server.get("message_id")}
        backend = self.backend
        if backend is None or backend.provider != self.provider or span.cut is None:
            return None
        window = [m for m in messages[: span.cut.index] if m.type != "system"]
        try:
            compacted = yield from call(backend.compact, backend.acompact, window)
        except ProviderCompactionError as exc:
            log.warning("ctx-langgraph: %s; the readable summary stands alone", exc)
            info["provider"] = {"status": "failed", "error": str(exc)[:300]}
            return None
        info["provider"] = {
            "kind": compacted.kind,
            "status": "compacted",
            "window_items": len(compacted.window),
            "response_id": compacted.response_id,
        }
        if compacted.usage is not None and self.ledger is not None:
            yield from self._book(self.ledger, scope, compacted)
        return compacted.state()

    def _book(self, ledger: UsageLedger, scope: Scope, result: ProviderCompaction) -> Flow[None]:
        usage = normalize_usage(result.usage or {}, provider="openai")
        key = f"openai:compact:{result.response_id or result.created_at}"
        yield from call(
            ledger.record, ledger.arecord, key, usage, scope=scope, purpose="compaction"
        )
