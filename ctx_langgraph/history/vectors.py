"""The vector index's operations: which events await vectors, writing vectors (only for the
event revision they were made from), and ranking a branch's events by meaning (exact: cosines
in NumPy over the thread's vectors, one per text and per sentence of an event) or by meaning
and words fused by score (docs/design.md §4 has the measured figures)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctx_langgraph.history import rank as rank_ops
from ctx_langgraph.history.index import SearchMode
from ctx_langgraph.history.rank_counts import (
    RankCounts,
    Stamp,
    Stamped,
    read_stamped,
    speaker_counts,
)
from ctx_langgraph.history.rows import EVENT_COLS, event_from_row
from ctx_langgraph.history.search import SearchFilter, filter_clause
from ctx_langgraph.history.types import RankedHit, Scope
from ctx_langgraph.history.vector_cache import ThreadVectors, VectorCache
from ctx_langgraph.storage.codec import load_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt, chunks, marks
from ctx_langgraph.storage.tables.vectors import BUMP_VECTOR_VERSION

__all__ = [
    "KEYWORD_WEIGHT",
    "LOOKUP_PAGE_MARK",
    "MAX_UNITS",
    "SEMANTIC_DEPTH",
    "PendingEvent",
    "RankedHits",
    "SemanticQuery",
    "embed_units",
    "fuse_scores",
    "pending_events",
    "put_event_vectors",
    "semantic_rank",
]

KEYWORD_WEIGHT = 0.5
"""The share of the normalized BM25 score in a hybrid score (the rest: the cosine)."""
SEMANTIC_DEPTH = 300
"""Events of the semantic ranking a hybrid search fuses with the keyword one (and the cosine
of every keyword hit): an event in neither scores below all of these."""
MAX_UNITS = 12
"""Most vectors an event has: its whole text and its first sentences or lines."""
_MIN_UNIT_CHARS = 12
"""Shorter sentences ("Wow!", "Thanks.") get no vector of their own."""
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_PEOPLE = ("human", "ai")
LOOKUP_PAGE_MARK = "ctx_lookup"
"""The artifact key of a history lookup's page (``view.markers.LOOKUP_MARK``, which this
store cannot import: the view package reads the store; a test keeps the two equal)."""
_VECTOR_JOIN = (
    "LEFT JOIN ctx_event_vectors v ON v.event_pk = e.pk AND v.model = ? AND v.revision = e.revision"
)


@dataclass(frozen=True)
class PendingEvent:
    """An event without vectors of the index's model for its current revision."""

    pk: int
    revision: int
    text: str
    role: str
    name: str | None = None
    copy: bool = False
    """A history lookup's page (a copy of older events): stored with no vector, so a search
    never finds the copy instead of the event."""


class RankedHits(list[RankedHit]):
    """A ranking (a list of :class:`~ctx_langgraph.history.types.RankedHit`, best first) with
    its ``mode``, ``unembedded`` (filtered events without a vector yet) and ``problem`` (why
    meaning was not searched, when it fell back to words)."""

    mode: SearchMode
    unembedded: int
    problem: str | None

    def __init__(
        self,
        hits: Sequence[RankedHit] = (),
        mode: SearchMode = "keyword",
        unembedded: int = 0,
        problem: str | None = None,
    ) -> None:
        super().__init__(hits)
        self.mode, self.unembedded, self.problem = mode, unembedded, problem


@dataclass(frozen=True)
class SemanticQuery:
    """A ranked search by meaning: the query's text (its words rank too, in ``hybrid``), its
    vector, the index's key and dimensions, and the filters (``limit`` hits come back)."""

    query: str
    vector: Sequence[float]
    key: str
    dims: int
    mode: SearchMode
    filters: SearchFilter


def embed_units(text: str, role: str, name: str | None, chars: int) -> list[str]:
    """What an event's vectors are made from: its text's first ``chars`` characters, then its
    sentences or lines (at most :data:`MAX_UNITS` in all), each after a person's name; an event
    without text is its role.

    Examples:
        >>> embed_units("Wow! They were stoked for the dinosaur exhibit. Bye.", "ai", "Mel", 2000)
        ['Mel: Wow! They were stoked for the dinosaur exhibit. Bye.', 'Mel: They were stoked for the dinosaur exhibit.']
        >>> embed_units("", "tool", None, 2000)
        ['(tool)']
    """
    body = text[:chars].strip()
    if not body:
        return [f"({role})"]
    prefix = f"{name}: " if name and role in _PEOPLE else ""
    parts = [part.strip() for part in _SENTENCES.split(body) if part.strip()]
    units = [prefix + body]
    if len(parts) > 1:
        long = [part for part in parts if len(part) >= _MIN_UNIT_CHARS]
        units += [prefix + part for part in long[: MAX_UNITS - 1]]
    return units


def pending_events(scope: Scope, key: str, limit: int) -> Op[tuple[list[PendingEvent], int]]:
    """The thread's visible events (every branch) without vectors under ``key`` for their
    revision, oldest first: at most ``limit``, and how many there are in all."""
    where = "e.tenant = ? AND e.thread_id = ? AND e.visible = ? AND v.event_pk IS NULL"
    params = (key, scope.tenant, scope.thread_id, True)
    rows = yield Stmt(
        f"SELECT e.pk, e.revision, e.text, e.role, e.name, CASE WHEN e.role = 'tool' THEN "
        f"e.content END FROM ctx_events e {_VECTOR_JOIN} "
        f"WHERE {where} ORDER BY e.pk LIMIT ?",
        (*params, limit),
        "all",
    )
    total = len(rows)
    if total >= limit:
        counted = yield Stmt(
            f"SELECT count(*) FROM ctx_events e {_VECTOR_JOIN} WHERE {where}", params, "one"
        )
        total = int(counted[0])
    events = [
        PendingEvent(int(r[0]), int(r[1]), load_text(r[2]), str(r[3]), r[4], _is_page(r[5]))
        for r in rows
    ]
    return events, total


def _is_page(content: str | None) -> bool:
    """Whether a tool result's stored record is a history lookup's page (its artifact)."""
    if not content:
        return False
    try:
        data = json.loads(load_text(content)).get("data") or {}
    except (ValueError, AttributeError):
        return False
    artifact = data.get("artifact") if isinstance(data, dict) else None
    return isinstance(artifact, dict) and bool(artifact.get(LOOKUP_PAGE_MARK))


def put_event_vectors(
    scope: Scope, key: str, written: Sequence[tuple[PendingEvent, int, bytes]]
) -> Op[int]:
    """Store each (event, tokens, vectors), unless the event changed since it was read
    (revised, hidden or deleted: nothing is written for it); returns how many were written."""
    count = 0
    for event, tokens, blob in written:
        changed = yield Stmt(
            "INSERT INTO ctx_event_vectors (event_pk, tenant, thread_id, branch, seq, revision, "
            "model, tokens, vector) SELECT pk, tenant, thread_id, branch, seq, revision, ?, ?, ? "
            "FROM ctx_events "
            "WHERE pk = ? AND tenant = ? AND thread_id = ? AND revision = ? AND visible = ? "
            "ON CONFLICT (event_pk) DO UPDATE SET revision = excluded.revision, "
            "model = excluded.model, tokens = excluded.tokens, vector = excluded.vector",
            (key, tokens, blob, event.pk, scope.tenant, scope.thread_id, event.revision, True),
            "rowcount",
        )
        count += int(changed or 0)
    if count:
        yield Stmt(BUMP_VECTOR_VERSION, (scope.tenant, scope.thread_id))
    return count


def fuse_scores(
    words: Iterable[tuple[int, float]], meaning: Iterable[tuple[int, float]]
) -> list[tuple[int, float]]:
    """The keyword ranking's (seq, bm25) and the semantic one's (seq, cosine) as one:
    ``KEYWORD_WEIGHT * bm25 / best_bm25 + (1 - KEYWORD_WEIGHT) * max(cosine, 0)``, best
    first, ties newest first. An event in one ranking only scores 0 in the other.

    Examples:
        >>> [(s, round(x, 2)) for s, x in fuse_scores([(5, 8.0), (3, 2.0)], [(3, 0.9), (7, 0.6)])]
        [(3, 0.57), (5, 0.5), (7, 0.3)]
    """
    words = list(words)
    best = max((score for _, score in words), default=0.0) or 1.0
    fused: dict[int, float] = {seq: KEYWORD_WEIGHT * score / best for seq, score in words}
    for seq, cosine in meaning:
        fused[seq] = fused.get(seq, 0.0) + (1 - KEYWORD_WEIGHT) * max(cosine, 0.0)
    return sorted(fused.items(), key=lambda item: (-item[1], -item[0]))


_VECTOR_ROWS = "SELECT event_pk, revision, branch, seq, vector FROM ctx_event_vectors"
REFRESH_SHARE = 0.25
"""A cached thread whose changed events are more than this share of it is read whole again."""


def _thread_vectors(
    scope: Scope, q: SemanticQuery, cache: VectorCache, stamp: Stamp
) -> Op[ThreadVectors]:
    """The thread's vectors under the index's key: from ``cache`` at the same vector version,
    else refreshed with only the vectors it does not hold (or read whole)."""
    version, incarnation = stamp.vector_version, stamp.incarnation  # made again: a new count
    key, where = (scope.tenant, scope.thread_id, q.key), (scope.tenant, scope.thread_id, q.key)
    entry = cache.get(key)
    if entry is not None and entry.incarnation == incarnation and entry.version == version:
        return entry
    thread = "WHERE tenant = ? AND thread_id = ? AND model = ?"
    if entry is not None and entry.incarnation == incarnation:
        import numpy as np

        listed = yield Stmt(
            f"SELECT event_pk, revision FROM ctx_event_vectors {thread}", where, "all"
        )
        pks = np.asarray([int(r[0]) for r in listed], dtype=np.int64)
        kept, wanted = entry.stale(pks, np.asarray([int(r[1]) for r in listed], dtype=np.int64))
        if len(wanted) <= REFRESH_SHARE * max(1, len(pks)):
            rows: list[Any] = []
            for chunk in chunks(wanted):
                rows += yield Stmt(
                    f"{_VECTOR_ROWS} {thread} AND event_pk IN ({marks(len(chunk))})",
                    (*where, *chunk),
                    "all",
                )
            entry = entry.refreshed(version, kept, rows, q.dims)
            cache.put(key, entry)
            return entry
    rows = yield Stmt(f"{_VECTOR_ROWS} {thread}", where, "all")
    entry = ThreadVectors.build(incarnation, version, rows, q.dims)
    cache.put(key, entry)
    return entry


def semantic_rank(
    d: Dialect, scope: Scope, q: SemanticQuery, cache: VectorCache, counts: RankCounts | None = None
) -> Op[RankedHits]:
    """The branch's filtered visible events, best first by meaning (``semantic``) or by meaning
    and words fused (``hybrid``); see :meth:`~ctx_langgraph.history.HistoryStore.rank`."""
    import numpy as np

    found = yield from read_stamped(scope)
    if found is None or found.stamp is None:
        return RankedHits((), q.mode)
    vectors = yield from _thread_vectors(scope, q, cache, found.stamp)
    chain = found.chain
    if _only_lineage(q.filters):  # the cache alone says which vectors are the branch's
        embedded, seqs, scores = vectors.scores_in(q.vector, chain)
        unembedded_op = _count_visible(d, scope, found, embedded, counts)
    else:  # the events that pass the filters, read each time
        where, args = filter_clause(d, scope, chain, q.filters)
        rows = yield Stmt(f"SELECT e.pk FROM ctx_events e WHERE {' AND '.join(where)}", args, "all")
        pks = np.asarray([int(r[0]) for r in rows], dtype=np.int64)
        embedded, seqs, scores = vectors.scores_of(q.vector, pks)
        unembedded_op = _constant(len(rows) - embedded)
    depth = q.filters.limit if q.mode == "semantic" else max(SEMANTIC_DEPTH, q.filters.limit)
    top = _top(scores, depth)
    meaning = list(zip(seqs[top].tolist(), scores[top].tolist(), strict=True))
    if q.mode == "semantic":
        best = meaning[: q.filters.limit]
    else:
        scored: list[tuple[int, float]] = []
        if rank_ops.has_rank_terms(q.query):
            depth = max(q.filters.limit, rank_ops.FUSION_DEPTH)
            ranked = rank_ops.RankQuery(q.query, replace(q.filters, limit=depth))
            candidates = max(depth, rank_ops.FUSION_CANDIDATES)
            scored = yield from rank_ops.rank_scores(d, scope, found, ranked, candidates, counts)
        meaning += _cosines_of(seqs, scores, [seq for seq, _ in scored])
        best = fuse_scores(scored, dict(meaning).items())[: q.filters.limit]
    found_rows = yield from rank_ops.visible_at(scope, chain, EVENT_COLS, [s for s, _ in best])
    by_seq = {event.seq: event for event in (event_from_row(d, r) for r in found_rows)}
    hits = [RankedHit(by_seq[seq], score) for seq, score in best if seq in by_seq]
    unembedded = yield from unembedded_op
    return RankedHits(hits, q.mode, unembedded)


def _only_lineage(filters: SearchFilter) -> bool:
    """Whether a search filters by nothing but the branch (its lineage)."""
    return not (
        filters.roles
        or filters.tool_name is not None
        or filters.since is not None
        or filters.until is not None
        or filters.min_seq is not None
        or filters.max_seq is not None
    )


def _top(scores: Any, count: int) -> Any:
    """The indexes of the ``count`` best scores, best first (ties: the later index first)."""
    import numpy as np

    if len(scores) > count:
        picked = np.argpartition(-scores, count - 1)[:count]
    else:
        picked = np.arange(len(scores))
    return picked[np.lexsort((-picked, -scores[picked]))]


def _constant(value: int) -> Op[int]:
    """An op that reads nothing and returns ``value``."""
    yield from ()
    return value


def _cosines_of(seqs: Any, scores: Any, wanted: Sequence[int]) -> list[tuple[int, float]]:
    """(seq, score) of the ``wanted`` seqs that are among ``seqs``, in ``wanted``'s order."""
    import numpy as np

    if not len(wanted) or not len(seqs):
        return []
    order = np.argsort(seqs, kind="stable")
    asked = np.asarray(wanted, dtype=np.int64)
    at = np.clip(np.searchsorted(seqs[order], asked), 0, len(seqs) - 1)
    hit = seqs[order][at] == asked
    return list(zip(asked[hit].tolist(), scores[order][at][hit].tolist(), strict=True))


def _count_visible(
    d: Dialect, scope: Scope, found: Stamped, embedded: int, counts: RankCounts | None
) -> Op[int]:
    """How many of the branch's visible events have no vector (``embedded`` of them have)."""
    where, args = filter_clause(d, scope, found.chain, SearchFilter())
    speakers = yield from speaker_counts(scope, found, where, args, counts)
    return max(0, sum(speakers.values()) - embedded)
