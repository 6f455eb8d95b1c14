"""A lookup with a query: the store's ranking with matching passages raised, several queries
fused (reciprocal rank), each hit served with the turn after it, in seq order (design §8).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctx_langgraph.core.effects import Flow
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.core.text import rank_terms, rank_tokens
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import HistoryEvent, RankedHit
from ctx_langgraph.lookup._args import Filters
from ctx_langgraph.lookup._cursors import RankedCursor
from ctx_langgraph.lookup._page import Page, always, too_small
from ctx_langgraph.lookup._reads import catch_up, next_turn, rank, searched_note
from ctx_langgraph.lookup._segments import segment_flow
from ctx_langgraph.lookup._trail import trail_flow

__all__ = ["RANKED_ORDER", "focus", "fuse", "passages", "ranked_flow"]

RANKED_ORDER = 'the best matches, oldest first; each "hit" followed by the turn after it'
RANK_FETCH = 30
PASSAGE_DEPTH = 60
PASSAGE_WEIGHT = 0.3
FUSED_DEPTH = 50
RRF_K = 60
NEIGHBOUR_ROOM = 24
CHARS_PER_TOKEN = 3


def focus(text: str, stems: Sequence[str], shown_chars: int) -> int:
    """Where to show a hit too long to show whole from: its first line holding the most of
    ``stems``, or 0 when that is within ``shown_chars`` or no line beats the first."""
    wanted = set(stems)
    best, best_score, offset = 0, 0, 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        score = len(wanted.intersection(rank_tokens(line)))
        if score > best_score:
            best, best_score = (0 if number == 0 else offset), score
        offset += len(line)
    return best if best > shown_chars else 0


def fuse(rankings: Sequence[Sequence[HistoryEvent]]) -> list[HistoryEvent]:
    """Several rankings as one by reciprocal-rank fusion; ties go to the better single rank,
    the earlier query, then the newer event."""
    score: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    events: dict[str, HistoryEvent] = {}
    for query, ranking in enumerate(rankings):
        for position, event in enumerate(ranking, start=1):
            key = event.event_id
            score[key] = score.get(key, 0.0) + 1.0 / (RRF_K + position)
            best[key] = min(best.get(key, (position, query)), (position, query))
            events.setdefault(key, event)
    order = sorted(events, key=lambda key: (-score[key], best[key], -events[key].seq))
    return [events[key] for key in order]


def passages(hits: Sequence[RankedHit]) -> list[HistoryEvent]:
    """The ranking's events with passages raised: each of the first :data:`PASSAGE_DEPTH` hits
    gains :data:`PASSAGE_WEIGHT` times its better neighbour's score; ties go newest first."""
    head = hits[:PASSAGE_DEPTH]
    scores = {hit.event.seq: hit.score for hit in head}

    def raised(hit: RankedHit) -> tuple[float, int]:
        seq = hit.event.seq
        near = max(scores.get(seq - 1, 0.0), scores.get(seq + 1, 0.0))
        return -(hit.score + PASSAGE_WEIGHT * near), -seq

    return [hit.event for hit in sorted(head, key=raised)] + [
        hit.event for hit in hits[len(head) :]
    ]


def _ranking(
    store: HistoryStore, scope: Scope, filters: Filters, wanted: int, page: Page
) -> Flow[tuple[list[HistoryEvent], bool]]:
    """The ranking's first ``wanted`` hits or more, and whether that is all of it."""
    options = {**filters.rank_options(), "mode": page.mode}
    if len(filters.query) == 1:
        limit = max(wanted, PASSAGE_DEPTH)
        hits = yield from rank(store, scope, filters.query[0], limit, options)
        page.searched = searched_note(hits)
        return passages(hits), len(hits) < limit
    rankings = []
    for query in filters.query:
        hits = yield from rank(store, scope, query, max(FUSED_DEPTH, PASSAGE_DEPTH), options)
        page.searched = page.searched or searched_note(hits)
        rankings.append(passages(hits)[:FUSED_DEPTH])
    return fuse(rankings), True


def _with_next_turn(
    store: HistoryStore, scope: Scope, page: Page, hit: HistoryEvent, cursor: str | None
) -> Flow[None]:
    """Add the turn after the hit, whole, right after it, unless the page has it already."""
    if page.max_tokens - page.tokens < NEIGHBOUR_ROOM:
        return
    after = yield from next_turn(store, scope, hit)
    if after is None or after.event_id in page.in_context:
        return
    if page.index_of(after.event_id) is None:
        at = page.ids.index(hit.event_id) + 1
        page.add(after, 0, always(cursor), at=at, whole=True)


def _serve(
    store: HistoryStore,
    scope: Scope,
    page: Page,
    hit: HistoryEvent,
    cursor: str | None,
    stems: Sequence[str],
) -> Flow[bool | None]:
    """Put a hit on the page with the turn after it: True when whole, False when cut (the page
    is full), None when left to the next page."""
    index = page.index_of(hit.event_id)
    if index is not None:
        if not page.mark_hit(index, cursor):
            return None
    else:
        room = CHARS_PER_TOKEN * max(0, page.max_tokens - page.tokens)
        start = focus(hit.text, stems, room // 2) if len(hit.text) > room else 0
        added = page.add(hit, start, always(cursor), hit=True)
        if added is None:
            return None
        if added[1] < len(hit.text):
            return False
    yield from _with_next_turn(store, scope, page, hit, cursor)
    return True


def ranked_flow(
    store: HistoryStore, scope: Scope, filters: Filters, skip: int, page: Page
) -> Flow[str]:
    """The page of the ranking past its first ``skip`` hits; hits of the current turn are
    passed over but counted."""
    page.order, page.in_time_order = RANKED_ORDER, True
    wanted = skip + RANK_FETCH
    stems = list(dict.fromkeys(stem for query in filters.query for stem in rank_terms(query)))
    if skip == 0 and page.mode != "keyword" and store.index is not None:
        yield from catch_up(store, scope)
    if skip == 0:
        first_cursor = RankedCursor(filters, 1).encode()
        yield from trail_flow(store, scope, filters.query, page, first_cursor)
        if page.segment_index:
            yield from segment_flow(store, scope, filters.query, page, first_cursor)
    events, complete = yield from _ranking(store, scope, filters, wanted, page)
    served, previous = skip, None
    while True:
        if served >= len(events):
            if complete:
                return page.render(page.records, None)
            wanted *= 2
            events, complete = yield from _ranking(store, scope, filters, wanted, page)
            continue
        hit = events[served]
        if hit.event_id in page.in_context:
            served += 1
            continue
        more = not complete or any(
            event.event_id not in page.in_context for event in events[served + 1 :]
        )
        cursor = RankedCursor(filters, served + 1).encode() if more else None
        placed = yield from _serve(store, scope, page, hit, cursor, stems)
        if placed is None:
            if not page.records:
                raise too_small(page)
            return page.render(page.records, previous)
        served, previous = served + 1, cursor
        if placed is False:
            return page.render(page.records, cursor)
