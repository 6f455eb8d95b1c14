"""What every part of the history store shares: the database it runs on, and its edit listeners."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ctx_langgraph.history.types import Scope
from ctx_langgraph.storage.runner import Database

__all__ = ["EditListener", "StoreBase"]


@runtime_checkable
class EditListener(Protocol):
    """Told after events are deleted, hidden or revised, or a thread is deleted (``kind`` is
    ``"deleted"``, ``"hidden"``, ``"revised"`` or ``"thread_deleted"``), so what was derived
    from them elsewhere goes too. :class:`~ctx_langgraph.memory.LongTermMemory` is one."""

    def events_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...

    async def aevents_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...


class StoreBase(Database):
    """A database with edit listeners (the history store's parts all derive from it)."""

    _edit_listeners: tuple[EditListener, ...] = ()

    def add_edit_listener(self, listener: EditListener) -> None:
        """Tell ``listener`` about every delete, hide and revision made through this store
        object, after it commits (adding the same listener twice is a no-op)."""
        if not any(existing is listener for existing in self._edit_listeners):
            self._edit_listeners = (*self._edit_listeners, listener)

    def notify_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None:
        """Tell the edit listeners that ``event_ids`` of ``scope`` were edited (``kind`` as
        :class:`EditListener` says); nothing is told of an empty edit but ``thread_deleted``."""
        if event_ids or kind == "thread_deleted":
            for listener in self._edit_listeners:
                listener.events_edited(scope, event_ids, kind)

    async def anotify_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None:
        """Async twin of :meth:`notify_edited`."""
        if event_ids or kind == "thread_deleted":
            for listener in self._edit_listeners:
                await listener.aevents_edited(scope, event_ids, kind)
