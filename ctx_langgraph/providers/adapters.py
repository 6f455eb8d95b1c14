"""The provider adapters: which protocol a model speaks, its "too long" errors, server-side
compaction backends and Anthropic's context editing (see :mod:`ctx_langgraph.providers`)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping, Sequence
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
"""Anthropic's compaction trigger when the edit names none (input tokens)."""


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
    """Whether ``model`` (or the model under ``bind_tools``) speaks the Responses API chained by
    ``previous_response_id`` (``ChatOpenAI(use_previous_response_id=True)``): it then sends only
    the messages after the last reply, and the provider keeps the rest.

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
    """What ``model``'s wire protocol needs of the messages a request sends
    (:class:`~ctx_langgraph.view.provider_items.Wire`): its provider, and whether it chains
    requests by ``previous_response_id``. An unknown model (None) changes nothing.

    Examples:
        >>> from langchain_anthropic import ChatAnthropic
        >>> wire_of(ChatAnthropic(model="claude-sonnet-4-6", api_key="k")), wire_of(None)
        (Wire(provider='anthropic', chained=False), Wire(provider=None, chained=False))
    """
    if model is None:
        return Wire()
    return Wire(provider_key(getattr(model, "bound", model)), chains_responses(model))


def compacts_server_side(model: Any) -> int | None:
    """The input tokens above which ``model``'s provider compacts the conversation itself
    (OpenAI's ``context_management=[{"type": "compaction", "compact_threshold": N}]``,
    Anthropic's ``compact_20260112`` edit), 0 when it compacts at a threshold of its own
    choosing, None when it does not compact.

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
    """The budget when ``model``'s provider compacts server-side: the provider compacts at
    its threshold, and a local compaction runs only when a request would not fit otherwise
    (the trigger becomes the usable window). ``budget`` itself for any other model.

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


# ----------------------------------------------------------------------------- context-length errors

_OVERFLOW_CODES: Final = frozenset({"context_length_exceeded", "request_too_large"})
"""Structured codes or types of a request too long for the model: OpenAI's error ``code`` (chat
completions and Responses), Anthropic's 413 error ``type``."""
_NOT_OVERFLOW_CODES: Final = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "insufficient_quota"}
)
"""Codes of errors about throughput or quota, whose messages also speak of too many tokens."""
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
_CONTEXT_OVERFLOW_TYPE: Final = getattr(langchain_core.exceptions, "ContextOverflowError", None)
"""LangChain's own class for this error (langchain-core 1.1 and later)."""


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries: ``status_code`` (OpenAI, Anthropic, httpx's
    response), else an integer ``code`` (Google's clients)."""
    for value in (
        getattr(exc, "status_code", None),
        getattr(getattr(exc, "response", None), "status_code", None),
        getattr(exc, "code", None),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
    return None


def _error_objects(payload: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """The error objects of a reply body: the body, its ``error`` member, the items of a list
    (OpenAI's body is the error object, Anthropic's and Google's wrap it in ``error``)."""
    if depth > 3:
        return
    if isinstance(payload, dict):
        yield payload
        yield from _error_objects(payload.get("error"), depth + 1)
    elif isinstance(payload, list | tuple):
        for item in payload[:8]:
            yield from _error_objects(item, depth + 1)


def _overflow_text(exc: BaseException) -> str | None:
    """The provider's message when this exception (alone, not its chain) is a context-length
    error, else None."""
    if isinstance(exc, ContextManagementError):
        return None  # ours (a budget error chained from the provider's): not the provider's
    status = _status_of(exc)
    codes: set[str] = set()
    texts: list[str] = []
    for name in ("code", "type", "error_code", "status"):
        value = getattr(exc, name, None)
        if isinstance(value, str):
            codes.add(value.lower())
    for name in ("message", "api_message"):
        value = getattr(exc, name, None)
        if isinstance(value, str) and value:
            texts.append(value)
    for name in ("body", "details", "response_json"):
        for error in _error_objects(getattr(exc, name, None)):
            for key in ("code", "type", "status"):
                if isinstance(error.get(key), str):
                    codes.add(error[key].lower())
            if isinstance(error.get("message"), str) and error["message"]:
                texts.insert(0, error["message"])  # the body's own words first
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
    """``exc`` and the exceptions it was raised from or while handling (``__cause__``, then an
    unsuppressed ``__context__``), each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending and len(seen) < 32:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, ContextManagementError):
            continue  # what ours was raised from is already accounted for
        if current.__cause__ is not None:
            pending.append(current.__cause__)
        if current.__context__ is not None and not current.__suppress_context__:
            pending.append(current.__context__)


def context_overflow_message(exc: BaseException) -> str | None:
    """The provider's message when ``exc`` (or an exception it was raised from) says the
    request is longer than the model's context window; None for any other error.

    See :func:`is_context_overflow` for what is recognized. The message is the provider's own
    words (the reply body's ``message`` when there is one), on one line, at most 300 characters.

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
    """Whether ``exc`` is a provider's "request too long for the context window" error.

    Recognized as the real clients raise them, directly or wrapped (the ``__cause__`` and
    ``__context__`` chain is walked, as LangChain integrations re-raise the SDK's error):

    - OpenAI: ``BadRequestError`` with code ``context_length_exceeded`` ("This model's maximum
      context length is ... tokens", or the Responses API's "Your input exceeds the context
      window of this model"), the same code in a streamed ``error`` event, and LangChain's
      ``ContextOverflowError`` classes;
    - Anthropic: 400 ``invalid_request_error`` "prompt is too long: N tokens > M maximum" or
      "input length and `max_tokens` exceed context limit", and 413 ``request_too_large``;
    - Gemini (``google-genai``, ``langchain-google-genai``): 400 ``INVALID_ARGUMENT`` "The input
      token count (N) exceeds the maximum number of tokens allowed (M)."

    Ordinary bad requests (an invalid tool schema, ``max_tokens`` above the model's output
    limit), rate limits and quota errors (HTTP 429, even when they speak of tokens) are not.
    Errors of this package (a :class:`~ctx_langgraph.errors.ContextBudgetExceeded` raised
    from a provider's error) are not either: they were handled already.

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
    """The context edits Anthropic applied to the request that produced ``message``
    (``response_metadata["context_management"]["applied_edits"]``)."""
    managed = (getattr(message, "response_metadata", None) or {}).get("context_management")
    edits = managed.get("applied_edits") if isinstance(managed, dict) else None
    return [dict(edit) for edit in edits or () if isinstance(edit, dict)]


# ----------------------------------------------------------------------------- compaction


@dataclass(frozen=True)
class ProviderCompaction:
    """What a provider's compaction returned: the window to send instead of the span."""

    provider: str
    kind: str
    """``"standalone"`` (the compact endpoint) or ``"server"`` (an item in a reply)."""
    model: str
    window: list[dict[str, Any]]
    response_id: str | None = None
    usage: dict[str, Any] | None = None
    created_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat())

    def state(self) -> dict[str, Any]:
        """The checkpoint's ``provider_state`` (JSON). ``item_tokens`` is what the provider
        reported generating for the compaction item (its usage's output tokens): what the item
        costs when it is read back, which a local counter cannot tell from its ciphertext."""
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
    """OpenAI's standalone compaction (``POST /v1/responses/compact``), through the official
    client of the ``ChatOpenAI`` model (its ``base_url``, key and retries apply).

    The span is sent as the Responses ``input`` that ``langchain-openai`` would build for it
    (including the window of an earlier compaction). The returned ``output`` is kept whole as
    the window, and its usage is booked as ``compaction``.

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
        """The reply's JSON as sent (not re-serialized from the SDK's typed objects: the
        window is kept exactly as the API returned it)."""
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

    def compact(self, messages: Sequence[BaseMessage]) -> ProviderCompaction:
        """Compact the span; any failure raises :class:`ProviderCompactionError`."""
        client = getattr(self.model, "root_client", None)
        if client is None:
            raise ProviderCompactionError(self.provider, "the model has no sync OpenAI client")
        try:
            reply = client.responses.with_raw_response.compact(**self._request(messages))
        except Exception as exc:
            raise ProviderCompactionError(self.provider, f"{type(exc).__name__}: {exc}") from exc
        return self._result(reply)

    async def acompact(self, messages: Sequence[BaseMessage]) -> ProviderCompaction:
        """Async :meth:`compact`, through the model's ``root_async_client``."""
        client = getattr(self.model, "root_async_client", None)
        if client is None:
            raise ProviderCompactionError(self.provider, "the model has no async OpenAI client")
        try:
            reply = await client.responses.with_raw_response.compact(**self._request(messages))
        except Exception as exc:
            raise ProviderCompactionError(self.provider, f"{type(exc).__name__}: {exc}") from exc
        return self._result(reply)


# ----------------------------------------------------------------------------- Anthropic


@dataclass(frozen=True)
class AnthropicContextEditing:
    """Anthropic's server-side context editing, as ``ChatAnthropic``'s ``context_management``.

    ``clear_tool_uses_20250919`` clears the oldest tool results once the input passes
    ``trigger_tokens`` and keeps the last ``keep_tool_uses``. With ``clear_thinking``,
    ``clear_thinking_20251015`` keeps the last ``keep_thinking_turns`` of thinking. The client
    keeps the full history; ``ctx_usage`` records what each reply says was cleared.

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
        edits = [edit]
        if self.clear_thinking:  # thinking edits go first, as the API requires
            thinking = {
                "type": "clear_thinking_20251015",
                "keep": {"type": "thinking_turns", "value": self.keep_thinking_turns},
            }
            edits.insert(0, thinking)
        return {"edits": edits}

    def apply(self, model: Any) -> Any:
        """A copy of a ``ChatAnthropic`` model with these edits set (and the API's
        ``context-management-2025-06-27`` beta, which sends them through the beta endpoint).
        A compaction edit the model has (:class:`AnthropicServerCompaction`) is kept, last."""
        betas = list(getattr(model, "betas", None) or [])
        if CONTEXT_MANAGEMENT_BETA not in betas:
            betas.append(CONTEXT_MANAGEMENT_BETA)
        managed = getattr(model, "context_management", None) or {}
        compaction = [  # a compaction edit the model has stays, after these
            edit
            for edit in (managed.get("edits") or () if isinstance(managed, Mapping) else ())
            if str(dict(edit).get("type", "")).startswith("compact_")
        ]
        params = self.params()
        params["edits"] += compaction
        return model.model_copy(update={"context_management": params, "betas": betas})


@dataclass(frozen=True)
class AnthropicServerCompaction:
    """Anthropic's server-side compaction (the ``compact_20260112`` context edit, beta
    ``compact-2026-01-12``), as ``ChatAnthropic``'s ``context_management``.

    When a request's input passes the trigger, Anthropic summarizes the conversation and the
    reply starts with a ``compaction`` block (the summary as text, an opaque
    ``encrypted_content`` and a ``signature``); every later request sends the block back and
    nothing before it. ``ctx_budget`` notices the block, ``ctx_compact`` records it with the
    coverage it implies (everything before the reply) next to a readable summary of the same
    span made by the thread's summarizer, and the block goes back only to Anthropic: a request
    to another provider gets the readable summary. The compaction's own usage
    (``usage.iterations``) is booked in the ledger as ``compaction``.

    Args:
        trigger_tokens: compact when the input passes this many tokens (the API's minimum is
            50,000). None: the usable window's trigger of ``config`` given to :meth:`apply`
            (``ContextConfig.trigger``), else the API's default (150,000).
        pause_after_compaction: the API stops after the compaction block (``stop_reason``
            ``"compaction"``) instead of answering in the same reply; the turn then ends on
            that reply, and the next turn continues from the compacted context.
        instructions: what the summary must keep (sent as the edit's ``instructions``). None:
            the API's own prompt.

    Examples:
        >>> edit = AnthropicServerCompaction(trigger_tokens=80_000).params()["edits"][0]
        >>> edit["type"], edit["trigger"]
        ('compact_20260112', {'type': 'input_tokens', 'value': 80000})
    """

    trigger_tokens: int | None = None
    pause_after_compaction: bool = False
    instructions: str | None = None

    def params(self, trigger_tokens: int | None = None) -> dict[str, Any]:
        """The ``context_management`` request parameter (``trigger_tokens`` when this
        adapter names none)."""
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
        """A copy of a ``ChatAnthropic`` model with the compaction edit added to its
        ``context_management`` (after any context-editing edits it has), and the
        ``compact-2026-01-12`` beta. With ``config`` (a
        :class:`~ctx_langgraph.config.ContextConfig`) and no ``trigger_tokens``, the trigger
        is the config's for the model's window."""
        trigger = None if config is None else config.resolve(model).trigger
        managed = dict(getattr(model, "context_management", None) or {})
        kept = [
            edit
            for edit in managed.get("edits") or ()
            if not str(dict(edit).get("type", "")).startswith("compact_")
        ]
        managed["edits"] = [*kept, *self.params(trigger)["edits"]]
        betas = list(getattr(model, "betas", None) or [])
        if COMPACTION_BETA not in betas:
            betas.append(COMPACTION_BETA)
        return model.model_copy(update={"context_management": managed, "betas": betas})
