"""What every part of the history store shares: its database, its edit listeners, and the
decorators that run a store method written once as a flow sync or async."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

from typing_extensions import Self

from ctx_langgraph.core.effects import Call, Flow, arun, call, run
from ctx_langgraph.history.types import Scope
from ctx_langgraph.storage.runner import Database
from ctx_langgraph.storage.statements import Op

__all__ = ["EditListener", "StoreBase", "async_twin", "flow_method"]

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def flow_method(flow: Callable[Concatenate[S, P], Flow[R]]) -> Callable[Concatenate[S, P], R]:
    """The method that runs the flow ``flow`` builds synchronously."""

    @functools.wraps(flow)
    def method(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return run(flow(self, *args, **kwargs))

    return method


def async_twin(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The async twin of a :func:`flow_method`: the same flow, run async."""
    flow: Callable[..., Flow[R]] = method.__wrapped__  # type: ignore[attr-defined]

    @functools.wraps(flow)
    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await arun(flow(self, *args, **kwargs))

    twin.__name__ = twin.__qualname__ = f"a{method.__name__}"
    twin.__doc__ = f"Async twin of :meth:`{method.__name__}`."
    return twin


@runtime_checkable
class EditListener(Protocol):
    """Told after events are deleted, hidden or revised, or a thread is deleted (``kind`` is
    ``"deleted"``, ``"hidden"``, ``"revised"`` or ``"thread_deleted"``), so what was derived
    from them elsewhere goes too. :class:`~ctx_langgraph.memory.LongTermMemory` is one."""

    def events_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...

    async def aevents_edited(self, scope: Scope, event_ids: Sequence[str], kind: str) -> None: ...


class StoreBase:
    """The database a store runs its operations on (``db``), and its edit listeners."""

    _edit_listeners: tuple[EditListener, ...] = ()

    def __init__(self, db: Database) -> None:
        self.db = db
        """The database the store's operations run on (one transaction each)."""

    @property
    def clock(self) -> Callable[[], dt.datetime]:
        """What "now" is for the rows this store writes (the database's clock)."""
        return self.db.clock

    def _op(self, op: Op[T], write: bool = False) -> Call[T]:
        """The effect running ``op`` on the store's database, in one transaction."""
        return Call(self.db.run, self.db.arun, (op,), {"write": write})

    @flow_method
    def setup(self) -> Flow[int]:
        """Create or migrate the tables (idempotent, safe to call from several processes).

        Returns:
            The schema version now in the database.
        """
        return (yield from call(self.db.setup, self.db.asetup))

    asetup = async_twin(setup)

    @flow_method
    def schema_version(self) -> Flow[int]:
        """The schema version the database is at (0: no tables yet), read without the check
        every other operation makes first (:meth:`setup` migrates it)."""
        return (yield from call(self.db.schema_version, self.db.aschema_version))

    aschema_version = async_twin(schema_version)

    @flow_method
    def close(self) -> Flow[None]:
        """Release the database's connections."""
        yield from call(self.db.close, self.db.aclose)

    aclose = async_twin(close)

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

    def _notify(self, scope: Scope, event_ids: Sequence[str], kind: str) -> Flow[None]:
        """Tell the edit listeners that ``event_ids`` of ``scope`` were edited (``kind`` as
        :class:`EditListener` says); nothing is told of an empty edit but ``thread_deleted``."""
        if event_ids or kind == "thread_deleted":
            for listener in self._edit_listeners:
                yield from call(
                    listener.events_edited, listener.aevents_edited, scope, event_ids, kind
                )

    notify_edited = flow_method(_notify)
    anotify_edited = async_twin(notify_edited)
