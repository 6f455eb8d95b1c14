"""One effect protocol: logic written once as a generator of :class:`Call` effects, run sync or async.

``rows = yield from call(store.read_events, store.aread_events, scope, from_seq=3)``:
:func:`run` calls the sync callable, :func:`arun` awaits the async twin (``None``: calls the sync
one). An exception a call raises is thrown into the flow at its ``yield``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, cast

__all__ = ["Call", "Flow", "arun", "call", "run"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

Flow = Generator["Call[Any]", Any, T]
"""A generator of :class:`Call` effects that returns ``T``."""


@dataclass(slots=True)
class Call(Generic[R]):
    """``fn(*args, **kwargs)``, or awaited ``afn(...)`` when run async; ``yield from`` it."""

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
    """The effect ``fn(*args, **kwargs)``, awaited ``afn(...)`` when run async (None: ``fn``)."""
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
            else:
                effect = flow.send(result)
    except StopIteration as stop:
        return cast(T, stop.value)
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
            else:
                effect = flow.send(result)
    except StopIteration as stop:
        return cast(T, stop.value)
    finally:
        flow.close()
