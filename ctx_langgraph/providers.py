"""Provider-native context features behind adapters (OpenAI Responses compaction, Anthropic
context editing and token counting).

- :class:`OpenAIResponsesCompaction`: a compaction backend. ``ctx_compact`` still writes our
  readable summary of the span and also sends the span to OpenAI's standalone compact endpoint
  (``client.responses.compact``). The returned window (the user messages and the encrypted
  compaction item, as the API returns them) is stored as the checkpoint's opaque
  ``provider_state``, and it becomes the base of the next requests while the thread stays on the
  Responses API.
- Server-side compaction (``ChatOpenAI(context_management=[{"type": "compaction",
  "compact_threshold": N}])``): a compaction item that arrives in a reply is recorded by
  ``ctx_budget`` as a checkpoint covering everything before that reply, with a readable summary
  of the same span.
- :class:`AnthropicContextEditing`: the ``context_management`` parameter of ``ChatAnthropic``
  (``clear_tool_uses_20250919``, ``clear_thinking_20251015``). ``ctx_usage`` reads the
  ``applied_edits`` of each reply, and the budget follows them.
- :func:`provider_key`: which wire protocol a chat model speaks. When it changes mid-thread,
  ``ctx_budget`` sets the opaque state aside and rebuilds the view from the readable summary
  and tail.

The rule: a provider's opaque state is never the only way to recover. Every checkpoint keeps a
readable summary, and a view for another provider is built from it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctx_langgraph.budget.counters import PROVIDER_TOKENS
from ctx_langgraph.errors import ProviderCompactionError

__all__ = [
    "ANTHROPIC",
    "OPENAI_RESPONSES",
    "AnthropicContextEditing",
    "CompactionBackend",
    "OpenAIResponsesCompaction",
    "ProviderCompaction",
    "applied_edits",
    "provider_key",
    "server_compaction_item",
    "without_provider_items",
]

OPENAI_RESPONSES: Final = "openai-responses"
ANTHROPIC: Final = "anthropic"
CONTEXT_MANAGEMENT_BETA: Final = "context-management-2025-06-27"
_OPAQUE_BLOCKS: Final = frozenset({"compaction"})
"""Content block types only the provider that made them can read."""


def provider_key(model: Any) -> str:
    """The wire protocol a chat model speaks: ``"openai-responses"``, ``"openai-chat"``,
    ``"anthropic"``, or the model's ``_llm_type`` (``"unknown"`` for None).

    Example:
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


def server_compaction_item(message: BaseMessage) -> dict[str, Any] | None:
    """The compaction item a Responses reply carries (server-side compaction), if any."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return None
    for block in message.content:
        if isinstance(block, dict) and block.get("type") == "compaction":
            return dict(block)
    return None


def without_provider_items(message: BaseMessage) -> BaseMessage:
    """``message`` without content blocks only their provider can read (an encrypted
    compaction item); the same object when it has none."""
    if not isinstance(message.content, list):
        return message
    kept = [
        block
        for block in message.content
        if not (isinstance(block, dict) and block.get("type") in _OPAQUE_BLOCKS)
    ]
    if len(kept) == len(message.content):
        return message
    return message.model_copy(update={"content": kept or ""})


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

    Example:
        ```python
        from langchain_openai import ChatOpenAI
        from ctx_langgraph import ContextConfig, OpenAIResponsesCompaction

        model = ChatOpenAI(model="gpt-5.2", use_responses_api=True)
        config = ContextConfig(compaction_backend=OpenAIResponsesCompaction(model))
        ```
    """

    provider = OPENAI_RESPONSES

    def __init__(
        self, model: Any, *, compact_model: str | None = None, timeout: float | None = 120.0
    ) -> None:
        from ctx_langgraph.budget.provider_count import OpenAIResponsesCountHook

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


def window_messages(state: dict[str, Any], flag: dict[str, Any]) -> list[BaseMessage]:
    """The view messages of a stored provider window: user items as human messages, the
    compaction item (and anything else) as an assistant message holding the item unchanged.
    Each carries ``flag`` (the summary flag: never recorded, replaced on the next compaction)."""
    from ctx_langgraph.budget.estimate import SUMMARY_FLAG

    out: list[BaseMessage] = []
    stem = str(flag.get("checkpoint_id", "w"))[:12]
    for part, item in enumerate(state.get("window") or ()):
        kwargs: dict[str, Any] = {
            SUMMARY_FLAG: {**flag, "provider": state.get("provider"), "part": part}
        }
        ident = f"ctx-window-{stem}-{part}"
        if item.get("type") == "message" and item.get("role") == "user":
            out.append(HumanMessage(item.get("content") or "", id=ident, additional_kwargs=kwargs))
            continue
        tokens = state.get("item_tokens")
        if item.get("type") == "compaction" and isinstance(tokens, int):
            kwargs[PROVIDER_TOKENS] = tokens  # counted as the provider reported, not as ciphertext
        out.append(AIMessage([dict(item)], id=ident, additional_kwargs=kwargs))
    return out


# ----------------------------------------------------------------------------- Anthropic


@dataclass(frozen=True)
class AnthropicContextEditing:
    """Anthropic's server-side context editing, as ``ChatAnthropic``'s ``context_management``.

    ``clear_tool_uses_20250919`` clears the oldest tool results once the input passes
    ``trigger_tokens`` and keeps the last ``keep_tool_uses``. With ``clear_thinking``,
    ``clear_thinking_20251015`` keeps the last ``keep_thinking_turns`` of thinking. The client
    keeps the full history; ``ctx_usage`` records what each reply says was cleared.

    Example:
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
        ``context-management-2025-06-27`` beta, which sends them through the beta endpoint)."""
        betas = list(getattr(model, "betas", None) or [])
        if CONTEXT_MANAGEMENT_BETA not in betas:
            betas.append(CONTEXT_MANAGEMENT_BETA)
        return model.model_copy(update={"context_management": self.params(), "betas": betas})
