"""The vector index's operations: which events await vectors, writing vectors (only for the
event revision they were made from), and ranking a branch's events by meaning, and by meaning
and words fused (docs/design.md §4).

Semantic search is exact: the vectors of the branch's visible events that pass the filters are
read with them in one statement and scored in NumPy (dot products: vectors are of unit
length). A thread is small (10,000 events are some 30 MB of float32 at 384 dimensions and two
vectors an event), so no approximate index is needed, and the same code serves SQLite and
PostgreSQL. A store with an approximate index (pgvector, sqlite-vec) would replace the
statement in :func:`semantic_rank` that reads the vectors: that statement is the seam.

An event has several vectors (:func:`embed_units`): its whole text, and each of its sentences
(or lines) when it has more than one, each after the speaker's name. Its semantic score is the
best cosine of them: a message of small talk with one sentence that answers the question
scores as that sentence does, where one vector of the whole message blurs it (measured on
LoCoMo: evidence among the first 10 hits 61% with one vector per message, 70% with sentences).

Hybrid ranking fuses the keyword ranking (BM25, :mod:`~ctx_langgraph.history.rank`) and the
semantic one by score: an event scores ``KEYWORD_WEIGHT * bm25 / best_bm25 + (1 -
KEYWORD_WEIGHT) * cosine``, a convex combination of the two scores, each on a 0-1 scale.
Reciprocal-rank fusion, which ignores how far apart scores are, was measured too and did worse
than words alone: a semantic ranking of small talk has no clear winners, and rank fusion gives
its first places the weight of BM25's (docs/design.md §4 has the figures).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ctx_langgraph.history import rank as rank_ops
from ctx_langgraph.history.branches import read_branch
from ctx_langgraph.history.index import SearchMode
from ctx_langgraph.history.rows import EVENT_COLS, event_from_row
from ctx_langgraph.history.search import SearchFilter, filter_clause
from ctx_langgraph.history.types import RankedHit, Scope
from ctx_langgraph.storage.codec import load_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt

__all__ = [
    "KEYWORD_WEIGHT",
    "MAX_UNITS",
    "PendingEvent",
    "RankedHits",
    "SemanticQuery",
    "embed_units",
    "fuse_scores",
    "pending_events",
    "put_event_vectors",
    "semantic_order",
    "semantic_rank",
]

KEYWORD_WEIGHT = 0.5
"""The share of the normalized BM25 score in a hybrid score (the rest: the cosine)."""
MAX_UNITS = 12
"""Most vectors an event has: its whole text and its first sentences or lines."""
_MIN_UNIT_CHARS = 12
"""Shorter sentences ("Wow!", "Thanks.") get no vector of their own."""
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_PEOPLE = ("human", "ai")
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


class RankedHits(list[RankedHit]):
    """A ranking (a list of :class:`~ctx_langgraph.history.types.RankedHit`, best first) that
    says how it was made: ``mode`` (``keyword``, ``semantic`` or ``hybrid``), ``unembedded``
    (events that passed the filters but have no vector yet: found by words only) and
    ``problem`` (why meaning was not searched, when a semantic search fell back to words)."""

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
    """What an event's vectors are made from: its text's first ``chars`` characters, then each
    of its sentences or lines when it has several (at most :data:`MAX_UNITS` in all, none
    shorter than 12 characters), each after the speaker's name on a person's message
    ("Mel: They were stoked!"). An event without text is its role, so every event has one.

    Example:
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
        f"SELECT e.pk, e.revision, e.text, e.role, e.name FROM ctx_events e {_VECTOR_JOIN} "
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
    events = [PendingEvent(int(r[0]), int(r[1]), load_text(r[2]), str(r[3]), r[4]) for r in rows]
    return events, total


def put_event_vectors(
    scope: Scope, key: str, written: Sequence[tuple[PendingEvent, int, bytes]]
) -> Op[int]:
    """Store each (event, tokens, vectors), unless the event changed since it was read
    (revised, hidden or deleted: nothing is written for it); returns how many were written."""
    count = 0
    for event, tokens, blob in written:
        changed = yield Stmt(
            "INSERT INTO ctx_event_vectors (event_pk, tenant, thread_id, revision, model, tokens, "
            "vector) SELECT pk, tenant, thread_id, revision, ?, ?, ? FROM ctx_events "
            "WHERE pk = ? AND tenant = ? AND thread_id = ? AND revision = ? AND visible = ? "
            "ON CONFLICT (event_pk) DO UPDATE SET revision = excluded.revision, "
            "model = excluded.model, tokens = excluded.tokens, vector = excluded.vector",
            (key, tokens, blob, event.pk, scope.tenant, scope.thread_id, event.revision, True),
            "rowcount",
        )
        count += int(changed or 0)
    return count


def semantic_order(
    seqs: Sequence[int], blobs: Sequence[bytes], vector: Sequence[float], dims: int
) -> list[tuple[int, float]]:
    """(seq, score) of every event with vectors, best first, ties newest first; an event's
    score is the best cosine of its vectors (a blob holds one or more, ``dims`` floats each).

    Raises:
        ValueError: a blob that is not a whole number of vectors of ``dims`` floats.

    Example:
        >>> import numpy as np
        >>> blob = lambda *rows: np.asarray(rows, "<f4").tobytes()
        >>> blobs = [blob([1, 0]), blob([0.6, 0.8]), blob([1, 0], [0, 1])]
        >>> [(s, round(x, 2)) for s, x in semantic_order([1, 2, 3], blobs, [0.6, 0.8], 2)]
        [(2, 1.0), (3, 0.8), (1, 0.6)]
    """
    import numpy as np

    if not seqs:
        return []
    raw = [bytes(blob) for blob in blobs]
    rows = [len(blob) // (4 * dims) for blob in raw]
    if any(n < 1 or n * 4 * dims != len(blob) for n, blob in zip(rows, raw, strict=True)):
        raise ValueError(f"a stored vector is not a whole number of {dims}-float vectors")
    matrix = np.frombuffer(b"".join(raw), dtype="<f4").reshape(-1, dims)
    cosines = matrix @ np.asarray(vector, dtype=np.float32)
    starts = np.concatenate(([0], np.cumsum(rows)[:-1]))
    scores = np.maximum.reduceat(cosines, starts)
    order = np.lexsort((-np.asarray(seqs, dtype=np.int64), -scores))
    return [(int(seqs[i]), float(scores[i])) for i in order]


def fuse_scores(
    words: Sequence[tuple[int, float]], meaning: Sequence[tuple[int, float]]
) -> list[tuple[int, float]]:
    """The keyword ranking's (seq, bm25) and the semantic one's (seq, cosine) as one:
    ``KEYWORD_WEIGHT * bm25 / best_bm25 + (1 - KEYWORD_WEIGHT) * max(cosine, 0)``, best
    first, ties newest first. An event in one ranking only scores 0 in the other.

    Example:
        >>> [(s, round(x, 2)) for s, x in fuse_scores([(5, 8.0), (3, 2.0)], [(3, 0.9), (7, 0.6)])]
        [(3, 0.57), (5, 0.5), (7, 0.3)]
    """
    best = max((score for _, score in words), default=0.0) or 1.0
    fused: dict[int, float] = {seq: KEYWORD_WEIGHT * score / best for seq, score in words}
    for seq, cosine in meaning:
        fused[seq] = fused.get(seq, 0.0) + (1 - KEYWORD_WEIGHT) * max(cosine, 0.0)
    return sorted(fused.items(), key=lambda item: (-item[1], -item[0]))


def semantic_rank(d: Dialect, scope: Scope, q: SemanticQuery) -> Op[RankedHits]:
    """The branch's visible events that pass the filters, best first by meaning (``semantic``)
    or by meaning and words fused (``hybrid``); see
    :meth:`~ctx_langgraph.history.HistoryStore.rank`."""
    found = yield from read_branch(d, scope)
    if found is None:
        return RankedHits((), q.mode)
    chain = found[1]
    where, args = filter_clause(d, scope, chain, q.filters)
    rows = yield Stmt(
        f"SELECT e.seq, v.vector FROM ctx_events e {_VECTOR_JOIN} WHERE {' AND '.join(where)}",
        (q.key, *args),
        "all",
    )
    embedded = [(int(row[0]), row[1]) for row in rows if row[1] is not None]
    meaning = semantic_order([s for s, _ in embedded], [b for _, b in embedded], q.vector, q.dims)
    if q.mode == "semantic":
        best = meaning[: q.filters.limit]
    else:
        words: list[RankedHit] = []
        if rank_ops.has_rank_terms(q.query):
            depth = max(q.filters.limit, rank_ops.FUSION_DEPTH)
            ranked = rank_ops.RankQuery(q.query, replace(q.filters, limit=depth))
            words = yield from rank_ops.rank(d, scope, ranked)
        scored = [(hit.event.seq, hit.score) for hit in words]
        best = fuse_scores(scored, meaning)[: q.filters.limit]
    found_rows = yield from rank_ops.visible_at(scope, chain, EVENT_COLS, [s for s, _ in best])
    by_seq = {event.seq: event for event in (event_from_row(d, r) for r in found_rows)}
    hits = [RankedHit(by_seq[seq], score) for seq, score in best if seq in by_seq]
    return RankedHits(hits, q.mode, len(rows) - len(embedded))
