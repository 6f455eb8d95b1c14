"""Drive a node's flow: a generator that yields I/O requests and receives their results.

The nodes write their logic once, as such a generator; these two runners serve the requests with
sync or async I/O. An exception raised while serving a request is thrown into the flow, which
decides what it means (retry, reconcile, fail).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["arun_flow", "run_flow"]

T = TypeVar("T")


def run_flow(flow: Generator[Any, Any, T], serve: Callable[[Any], Any]) -> T:
    """Run ``flow`` to its return value, serving each request with ``serve``."""
    try:
        request = next(flow)
        while True:
            try:
                result = serve(request)
            except Exception as exc:
                request = flow.throw(exc)
                continue
            request = flow.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value


async def arun_flow(flow: Generator[Any, Any, T], serve: Callable[[Any], Awaitable[Any]]) -> T:
    """Async twin of :func:`run_flow`."""
    try:
        request = next(flow)
        while True:
            try:
                result = await serve(request)
            except Exception as exc:
                request = flow.throw(exc)
                continue
            request = flow.send(result)
    except StopIteration as stop:
        value: T = stop.value
        return value
