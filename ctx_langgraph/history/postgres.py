"""The production history store: PostgreSQL through psycopg 3 and psycopg_pool (the driver of
``langgraph-checkpoint-postgres``, so one database can serve both)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from typing_extensions import Self

from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.index import IndexConfig, VectorIndex
from ctx_langgraph.storage.postgres import PostgresDatabase
from ctx_langgraph.storage.runner import utcnow

__all__ = ["PostgresHistoryStore"]


class PostgresHistoryStore(HistoryStore):
    """History store on PostgreSQL (tsvector + GIN full-text search).

    Connections come from a pool opened on first use. A server that is down gives
    :class:`~ctx_langgraph.errors.HistoryStoreError` after ``connect_timeout``, one that refuses
    the connection at once, with its reason. The async methods use an ``AsyncConnectionPool``
    bound to the running event loop.

    Examples:
        .. code-block:: python

            with PostgresHistoryStore.from_conn_string("postgresql://user@localhost/db") as store:
                store.setup()
                store.append("thread-1", messages)
    """

    db: PostgresDatabase

    def __init__(
        self,
        conninfo: str | PostgresDatabase,
        *,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 5.0,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        """A store for a connection string (see :meth:`from_conn_string`), or over a
        :class:`~ctx_langgraph.storage.postgres.PostgresDatabase`."""
        if not isinstance(conninfo, PostgresDatabase):
            conninfo = PostgresDatabase(
                conninfo,
                min_size=min_size,
                max_size=max_size,
                connect_timeout=connect_timeout,
                clock=clock,
                owner=type(self).__name__,
            )
        super().__init__(conninfo)

    @classmethod
    def from_conn_string(
        cls: type[Self],
        conninfo: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 5.0,
        clock: Callable[[], dt.datetime] = utcnow,
        index: IndexConfig | VectorIndex | None = None,
    ) -> Self:
        """A store for a libpq connection string or URL (``postgresql://user@host:port/db``).

        Args:
            conninfo: the connection string.
            min_size: connections the pool keeps open.
            max_size: most connections the pool opens at once.
            connect_timeout: seconds to wait for a connection before raising HistoryStoreError.
            index: search by meaning too: ``{"embed": <Embeddings or "provider:model">,
                "dims": N}``, as LangGraph's store index (:meth:`use_index`). Vectors are a
                plain column searched exactly within the thread (no pgvector needed).

        Raises:
            TypeError: ``conninfo`` is not a string (``None``, a number), at once.
            HistoryStoreError: ``conninfo`` is a string libpq cannot read, at once (its
                password never in the message); on first use, a server that refuses the
                connection, with its reason (``database "x" does not exist``).
        """
        store = cls(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            connect_timeout=connect_timeout,
            clock=clock,
        )
        return store.use_index(index)
