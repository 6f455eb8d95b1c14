"""Search: the filters (checked when built), the query over a branch's visible events, and the
page cursor (the last hit's seq and the ordering)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ctx_langgraph.core import cursor as core_cursor
from ctx_langgraph.core.text import match_tokens
from ctx_langgraph.history.args import (
    MAX_QUERY_WORDS,
    MAX_ROLES,
    SEQ_MAX,
    limit_arg,
    seq_bound,
    shown,
    text_arg,
)
from ctx_langgraph.history.branches import Lineage, lineage_clause, read_branch
from ctx_langgraph.history.rows import EVENT_COLS, event_from_row
from ctx_langgraph.history.types import Scope, SearchPage
from ctx_langgraph.storage.codec import store_names, store_text
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.storage.statements import Op, Stmt, marks

__all__ = ["SearchFilter", "decode_cursor", "encode_cursor", "filter_clause", "search"]


def encode_cursor(seq: int, newest_first: bool) -> str:
    """The cursor of a search page that ends at ``seq``.

    Examples:
        >>> encode_cursor(3, False)
        'eyJ2IjoxLCJzZXEiOjMsImRlc2MiOmZhbHNlfQ'
        >>> decode_cursor(encode_cursor(3, False), False)
        3
    """
    return core_cursor.encode_cursor({"v": 1, "seq": seq, "desc": newest_first})


def decode_cursor(cursor: str, newest_first: bool) -> int:
    """The seq a cursor made by :func:`encode_cursor` continues from.

    Raises:
        ValueError: not such a cursor (a forged seq that is not a whole number within the
            64-bit range included), or one made for the other ordering.
    """
    try:
        data = core_cursor.decode_cursor(cursor)
        seq = data["seq"]
        if type(seq) is not int or not 0 <= seq <= SEQ_MAX:
            raise ValueError(f"seq {shown(seq)} is not a seq")
        if data.get("v") != 1 or data.get("desc") is not newest_first:
            raise ValueError("cursor made for another ordering")
    except (ValueError, KeyError) as exc:
        raise ValueError(f"malformed search cursor {shown(cursor)}: {exc}") from None
    return seq


@dataclass(frozen=True)
class SearchFilter:
    """What a search asks for, checked when built: wrong types raise TypeError naming the
    argument, a seq bound beyond the 64-bit range is clamped (a ``min_seq`` above every seq just
    finds nothing), and a malformed cursor or query raises ValueError."""

    query: str | None = None
    min_seq: int | None = None
    max_seq: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    roles: tuple[str, ...] = ()
    tool_name: str | None = None
    limit: int = 20
    cursor: str | None = None
    newest_first: bool = False

    def __post_init__(self) -> None:
        checked = {
            "limit": limit_arg("limit", self.limit),
            "min_seq": None if self.min_seq is None else seq_bound("min_seq", self.min_seq),
            "max_seq": None if self.max_seq is None else seq_bound("max_seq", self.max_seq),
            "roles": tuple(dict.fromkeys(text_arg("roles", role) for role in self.roles)),
            "newest_first": bool(self.newest_first),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if len(self.roles) > MAX_ROLES:
            raise ValueError(
                f"roles names {len(self.roles)} distinct roles; a search takes at most {MAX_ROLES}"
            )
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dt.datetime):
                raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
        if self.tool_name is not None:
            text_arg("tool_name", self.tool_name)
        if self.cursor is not None:
            decode_cursor(self.cursor, self.newest_first)
        if self.query is not None:
            tokens = match_tokens(text_arg("query", self.query))
            if not tokens:
                raise ValueError(f"search query {shown(self.query)} has no searchable words")
            if len(tokens) > MAX_QUERY_WORDS:
                raise ValueError(
                    f"search query has {len(tokens)} distinct words; at most {MAX_QUERY_WORDS} "
                    "are matched at once (every one must be in a hit): search for fewer"
                )


def filter_clause(
    d: Dialect, scope: Scope, chain: Lineage, flt: SearchFilter, *, matched: bool = False
) -> tuple[list[str], list[Any]]:
    """(conditions, params) selecting the visible events ``e`` of a branch (``chain``) that
    pass ``flt``'s filters (not the query or cursor). ``matched``: the events are found by a
    full-text match, so on PostgreSQL the thread's columns are checked on the rows found, not
    through their btree index (which the planner would scan for nothing)."""
    clause, clause_params = lineage_clause(chain)
    thread = ["(e.tenant || '') = ?", "(e.thread_id || '') = ?"]
    if not (matched and d.name == "postgres"):
        thread = ["e.tenant = ?", "e.thread_id = ?"]
    where = [*thread, clause, "e.visible = ?"]
    args: list[Any] = [scope.tenant, scope.thread_id, *clause_params, True]
    if flt.min_seq is not None:
        where.append("e.seq >= ?")
        args.append(flt.min_seq)
    if flt.max_seq is not None:
        where.append("e.seq <= ?")
        args.append(flt.max_seq)
    if flt.since is not None:
        where.append("e.created_at >= ?")
        args.append(d.ts(flt.since))
    if flt.until is not None:
        where.append("e.created_at < ?")
        args.append(d.ts(flt.until))
    if flt.roles:
        where.append(f"e.role IN ({marks(len(flt.roles))})")
        args.extend(store_text(role) for role in flt.roles)
    if flt.tool_name is not None:
        where.append(d.contains("e.tool_names"))
        args.append(store_names([flt.tool_name]))
    return where, args


def search(d: Dialect, scope: Scope, flt: SearchFilter) -> Op[SearchPage]:
    """One page of the branch's visible events matching ``flt``, in seq order (see
    :meth:`~ctx_langgraph.history.HistoryStore.search`)."""
    found = yield from read_branch(d, scope)
    if found is None:
        return SearchPage((), None, False)
    where, args = filter_clause(d, scope, found[1], flt)
    source = "ctx_events e"
    if flt.query is not None:
        source, match, match_params = d.text_match(
            scope.tenant, scope.thread_id, match_tokens(flt.query)
        )
        where.insert(0, match)
        args[0:0] = match_params
    if flt.cursor is not None:
        where.append("e.seq < ?" if flt.newest_first else "e.seq > ?")
        args.append(decode_cursor(flt.cursor, flt.newest_first))
    order = "DESC" if flt.newest_first else "ASC"
    rows = yield Stmt(
        f"SELECT {EVENT_COLS} FROM {source} WHERE {' AND '.join(where)} "
        f"ORDER BY e.seq {order} LIMIT ?",
        (*args, flt.limit + 1),
        "all",
    )
    hits = tuple(event_from_row(d, row) for row in rows[: flt.limit])
    has_more = len(rows) > flt.limit
    return SearchPage(
        hits, encode_cursor(hits[-1].seq, flt.newest_first) if has_more else None, has_more
    )
