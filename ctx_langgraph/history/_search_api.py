"""The history store's public search methods, thin calls of
:func:`ctx_langgraph.history.search.search` and :func:`ctx_langgraph.history.rank.rank`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ctx_langgraph.core.effects import Flow
from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import rank as rank_ops
from ctx_langgraph.history import search as search_ops
from ctx_langgraph.history import vectors as vector_ops
from ctx_langgraph.history._store import async_twin, flow_method
from ctx_langgraph.history._vectors_api import VectorsAPI
from ctx_langgraph.history.index import SearchMode
from ctx_langgraph.history.rank_counts import RankCounts
from ctx_langgraph.history.types import Scope, SearchPage
from ctx_langgraph.history.vectors import RankedHits
from ctx_langgraph.storage.statements import Op

__all__ = ["SearchAPI"]


def _filter(roles: Sequence[str] | str | None, **filters: Any) -> search_ops.SearchFilter:
    return search_ops.SearchFilter(
        roles=(roles,) if isinstance(roles, str) else tuple(roles or ()), **filters
    )


class SearchAPI(VectorsAPI):
    """Find a branch's visible events: one page at a time, or ranked by relevance."""

    _rank_counts: RankCounts | None = None

    @property
    def rank_counts(self) -> RankCounts:
        """What ranked searches counted over the branches they searched, kept up to date by
        counting only what was appended since (see :mod:`~ctx_langgraph.history.rank_counts`)."""
        if self._rank_counts is None:
            self._rank_counts = RankCounts()
        return self._rank_counts

    def _search(self, scope: Scope | str, **filters: Any) -> Op[SearchPage]:
        flt = _filter(**filters)
        return search_ops.search(self.db.dialect, checked_scope(scope), flt)

    def _rank(
        self,
        scope: Scope | str,
        query: str,
        mode: SearchMode,
        vector: list[float] | None,
        problem: str | None,
        **filters: Any,
    ) -> Op[RankedHits]:
        """The ranking op: by words in keyword mode or when the query could not be embedded
        (``problem`` says why), else by the query's vector (and its words, in hybrid)."""
        flt = _filter(**filters)
        if mode == "keyword" or vector is None:
            ranked = rank_ops.RankQuery(query, flt)
            counts = self.rank_counts
            hits = yield from rank_ops.rank(self.db.dialect, checked_scope(scope), ranked, counts)
            return RankedHits(hits, "keyword", 0, problem)
        assert self.index is not None
        semantic = vector_ops.SemanticQuery(
            query, vector, self.index.key, self.index.dims, mode, flt
        )
        cache, counts = self.vector_cache, self.rank_counts
        return (
            yield from vector_ops.semantic_rank(
                self.db.dialect, checked_scope(scope), semantic, cache, counts
            )
        )

    @flow_method
    def search(
        self,
        scope: Scope | str,
        query: str | None = None,
        *,
        min_seq: int | None = None,
        max_seq: int | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        roles: Sequence[str] | str | None = None,
        tool_name: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        newest_first: bool = False,
    ) -> Flow[SearchPage]:
        """Find visible events of a branch, one page at a time, in seq order.

        ``query`` matches events containing every word of it (full-text: SQLite FTS5,
        PostgreSQL tsvector). The other filters narrow by seq range, time range
        (``since <= created_at < until``), role and tool name (tool results of, and AI calls
        to, that tool). Pass a page's ``next_cursor`` back to get the next page; pages never
        repeat or skip a hit, even while events are appended.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(f"order {n} shipped", id=f"m{n}") for n in range(5)])
            ...     page = store.search("t", "shipped", limit=3)
            ...     [hit.seq for hit in page.hits], page.has_more
            ...     [hit.seq for hit in store.search("t", "shipped", limit=3, cursor=page.next_cursor).hits]
            ([1, 2, 3], True)
            [4, 5]
        """
        call = self._search(
            scope,
            query=query,
            min_seq=min_seq,
            max_seq=max_seq,
            since=since,
            until=until,
            roles=roles,
            tool_name=tool_name,
            limit=limit,
            cursor=cursor,
            newest_first=newest_first,
        )
        return (yield from self._op(call))

    asearch = async_twin(search)

    @flow_method
    def rank(
        self,
        scope: Scope | str,
        query: str,
        *,
        limit: int = 20,
        min_seq: int | None = None,
        max_seq: int | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        roles: Sequence[str] | str = (),
        tool_name: str | None = None,
        mode: SearchMode | None = None,
    ) -> Flow[RankedHits]:
        """Visible events of a branch by relevance to ``query``, best first.

        ``mode`` (default: ``hybrid`` when the store has a vector index, else ``keyword``):

        - ``keyword``: the events having any word of the query, by BM25 (below);
        - ``semantic``: every event that passes the filters, by the best cosine of its vectors
          with the query's (exact search within the thread; events not embedded yet are left
          out);
        - ``hybrid``: both fused by score, ``0.5 * bm25 / best_bm25 + 0.5 * cosine``
          (:data:`~ctx_langgraph.history.vectors.KEYWORD_WEIGHT`), over BM25's first 100 and
          the cosines' first 300 (or ``limit``).

        The result is a :class:`~ctx_langgraph.history.vectors.RankedHits` (a list) that says
        its ``mode``, how many filtered events had no vector yet (``unembedded``: searched by
        words only) and, when the query could not be embedded (``problem``), that it fell back
        to words. The rest of this describes the keyword ranking.

        Words match by stem ("went" finds "go", "going" and "goes"; "groups" finds "group");
        glue words ("the", "what", ...) are left out, and a query of only those raises
        ValueError naming it. Rare words outweigh common ones, and of two events with a word
        as often, the shorter ranks first; equal scores rank the newest (highest seq) first.
        A user's or assistant's message counts its speaker's ``name`` as one more word, so
        a question naming a person ranks what that person said first.
        The score is computed in Python, the same on every backend (docs/design.md §4). The
        filters are :meth:`search`'s; ``limit`` hits at most come back.

        Per word of the query, the newest matching events are read (300,
        :data:`~ctx_langgraph.history.rank.CANDIDATES_PER_STEM`), though all are counted: an
        older event having only words that match more is not ranked.

        Raises:
            ValueError: the query has no word besides glue words, or more than 32 distinct
                ones; a filter is out of range (as :meth:`search` says).
            TypeError: an argument of the wrong type, named.

        Examples:
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> texts = ["we go hiking on Sunday", "the hike went well", "a parade", "hiking again"]
            >>> with SQLiteHistoryStore.from_path(":memory:") as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage(t, id=f"m{n}") for n, t in enumerate(texts)])
            ...     [hit.event.seq for hit in store.rank("t", "where did we go")]
            ...     [hit.event.seq for hit in store.rank("t", "going hiking")]
            [2, 1]
            [2, 1, 4]
        """
        chosen = self.search_mode(mode)
        vector, problem = (
            (None, None) if chosen == "keyword" else (yield from self._query_vector(query))
        )
        call = self._rank(
            scope,
            query,
            chosen,
            vector,
            problem,
            limit=limit,
            min_seq=min_seq,
            max_seq=max_seq,
            since=since,
            until=until,
            roles=roles,
            tool_name=tool_name,
        )
        return (yield from self._op(call))

    arank = async_twin(rank)
