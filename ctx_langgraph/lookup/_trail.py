"""A query naming an artifact: its entry of the summary's artifact trail, and the events of its
state and latest touch as hits, on a query's first page (docs/design.md §8).
"""

from __future__ import annotations

from typing import Any, Final

from ctx_langgraph.compaction.trail import ArtifactEntry, ArtifactTrail
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.lookup._page import Page
from ctx_langgraph.lookup._reads import add_events, log

__all__ = ["MAX_ENTRIES", "shown_entry", "trail_flow"]

MAX_ENTRIES: Final = 3
EVENTS_PER_ENTRY: Final = 2


def shown_entry(entry: ArtifactEntry) -> dict[str, Any]:
    """An entry as a page shows it."""
    shown: dict[str, Any] = {
        "artifact": entry.artifact,
        "kind": entry.kind,
        "touches": [f"{action} {seq}" for seq, action in entry.touches],
    }
    if entry.state is not None:
        shown["state"] = entry.state
        shown["state_seq"] = entry.state_seq
    return shown


def _pointed_seqs(entry: ArtifactEntry) -> list[int]:
    seqs = [entry.state_seq] if entry.state_seq is not None else []
    seqs += [seq for seq, _ in reversed(entry.touches) if seq not in seqs]
    return seqs[:EVENTS_PER_ENTRY]


def trail_flow(
    store: HistoryStore, scope: Scope, queries: tuple[str, ...], page: Page, cursor: str | None
) -> Flow[None]:
    """Put the entries ``queries`` name, and their events, on ``page`` (nothing when the store
    cannot say)."""
    try:
        active = yield from call(store.get_active, store.aget_active, scope)
    except Exception as exc:
        log.warning("history lookup: the artifact trail could not be read: %s", exc)
        return
    entries = ArtifactTrail.from_checkpoint(active).find(queries)[:MAX_ENTRIES]
    while entries:
        page.artifacts = [shown_entry(e) for e in entries]
        if page.counter.count_text(page.render(page.records, cursor)) <= page.max_tokens:
            break
        entries = entries[:-1]
    else:
        page.artifacts = None
        return
    for entry in entries:
        yield from add_events(
            store, scope, page, _pointed_seqs(entry), cursor, "the trail", hit=True
        )
