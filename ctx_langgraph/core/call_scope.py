"""The scope a chat-model call belongs to: what the usage ledger books it under.

A LangGraph run names its scope in ``configurable`` (``thread_id``, ``ctx_tenant``,
``ctx_branch``), and the state may have moved to another branch since (a fork). A callback
handler sees neither: LangGraph copies ``thread_id`` into a call's run metadata, never
``ctx_tenant`` or ``ctx_branch``. So the package's own steps say which scope the model calls
they make belong to (:func:`calls_in`, around the summarizer, the memory extractor and the
agent's model call), and :func:`scope_of_call` resolves a call's scope from, in order: that
scope, the ``configurable`` of the run the call is made in, the call's metadata, the
handler's own scope.
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
    """The chat-model calls made inside belong to ``scope`` (the run's tenant and thread, and
    the branch its state is on): a ledger handler books them there.

    Examples:
        >>> with calls_in(Scope("t", tenant="acme", branch="b2")):
        ...     scope_of_call({"thread_id": "t"}, None)
        Scope(thread_id='t', tenant='acme', branch='b2')
    """
    token = _CALLS_IN.set(scope)
    try:
        yield
    finally:
        _CALLS_IN.reset(token)


def _named(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int) and str(value).strip() else None


def _configurable() -> Mapping[str, Any]:
    """The ``configurable`` of the runnable the current call is made in (LangGraph sets it for
    every node it runs, and a node's children inherit it)."""
    config = var_child_runnable_config.get() or {}
    configurable = config.get("configurable")
    return configurable if isinstance(configurable, Mapping) else {}


def scope_of_call(metadata: Mapping[str, Any] | None, fallback: Scope | None) -> Scope | None:
    """The scope of a chat-model call (see the module): the package's :func:`calls_in` scope
    when it names the call's thread; else the thread, tenant and branch the run's
    ``configurable`` names; else the call's metadata (``thread_id``, ``ctx_tenant``,
    ``ctx_branch``); else ``fallback`` (None: no scope is known).

    Examples:
        >>> scope_of_call({"thread_id": "t", "ctx_tenant": "acme"}, None)
        Scope(thread_id='t', tenant='acme', branch='main')
        >>> scope_of_call({}, Scope("fixed")) == Scope("fixed")
        True
    """
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
    else:  # a call's metadata of its own (a model called with a config of its own)
        source = metadata
    tenant = (
        _named(source.get("ctx_tenant"))
        or _named(metadata.get("ctx_tenant"))
        or (fallback.tenant if fallback else DEFAULT_TENANT)
    )
    branch = _named(source.get("ctx_branch")) or _named(metadata.get("ctx_branch"))
    return Scope(thread, tenant, branch or DEFAULT_BRANCH)
