"""Ranked search: a branch's visible events having any stem of a query, best first by Okapi
BM25 (``k1 = 1.2``, ``b = 0.75``), scored in Python so every backend ranks alike (docs/design.md
§4). The full-text index finds and counts the events per stem (the newest
:data:`CANDIDATES_PER_STEM` are read); a person's message counts its speaker's name as one
more word."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctx_langgraph.core.text import rank_terms, rank_tokens, stem_counts
from ctx_langgraph.history.args import shown, text_arg
from ctx_langgraph.history.branches import Lineage, lineage_clause
from ctx_langgraph.history.rank_counts import (
    PEOPLE,
    RankCounts,
    Stamped,
    read_stamped,
    speaker_counts,
)
from ctx_langgraph.history.rows import EVENT_COLS, event_from_row
from ctx_langgraph.history.search import SearchFilter, filter_clause
from ctx_langgraph.history.types import RankedHit, Scope
from ctx_langgraph.storage.codec import load_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt, chunks, marks

__all__ = [
    "CANDIDATES_PER_STEM",
    "K1",
    "MAX_RANK_TERMS",
    "B",
    "RankQuery",
    "bm25_order",
    "has_rank_terms",
    "idf",
    "rank",
    "rank_scores",
    "visible_at",
]

K1 = 1.2
"""BM25's term-frequency saturation."""
B = 0.75
"""BM25's document-length normalization."""
CANDIDATES_PER_STEM = 300
"""Most events read per stem of the query (the newest that match)."""
MAX_RANK_TERMS = 32
"""Most distinct stems a ranked query may have."""
TEXTS_PER_READ = 100
"""Candidate texts a ranked search reads (and counts) at a time."""
_SCORED = "e.seq, e.text, e.role, e.name"
"""What a candidate is scored on."""
FUSION_DEPTH = 100
"""Hits of the keyword ranking a hybrid search fuses (at least; more when more are asked for)."""
FUSION_CANDIDATES = 100
"""Events read per stem by the keyword side of a hybrid search (meaning finds the rest)."""


@dataclass(frozen=True)
class RankQuery:
    """A ranked search's stems and filters (without query or cursor), checked when built."""

    query: str
    filters: SearchFilter
    stems: tuple[str, ...] = field(init=False)
    """The distinct stems the hits are ranked by, in the query's order."""

    def __post_init__(self) -> None:
        stems = tuple(rank_terms(text_arg("query", self.query)))
        if not stems:
            raise ValueError(
                f"ranked search query {shown(self.query)} has no words to rank by: it is empty "
                "or only glue words (the, of, what, ...); ask with a content word"
            )
        if len(stems) > MAX_RANK_TERMS:
            raise ValueError(
                f"ranked search query {shown(self.query)} has {len(stems)} distinct words "
                f"besides glue words; at most {MAX_RANK_TERMS} are ranked at once: ask with fewer"
            )
        if self.filters.query is not None or self.filters.cursor is not None:
            raise ValueError("a ranked search's filters take no query and no cursor")
        object.__setattr__(self, "stems", stems)


def has_rank_terms(query: str) -> bool:
    """Whether ``query`` has a word to rank by (not only glue words)."""
    return bool(rank_terms(query))


def idf(events: int, matching: int) -> float:
    """BM25's inverse document frequency of a stem found in ``matching`` of ``events``.

    Examples:
        >>> round(idf(100, 1), 3), round(idf(100, 90), 3)
        (4.21, 0.11)
    """
    return math.log(1 + (events - matching + 0.5) / (matching + 0.5))


def bm25_order(texts: Mapping[int, str], weights: Mapping[str, float]) -> list[tuple[int, float]]:
    """Score the texts by seq (each the text of one event) against the stems' ``weights``
    (their :func:`idf`, in the query's order): (seq, score) pairs, best first, ties newest
    (highest seq) first; a text having none of the stems is left out.

    Examples:
        >>> texts = {1: "we went hiking", 2: "hiking and going hiking", 3: "a parade"}
        >>> [(seq, round(score, 3)) for seq, score in bm25_order(texts, {"go": 1.0, "hike": 0.5})]
        [(2, 1.509), (1, 1.5)]
    """
    memo: dict[str, str] = {}
    return _bm25({seq: stem_counts(text, weights, memo) for seq, text in texts.items()}, weights)


def _bm25(
    counted: Mapping[int, tuple[dict[str, int], int]], weights: Mapping[str, float]
) -> list[tuple[int, float]]:
    """:func:`bm25_order` of texts already counted by
    :func:`~ctx_langgraph.core.text.stem_counts`."""
    average = sum(length for _, length in counted.values()) / max(len(counted), 1) or 1.0
    scored: list[tuple[int, float]] = []
    for seq, (counts, length) in counted.items():
        norm = K1 * (1 - B + B * length / average)
        score = 0.0
        for stem, weight in weights.items():  # one order: the same sum on every backend
            tf = counts.get(stem, 0)
            if tf:
                score += weight * tf * (K1 + 1) / (tf + norm)
        if score > 0:
            scored.append((seq, score))
    scored.sort(key=lambda hit: (-hit[1], -hit[0]))
    return scored


def _matching(
    d: Dialect,
    scope: Scope,
    stems: Sequence[str],
    where: Sequence[str],
    args: Sequence[Any],
    candidates: int,
) -> Op[tuple[dict[str, int], dict[int, tuple[dict[str, int], int]]]]:
    """Per stem, how many filtered events have it; per candidate (the newest ``candidates`` of
    each stem), its stems' counts and length. The texts are read :data:`TEXTS_PER_READ` at a
    time."""
    ctes: list[str] = []
    newest: list[str] = []
    counts: list[str] = []
    params: list[Any] = []
    for n, stem in enumerate(stems):
        source, match, match_params = d.text_match(
            scope.tenant, scope.thread_id, [stem], stems=True
        )
        ctes.append(
            f"m{n} AS {d.materialized}(SELECT e.pk, e.seq FROM {source} "
            f"WHERE {' AND '.join([match, *where])})"
        )
        params += [*match_params, *args]
        newest.append(f"SELECT pk FROM (SELECT pk FROM m{n} ORDER BY seq DESC LIMIT ?) AS n{n}")
        counts.append(f"SELECT {n}, count(*), NULL, NULL, NULL FROM m{n}")
    picked = f"picked AS ({' UNION '.join(newest)})"
    rows = yield Stmt(
        f"WITH {', '.join([*ctes, picked])} {' UNION ALL '.join(counts)} UNION ALL "
        f"SELECT -1, {_SCORED} FROM ctx_events e WHERE e.pk IN "
        "(SELECT pk FROM picked ORDER BY pk LIMIT ?) UNION ALL "
        "SELECT -2, pk, NULL, NULL, NULL FROM picked WHERE pk > "
        "(SELECT max(pk) FROM (SELECT pk FROM picked ORDER BY pk LIMIT ?) AS head)",
        (*params, *[candidates] * len(stems), TEXTS_PER_READ, TEXTS_PER_READ),
        "all",
    )
    df = {stem: 0 for stem in stems}
    wanted, memo = set(stems), dict[str, str]()
    counted: dict[int, tuple[dict[str, int], int]] = {}
    rest: list[int] = []
    for n, value, text, role, name in rows:
        if int(n) >= 0:
            df[stems[int(n)]] = int(value)
        elif int(n) == -1:
            counted[int(value)] = stem_counts(
                _with_speaker(load_text(text), role, name), wanted, memo
            )
        else:
            rest.append(int(value))
    del rows
    for chunk in chunks(rest, TEXTS_PER_READ):
        read = yield Stmt(
            f"SELECT {_SCORED} FROM ctx_events e WHERE e.pk IN ({marks(len(chunk))})",
            tuple(chunk),
            "all",
        )
        for seq, text, role, name in read:
            counted[int(seq)] = stem_counts(
                _with_speaker(load_text(text), role, name), wanted, memo
            )
    return df, counted


def rank(
    d: Dialect, scope: Scope, q: RankQuery, counts: RankCounts | None = None
) -> Op[list[RankedHit]]:
    """The branch's visible events having any stem of the query, best first (see
    :meth:`~ctx_langgraph.history.HistoryStore.rank`); ``counts``: the store's counts."""
    found = yield from read_stamped(scope)
    if found is None:
        return []
    best = yield from rank_scores(d, scope, found, q, counts=counts)
    rows = yield from visible_at(scope, found.chain, EVENT_COLS, [seq for seq, _ in best])
    by_seq = {event.seq: event for event in (event_from_row(d, r) for r in rows)}
    return [RankedHit(by_seq[seq], score) for seq, score in best if seq in by_seq]


def rank_scores(
    d: Dialect,
    scope: Scope,
    found: Stamped,
    q: RankQuery,
    candidates: int | None = None,
    counts: RankCounts | None = None,
) -> Op[list[tuple[int, float]]]:
    """(seq, BM25 score) of the branch's best ``q.filters.limit`` events, best first, reading
    at most ``candidates`` events per stem (default :data:`CANDIDATES_PER_STEM`)."""
    where, args = filter_clause(d, scope, found.chain, q.filters)
    speakers = yield from speaker_counts(scope, found, where, args, counts)
    events = sum(speakers.values())
    if not events:
        return []
    read = CANDIDATES_PER_STEM if candidates is None else candidates
    where, args = filter_clause(d, scope, found.chain, q.filters, matched=True)
    df, counted = yield from _matching(d, scope, q.stems, where, args, read)
    spoken = _spoken(speakers, q.stems)
    df = {stem: df[stem] + spoken.get(stem, 0) for stem in q.stems}
    weights = {stem: idf(events, min(events, count)) for stem, count in df.items() if count}
    return _bm25(counted, weights)[: q.filters.limit]


def _speaker(role: str, name: str | None) -> bool:
    return bool(name) and role in PEOPLE


def _with_speaker(text: str, role: str, name: str | None) -> str:
    """What a message is scored on: its text, and its speaker's name as one more word."""
    return f"{text}\n{name}" if _speaker(role, name) else text


def _spoken(speakers: Mapping[str | None, int], stems: Sequence[str]) -> dict[str, int]:
    """Per stem of the query, how many messages have a speaker whose name has it."""
    wanted = set(stems)
    spoken: dict[str, int] = {}
    for name, count in speakers.items():
        for stem in set(rank_tokens(str(name))) & wanted if name else ():
            spoken[stem] = spoken.get(stem, 0) + count
    return spoken


def visible_at(scope: Scope, chain: Lineage, columns: str, seqs: Sequence[int]) -> Op[list[Any]]:
    """``columns`` of the branch's visible events (``chain``: its lineage) at ``seqs``."""
    clause, clause_params = lineage_clause(chain)
    found: list[Any] = []
    for chunk in chunks(seqs):
        found += yield Stmt(
            f"SELECT {columns} FROM ctx_events e WHERE e.tenant = ? AND e.thread_id = ? "
            f"AND {clause} AND e.visible = ? AND e.seq IN ({marks(len(chunk))})",
            (scope.tenant, scope.thread_id, *clause_params, True, *chunk),
            "all",
        )
    return found
