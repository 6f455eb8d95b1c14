"""The lookup, written once as flows of the store's calls: a record's text (``handle``), a
ranking's page (``query``) or the records in seq order, in the run's own scope.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException

from ctx_langgraph.core.effects import Flow
from ctx_langgraph.core.scope import Scope, scope_from_config
from ctx_langgraph.errors import ScopeError
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.lookup._args import (
    Filters,
    LookupArgs,
    event_id_of,
    filters_of,
    handle_of,
    resumed,
)
from ctx_langgraph.lookup._cursors import HandleCursor, RankedCursor, SearchCursor, read_cursor
from ctx_langgraph.lookup._page import Page, always, too_small
from ctx_langgraph.lookup._ranked import ranked_flow
from ctx_langgraph.lookup._reads import get_event, search
from ctx_langgraph.lookup._state import current_turn, state_context

SEQ_ORDER = "oldest first"
NEWEST_ORDER = "newest first"


def _run_scope(config: RunnableConfig | None, runtime: object) -> Scope:
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id"):
        raise ToolException(
            "the history lookup is not available in this run: it has no thread_id. The "
            'application must run the graph with config={"configurable": {"thread_id": ...}}.'
        )
    context = state_context(runtime)
    try:
        return scope_from_config(config, dict(context) if context is not None else None)
    except ScopeError as exc:
        raise ToolException(
            f"the history lookup cannot tell which history to read: {exc}"
        ) from None


def _seq_flow(
    store: HistoryStore, scope: Scope, filters: Filters, after_seq: int | None, page: Page
) -> Flow[str]:
    """The records past ``after_seq`` in seq order (or newest first)."""
    page.order = NEWEST_ORDER if filters.newest_first else SEQ_ORDER
    previous: str | None = None
    while True:
        hits = yield from search(store, scope, filters.search_options(after_seq))
        for index, event in enumerate(hits.hits):
            if event.event_id in page.in_context:
                after_seq = event.seq
                continue
            cursor = SearchCursor(filters, event.seq).encode()
            added = page.add(event, 0, always(cursor))
            if added is None:
                if previous is None:
                    raise too_small(page)
                return page.render(page.records, previous)
            after_seq, previous = event.seq, cursor
            if added[1] < len(event.text):
                last = index == len(hits.hits) - 1 and not hits.has_more
                return page.render(page.records, None if last else cursor)
        if not hits.has_more:
            return page.render(page.records, None)


def _handle_flow(
    store: HistoryStore, scope: Scope, event_id: str, cursor: HandleCursor | None, page: Page
) -> Flow[str]:
    event = yield from get_event(store, scope, event_id)
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
        raise too_small(page)
    return page.render(page.records, next_cursor(added[1]))


def lookup_flow(
    store: HistoryStore,
    args: LookupArgs,
    config: RunnableConfig | None,
    runtime: object,
    page: Page,
) -> Flow[str]:
    """One lookup: a record's text (``handle``), a ranking's page or the records in seq order."""
    scope = _run_scope(config, runtime)
    page.in_context = current_turn(runtime)
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
        return (yield from ranked_flow(store, scope, saved, cursor.skip, page))
    if isinstance(cursor, SearchCursor):
        saved = resumed(cursor.filters, filters)
        return (yield from _seq_flow(store, scope, saved, cursor.after_seq, page))
    if filters.query:
        return (yield from ranked_flow(store, scope, filters, 0, page))
    return (yield from _seq_flow(store, scope, filters, None, page))
