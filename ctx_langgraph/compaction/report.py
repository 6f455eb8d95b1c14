"""The report step of ``ctx_compact``: the state update each outcome leaves (a commit rewrites
the view; the others only say what happened in ``context["compaction"]``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ctx_langgraph.compaction.summarize import Attempts
from ctx_langgraph.compaction.trail import ArtifactTrail
from ctx_langgraph.errors import CompactionFailed
from ctx_langgraph.history.types import CompactionCheckpoint
from ctx_langgraph.state import CompactionReport, FlatContext, SummarizerBackoff, unpack
from ctx_langgraph.view.summary import rewrite_view

__all__ = [
    "failed",
    "next_backoff",
    "not_recorded",
    "nothing_to_cover",
    "precompacting",
    "refused",
    "rewritten",
    "served",
]

log = logging.getLogger(__name__)


def nothing_to_cover(info: CompactionReport, *, rebuild: bool = False) -> dict[str, Any]:
    """No cut in the view (and, for a rebuild, no history before it)."""
    context: FlatContext = {"compaction": {**info, "status": "nothing_to_cover"}}
    if rebuild:
        context = {"rebuild": False, **context}
    return {"context": context}


def refused(info: CompactionReport) -> dict[str, Any]:
    """A malformed compaction request: cleared, and why in ``context["compaction"]``."""
    context: FlatContext = {"compact": None, "compaction": {**info, "status": "refused"}}
    return {"context": context}


def served(update: dict[str, Any]) -> dict[str, Any]:
    """Any outcome of a requested compaction clears the request: it is served once."""
    context: dict[str, Any] = {**update.get("context", {}), "compact": None}
    return {**update, "context": context}


def not_recorded(info: CompactionReport, message_id: object) -> dict[str, Any]:
    """The last covered message is not in the history store: nothing can be covered yet."""
    error = f"message {message_id!r} is not in the history store"
    report: CompactionReport = {**info, "status": "not_recorded", "error": error}
    context: FlatContext = {"compaction": report}
    return {"context": context}


def rewritten(
    messages: Sequence[BaseMessage],
    checkpoint: CompactionCheckpoint,
    provider: str | None,
    epoch: int,
    info: CompactionReport,
    status: str,
) -> dict[str, Any]:
    """The state after a commit: system prompt + summary message + the uncovered tail."""
    view, removed = rewrite_view(messages, checkpoint, provider)
    context: FlatContext = {
        "projection_epoch": epoch + 1,
        "baseline": None,
        "rebuild": False,
        "server_compaction": None,
        "projected_for": provider,
        "active_checkpoint_id": checkpoint.id,
        "active_generation": checkpoint.generation,
        "covered_through_seq": checkpoint.covered_through_seq,
        "artifacts": ArtifactTrail.from_checkpoint(checkpoint).report(),
        "compaction": {
            **info,
            "status": status,
            "generation": checkpoint.generation,
            "covered_through_seq": checkpoint.covered_through_seq,
            "summary_tokens": checkpoint.summary_tokens,
            "removed_messages": removed,
        },
    }
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *view], "context": context}


def next_backoff(context: FlatContext, backoff_s: float, summarizer_id: str) -> SummarizerBackoff:
    """When the summarizer is tried again after one more failure in a row (doubling)."""
    last = context.get("summarizer_backoff")
    failures = int((last.get("failures") if last else 0) or 0) + 1
    step = 2 ** min(failures - 1, 5)
    wait_s = backoff_s * step
    passes = int(context.get("budget_passes") or 0)
    log.warning(
        "ctx-langgraph: the summarizer %s failed (%d compactions in a row); it is tried "
        "again after %d model calls and %.0fs",
        summarizer_id,
        failures,
        step + 1,
        wait_s,
    )
    return {
        "failures": failures,
        "retry_after_pass": passes + 1 + step,
        "retry_at": time.time() + wait_s,
    }


def failed(run: Attempts, estimate: int, usable: int, backoff: FlatContext) -> dict[str, Any]:
    """Every try failed: proceed uncompacted when the request fits, else raise.

    Raises:
        CompactionFailed: the request is over the usable window (the fallback failed too).
    """
    if estimate > usable:
        raise CompactionFailed(
            attempts=run.count, problems=run.problems, estimate=estimate, usable=usable
        )
    log.warning(
        "ctx-langgraph: compaction failed, proceeding uncompacted (the request fits): %s",
        run.problems[-1:] or run.problems,
    )
    report: CompactionReport = {
        **run.info,
        "status": "failed",
        "attempts": run.count,
        "problems": run.problems[-5:],
    }
    context: FlatContext = {"compaction": report, **backoff}
    return {"context": context}


def precompacting(state: dict[str, Any]) -> dict[str, Any] | None:
    """The update that says a background pre-compaction started (None: no pre-compaction)."""
    context = unpack(state.get("context"))
    if (context.get("budget") or {}).get("decision") != "precompact":
        return None
    epoch = int(context.get("projection_epoch", 0))
    started: FlatContext = {"precompaction": {"epoch": epoch, "status": "started"}}
    return {"context": started}
