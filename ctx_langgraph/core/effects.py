"""One effect protocol for the whole package: logic written once as a generator, run sync or async.

A flow is a generator that yields :class:`Call` effects and receives their results. A call is
built from bound callables, the sync method and its async twin, and the arguments for both:
``rows = yield from call(store.read_events, store.aread_events, scope, from_seq=3)``.
:func:`run` calls the first, :func:`arun` awaits the second (``None``: there is no async twin,
and the async runner calls the sync one too). Typed with a ``ParamSpec``, so the type checker
checks the arguments against both twins and types the result by the sync one, and "find usages"
finds every caller of either. An exception raised by a call is thrown into the flow at the
``yield``, so the flow decides what it means (retry, fall back, fail). This is httpx's ``Auth.auth_flow`` idea,
generalised: a new effect needs no request class and no new branch in a dispatcher.

Examples:
    >>> class Store:
    ...     def get(self, key: str) -> str: return key.upper()
    ...     async def aget(self, key: str) -> str: return key.upper()
    >>> def flow(store: Store) -> Flow[str]:
    ...     value = yield from call(store.get, store.aget, "a")  # value: str
    ...     return value + "!"
    >>> run(flow(Store()))
    'A!'
    >>> import asyncio
    >>> asyncio.run(arun(flow(Store())))
    'A!'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

__all__ = ["Call", "Flow", "arun", "call", "run"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

Flow = Generator["Call[Any]", Any, T]
"""A generator of :class:`Call` effects that returns ``T``."""


@dataclass(slots=True)
class Call(Generic[R]):
    """``fn(*args, **kwargs)``, or awaited ``afn(*args, **kwargs)`` when run async (build it
    with :func:`call`; one is built per store statement, so it is slotted). ``yield from`` it
    to get its result typed; a bare ``yield`` works too (untyped)."""

    fn: Callable[..., R]
    afn: Callable[..., Awaitable[Any]] | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def __iter__(self) -> Generator[Call[Any], Any, R]:
        result: R = yield self
        return result


def call(
    fn: Callable[P, R],
    afn: Callable[P, Awaitable[Any]] | None,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> Call[R]:
    """The effect ``fn(*args, **kwargs)``, or ``await afn(*args, **kwargs)`` when run async
    (``afn=None``: no async twin, ``fn`` is called by both runners). Both twins are checked
    against the arguments; the result is typed by ``fn`` (the async twin's result is not
    checked against it: a generic pair such as ``run``/``arun`` would not unify)."""
    return Call(fn, afn, args, kwargs)


def run(flow: Flow[T]) -> T:
    """Run ``flow`` to its return value, making each call synchronously."""
    try:
        effect = next(flow)
        while True:
            try:
                result = effect.fn(*effect.args, **effect.kwargs)
            except Exception as exc:
                effect = flow.throw(exc)
                continue
            effect = flow.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value
    finally:
        flow.close()


async def arun(flow: Flow[T]) -> T:
    """Async twin of :func:`run`: each call awaits its async twin (or calls ``fn`` if none)."""
    try:
        effect = next(flow)
        while True:
            try:
                if effect.afn is None:
                    result = effect.fn(*effect.args, **effect.kwargs)
                else:
                    result = await effect.afn(*effect.args, **effect.kwargs)
            except Exception as exc:
                effect = flow.throw(exc)
                continue
            effect = flow.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value
    finally:
        flow.close()
