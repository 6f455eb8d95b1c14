"""Where things live: :class:`Scope` (tenant, thread, branch) and how a run names its scope."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from ctx_langgraph.errors import ScopeError, ThreadIdMissing

__all__ = [
    "DEFAULT_BRANCH",
    "DEFAULT_TENANT",
    "Scope",
    "checked_scope",
    "ensure_scope",
    "scope_from_config",
]

log = logging.getLogger(__name__)

DEFAULT_TENANT = "default"
"""The tenant of a scope made from a thread id alone (``configurable.ctx_tenant`` overrides)."""
DEFAULT_BRANCH = "main"
"""The branch of a thread before any fork (``configurable.ctx_branch`` overrides)."""
_MAX_SCOPE_PART = 256


def _check_part(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ScopeError(f"scope {name} must be a string, got {type(value).__name__}: {value!r}")
    if not value or value != value.strip():
        raise ScopeError(
            f"scope {name} must be non-empty without surrounding spaces, got {value!r}"
        )
    if len(value) > _MAX_SCOPE_PART:
        raise ScopeError(
            f"scope {name} is {len(value)} characters long; the limit is {_MAX_SCOPE_PART}"
        )
    if any(ord(ch) < 32 for ch in value):
        raise ScopeError(f"scope {name} contains control characters: {value!r}")
    return value


@dataclass(frozen=True, order=True)
class Scope:
    """Where events live: one branch of one thread of one tenant.

    ``thread_id`` is the LangGraph thread id (``config["configurable"]["thread_id"]``). Every
    thread has the default branch ``"main"``; other branches are made by
    :meth:`~ctx_langgraph.history.HistoryStore.create_branch`.

    Examples:
        >>> Scope("thread-1")
        Scope(thread_id='thread-1', tenant='default', branch='main')
        >>> str(Scope("t", tenant="acme", branch="retry-2"))
        'acme/t@retry-2'
    """

    thread_id: str
    tenant: str = DEFAULT_TENANT
    branch: str = DEFAULT_BRANCH

    def __post_init__(self) -> None:
        for part in ("thread_id", "tenant", "branch"):
            _check_part(part, getattr(self, part))

    def __str__(self) -> str:
        return f"{self.tenant}/{self.thread_id}@{self.branch}"

    def on_branch(self, branch: str) -> Scope:
        """The same thread and tenant on another branch."""
        return Scope(self.thread_id, self.tenant, branch)


def ensure_scope(scope: Scope | str) -> Scope:
    """Accept a :class:`Scope` or a bare thread id (default tenant and branch)."""
    if isinstance(scope, Scope):
        return scope
    if isinstance(scope, str):
        return Scope(scope)
    raise ScopeError(f"expected a Scope or a thread id string, got {type(scope).__name__}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def checked_scope(scope: Scope | str) -> Scope:
    """:func:`ensure_scope`, refusing a part that holds a lone surrogate too."""
    checked = ensure_scope(scope)
    for part in ("tenant", "thread_id", "branch"):
        if _SURROGATE.search(getattr(checked, part)):
            raise ScopeError(f"scope {part} contains a lone surrogate: {getattr(checked, part)!r}")
    return checked


def scope_from_config(
    config: RunnableConfig | None, context: dict[str, Any] | None = None
) -> Scope:
    """The run's scope: ``thread_id`` (and ``ctx_tenant``) from ``configurable``, the branch from
    the state's context (or ``configurable["ctx_branch"]``). Never from model-supplied data.

    Raises:
        ThreadIdMissing: the run has no ``configurable["thread_id"]`` (None or empty): it has
            no thread, and its messages are never pooled with another run's.

    Examples:
        >>> scope_from_config({"configurable": {"thread_id": "t", "ctx_tenant": "acme"}})
        Scope(thread_id='t', tenant='acme', branch='main')
        >>> scope_from_config({})
        Traceback (most recent call last):
        ...
        ctx_langgraph.errors.ThreadIdMissing: this run has no thread id, ...
    """
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ThreadIdMissing
    branch = (context or {}).get("branch") or configurable.get("ctx_branch") or DEFAULT_BRANCH
    return Scope(str(thread_id), str(configurable.get("ctx_tenant") or DEFAULT_TENANT), str(branch))
