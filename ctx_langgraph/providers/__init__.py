"""Provider-native context features behind adapters: OpenAI Responses compaction
(:class:`OpenAIResponsesCompaction`, or server-side ``compaction`` items), Anthropic's
server-side compaction (:class:`AnthropicServerCompaction`) and context editing
(:class:`AnthropicContextEditing`), a model's wire protocol (:func:`provider_key`), context
overflow errors (:func:`is_context_overflow`) and exact request counts
(:mod:`~ctx_langgraph.providers.count`). A provider's opaque state is never the only way to
recover: every checkpoint keeps a readable summary, and a view for another provider is built
from it."""

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
