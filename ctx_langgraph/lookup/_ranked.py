"""A lookup with a query: the store's ranking (best match first) with matching passages
raised, several queries fused into one, and each hit served with the turn after it
(docs/design.md §8).

The store ranks events one by one (BM25); a hit next to another hit is part of a passage that
matches, so among the first :data:`PASSAGE_DEPTH` hits each scores its own score plus
:data:`PASSAGE_WEIGHT` times the better of its two neighbours' (seq - 1 and seq + 1, when they
are hits too). A page takes that ranking hit by hit: the hit (marked ``"hit": true``), then the
visible event just after it in the branch (most often the answer to what matched) when it fits
whole, each record once; a record already taken after an earlier hit is marked as a hit where
it stands. A hit too long for the room left is shown from its line holding the most of the
query's words (:func:`focus`: the row of a table, the line of a log), with its ``offset``; its
handle reads it whole. The page shows its records in time (seq) order, so a later statement
reads after the one it corrects. The ranking is the same on every call over the same history,
so a cursor is how many of its hits were served.
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
"""The ``order`` a page of a query says."""
RANK_FETCH = 30
"""Hits asked of a single query's ranking at a time (more when a page holds more)."""
PASSAGE_DEPTH = 60
"""The first hits of a ranking whose scores are raised by their neighbours' (always read)."""
PASSAGE_WEIGHT = 0.3
"""The share of the better neighbour's score a hit gains."""
FUSED_DEPTH = 50
"""Hits of each query a fused ranking (several queries) is made of."""
RRF_K = 60
"""Reciprocal-rank fusion's constant: a hit's score is the sum of ``1 / (RRF_K + rank)``."""
NEIGHBOUR_ROOM = 24
"""Tokens a page must have left for the turn after a hit to be looked for."""
CHARS_PER_TOKEN = 3
"""A hit longer than this many characters per token of room left cannot fit whole: it is
shown from the line that matches best."""


def focus(text: str, stems: Sequence[str], shown_chars: int) -> int:
    r"""Where to start showing a hit too long to show whole: the start of its line holding the
    most of the query's ``stems`` (the first such line), or 0 when that line lies within the
    first ``shown_chars`` characters (shown anyway) or no line matches better than the first.
    A matching row of a table, a line of a log: the part of a dump the question is about.

    Examples:
        >>> dump = "id,name,city\n" + "".join(f"A-{n},Ann {n},Oslo\n" for n in range(50))
        >>> dump += "A-77,Tomasz Ferreira,Porto\n"
        >>> start = focus(dump, ["tomasz", "ferreira", "porto"], 100)
        >>> dump[start:].splitlines()[0]
        'A-77,Tomasz Ferreira,Porto'
        >>> focus(dump, ["ann"], 100)
        0
    """
    wanted = set(stems)
    best, best_score, offset = 0, 0, 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        score = len(wanted.intersection(rank_tokens(line)))
        if score > best_score:
            best, best_score = (0 if number == 0 else offset), score
        offset += len(line)
    return best if best > shown_chars else 0


def fuse(rankings: Sequence[Sequence[HistoryEvent]]) -> list[HistoryEvent]:
    """Several rankings as one, by reciprocal-rank fusion: each event scores
    ``sum(1 / (RRF_K + rank))`` over the rankings it is in (rank from 1); ties go to the
    better single rank, then the earlier query, then the newer event. Each event once.

    Examples:
        >>> from types import SimpleNamespace as E
        >>> a, b, c = E(event_id="a", seq=1), E(event_id="b", seq=2), E(event_id="c", seq=3)
        >>> [e.event_id for e in fuse([[a, b], [c, b]])]
        ['b', 'a', 'c']
    """
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
    """The events of a ranking (best first) with matching passages raised: each of the first
    :data:`PASSAGE_DEPTH` hits scores its own score plus :data:`PASSAGE_WEIGHT` times the
    better of its neighbours' (seq - 1, seq + 1) among them; ties go newest first. The hits
    past them keep their order, so a longer ranking of the same history starts alike.

    Examples:
        >>> from types import SimpleNamespace as E
        >>> hits = [E(event=E(seq=s), score=x) for s, x in ((9, 3.0), (4, 2.8), (5, 2.0))]
        >>> [event.seq for event in passages(hits)]
        [4, 9, 5]
    """
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
    """Put one hit on the page, with the turn after it: True when it is there whole, False when
    it was cut (the page is full), None when it is left to the next page. A hit too long for
    the room left is shown from its best-matching line (:func:`focus`)."""
    index = page.index_of(hit.event_id)
    if index is not None:  # already shown beside an earlier hit
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
    """The page of the ranking past its first ``skip`` hits. Hits in the current turn are
    passed over (the model has them), but counted: a cursor is a place in the store's
    ranking."""
    page.order, page.in_time_order = RANKED_ORDER, True
    wanted = skip + RANK_FETCH
    stems = list(dict.fromkeys(stem for query in filters.query for stem in rank_terms(query)))
    if skip == 0 and page.mode != "keyword" and store.index is not None:
        yield from catch_up(store, scope)  # what awaits a vector, so meaning finds it too
    if skip == 0:  # the first page: the trail entries the query names, and their events
        first_cursor = RankedCursor(filters, 1).encode()
        yield from trail_flow(store, scope, filters.query, page, first_cursor)
        if page.segment_index:  # and the best segments of the index, and theirs
            yield from segment_flow(store, scope, filters.query, page, first_cursor)
    events, complete = yield from _ranking(store, scope, filters, wanted, page)
    served, previous = skip, None  # previous: the cursor after the last hit served
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
