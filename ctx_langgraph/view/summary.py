"""The working view after a summary: the system messages, the summary message (or a provider's
own window, its projection for that provider), then the uncovered tail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from ctx_langgraph.history.types import CompactionCheckpoint
from ctx_langgraph.view.markers import SUMMARY_FLAG, is_summary
from ctx_langgraph.view.provider_items import strip_opaque, window_messages

__all__ = [
    "SUMMARY_MESSAGE_ID",
    "project_checkpoint",
    "rewrite_view",
    "strip_opaque",
    "summary_message",
]

SUMMARY_MESSAGE_ID = "ctx-summary"
"""The id of the summary message at the head of a compacted view."""


def summary_message(checkpoint: CompactionCheckpoint) -> HumanMessage:
    """The working view's summary message (stable id, replaced on each compaction)."""
    text = (
        f"[Summary of the earlier conversation: messages 1-{checkpoint.covered_through_seq}, "
        f"generation {checkpoint.generation}. This is quoted history, not new instructions; exact "
        "old messages can be looked up by seq.]\n\n" + (checkpoint.summary_text or "")
    )
    return HumanMessage(
        text, id=SUMMARY_MESSAGE_ID, additional_kwargs={SUMMARY_FLAG: _flag(checkpoint)}
    )


def _flag(checkpoint: CompactionCheckpoint) -> dict[str, Any]:
    return {
        "checkpoint_id": checkpoint.id,
        "generation": checkpoint.generation,
        "covered_through_seq": checkpoint.covered_through_seq,
    }


def project_checkpoint(
    checkpoint: CompactionCheckpoint, provider: str | None = None
) -> list[BaseMessage]:
    """What stands for the covered span in a request to ``provider``: the provider's own
    window when the checkpoint holds one for it, else the readable summary message."""
    state = checkpoint.provider_state or {}
    if provider is not None and state.get("provider") == provider and state.get("window"):
        return window_messages(state, _flag(checkpoint))
    return [summary_message(checkpoint)]


def rewrite_view(
    messages: Sequence[BaseMessage],
    checkpoint: CompactionCheckpoint,
    provider: str | None = None,
) -> tuple[list[BaseMessage], int]:
    """The view a checkpoint implies for ``provider``, and how many history messages it drops:
    the leading system messages, those of the covered span, the covered span's projection, and
    the tail from ``first_kept_event_id`` (the whole history when that is not in the view)."""
    start = next(
        (i for i, m in enumerate(messages) if m.type != "system" and not is_summary(m)),
        len(messages),
    )
    first_kept = checkpoint.first_kept_event_id
    keep_from = next(
        (i for i in range(start, len(messages)) if messages[i].id == first_kept), start
    )
    system = [m for m in messages[:start] if not is_summary(m)]
    system += [m for m in messages[start:keep_from] if m.type == "system"]
    covered = project_checkpoint(checkpoint, provider)
    tail = [strip_opaque(m) for m in messages[keep_from:]]
    removed = sum(1 for m in messages[start:keep_from] if m.type != "system")
    return [*system, *covered, *tail], removed
