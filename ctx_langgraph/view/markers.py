"""Every mark this package puts on a message of the working view (a key of its
``additional_kwargs``, or of a lookup result's ``artifact``), and the predicates that read them.
"""

from __future__ import annotations

from typing import Final

from langchain_core.messages import BaseMessage

__all__ = [
    "CAPPED_FLAG",
    "CLEARED_FLAG",
    "INPUTS_CLEARED_FLAG",
    "LOOKUP_MARK",
    "LOOKUP_TOOL_MARK",
    "MEMORY_FLAG",
    "PINNED_FLAG",
    "PROVIDER_TOKENS",
    "REPAIR_FLAG",
    "RETRIEVED_FLAG",
    "STRIPPED_FLAG",
    "SUMMARY_FLAG",
    "is_flagged",
    "is_lookup_result",
    "is_lookup_tool",
    "is_memory_message",
    "is_summary",
    "is_synthetic",
]

SUMMARY_FLAG: Final = "ctx_summary"
"""The rolling summary message."""
RETRIEVED_FLAG: Final = "ctx_retrieved"
"""A message that carries retrieved history snippets."""
PINNED_FLAG: Final = "ctx_pinned"
"""A pinned rule, kept first in the view on every turn."""
MEMORY_FLAG: Final = "ctx_memory"
"""The long-term memory message ``ctx_budget`` keeps in the view."""
REPAIR_FLAG: Final = "ctx_repair"
"""A stand-in result for a tool call whose result is missing."""
CAPPED_FLAG: Final = "ctx_capped"
"""A preview of a tool result over the output cap (the original is recorded)."""
CLEARED_FLAG: Final = "ctx_cleared"
"""A placeholder of an old tool result cleared from the view (the original is recorded)."""
INPUTS_CLEARED_FLAG: Final = "ctx_inputs_cleared"
"""An AI message whose tool calls' arguments were cleared (the ids of those calls)."""
STRIPPED_FLAG: Final = "ctx_stripped"
"""A message whose provider-only content was stripped for another provider."""
PROVIDER_TOKENS: Final = "ctx_provider_tokens"
"""A message whose size a provider reported (an opaque compaction item): counted as that."""
LOOKUP_MARK: Final = "ctx_lookup"
"""Key of the artifact of a history lookup's tool result."""
LOOKUP_TOOL_MARK: Final = "ctx_history_lookup"
"""Key of the metadata that marks the history lookup tool, whatever its name."""

SYNTHETIC_FLAGS: Final = (SUMMARY_FLAG, RETRIEVED_FLAG, PINNED_FLAG, MEMORY_FLAG, REPAIR_FLAG)
VIEW_FLAGS: Final = (
    *SYNTHETIC_FLAGS,
    CAPPED_FLAG,
    CLEARED_FLAG,
    INPUTS_CLEARED_FLAG,
    STRIPPED_FLAG,
)


def is_summary(message: BaseMessage) -> bool:
    """Whether a message is the working view's summary message."""
    return bool(message.additional_kwargs.get(SUMMARY_FLAG))


def is_memory_message(message: BaseMessage) -> bool:
    """Whether a message is the long-term memory message ``ctx_budget`` keeps in the view."""
    return bool(message.additional_kwargs.get(MEMORY_FLAG))


def is_lookup_result(message: BaseMessage) -> bool:
    """Whether a tool result is a history lookup page."""
    artifact = getattr(message, "artifact", None)
    return isinstance(artifact, dict) and bool(artifact.get(LOOKUP_MARK))


def is_lookup_tool(tool: object) -> bool:
    """Whether ``tool`` is the history lookup tool."""
    return bool((getattr(tool, "metadata", None) or {}).get(LOOKUP_TOOL_MARK))


def is_synthetic(message: BaseMessage) -> bool:
    """Messages put in the view by this package: never recorded."""
    kwargs = message.additional_kwargs
    return bool(kwargs) and any(kwargs.get(flag) for flag in SYNTHETIC_FLAGS)


def is_flagged(message: BaseMessage) -> bool:
    """Messages not to record now: synthetic ones, and previews of recorded originals."""
    kwargs = message.additional_kwargs
    return bool(kwargs) and any(kwargs.get(flag) for flag in VIEW_FLAGS)
