"""One effect protocol for the whole package: logic written once as a generator, run sync or async.

A flow is a generator that yields :class:`Call` effects and receives their results. A call
names its target object and a method; :func:`run` calls ``target.method(...)``, :func:`arun`
awaits ``target.amethod(...)`` (the ``a``-twin every store, summarizer and model in this
package has). An exception raised by a call is thrown into the flow at the ``yield``, so the
flow decides what it means (retry, fall back, fail). This is httpx's ``Auth.auth_flow`` idea,
generalised: a new effect needs no request class and no new branch in a dispatcher.

Examples:
    >>> class Store:
    ...     def get(self, key): return key.upper()
    ...     async def aget(self, key): return key.upper()
    >>> def flow(store):
    ...     value = yield call(store, "get", "a")
    ...     return value + "!"
    >>> run(flow(Store()))
    'A!'
    >>> import asyncio
    >>> asyncio.run(arun(flow(Store())))
    'A!'
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple, TypeVar

__all__ = ["Call", "Flow", "arun", "call", "run"]

T = TypeVar("T")

Flow = Generator["Call", Any, T]
"""A generator of :class:`Call` effects that returns ``T``."""


class Call(NamedTuple):
    """``target.method(*args, **kwargs)``, or awaited ``target.amethod(...)`` when run async.

    A named tuple: one is built per store statement and per node effect, so it must be cheap.
    """

    target: Any
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}  # noqa: RUF012 (never mutated; an empty default)
    sync_only: bool = False
    """The target has no async twin (a pure or in-memory call); the async runner calls it too."""

    def __call__(self) -> Any:
        return getattr(self.target, self.method)(*self.args, **self.kwargs)

    async def acall(self) -> Any:
        if self.sync_only:
            return self()
        return await getattr(self.target, "a" + self.method)(*self.args, **self.kwargs)


def call(target: Any, method: str, /, *args: Any, **kwargs: Any) -> Call:
    """The effect ``target.method(*args, **kwargs)`` (``target.amethod`` when run async)."""
    return Call(target, method, args, kwargs)


def run(flow: Generator[Call, Any, T]) -> T:
    """Run ``flow`` to its return value, making each call synchronously."""
    try:
        effect = next(flow)
        while True:
            try:
                result = effect()
            except Exception as exc:
                effect = flow.throw(exc)
                continue
            effect = flow.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value
    finally:
        flow.close()


async def arun(flow: Generator[Call, Any, T]) -> T:
    """Async twin of :func:`run`: each call awaits the target's ``a``-twin."""
    try:
        effect = next(flow)
        while True:
            try:
                result = await effect.acall()
            except Exception as exc:
                effect = flow.throw(exc)
                continue
            effect = flow.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value
    finally:
        flow.close()
