"""A store argument checked at build time: anything but a history store is refused, saying what
to pass instead."""

from __future__ import annotations

from ctx_langgraph.core.arguments import described

__all__ = ["require_store"]

_MAKE_ONE = (
    'SQLiteHistoryStore.from_path("history.sqlite") for a file, or '
    'PostgresHistoryStore.from_conn_string("postgresql://...") for PostgreSQL, then '
    "store.setup() once"
)


def _advice(value: object, expected: type) -> str:
    """How to make a store from what was given, when that says what the user meant."""
    if isinstance(value, type) and issubclass(value, expected):
        maker = "from_conn_string(...)" if "Postgres" in value.__name__ else "from_path(...)"
        return f"make an instance: {value.__name__}.{maker}, then store.setup() once"
    if isinstance(value, str):
        if value.startswith(("postgres://", "postgresql://")) or "dbname=" in value:
            return (
                "open it first: PostgresHistoryStore.from_conn_string(<that string>), then "
                "store.setup() once"
            )
        return (
            f'open it first: SQLiteHistoryStore.from_path("{value[:80]}"), then store.setup() once'
        )
    names = {cls.__name__ for cls in type(value).__mro__}
    if "BaseStore" in names:
        return (
            f"{type(value).__name__} is a LangGraph store: it holds long-term memory "
            "(memory=LongTermMemory(store=...)) or goes to .compile(store=...); the history "
            f"store is a separate object: {_MAKE_ONE}"
        )
    if "BaseCheckpointSaver" in names:
        return (
            f"{type(value).__name__} is a checkpointer: pass it to .compile(checkpointer=...) "
            f"(or create_agent(checkpointer=...)); the history store is a separate object: "
            f"{_MAKE_ONE}"
        )
    return _MAKE_ONE


def require_store(value: object, *, where: str, expected: type) -> None:
    """Raise a ``TypeError`` unless ``value`` is an instance of ``expected`` (a history store);
    ``where`` is the call and argument as the user wrote them.

    Examples:
        >>> from ctx_langgraph.history import HistoryStore
        >>> require_store("history.sqlite", where="f(store=...)", expected=HistoryStore)
        Traceback (most recent call last):
        ...
        TypeError: f(store=...) expects a HistoryStore instance, got the string 'history.sqlite': open it first: SQLiteHistoryStore.from_path("history.sqlite"), then store.setup() once
    """
    if isinstance(value, expected):
        return
    raise TypeError(
        f"{where} expects a {expected.__name__} instance, got {described(value)}: "
        f"{_advice(value, expected)}"
    )
