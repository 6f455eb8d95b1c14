"""The storage core: statements, dialects, one runner, composed migrations.

Below every store (history, usage ledger): it imports nothing above it.

- :mod:`~ctx_langgraph.storage.statements`: :class:`Stmt`, what an operation yields, and ``Op``.
- :mod:`~ctx_langgraph.storage.dialects`: what differs between SQLite and PostgreSQL.
- :mod:`~ctx_langgraph.storage.codec`: text as both backends store it.
- :mod:`~ctx_langgraph.storage.runner`: :class:`Database`, which runs an operation in one
  transaction, sync or async; :mod:`~ctx_langgraph.storage.sqlite` and
  :mod:`~ctx_langgraph.storage.postgres` are its backends.
- :mod:`~ctx_langgraph.storage.migrations`: the numbered migrations, composed from each domain's
  table declarations in :mod:`~ctx_langgraph.storage.tables`.
"""
