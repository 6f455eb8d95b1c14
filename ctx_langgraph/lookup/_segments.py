"""A query against the segment index: the best segments' matching summary lines, and the
events they cite (``from_segment``), in at most :data:`SHARE` of a first page (design §8).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.core.text import rank_terms, rank_tokens
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.rank import bm25_order, idf
from ctx_langgraph.history.types import Segment
from ctx_langgraph.lookup._page import Page
from ctx_langgraph.lookup._reads import add_events, log

__all__ = ["SHARE", "TOP_SEGMENTS", "rank_segments", "segment_flow", "segment_lines"]

TOP_SEGMENTS: Final = 2
SHARE: Final = 0.4
"""The share of a page the segments and their events may take."""
LINES_PER_SEGMENT: Final = 3
EVENTS_PER_SEGMENT: Final = 2
LINE_FLOOR: Final = 0.6
"""A line shown matches at least this share of the segment's best line."""
_SEQ_REF = re.compile(r"\[seqs? ([0-9][0-9, \-]*)")


def _searchable(segment: Segment) -> str:
    facts = " ".join(fact.text for fact in segment.key_facts)
    return f"{segment.summary_text or ''}\n{facts}"


def _weights(query: str, segments: Sequence[Segment]) -> dict[str, float]:
    """Each stem of the query's idf over the segments."""
    counted = [set(rank_tokens(_searchable(segment))) for segment in segments]
    return {
        stem: idf(len(segments), sum(stem in tokens for tokens in counted))
        for stem in dict.fromkeys(rank_terms(query))
    }


def rank_segments(query: str, segments: Sequence[Segment]) -> list[tuple[Segment, float]]:
    """The segments sharing a word with ``query``, best first (BM25 over summary and facts)."""
    texts = {index: _searchable(segment) for index, segment in enumerate(segments)}
    ranked = bm25_order(texts, _weights(query, segments))
    return [(segments[index], score) for index, score in ranked]


def segment_lines(segment: Segment, weights: dict[str, float]) -> tuple[list[str], list[int]]:
    """The summary lines of ``segment`` that match best, and the seqs they cite in its range."""
    lines = [line.strip() for line in (segment.summary_text or "").splitlines()]
    scored = sorted(
        (
            (sum(weights.get(stem, 0.0) for stem in set(rank_tokens(line))), index)
            for index, line in enumerate(lines)
            if line.startswith("- ")
        ),
        reverse=True,
    )
    best = scored[0][0] if scored else 0.0
    kept = [(score, index) for score, index in scored if score > 0 and score >= LINE_FLOOR * best]
    kept = kept[:LINES_PER_SEGMENT]
    seqs: list[int] = []
    for _score, index in kept:
        for found in _SEQ_REF.findall(lines[index]):
            for part in re.split(r"[, ]+", found):
                number = part.split("-")[0]
                if number.isdigit() and segment.first_seq <= int(number) <= segment.last_seq:
                    seqs.append(int(number))
    shown = [lines[index] for _score, index in sorted(kept, key=lambda hit: hit[1])]
    return shown, list(dict.fromkeys(seqs))[:EVENTS_PER_SEGMENT]


def _shown(segment: Segment, lines: list[str], seqs: list[int]) -> dict[str, Any]:
    return {
        "range": f"seq {segment.first_seq}-{segment.last_seq}",
        "generation": segment.generation,
        "summary": lines,
        "points_to": seqs,
    }


def segment_flow(
    store: HistoryStore, scope: Scope, queries: tuple[str, ...], page: Page, cursor: str | None
) -> Flow[None]:
    """Put the best segments for ``queries``, and the events their matching lines cite, on
    ``page``, within :data:`SHARE` of it (nothing when no segment shares a word, or when the
    store cannot say: the ranking answers all the same)."""
    try:
        segments: list[Segment] = yield from call(store.segments, store.asegments, scope)
    except Exception as exc:
        log.warning("history lookup: the segment index could not be read: %s", exc)
        return
    query = " ".join(queries)
    weights = _weights(query, segments)
    chosen = [(s, *segment_lines(s, weights)) for s, _ in rank_segments(query, segments)]
    chosen = [entry for entry in chosen if entry[1]][:TOP_SEGMENTS]
    if not chosen:
        return
    cap, page.max_tokens = page.max_tokens, max(1, int(page.max_tokens * SHARE))
    try:
        while chosen:
            page.segments = [_shown(*entry) for entry in chosen]
            if page.counter.count_text(page.render(page.records, cursor)) <= page.max_tokens:
                break
            chosen = chosen[:-1]  # the lower ranked leaves room for the better
        else:
            page.segments = None
            return
        for segment, _lines, seqs in chosen:
            mark = {"from_segment": f"seq {segment.first_seq}-{segment.last_seq}"}
            yield from add_events(store, scope, page, seqs, cursor, "a segment", extra=mark)
    finally:
        page.max_tokens = cap
