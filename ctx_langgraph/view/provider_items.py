"""Provider items in the view: a reply's server-side compaction item, the view messages of a
provider's stored window, and a message without the blocks only its provider can read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctx_langgraph.view.markers import PROVIDER_TOKENS, SUMMARY_FLAG

__all__ = [
    "chain_broken",
    "provider_block",
    "server_compaction_item",
    "unchained",
    "window_messages",
    "without_provider_items",
]

_OPAQUE_BLOCKS: Final = frozenset({"compaction"})
"""Content block types only the provider that made them can read."""


_STREAM_KEYS: Final = frozenset({"index", "sub_index"})
"""Keys langchain adds to a block while merging a stream (not the provider's)."""


def provider_block(block: Any) -> dict[str, Any] | None:
    """A content block as its provider wrote it, in every output format langchain produces:
    the block itself (``v0``, ``responses/v1``), or the value of the ``non_standard`` block
    that wraps it (``v1``); without the keys a stream's merge adds. None for a text part.

    Example:
        >>> item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA=="}
        >>> provider_block({"type": "non_standard", "value": item}) == item
        True
        >>> provider_block({**item, "index": 0}) == item, provider_block("text")
        (True, None)
    """
    if not isinstance(block, dict):
        return None
    value = block.get("value")
    if block.get("type") == "non_standard" and isinstance(value, dict):
        block = value
    return {key: part for key, part in block.items() if key not in _STREAM_KEYS}


def server_compaction_item(message: BaseMessage) -> dict[str, Any] | None:
    """The compaction item a Responses reply carries (server-side compaction), if any, in
    whatever output format and whether streamed or not (:func:`provider_block`)."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return None
    for block in message.content:
        item = provider_block(block)
        if item is not None and item.get("type") == "compaction":
            return item
    return None


def without_provider_items(message: BaseMessage) -> BaseMessage:
    """``message`` without content blocks only their provider can read (an encrypted
    compaction item); the same object when it has none."""
    if not isinstance(message.content, list):
        return message
    kept = [
        block
        for block in message.content
        if (provider_block(block) or {}).get("type") not in _OPAQUE_BLOCKS
    ]
    if len(kept) == len(message.content):
        return message
    return message.model_copy(update={"content": kept or ""})


def window_messages(state: dict[str, Any], flag: dict[str, Any]) -> list[BaseMessage]:
    """The view messages of a stored provider window: user items as human messages, the
    compaction item (and anything else) as an assistant message holding the item unchanged.
    Each carries ``flag`` (the summary flag: never recorded, replaced on the next compaction)."""
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


def chain_broken(context: Any) -> bool:
    """The view's prefix is not the one the provider holds for the thread: no baseline was
    measured on it (a compaction dropped it, or none yet), or it was measured in another
    projection epoch (an edit, cleared results, a provider switch). A model chained by
    ``previous_response_id`` must then send the view whole, once.

    Example:
        >>> chain_broken({"projection_epoch": 2, "baseline": {"projection_epoch": 2}})
        False
        >>> chain_broken({"projection_epoch": 3, "baseline": {"projection_epoch": 2}}), chain_broken({})
        (True, True)
    """
    context = context if isinstance(context, Mapping) else {}
    baseline = context.get("baseline")
    if not isinstance(baseline, Mapping):
        return True
    return bool(baseline.get("projection_epoch") != context.get("projection_epoch", 0))


def unchained(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with the provider's response ids taken off the assistant messages' copies,
    so a model with ``use_previous_response_id`` sends them whole and starts a new chain
    instead of continuing one from a reply whose context is no longer the view.

    Example:
        >>> reply = AIMessage("ok", response_metadata={"id": "resp_1", "model_name": "gpt-4.1"})
        >>> [m.response_metadata for m in unchained([HumanMessage("hi"), reply])]
        [{}, {'model_name': 'gpt-4.1'}]
        >>> reply.response_metadata["id"]
        'resp_1'
    """
    out: list[BaseMessage] = []
    for message in messages:
        response_id = (
            message.response_metadata.get("id") if isinstance(message, AIMessage) else None
        )
        if isinstance(response_id, str) and response_id.startswith("resp_"):
            metadata = {k: v for k, v in message.response_metadata.items() if k != "id"}
            message = message.model_copy(update={"response_metadata": metadata})
        out.append(message)
    return out
