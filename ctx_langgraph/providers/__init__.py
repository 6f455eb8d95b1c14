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
- :class:`AnthropicServerCompaction`: Anthropic's server-side compaction (the
  ``compact_20260112`` edit). Its ``compaction`` block is recorded like OpenAI's item, with a
  readable summary of the same span, sent back only to Anthropic, and its usage booked.
- :class:`AnthropicContextEditing`: the ``context_management`` parameter of ``ChatAnthropic``
  (``clear_tool_uses_20250919``, ``clear_thinking_20251015``). ``ctx_usage`` reads the
  ``applied_edits`` of each reply, and the budget follows them.
- :func:`provider_key`: which wire protocol a chat model speaks. When it changes mid-thread,
  ``ctx_budget`` sets the opaque state aside and rebuilds the view from the readable summary
  and tail.
- :func:`is_context_overflow` / :func:`context_overflow_message`: a provider's "the request is
  too long for the model's window" error (OpenAI, Anthropic, Gemini, as their clients raise it),
  on which the model node compacts and retries once.

The rule: a provider's opaque state is never the only way to recover. Every checkpoint keeps a
readable summary, and a view for another provider is built from it.

- :mod:`~ctx_langgraph.providers.count`: exact input-token counts of a whole request, asked of
  the provider, for the budget check near the limit.
"""

from ctx_langgraph.providers.adapters import (
    ANTHROPIC,
    OPENAI_RESPONSES,
    AnthropicContextEditing,
    AnthropicServerCompaction,
    CompactionBackend,
    OpenAIResponsesCompaction,
    ProviderCompaction,
    applied_edits,
    chains_responses,
    compacts_server_side,
    context_overflow_message,
    defer_to_server,
    is_context_overflow,
    provider_key,
    wire_of,
)
from ctx_langgraph.providers.count import (
    AnthropicCountHook,
    OpenAIResponsesCountHook,
    ProviderCountHook,
)
from ctx_langgraph.view.provider_items import (
    Wire,
    item_provider,
    server_compaction,
    server_compaction_item,
    window_messages,
    without_provider_items,
)

__all__ = [
    "ANTHROPIC",
    "OPENAI_RESPONSES",
    "AnthropicContextEditing",
    "AnthropicCountHook",
    "AnthropicServerCompaction",
    "CompactionBackend",
    "OpenAIResponsesCompaction",
    "OpenAIResponsesCountHook",
    "ProviderCompaction",
    "ProviderCountHook",
    "Wire",
    "applied_edits",
    "chains_responses",
    "compacts_server_side",
    "context_overflow_message",
    "defer_to_server",
    "is_context_overflow",
    "item_provider",
    "provider_key",
    "server_compaction",
    "server_compaction_item",
    "window_messages",
    "wire_of",
    "without_provider_items",
]
