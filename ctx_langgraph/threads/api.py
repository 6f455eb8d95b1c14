"""Export, import and delete a whole thread: its history (every branch), its usage ledger rows
and, when given, its long-term memories (each written once as an effect flow, run sync or async)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.scope import Scope, checked_scope
from ctx_langgraph.threads import ops
from ctx_langgraph.threads.document import export_scope

if TYPE_CHECKING:
    from ctx_langgraph.history import HistoryStore
    from ctx_langgraph.memory.store import LongTermMemory

__all__ = [
    "adelete_thread",
    "aexport_thread",
    "aimport_thread",
    "delete_thread",
    "export_thread",
    "import_thread",
]


def _delete_flow(store: HistoryStore, scope: Scope | str, ledger: bool) -> Flow[dict[str, int]]:
    target = checked_scope(scope)
    op = ops.delete_thread(target, ledger=ledger)
    deleted: dict[str, int] = yield from call(store.db.run, store.db.arun, op, write=True)
    yield from call(store.notify_edited, store.anotify_edited, target, [], "thread_deleted")
    return deleted


def delete_thread(
    store: HistoryStore, scope: Scope | str, *, ledger: bool = False
) -> dict[str, int]:
    """Forget a thread, every branch, in one transaction: events, revisions, edit log, summary
    versions, branches and thread row; with ``ledger`` its usage ledger rows too (by default
    they stay, for billing). Returns the rows deleted per table. Edit listeners (a wired
    :class:`~ctx_langgraph.memory.LongTermMemory`) delete its memories; LangGraph's checkpoints
    go with the checkpointer's own ``delete_thread(thread_id)``.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> with SQLiteHistoryStore.from_path(":memory:") as store:
        ...     _ = store.setup()
        ...     _ = store.append("t", [HumanMessage("hello", id="m1")])
        ...     delete_thread(store, "t")["ctx_events"], store.read_events("t")
        (1, [])
    """
    return run(_delete_flow(store, scope, ledger))


async def adelete_thread(
    store: HistoryStore, scope: Scope | str, *, ledger: bool = False
) -> dict[str, int]:
    """Async twin of :func:`delete_thread`."""
    return await arun(_delete_flow(store, scope, ledger))


def _export_flow(
    store: HistoryStore, scope: Scope | str, ledger: bool, memory: LongTermMemory | None
) -> Flow[dict[str, Any]]:
    target = checked_scope(scope)
    op = ops.export_thread(store.db.dialect, target, store.clock(), ledger=ledger)
    document: dict[str, Any] = yield from call(store.db.run, store.db.arun, op)
    if memory is not None:
        document["memories"] = yield from call(memory.export_thread, memory.aexport_thread, target)
    return document


def export_thread(
    store: HistoryStore,
    scope: Scope | str,
    *,
    ledger: bool = True,
    memory: LongTermMemory | None = None,
) -> dict[str, Any]:
    """Everything ``store`` remembers of a thread as one JSON-ready document: every branch,
    event (hidden ones ``visible: false``) and earlier revision, the edit log, every summary
    version, the active pointers, with ``ledger`` its usage ledger rows, and with ``memory`` its
    long-term memories (``"memories"``). :func:`import_thread` writes it back, into any store.

    Raises:
        ScopeError: the thread has no history.

    Examples:
        >>> import json
        >>> from langchain_core.messages import HumanMessage
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> with SQLiteHistoryStore.from_path(":memory:") as store:
        ...     _ = store.setup()
        ...     _ = store.append("t", [HumanMessage("hello", id="m1")])
        ...     document = json.loads(json.dumps(export_thread(store, "t")))
        >>> document["format"], [e["message"]["data"]["content"] for e in document["events"]]
        ('ctx-langgraph/thread', ['hello'])
        >>> with SQLiteHistoryStore.from_path(":memory:") as fresh:
        ...     _ = fresh.setup()
        ...     import_thread(fresh, document)["events"], fresh.read_events("t")[0].text
        (1, 'hello')
    """
    return run(_export_flow(store, scope, ledger, memory))


async def aexport_thread(
    store: HistoryStore,
    scope: Scope | str,
    *,
    ledger: bool = True,
    memory: LongTermMemory | None = None,
) -> dict[str, Any]:
    """Async twin of :func:`export_thread`."""
    return await arun(_export_flow(store, scope, ledger, memory))


def _import_flow(
    store: HistoryStore,
    document: dict[str, Any],
    into: Scope | str | None,
    memory: LongTermMemory | None,
) -> Flow[dict[str, int]]:
    target = checked_scope(into) if into is not None else export_scope(document)
    op = ops.import_thread(store.db.dialect, document, target)
    counts: dict[str, int] = yield from call(store.db.run, store.db.arun, op, write=True)
    if memory is not None:
        records = document.get("memories") or []
        counts["memories"] = yield from call(
            memory.import_records, memory.aimport_records, records, into=target
        )
    return counts


def import_thread(
    store: HistoryStore,
    document: dict[str, Any],
    *,
    into: Scope | str | None = None,
    memory: LongTermMemory | None = None,
) -> dict[str, int]:
    """Write a document made by :func:`export_thread` as a thread of ``store`` (its own tenant
    and thread id, or ``into``'s) that has no history yet, in one transaction; summary version
    ids are kept, so one export goes into one database once. With ``memory``, its memories too.

    Raises:
        ScopeError: the thread already has history.
        DocumentError: the document is not an export this version reads, or a field of it
            is missing, mistyped or inconsistent (named by its path); nothing was written.
    """
    return run(_import_flow(store, document, into, memory))


async def aimport_thread(
    store: HistoryStore,
    document: dict[str, Any],
    *,
    into: Scope | str | None = None,
    memory: LongTermMemory | None = None,
) -> dict[str, int]:
    """Async twin of :func:`import_thread`."""
    return await arun(_import_flow(store, document, into, memory))
