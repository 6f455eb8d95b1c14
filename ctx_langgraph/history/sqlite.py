"""The embedded history store: stdlib ``sqlite3``, WAL mode, FTS5 search."""

from __future__ import annotations

from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.storage.sqlite import SQLiteDatabase

__all__ = ["SQLiteHistoryStore"]


class SQLiteHistoryStore(HistoryStore, SQLiteDatabase):
    """History store on SQLite: a file (WAL mode) or ``":memory:"``.

    One connection per store, used by one transaction at a time (a lock serializes threads;
    ``BEGIN IMMEDIATE`` serializes writers across processes sharing the file). Async methods
    run the same code in a worker thread.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> with SQLiteHistoryStore.from_path(":memory:") as store:
        ...     _ = store.setup()
        ...     store.append("thread-1", [HumanMessage("The order id is A-1042", id="m1")])[0].seq
        ...     store.search("thread-1", "A-1042").hits[0].event_id
        1
        'm1'
    """
