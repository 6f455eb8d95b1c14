"""The history store's public search method, a thin call of
:func:`ctx_langgraph.history.search.search`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.history import search as search_ops
from ctx_langgraph.history._store import StoreBase
from ctx_langgraph.history.types import Scope, SearchPage
from ctx_langgraph.storage.statements import Op

__all__ = ["SearchAPI"]


class SearchAPI(StoreBase):
    """Find a branch's visible events, one page at a time."""

    def _search(self, scope: Scope | str, **filters: Any) -> Op[SearchPage]:
        roles = filters.pop("roles", None)
        if isinstance(roles, str):
            roles = (roles,)
        flt = search_ops.SearchFilter(roles=tuple(roles or ()), **filters)
        return search_ops.search(self.dialect, checked_scope(scope), flt)

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
    ) -> SearchPage:
        """Find visible events of a branch, one page at a time, in seq order.

        ``query`` matches events containing every word of it (full-text: SQLite FTS5,
        PostgreSQL tsvector). The other filters narrow by seq range, time range
        (``since <= created_at < until``), role and tool name (tool results of, and AI calls
        to, that tool). Pass a page's ``next_cursor`` back to get the next page; pages never
        repeat or skip a hit, even while events are appended.

        Example:
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
        return self.run(call)

    async def asearch(
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
    ) -> SearchPage:
        """Async twin of :meth:`search`."""
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
        return await self.arun(call)
