"""The wiring's arguments checked at build time, the same way by every entry point: a wrong
object is a ``TypeError`` naming the argument, what it got and what to pass."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from ctx_langgraph.compaction.summarizers import resolve_summary_model
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.arguments import require_instance
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.storage.required import require_store
from ctx_langgraph.usage.ledger import UsageLedger

__all__ = ["check_wiring_arguments", "checked_arguments", "require_chat_model"]

F = TypeVar("F", bound=Callable[..., Any])


def _is_summarizer(value: object) -> bool:
    return callable(getattr(value, "summarize", None)) and callable(
        getattr(value, "asummarize", None)
    )


_EXPECTED: dict[str, tuple[type | tuple[type, ...], str, str]] = {
    "config": (
        ContextConfig,
        "a ContextConfig",
        "pass ContextConfig(context_window=..., trigger=..., ...), or leave it unset",
    ),
    "ledger": (
        UsageLedger,
        "a UsageLedger",
        "pass UsageLedger(store), or leave it unset to book on the history store",
    ),
    "summarizer": (
        (),
        "a Summarizer (an object with summarize() and asummarize())",
        "pass ExtractiveSummarizer() or LLMSummarizer(chat_model); a chat model or a "
        'spec such as "openai:gpt-4o-mini" goes to summary_model=...',
    ),
    "memory": (
        LongTermMemory,
        "a LongTermMemory",
        "pass LongTermMemory(store=<a LangGraph BaseStore>, ...)",
    ),
    "pinned_rules": (
        PinnedRules,
        "a PinnedRules",
        'pass PinnedRules(text="...") or PinnedRules.from_file(path)',
    ),
}
"""What each optional wiring argument must be: ``(type, what it is, advice)``, in check order."""


def check_wiring_arguments(where: str, *, store: object, **optional: object) -> None:
    """Raise a ``TypeError`` naming the first argument of ``where`` that is not what it takes
    (``store``, and the :data:`_EXPECTED` ones given)."""
    require_store(store, where=f"{where}(store=...)", expected=HistoryStore)
    for name, (expected, what, advice) in _EXPECTED.items():
        value = optional.get(name)
        if value is not None and not (name == "summarizer" and _is_summarizer(value)):
            require_instance(
                value, expected, where=f"{where}({name}=...)", what=what, advice=advice
            )


def require_chat_model(model: Any, *, where: str, tools: bool) -> None:
    """``model`` can answer (``invoke``) and, with ``tools``, be bound to them (``bind_tools``)."""
    if not callable(getattr(model, "invoke", None)):
        require_instance(
            model,
            (),
            where=where,
            what='a chat model (or an init_chat_model spec such as "openai:gpt-4o-mini")',
            advice="pass the chat model your agent calls, e.g. ChatOpenAI(model=...)",
        )
    if tools and not callable(getattr(model, "bind_tools", None)):
        raise TypeError(
            f"{where} expects a chat model that supports tool calling (bind_tools), got a "
            f"{type(model).__name__}: pass a tool-calling chat model, or lookup_tool=False and "
            "no tools"
        )


def _needs_tools(arguments: dict[str, Any]) -> bool:
    """``create_context_agent`` binds tools: its own, the lookup tool or the compaction tool."""
    return (
        bool(arguments.get("tools"))
        or bool(arguments.get("lookup_tool"))
        or bool(arguments.get("compact_tool"))
    )


def checked_arguments(where: str, *, chat_model: bool = False) -> Callable[[F], F]:
    """Check a builder's arguments (:func:`check_wiring_arguments`) before it runs; with
    ``chat_model``, its ``model`` too, an ``init_chat_model`` spec made into a chat model."""

    def decorate(function: F) -> F:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            check_wiring_arguments(
                where, store=given.get("store"), **{name: given.get(name) for name in _EXPECTED}
            )
            if chat_model:
                if isinstance(given["model"], str):
                    given["model"] = resolve_summary_model(given["model"], argument="model")
                require_chat_model(
                    given["model"], where=f"{where}(model=...)", tools=_needs_tools(given)
                )
            return function(*bound.args, **bound.kwargs)

        return checked  # type: ignore[return-value]

    return decorate
