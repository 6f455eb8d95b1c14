"""The production history store: PostgreSQL through psycopg 3 and psycopg_pool.

The same driver as ``langgraph-checkpoint-postgres``, so one database can serve both.
"""

from __future__ import annotations

from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.storage.postgres import PostgresDatabase

__all__ = ["PostgresHistoryStore"]


class PostgresHistoryStore(HistoryStore, PostgresDatabase):
    """History store on PostgreSQL (tsvector + GIN full-text search).

    Connections come from a pool opened on first use; connecting is bounded by
    ``connect_timeout``, so a server that is down gives
    :class:`~ctx_langgraph.errors.HistoryStoreError` quickly instead of hanging. The async
    methods use an ``AsyncConnectionPool`` bound to the running event loop.

    Example:
        .. code-block:: python

            with PostgresHistoryStore.from_conn_string("postgresql://user@localhost/db") as store:
                store.setup()
                store.append("thread-1", messages)
    """
