"""The provider adapters: a model's wire protocol, its "too long" errors, server-side
compaction backends and Anthropic's context editing."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol, runtime_checkable

import langchain_core.exceptions
from langchain_core.messages import BaseMessage

from ctx_langgraph.config import ResolvedBudget
from ctx_langgraph.errors import ContextManagementError, ProviderCompactionError
from ctx_langgraph.providers.count import OpenAIResponsesCountHook
from ctx_langgraph.view.provider_items import ANTHROPIC, OPENAI_RESPONSES, Wire

__all__ = [
    "ANTHROPIC",
    "OPENAI_RESPONSES",
    "AnthropicContextEditing",
    "AnthropicServerCompaction",
    "CompactionBackend",
    "OpenAIResponsesCompaction",
    "ProviderCompaction",
    "applied_edits",
    "compacts_server_side",
    "context_overflow_message",
    "defer_to_server",
    "is_context_overflow",
    "provider_key",
    "wire_of",
]

CONTEXT_MANAGEMENT_BETA: Final = "context-management-2025-06-27"
COMPACTION_BETA: Final = "compact-2026-01-12"
ANTHROPIC_DEFAULT_TRIGGER: Final = 150_000


def provider_key(model: Any) -> str:
    """The wire protocol a chat model speaks: ``"openai-responses"``, ``"openai-chat"``,
    ``"anthropic"``, or the model's ``_llm_type`` (``"unknown"`` for None).

    Examples:
        >>> from langchain_openai import ChatOpenAI
        >>> provider_key(ChatOpenAI(model="gpt-4.1", use_responses_api=True, api_key="k"))
        'openai-responses'
        >>> provider_key(ChatOpenAI(model="gpt-4o", use_responses_api=False, api_key="k"))
        'openai-chat'
    """
    if model is None:
        return "unknown"
    uses_responses = getattr(model, "_use_responses_api", None)
    if callable(uses_responses) and hasattr(model, "root_client"):
        try:
            return OPENAI_RESPONSES if uses_responses({}) else "openai-chat"
        except Exception:  # a subclass with other needs: its type name below
            pass
    llm_type = str(getattr(model, "_llm_type", "") or type(model).__name__)
    return ANTHROPIC if llm_type.startswith("anthropic") else llm_type


def chains_responses(model: Any) -> bool:
    """Whether ``model`` (or the model under ``bind_tools``) chains Responses requests by
    ``previous_response_id``: it sends only the messages after the last reply.

    Examples:
        >>> from langchain_openai import ChatOpenAI
        >>> chains_responses(ChatOpenAI(model="gpt-4.1", use_previous_response_id=True, api_key="k"))
        True
        >>> chains_responses(ChatOpenAI(model="gpt-4.1", api_key="k")), chains_responses(None)
        (False, False)
    """
    model = getattr(model, "bound", model)
    return bool(getattr(model, "use_previous_response_id", False)) and (
        provider_key(model) == OPENAI_RESPONSES
    )


def wire_of(model: Any) -> Wire:
    """``model``'s :class:`~ctx_langgraph.view.provider_items.Wire`: its provider and whether
    it chains requests by ``previous_response_id`` (None: an empty ``Wire``).

    Examples:
        >>> from langchain_anthropic import ChatAnthropic
        >>> wire_of(ChatAnthropic(model="claude-sonnet-4-6", api_key="k")), wire_of(None)
        (Wire(provider='anthropic', chained=False), Wire(provider=None, chained=False))
    """
    if model is None:
        return Wire()
    return Wire(provider_key(getattr(model, "bound", model)), chains_responses(model))


def compacts_server_side(model: Any) -> int | None:
    """The input tokens above which ``model``'s provider compacts server-side (OpenAI's
    ``compaction`` entry, Anthropic's ``compact_20260112`` edit): 0 at its own threshold,
    None when it does not compact.

    Examples:
        >>> from langchain_anthropic import ChatAnthropic
        >>> model = ChatAnthropic(model="claude-sonnet-4-6", api_key="k")
        >>> compacts_server_side(AnthropicServerCompaction(trigger_tokens=60_000).apply(model))
        60000
        >>> compacts_server_side(model) is None
        True
    """
    managed = getattr(getattr(model, "bound", model), "context_management", None)
    if isinstance(managed, list):  # OpenAI Responses
        for entry in managed:
            if isinstance(entry, Mapping) and entry.get("type") == "compaction":
                threshold = entry.get("compact_threshold")
                return int(threshold) if isinstance(threshold, int) else 0
    if isinstance(managed, Mapping):  # Anthropic
        for edit in managed.get("edits") or ():
            if isinstance(edit, Mapping) and str(edit.get("type", "")).startswith("compact_"):
                trigger = edit.get("trigger")
                value = trigger.get("value") if isinstance(trigger, Mapping) else None
                return int(value) if isinstance(value, int) else ANTHROPIC_DEFAULT_TRIGGER
    return None


def defer_to_server(budget: ResolvedBudget, model: Any) -> ResolvedBudget:
    """``budget`` with its trigger at the usable window when ``model``'s provider compacts
    server-side (a local compaction only when a request would not fit), else ``budget``.

    Examples:
        >>> from ctx_langgraph.config import ContextConfig
        >>> from langchain_anthropic import ChatAnthropic
        >>> model = AnthropicServerCompaction(trigger_tokens=60_000).apply(
        ...     ChatAnthropic(model="claude-sonnet-4-6", api_key="k"))
        >>> budget = ContextConfig(context_window=200_000).resolve()
        >>> budget.trigger, defer_to_server(budget, model).trigger
        (146892, 183616)
    """
    if compacts_server_side(model) is None or budget.trigger >= budget.usable:
        return budget
    return replace(budget, trigger=budget.usable)


_OVERFLOW_CODES: Final = frozenset({"context_length_exceeded", "request_too_large"})
_NOT_OVERFLOW_CODES: Final = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "insufficient_quota"}
)
_OVERFLOW_TEXT: Final = re.compile(
    "|".join(
        (
            r"maximum context length",  # OpenAI chat completions, vLLM, DeepSeek, OpenRouter
            r"context[_ ]length[_ ]exceeded",  # OpenAI's code, as LangChain's ValueErrors carry it
            r"exceeds? the context window",  # OpenAI Responses
            r"prompt is too long",  # Anthropic
            r"exceed(?:s|ed)? (?:the )?context limit",  # Anthropic: input + max_tokens
            r"input token count.{0,40}exceeds the maximum number of tokens",  # Gemini
            r"input tokens exceed the configured limit",  # OpenAI-compatible gateways
            r"input is too long for (?:the )?requested model",  # Bedrock
            r"ContextWindowExceededError",  # LiteLLM proxies
        )
    ),
    re.IGNORECASE | re.DOTALL,
)
_CODE_ATTRS: Final = ("code", "type", "error_code", "status")
_ERROR_ATTRS: Final = (*_CODE_ATTRS, "message", "api_message")
_CONTEXT_OVERFLOW_TYPE: Final = getattr(langchain_core.exceptions, "ContextOverflowError", None)


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (``status_code``, else Google's integer ``code``)."""
    for value in (
        getattr(exc, "status_code", None),
        getattr(getattr(exc, "response", None), "status_code", None),
        getattr(exc, "code", None),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
    return None


def _error_objects(payload: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """The error objects of a reply body: the body, its ``error`` member, a list's items."""
    if depth > 3:
        return
    if isinstance(payload, dict):
        yield payload
        yield from _error_objects(payload.get("error"), depth + 1)
    elif isinstance(payload, list | tuple):
        for item in payload[:8]:
            yield from _error_objects(item, depth + 1)


def _overflow_text(exc: BaseException) -> str | None:
    """The provider's message when this exception (not its chain) is a context-length error."""
    if isinstance(exc, ContextManagementError):
        return None
    status = _status_of(exc)
    attrs = {name: getattr(exc, name, None) for name in _ERROR_ATTRS}
    codes = {v.lower() for k, v in attrs.items() if k in _CODE_ATTRS and isinstance(v, str)}
    texts = [v for k, v in attrs.items() if k not in _CODE_ATTRS and isinstance(v, str) and v]
    for name in ("body", "details", "response_json"):
        for error in _error_objects(getattr(exc, name, None)):
            for key in ("code", "type", "status"):
                if isinstance(error.get(key), str):
                    codes.add(error[key].lower())
            if isinstance(error.get("message"), str) and error["message"]:
                texts.insert(0, error["message"])
    texts.append(str(exc))
    message = next((t for t in texts if _OVERFLOW_TEXT.search(t)), None) or texts[0]
    if status == 429 or codes & _NOT_OVERFLOW_CODES:
        return None
    if (
        (_CONTEXT_OVERFLOW_TYPE is not None and isinstance(exc, _CONTEXT_OVERFLOW_TYPE))
        or codes & _OVERFLOW_CODES
        or status == 413
    ):
        return message
    if status not in (None, 400):
        return None
    return message if any(_OVERFLOW_TEXT.search(t) for t in texts) else None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its ``__cause__`` / unsuppressed ``__context__`` chain, each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending and len(seen) < 32:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, ContextManagementError):
            continue
        if current.__cause__ is not None:
            pending.append(current.__cause__)
        if current.__context__ is not None and not current.__suppress_context__:
            pending.append(current.__context__)


def context_overflow_message(exc: BaseException) -> str | None:
    """The provider's message (one line, at most 300 characters) when ``exc`` or an exception
    it was raised from is a context-length error (see :func:`is_context_overflow`), else None.

    Examples:
        >>> context_overflow_message(ValueError("prompt is too long: 215000 tokens > 200000 maximum"))
        'prompt is too long: 215000 tokens > 200000 maximum'
        >>> context_overflow_message(ValueError("invalid tool schema")) is None
        True
    """
    for current in _chain(exc):
        text = _overflow_text(current)
        if text is not None:
            return " ".join(text.split())[:300]
    return None


def is_context_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception in its ``__cause__`` / ``__context__`` chain) is a
    provider's "request too long for the context window" error: OpenAI's
    ``context_length_exceeded`` (and LangChain's ``ContextOverflowError``), Anthropic's "prompt
    is too long" / "exceed context limit" and 413 ``request_too_large``, Gemini's "input token
    count ... exceeds the maximum". Other bad requests, rate limits and quota errors (HTTP 429)
    and this package's own errors are not.

    Examples:
        >>> is_context_overflow(ValueError(
        ...     "context_length_exceeded: Your input exceeds the context window of this model."))
        True
        >>> try:
        ...     try:
        ...         raise ValueError("prompt is too long: 215000 tokens > 200000 maximum")
        ...     except ValueError as exc:
        ...         raise RuntimeError("model call failed") from exc
        ... except RuntimeError as wrapped:
        ...     is_context_overflow(wrapped)
        True
        >>> is_context_overflow(ValueError("Invalid schema for function 'search'"))
        False
    """
    return context_overflow_message(exc) is not None


def applied_edits(message: BaseMessage) -> list[dict[str, Any]]:
    """The context edits Anthropic applied to the request that produced ``message``."""
    managed = (getattr(message, "response_metadata", None) or {}).get("context_management")
    edits = managed.get("applied_edits") if isinstance(managed, dict) else None
    return [dict(edit) for edit in edits or () if isinstance(edit, dict)]


@dataclass(frozen=True)
class ProviderCompaction:
    """What a provider's compaction returned: the window to send instead of the span."""

    provider: str
    kind: str
    """``"standalone"`` or ``"server"``."""
    model: str
    window: list[dict[str, Any]]
    response_id: str | None = None
    usage: dict[str, Any] | None = None
    created_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat())

    def state(self) -> dict[str, Any]:
        """The checkpoint's ``provider_state`` (``item_tokens``: the usage's output tokens)."""
        output = (self.usage or {}).get("output_tokens")
        return {
            "provider": self.provider,
            "kind": self.kind,
            "model": self.model,
            "window": self.window,
            "response_id": self.response_id,
            "created_at": self.created_at,
            "item_tokens": output if isinstance(output, int) and output >= 0 else None,
        }


@runtime_checkable
class CompactionBackend(Protocol):
    """A provider's own compaction, used by ``ctx_compact`` next to the readable summary."""

    provider: str

    @property
    def id(self) -> str: ...

    def compact(self, messages: Sequence[BaseMessage]) -> ProviderCompaction: ...

    async def acompact(self, messages: Sequence[BaseMessage]) -> ProviderCompaction: ...


class OpenAIResponsesCompaction:
    """OpenAI's standalone compaction (``POST /v1/responses/compact``) through the
    ``ChatOpenAI`` model's client; the returned ``output`` is kept whole as the window.

    Args:
        model: the ``ChatOpenAI`` model of the graph (on the Responses API).
        compact_model: the model for the compact call (default: ``model``'s).
        timeout: seconds per call.

    Examples:
        ```python
        from langchain_openai import ChatOpenAI
        from ctx_langgraph import ContextConfig
        from ctx_langgraph.providers import OpenAIResponsesCompaction

        model = ChatOpenAI(model="gpt-5.2", use_responses_api=True)
        config = ContextConfig(compaction_backend=OpenAIResponsesCompaction(model))
        ```
    """

    provider = OPENAI_RESPONSES

    def __init__(
        self, model: Any, *, compact_model: str | None = None, timeout: float | None = 120.0
    ) -> None:
        self.model = model
        self.compact_model = compact_model or str(getattr(model, "model_name", "") or "")
        self.timeout = timeout
        self._body = OpenAIResponsesCountHook(model).request_body

    @property
    def id(self) -> str:
        return f"openai:responses/compact:{self.compact_model}"

    def _request(self, messages: Sequence[BaseMessage]) -> dict[str, Any]:
        body = self._body(messages, ())
        request: dict[str, Any] = {"model": self.compact_model, "input": body.get("input") or []}
        if body.get("instructions"):
            request["instructions"] = body["instructions"]
        if self.timeout is not None:
            request["timeout"] = self.timeout
        return request

    def _result(self, raw: Any) -> ProviderCompaction:
        """The compaction in the reply's JSON as sent (not re-serialized by the SDK)."""
        try:
            data = raw.http_response.json() if hasattr(raw, "http_response") else raw
        except ValueError as exc:
            raise ProviderCompactionError(self.provider, f"the reply is not JSON: {exc}") from exc
        output = data.get("output") if isinstance(data, dict) else None
        if not isinstance(output, list) or not output:
            raise ProviderCompactionError(self.provider, "the compact reply has no output window")
        window = [dict(item) for item in output if isinstance(item, dict)]
        if not any(item.get("type") == "compaction" for item in window):
            raise ProviderCompactionError(self.provider, "the compact reply has no compaction item")
        usage = data.get("usage")
        return ProviderCompaction(
            provider=self.provider,
            kind="standalone",
            model=self.compact_model,
            window=window,
            response_id=data.get("id"),
            usage=dict(usage) if isinstance(usage, dict) else None,
        )

    def _endpoint(self, client: str, kind: str) -> Any:
        found = getattr(self.model, client, None)
        if found is None:
            raise ProviderCompactionError(self.provider, f"the model has no {kind} OpenAI client")
        return found.responses.with_raw_response.compact

    @contextmanager
    def _failures(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            raise ProviderCompactionError(self.provider, f"{type(exc).__name__}: {exc}") from exc

    def compact(self, messages: Sequence[BaseMessage]) -> ProviderCompaction:
        """Compact the span; any failure raises :class:`ProviderCompactionError`."""
        endpoint = self._endpoint("root_client", "sync")
        with self._failures():
            reply = endpoint(**self._request(messages))
        return self._result(reply)

    async def acompact(self, messages: Sequence[BaseMessage]) -> ProviderCompaction:
        """Async :meth:`compact`, through the model's ``root_async_client``."""
        endpoint = self._endpoint("root_async_client", "async")
        with self._failures():
            reply = await endpoint(**self._request(messages))
        return self._result(reply)


@dataclass(frozen=True)
class AnthropicContextEditing:
    """Anthropic's server-side context editing, as ``ChatAnthropic``'s ``context_management``:
    ``clear_tool_uses_20250919`` clears the oldest tool results past ``trigger_tokens`` but the
    last ``keep_tool_uses``; with ``clear_thinking``, ``clear_thinking_20251015`` keeps the last
    ``keep_thinking_turns`` of thinking. ``ctx_usage`` records what each reply says was cleared.

    Examples:
        >>> AnthropicContextEditing(trigger_tokens=30_000, keep_tool_uses=2).params()["edits"][0]["keep"]
        {'type': 'tool_uses', 'value': 2}
    """

    trigger_tokens: int = 100_000
    keep_tool_uses: int = 3
    clear_at_least_tokens: int | None = None
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False
    clear_thinking: bool = False
    keep_thinking_turns: int = 1

    def params(self) -> dict[str, Any]:
        """The ``context_management`` request parameter."""
        edit: dict[str, Any] = {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": self.trigger_tokens},
            "keep": {"type": "tool_uses", "value": self.keep_tool_uses},
        }
        if self.clear_at_least_tokens:
            edit["clear_at_least"] = {"type": "input_tokens", "value": self.clear_at_least_tokens}
        if self.exclude_tools:
            edit["exclude_tools"] = list(self.exclude_tools)
        if self.clear_tool_inputs:
            edit["clear_tool_inputs"] = True
        thinking = {
            "type": "clear_thinking_20251015",
            "keep": {"type": "thinking_turns", "value": self.keep_thinking_turns},
        }
        return {"edits": [thinking, edit] if self.clear_thinking else [edit]}

    def apply(self, model: Any) -> Any:
        """A copy of a ``ChatAnthropic`` model with these edits (and the
        ``context-management-2025-06-27`` beta); a compaction edit it has is kept, last."""
        managed = getattr(model, "context_management", None) or {}
        edits = managed.get("edits") or () if isinstance(managed, Mapping) else ()
        params = self.params()
        params["edits"] += [edit for edit in edits if _compacts(edit)]
        return _with_beta(model, CONTEXT_MANAGEMENT_BETA, params)


def _compacts(edit: Any) -> bool:
    return str(dict(edit).get("type", "")).startswith("compact_")


def _with_beta(model: Any, beta: str, context_management: dict[str, Any]) -> Any:
    """A copy of ``model`` with this ``context_management`` and ``beta`` among its betas."""
    betas = list(getattr(model, "betas", None) or [])
    if beta not in betas:
        betas.append(beta)
    return model.model_copy(update={"context_management": context_management, "betas": betas})


@dataclass(frozen=True)
class AnthropicServerCompaction:
    """Anthropic's server-side compaction (the ``compact_20260112`` edit, beta
    ``compact-2026-01-12``), as ``ChatAnthropic``'s ``context_management``.

    Past the trigger the reply starts with a ``compaction`` block that later requests send
    instead of what it covers. ``ctx_compact`` records it next to a readable summary of the
    same span (sent to any other provider), and its usage (``usage.iterations``) is booked as
    ``compaction``.

    Args:
        trigger_tokens: compact past this many input tokens (the API's minimum is 50,000).
            None: the trigger of the ``config`` given to :meth:`apply`, else the API's 150,000.
        pause_after_compaction: the reply stops after the compaction block; the next turn
            continues from the compacted context.
        instructions: what the summary must keep (None: the API's own prompt).

    Examples:
        >>> edit = AnthropicServerCompaction(trigger_tokens=80_000).params()["edits"][0]
        >>> edit["type"], edit["trigger"]
        ('compact_20260112', {'type': 'input_tokens', 'value': 80000})
    """

    trigger_tokens: int | None = None
    pause_after_compaction: bool = False
    instructions: str | None = None

    def params(self, trigger_tokens: int | None = None) -> dict[str, Any]:
        """The ``context_management`` parameter (``trigger_tokens`` when this names none)."""
        edit: dict[str, Any] = {"type": "compact_20260112"}
        trigger = self.trigger_tokens if self.trigger_tokens is not None else trigger_tokens
        if trigger is not None:
            edit["trigger"] = {"type": "input_tokens", "value": int(trigger)}
        if self.pause_after_compaction:
            edit["pause_after_compaction"] = True
        if self.instructions:
            edit["instructions"] = self.instructions
        return {"edits": [edit]}

    def apply(self, model: Any, config: Any = None) -> Any:
        """A copy of a ``ChatAnthropic`` model with the compaction edit last in its
        ``context_management`` and the ``compact-2026-01-12`` beta; with ``config`` (a
        :class:`~ctx_langgraph.config.ContextConfig`), its trigger for the model's window."""
        trigger = None if config is None else config.resolve(model).trigger
        managed = dict(getattr(model, "context_management", None) or {})
        kept = [edit for edit in managed.get("edits") or () if not _compacts(edit)]
        managed["edits"] = [*kept, *self.params(trigger)["edits"]]
        return _with_beta(model, COMPACTION_BETA, managed)
