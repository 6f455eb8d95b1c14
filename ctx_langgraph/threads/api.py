"""Export, import and delete a whole thread: its history (every branch), its usage ledger rows
and, when given, its long-term memories.

Each operation is written once, as a flow of effects (:mod:`ctx_langgraph.core.effects`):
the database part runs as one transaction through the store's runner, then the memory part
and the edit listeners follow. The ``a``-twins run the same flow with the async methods.
"""

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


# --------------------------------------------------------------------------- delete


def _delete_flow(store: HistoryStore, scope: Scope | str, ledger: bool) -> Flow[dict[str, int]]:
    target = checked_scope(scope)
    op = ops.delete_thread(target, ledger=ledger)
    deleted: dict[str, int] = yield from call(store.db.run, store.db.arun, op, write=True)
    yield from call(store.notify_edited, store.anotify_edited, target, [], "thread_deleted")
    return deleted


def delete_thread(
    store: HistoryStore, scope: Scope | str, *, ledger: bool = False
) -> dict[str, int]:
    """Forget a thread: its events and their revisions, edit log, summary versions, branches
    and thread row, all branches at once, in one transaction (the branch of ``scope`` does
    not matter). With ``ledger`` its usage ledger rows go too (by default they stay, for
    billing). Returns the rows deleted per table.

    LangGraph's checkpoints are not here: delete them with the checkpointer's own
    ``delete_thread(thread_id)``. Edit listeners (a wired
    :class:`~ctx_langgraph.memory.LongTermMemory`) delete the thread's memories and purge
    those derived from it.

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


# --------------------------------------------------------------------------- export


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
    """Everything ``store`` remembers of a thread, as one JSON-ready document: every
    branch, every event (hidden ones marked ``visible: false``) with its earlier revisions,
    the edit log, every summary version with its status and key facts, the active pointers,
    and (``ledger``) its usage ledger rows. Deleted events are gone and are not in it. With
    ``memory``, the thread's long-term memories (its own and those derived from it, any
    status) are in ``"memories"``.
    :func:`import_thread` writes it back, into this or another store.

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


# --------------------------------------------------------------------------- import


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
    """Write a document made by :func:`export_thread` as a thread of ``store`` (its own
    tenant and thread id, or ``into``'s), in one transaction. The thread must have no
    history yet; summary version ids are kept, so one export goes into one database once.
    With ``memory``, the document's memories are written to it too (count in ``"memories"``).

    Raises:
        ScopeError: the thread already has history.
        DocumentError: the document is not an export this version reads, or a field of it
            is missing, mistyped or inconsistent (the error names its path); the whole
            document is checked first, so nothing was written.
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
