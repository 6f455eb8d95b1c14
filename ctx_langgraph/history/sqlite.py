"""The embedded history store: stdlib ``sqlite3``, WAL mode, FTS5 search."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from pathlib import Path

from typing_extensions import Self

from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.index import IndexConfig, VectorIndex
from ctx_langgraph.storage.runner import utcnow
from ctx_langgraph.storage.sqlite import SQLiteDatabase

__all__ = ["SQLiteHistoryStore"]


class SQLiteHistoryStore(HistoryStore):
    """History store on SQLite: a file (WAL mode) or ``":memory:"``.

    One connection per store, used by one transaction at a time (a lock serializes threads;
    ``BEGIN IMMEDIATE`` serializes writers across processes sharing the file). Async methods
    run the same code in a worker thread.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> with SQLiteHistoryStore.from_path(":memory:") as store:
        ...     _ = store.setup()
        ...     store.append("thread-1", [HumanMessage("The order id is A-1042", id="m1")])[0].seq
        ...     store.search("thread-1", "A-1042").hits[0].event_id
        1
        'm1'
    """

    db: SQLiteDatabase

    def __init__(
        self,
        conn: sqlite3.Connection | SQLiteDatabase,
        *,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        """A store on an open ``sqlite3`` connection (or a :class:`SQLiteDatabase` over one)."""
        super().__init__(
            conn if isinstance(conn, SQLiteDatabase) else SQLiteDatabase(conn, clock=clock)
        )

    @classmethod
    def from_path(
        cls: type[Self],
        path: str | Path,
        *,
        busy_timeout: float = 30.0,
        clock: Callable[[], dt.datetime] = utcnow,
        index: IndexConfig | VectorIndex | None = None,
    ) -> Self:
        """Open (creating if needed) a database file, or an in-memory database for ``":memory:"``.

        Args:
            path: file path or ``":memory:"``.
            busy_timeout: seconds a writer waits for another process's write lock.
            index: search by meaning too: ``{"embed": <Embeddings or "provider:model">,
                "dims": N}``, as LangGraph's store index (:meth:`use_index`).
        """
        db = SQLiteDatabase.from_path(path, busy_timeout=busy_timeout, clock=clock)
        return cls(db).use_index(index)
