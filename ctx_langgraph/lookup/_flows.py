"""The lookup, written once: flows that yield the store's ``search`` / ``get_event`` calls.

They run synchronously with :func:`ctx_langgraph.core.effects.run` and asynchronously with
:func:`~ctx_langgraph.core.effects.arun` (which awaits ``asearch`` / ``aget_event``). What the
lookup may read is fixed by the run, never by the model: the thread and tenant come from
``config["configurable"]`` and the branch from the graph state's ``context["branch"]`` (or
``configurable["ctx_branch"]``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException
from langgraph.prebuilt import ToolRuntime

from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope, scope_from_config
from ctx_langgraph.core.stopwords import STOPWORDS
from ctx_langgraph.core.text import query_terms
from ctx_langgraph.errors import ScopeError
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import HistoryEvent, SearchPage
from ctx_langgraph.lookup._args import (
    Filters,
    LookupArgs,
    event_id_of,
    filters_of,
    handle_of,
    plain_text,
    resumed,
)
from ctx_langgraph.lookup._cursors import HandleCursor, RankedCursor, SearchCursor, read_cursor
from ctx_langgraph.lookup._page import Page, always, too_small

# the tool's logger (its package's name), whichever of its modules logs
log = logging.getLogger("ctx_langgraph.lookup")

_RANK_FETCH = 100
"""Ranked search: hits read per word; a word with more is common and weighs little."""
RANKED_NOTE = (
    "No record contains every word of the query; these records contain some of its words, "
    "those with the most and rarest words first."
)


# --------------------------------------------------------------------------- the run's scope


def _state_context(runtime: object) -> Mapping[str, Any] | None:
    """The graph state's ``context`` channel, when the tool runs inside a graph."""
    if not isinstance(runtime, ToolRuntime):  # a value passed in the arguments: never trusted
        return None
    state = runtime.state
    context = (
        state.get("context") if isinstance(state, Mapping) else getattr(state, "context", None)
    )
    return context if isinstance(context, Mapping) else None


def _current_turn(runtime: object) -> frozenset[str]:
    """Ids of the current turn's messages in the graph state: the last user message and what
    followed it. They are the request that asked (a search for its words finds it first)."""
    if not isinstance(runtime, ToolRuntime) or not isinstance(runtime.state, Mapping):
        return frozenset()
    messages = [m for m in runtime.state.get("messages") or () if isinstance(m, BaseMessage)]
    start = max((i for i, m in enumerate(messages) if m.type == "human"), default=0)
    return frozenset(str(m.id) for m in messages[start:] if m.id)


def _run_scope(config: RunnableConfig | None, runtime: object) -> Scope:
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id"):
        raise ToolException(
            "the history lookup is not available in this run: it has no thread_id. The "
            'application must run the graph with config={"configurable": {"thread_id": ...}}.'
        )
    context = _state_context(runtime)
    try:
        return scope_from_config(config, dict(context) if context is not None else None)
    except ScopeError as exc:
        raise ToolException(
            f"the history lookup cannot tell which history to read: {exc}"
        ) from None


# --------------------------------------------------------------------------- the store's answers


def _store_failed(exc: Exception, what: str) -> ToolException:
    """What the model is told when the store fails (a refused value, a database error): a
    message instead of the end of the run; the failure is logged."""
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


def _search(store: HistoryStore, scope: Scope, options: dict[str, Any]) -> Flow[SearchPage]:
    try:
        page: SearchPage = yield call(store, "search", scope, **options)
    except Exception as exc:
        raise _store_failed(exc, f"search {scope} {options!r}") from None
    return page


def _get_event(store: HistoryStore, scope: Scope, event_id: str) -> Flow[HistoryEvent | None]:
    try:
        event: HistoryEvent | None = yield call(
            store, "get_event", scope, event_id, include_hidden=False
        )
    except Exception as exc:
        raise _store_failed(exc, f"get_event {scope} {event_id!r}") from None
    return event


# --------------------------------------------------------------------------- flows


def _search_flow(
    store: HistoryStore, scope: Scope, filters: Filters, after_seq: int | None, page: Page
) -> Flow[str]:
    previous: str | None = None  # the cursor after the page's last record
    first = after_seq is None
    while True:
        hits = yield from _search(store, scope, filters.search_options(after_seq))
        shown = [event for event in hits.hits if event.event_id not in page.in_context]
        if first and not shown and not hits.has_more and len(_ranked_terms(filters.query)) > 1:
            return (yield from _ranked_flow(store, scope, filters, 0, page))
        first = False
        for index, event in enumerate(hits.hits):
            if event.event_id in page.in_context:  # the model has it already
                after_seq = event.seq
                continue
            cursor = SearchCursor(filters, event.seq).encode()
            added = page.add(event, 0, always(cursor))
            if added is None:  # no room left: the next page starts with this hit
                if previous is None:
                    raise too_small(page.max_tokens)
                return page.render(page.records, previous)
            after_seq, previous = event.seq, cursor
            if "cut" in added[0]:  # the page is full
                last = index == len(hits.hits) - 1 and not hits.has_more
                return page.render(page.records, None if last else cursor)
        if not hits.has_more:
            return page.render(page.records, None)


def _ranked_terms(query: str | None) -> list[str]:
    """The distinct words a ranked search weighs: the query's, without glue words."""
    return list(dict.fromkeys(t for t in query_terms(query or "") if t not in STOPWORDS))


def _ranked_flow(
    store: HistoryStore, scope: Scope, filters: Filters, skip: int, page: Page
) -> Flow[str]:
    """No event has every word: rank the events having any by the words they have.

    One search per word (the same filters); a word's weight is ``log(1 + n / hits)`` with ``n``
    the newest seq seen, so rare words count most and a word found in many events (over
    ``_RANK_FETCH``) barely counts. The ranking is the same on every call (ties in this lookup's
    seq order), so a cursor is how many records were already served.
    """
    found: dict[str, HistoryEvent] = {}
    hits_per_term: dict[str, int] = {}
    for term in _ranked_terms(filters.query):
        options = {**filters.search_options(None), "query": term, "limit": _RANK_FETCH}
        hits = yield from _search(store, scope, options)
        hits_per_term[term] = len(hits.hits) * (4 if hits.has_more else 1)
        for event in hits.hits:
            if event.event_id not in page.in_context:
                found.setdefault(event.event_id, event)
    newest = max((event.seq for event in found.values()), default=1)
    weight = {t: math.log1p(newest / n) for t, n in hits_per_term.items() if n}

    def score(event: HistoryEvent) -> float:
        return sum(weight.get(t, 0.0) for t in set(query_terms(event.text)) & weight.keys())

    order = -1 if filters.newest_first else 1
    ranked = sorted(found.values(), key=lambda e: (-score(e), order * e.seq))
    return _ranked_page(ranked, filters, skip, page)


def _ranked_page(ranked: list[HistoryEvent], filters: Filters, skip: int, page: Page) -> str:
    """The page of the ranking past its first ``skip`` records."""
    page.note = RANKED_NOTE
    served = skip
    for event in ranked[skip:]:
        cursor = RankedCursor(filters, served + 1).encode()
        last = served + 1 == len(ranked)
        added = page.add(event, 0, always(None if last else cursor))
        if added is None:
            if served == skip:
                raise too_small(page.max_tokens)
            return page.render(page.records, RankedCursor(filters, served).encode())
        served += 1
        if "cut" in added[0]:
            return page.render(page.records, None if last else cursor)
    return page.render(page.records, None)


def _handle_flow(
    store: HistoryStore, scope: Scope, event_id: str, cursor: HandleCursor | None, page: Page
) -> Flow[str]:
    event = yield from _get_event(store, scope, event_id)
    if event is None:
        raise ToolException(
            f"no record {handle_of(event_id)} in this conversation's history (it may have "
            "been deleted or hidden)."
        )
    start = 0
    if cursor is not None:
        if cursor.revision != event.revision:
            raise ToolException(
                f"record {handle_of(event_id)} changed since this cursor was given: read it "
                "again from the start (pass the handle without cursor)."
            )
        if cursor.offset > len(event.text):
            raise ToolException(
                f"the cursor points past the end of record {handle_of(event_id)}: pass the "
                "handle without cursor to read it from the start."
            )
        start = cursor.offset

    def next_cursor(end: int) -> str | None:
        return (
            HandleCursor(event_id, end, event.revision).encode() if end < len(event.text) else None
        )

    added = page.add(event, start, next_cursor)
    if added is None or (added[1] == start < len(event.text)):
        raise too_small(page.max_tokens)
    return page.render(page.records, next_cursor(added[1]))


def lookup_flow(
    store: HistoryStore,
    args: LookupArgs,
    config: RunnableConfig | None,
    runtime: object,
    page: Page,
) -> Flow[str]:
    """One lookup: the run's scope, then a record's text (``handle``) or a search's page."""
    scope = _run_scope(config, runtime)
    page.in_context = _current_turn(runtime)
    cursor = read_cursor(args.cursor) if args.cursor and args.cursor.strip() else None
    if args.handle is not None and args.handle.strip():
        event_id = event_id_of(args.handle)
        if isinstance(cursor, SearchCursor | RankedCursor):
            raise ToolException(
                "this cursor continues a search, not a handle: pass the handle alone, or the "
                "cursor without the handle."
            )
        if cursor is not None and cursor.event_id != event_id:
            raise ToolException(
                f"this cursor reads record {handle_of(cursor.event_id)}, not "
                f"{handle_of(event_id)}: pass the matching handle, or the cursor alone."
            )
        return (yield from _handle_flow(store, scope, event_id, cursor, page))
    if isinstance(cursor, HandleCursor):
        return (yield from _handle_flow(store, scope, cursor.event_id, cursor, page))
    filters = filters_of(args)
    if isinstance(cursor, RankedCursor):
        saved = resumed(cursor.filters, filters)
        return (yield from _ranked_flow(store, scope, saved, cursor.skip, page))
    if cursor is None:
        return (yield from _search_flow(store, scope, filters, None, page))
    saved = resumed(cursor.filters, filters)
    return (yield from _search_flow(store, scope, saved, cursor.after_seq, page))
