"""The scope a chat-model call belongs to, which the usage ledger books it under: the package's
own :func:`calls_in` scope, else the run's ``configurable``, the call's metadata, a fallback.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables.config import var_child_runnable_config

from ctx_langgraph.core.scope import DEFAULT_BRANCH, DEFAULT_TENANT, Scope

__all__ = ["calls_in", "scope_of_call"]

_CALLS_IN: ContextVar[Scope | None] = ContextVar("ctx_langgraph_calls_in", default=None)


@contextmanager
def calls_in(scope: Scope) -> Iterator[None]:
    """The chat-model calls made inside belong to ``scope``."""
    token = _CALLS_IN.set(scope)
    try:
        yield
    finally:
        _CALLS_IN.reset(token)


def _named(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int) and str(value).strip() else None


def _configurable() -> Mapping[str, Any]:
    """The ``configurable`` of the runnable the current call is made in."""
    config = var_child_runnable_config.get() or {}
    configurable = config.get("configurable")
    return configurable if isinstance(configurable, Mapping) else {}


def scope_of_call(metadata: Mapping[str, Any] | None, fallback: Scope | None) -> Scope | None:
    """The scope of a chat-model call: the :func:`calls_in` scope when it names the call's
    thread, else from the run's ``configurable``, the call's ``metadata``, or ``fallback``."""
    metadata = metadata or {}
    configurable = _configurable()
    thread = _named(configurable.get("thread_id")) or _named(metadata.get("thread_id"))
    ours = _CALLS_IN.get()
    if ours is not None and thread in (None, ours.thread_id):
        return ours
    if thread is None:
        return fallback
    if _named(configurable.get("thread_id")) == thread:
        source: Mapping[str, Any] = configurable
    else:
        source = metadata
    tenant = (
        _named(source.get("ctx_tenant"))
        or _named(metadata.get("ctx_tenant"))
        or (fallback.tenant if fallback else DEFAULT_TENANT)
    )
    branch = _named(source.get("ctx_branch")) or _named(metadata.get("ctx_branch"))
    return Scope(thread, tenant, branch or DEFAULT_BRANCH)
