"""The lookup's reads of the history store, as effects; a store that fails becomes a message
to the model and a warning in the log."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.tools import ToolException

from ctx_langgraph.core.effects import Call, Flow, call
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import HistoryEvent, SearchPage
from ctx_langgraph.history.vectors import RankedHits
from ctx_langgraph.lookup._args import plain_text
from ctx_langgraph.lookup._page import Page, always
from ctx_langgraph.usage.ledger import UsageLedger

__all__ = [
    "CATCH_UP",
    "add_events",
    "catch_up",
    "get_event",
    "next_turn",
    "rank",
    "search",
    "searched_note",
]

log = logging.getLogger("ctx_langgraph.lookup")
T = TypeVar("T")


def store_failed(exc: Exception, what: str) -> ToolException:
    """What the model is told when the store fails (the failure is logged)."""
    log.warning("history lookup: the store failed on %s", what, exc_info=exc)
    if isinstance(exc, ValueError):
        return ToolException(
            f"the history store refused this lookup: {plain_text(str(exc))}. Change the "
            "filter it names, or leave it out."
        )
    return ToolException(
        f"the history lookup failed: the history store could not answer "
        f"({type(exc).__name__}). Try once more with fewer filters, or go on without it."
    )


def _read(effect: Call[T], what: Callable[[], str]) -> Flow[T]:
    try:
        return (yield from effect)
    except Exception as exc:
        raise store_failed(exc, what()) from None


def search(store: HistoryStore, scope: Scope, options: dict[str, Any]) -> Flow[SearchPage]:
    effect = call(store.search, store.asearch, scope, **options)
    return (yield from _read(effect, lambda: f"search {scope} {options!r}"))


def rank(
    store: HistoryStore, scope: Scope, query: str, limit: int, options: dict[str, Any]
) -> Flow[RankedHits]:
    """The events of the branch matching ``query``, best first (at most ``limit``)."""
    effect = call(store.rank, store.arank, scope, query, limit=limit, **options)
    return (yield from _read(effect, lambda: f"rank {scope} {query!r} {options!r}"))


CATCH_UP = 64


def catch_up(store: HistoryStore, scope: Scope) -> Flow[None]:
    """Embed the thread's newest events awaiting a vector before a search by meaning; a
    failure is logged."""
    try:
        yield from call(
            store.embed_pending,
            store.aembed_pending,
            scope,
            limit=CATCH_UP,
            ledger=UsageLedger(store),
        )
    except Exception as exc:
        log.warning("history lookup: embedding before the search failed: %s", exc)


def searched_note(hits: RankedHits) -> str | None:
    """What a page says when its ranking searched some records by words only."""
    if hits.problem:
        return f"by words only: the embedding model failed ({plain_text(hits.problem, 120)})"
    if hits.unembedded:
        return (
            f"by words and meaning; {hits.unembedded} record(s) not indexed by meaning yet "
            "were searched by words only"
        )
    return None


def get_event(store: HistoryStore, scope: Scope, event_id: str) -> Flow[HistoryEvent | None]:
    effect = call(store.get_event, store.aget_event, scope, event_id, include_hidden=False)
    return (yield from _read(effect, lambda: f"get_event {scope} {event_id!r}"))


def add_events(
    store: HistoryStore,
    scope: Scope,
    page: Page,
    seqs: list[int],
    cursor: str | None,
    source: str,
    **how: Any,
) -> Flow[None]:
    """Add the events at ``seqs`` whole, unless the page or the current turn has them."""
    for seq in seqs:
        try:
            found = yield from call(
                store.read_events, store.aread_events, scope, from_seq=seq, to_seq=seq
            )
        except Exception as exc:
            log.warning("history lookup: event %d of %s not read: %s", seq, source, exc)
            continue
        for event in found:
            if event.event_id in page.in_context or page.index_of(event.event_id) is not None:
                continue
            page.add(event, 0, always(cursor), whole=True, **how)


def next_turn(store: HistoryStore, scope: Scope, event: HistoryEvent) -> Flow[HistoryEvent | None]:
    """The visible event just after ``event`` in the branch, whatever the filters."""
    after = yield from search(store, scope, {"min_seq": event.seq + 1, "limit": 1})
    return after.hits[0] if after.hits else None
