"""A query naming an artifact: its entry of the active summary's artifact trail, and the events
the entry points to (docs/design.md §8).

The trail (:mod:`ctx_langgraph.compaction.trail`) says where a file, URL, id or command was
created, read, changed or mentioned, and its last known state. A first page of a query that
names one (the artifact is in the query, or a path-like word of the query is part of it) shows
the entry under ``artifacts`` and, as hits ahead of the ranking's, the events of its state and
of its latest touch. Later pages (a cursor) go on with the ranking alone.
"""

from __future__ import annotations

from typing import Any, Final

from ctx_langgraph.compaction.trail import ArtifactEntry, ArtifactTrail
from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.lookup._page import Page, always
from ctx_langgraph.lookup._reads import log

__all__ = ["MAX_ENTRIES", "shown_entry", "trail_flow"]

MAX_ENTRIES: Final = 3
"""Trail entries a page shows at most (the most recently touched first)."""
EVENTS_PER_ENTRY: Final = 2
"""Events of an entry a page shows: its state's and its latest touch's."""


def shown_entry(entry: ArtifactEntry) -> dict[str, Any]:
    """An entry as a page shows it: the artifact, what was done at which seqs, its state."""
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
    """Put the entries ``queries`` name, and their events, on ``page`` (nothing when none is
    named, or when the store cannot say: the ranking answers all the same)."""
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
        entries = entries[:-1]  # the oldest touched leaves room for the rest
    else:
        page.artifacts = None
        return
    for entry in entries:
        for seq in _pointed_seqs(entry):
            try:
                found = yield from call(
                    store.read_events, store.aread_events, scope, from_seq=seq, to_seq=seq
                )
            except Exception as exc:
                log.warning("history lookup: event %d of the trail not read: %s", seq, exc)
                continue
            for event in found:
                if event.event_id in page.in_context or page.index_of(event.event_id) is not None:
                    continue
                page.add(event, 0, always(cursor), hit=True, whole=True)
