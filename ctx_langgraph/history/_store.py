"""What every part of the history store shares: the database it runs on, and its edit listeners."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

from typing_extensions import Self

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


class StoreBase:
    """The database a store runs its operations on, and its edit listeners (the history
    store's parts all derive from it). The store holds its database (``db``), it is not one:
    what other packages need of it is a method of the store, never a query of their own."""

    _edit_listeners: tuple[EditListener, ...] = ()

    def __init__(self, db: Database) -> None:
        self.db = db
        """The database the store's operations run on (one transaction each)."""

    @property
    def clock(self) -> Callable[[], dt.datetime]:
        """What "now" is for the rows this store writes (the database's clock)."""
        return self.db.clock

    def setup(self) -> int:
        """Create or migrate the tables (idempotent, safe to call from several processes).

        Returns:
            The schema version now in the database.
        """
        return self.db.setup()

    async def asetup(self) -> int:
        """Async twin of :meth:`setup`."""
        return await self.db.asetup()

    def schema_version(self) -> int:
        """The schema version the database is at (0: no tables yet), read without the check
        every other operation makes first (:meth:`setup` migrates it)."""
        return self.db.schema_version()

    async def aschema_version(self) -> int:
        """Async twin of :meth:`schema_version`."""
        return await self.db.aschema_version()

    def close(self) -> None:
        """Release the database's connections."""
        self.db.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await self.db.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

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
