"""Provider items in the view: a reply's server-side compaction item (OpenAI's or Anthropic's),
the view messages of a provider's stored window, and a request's messages as the model's wire
protocol needs them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctx_langgraph.state import unpack
from ctx_langgraph.view.markers import PROVIDER_TOKENS, STRIPPED_FLAG, SUMMARY_FLAG

__all__ = [
    "ANTHROPIC",
    "OPENAI_RESPONSES",
    "Wire",
    "chain_broken",
    "compaction_iterations",
    "item_provider",
    "provider_block",
    "server_compaction",
    "server_compaction_item",
    "strip_opaque",
    "unchained",
    "window_messages",
    "without_provider_items",
]

OPENAI_RESPONSES: Final = "openai-responses"
"""The provider key of OpenAI's Responses API (its compaction items and chained requests)."""
ANTHROPIC: Final = "anthropic"
"""The provider key of Anthropic's Messages API (its compaction blocks and context edits)."""

_OPAQUE_BLOCKS: Final = frozenset({"compaction"})
_STREAM_KEYS: Final = frozenset({"index", "sub_index"})


def provider_block(block: Any) -> dict[str, Any] | None:
    """A content block as its provider wrote it (unwrapped from ``non_standard``, without the
    keys a stream's merge adds); None for a text part."""
    if not isinstance(block, dict):
        return None
    value = block.get("value")
    if block.get("type") == "non_standard" and isinstance(value, dict):
        block = value
    return {key: part for key, part in block.items() if key not in _STREAM_KEYS}


def item_provider(message: BaseMessage, item: Mapping[str, Any]) -> str:
    """Which provider made an opaque ``item`` of ``message``: ``"anthropic"`` or
    ``"openai-responses"``, from the projection's flag, else the reply's ``model_provider``,
    else the item's shape.

    Examples:
        >>> openai = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA=="}
        >>> anthropic = {"type": "compaction", "content": "The user asked...", "signature": "s"}
        >>> item_provider(AIMessage([openai]), openai), item_provider(AIMessage([anthropic]), anthropic)
        ('openai-responses', 'anthropic')
    """
    flag = message.additional_kwargs.get(SUMMARY_FLAG)
    if isinstance(flag, Mapping) and flag.get("provider") in (ANTHROPIC, OPENAI_RESPONSES):
        return str(flag["provider"])
    made_by = (getattr(message, "response_metadata", None) or {}).get("model_provider")
    if made_by in ("anthropic", "openai"):
        return ANTHROPIC if made_by == "anthropic" else OPENAI_RESPONSES
    if "id" in item and not ({"content", "signature", "tool_changes"} & item.keys()):
        return OPENAI_RESPONSES
    return ANTHROPIC


def server_compaction(message: BaseMessage) -> tuple[str, dict[str, Any]] | None:
    """The provider and the compaction item a reply carries, if any, in any output format,
    streamed or not (an Anthropic block with null ``content``, a failed one, is none).

    Examples:
        >>> block = {"type": "compaction", "content": "Summary so far.", "encrypted_content": "e"}
        >>> reply = AIMessage([{"type": "non_standard", "value": block}, {"type": "text", "text": "ok"}],
        ...                   response_metadata={"model_provider": "anthropic"})
        >>> server_compaction(reply) == ("anthropic", block)
        True
        >>> server_compaction(AIMessage([{**block, "content": None}], response_metadata={"model_provider": "anthropic"})) is None
        True
    """
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return None
    for block in message.content:
        item = provider_block(block)
        if item is None or item.get("type") != "compaction":
            continue
        provider = item_provider(message, item)
        if provider == ANTHROPIC and not item.get("content"):
            continue
        return provider, item
    return None


def compaction_iterations(message: BaseMessage) -> list[dict[str, Any]]:
    """The usage of the compaction steps a reply reports apart from its own (Anthropic's
    ``usage.iterations`` of type ``compaction``; none from a stream)."""
    usage = (getattr(message, "response_metadata", None) or {}).get("usage")
    iterations = usage.get("iterations") if isinstance(usage, Mapping) else None
    if not isinstance(iterations, list):
        return []
    return [
        dict(entry)
        for entry in iterations
        if isinstance(entry, Mapping) and entry.get("type") == "compaction"
    ]


def server_compaction_item(message: BaseMessage) -> dict[str, Any] | None:
    """The compaction item a reply carries, if any (:func:`server_compaction` without the
    provider)."""
    found = server_compaction(message)
    return None if found is None else found[1]


def without_provider_items(message: BaseMessage, *, keep_for: str | None = None) -> BaseMessage:
    """``message`` without content blocks only their provider can read (with ``keep_for``,
    only those another provider made); the same object when there is nothing to take out."""
    if not isinstance(message.content, list):
        return message
    kept = [block for block in message.content if not _opaque(message, block, keep_for)]
    if len(kept) == len(message.content):
        return message
    return message.model_copy(update={"content": kept or ""})


def _opaque(message: BaseMessage, block: Any, keep_for: str | None) -> bool:
    item = provider_block(block) or {}
    return item.get("type") in _OPAQUE_BLOCKS and (
        keep_for is None or item_provider(message, item) != keep_for
    )


def window_messages(state: dict[str, Any], flag: dict[str, Any]) -> list[BaseMessage]:
    """The view messages of a stored provider window: user items as human messages, the
    compaction item (and anything else) as an assistant message holding it unchanged; each
    carries ``flag`` (the summary flag)."""
    out: list[BaseMessage] = []
    stem = str(flag.get("checkpoint_id", "w"))[:12]
    for part, item in enumerate(state.get("window") or ()):
        kwargs: dict[str, Any] = {
            SUMMARY_FLAG: {**flag, "provider": state.get("provider"), "part": part}
        }
        ident = f"ctx-window-{stem}-{part}"
        if item.get("type") == "message" and item.get("role") == "user":  # OpenAI's window
            out.append(HumanMessage(item.get("content") or "", id=ident, additional_kwargs=kwargs))
            continue
        tokens = state.get("item_tokens")
        if item.get("type") == "compaction" and isinstance(tokens, int):
            kwargs[PROVIDER_TOKENS] = tokens
        out.append(AIMessage([dict(item)], id=ident, additional_kwargs=kwargs))
    return out


def strip_opaque(message: BaseMessage, *, keep_for: str | None = None) -> BaseMessage:
    """``message`` without a provider's opaque items, as a flagged copy (never recorded over the
    original); the same object when it has none."""
    stripped = without_provider_items(message, keep_for=keep_for)
    if stripped is message:
        return message
    kwargs = {**stripped.additional_kwargs, STRIPPED_FLAG: True}
    return stripped.model_copy(update={"additional_kwargs": kwargs})


def _may_change(message: BaseMessage) -> bool:
    """Whether :meth:`Wire.messages` may take out or strip ``message``."""
    if message.content.__class__ is not str:
        return True
    return not message.content and message.type == "ai" and _emptied(message)


def _emptied(message: BaseMessage) -> bool:
    """An assistant message with nothing left to send once its opaque items were taken out."""
    return (
        isinstance(message, AIMessage)
        and not message.content
        and not message.tool_calls
        and not message.invalid_tool_calls
        and (
            bool(message.additional_kwargs.get(STRIPPED_FLAG))
            or message.response_metadata.get("stop_reason") == "compaction"
        )
    )


def chain_broken(context: Any) -> bool:
    """The view's prefix is not the one the provider holds (no baseline measured on it in this
    projection epoch): a model chained by ``previous_response_id`` must send it whole, once."""
    context = unpack(context) if isinstance(context, Mapping) else {}
    baseline = context.get("baseline")
    if not isinstance(baseline, Mapping):
        return True
    return bool(baseline.get("projection_epoch") != context.get("projection_epoch", 0))


def unchained(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with the provider's response ids taken off the assistant messages' copies
    (a chained model then sends them whole and starts a new chain)."""
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


@dataclass(frozen=True)
class Wire:
    """What the model's wire protocol needs of a request's messages, applied to the copies
    that go out: an opaque item another provider made is taken out (``provider``, None: not
    known), an assistant message left empty is not sent, and with ``chained`` a view the
    provider does not hold is sent whole, once.

    Examples:
        >>> block = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA=="}
        >>> view = [HumanMessage("hi"), AIMessage([block, {"type": "text", "text": "ok"}])]
        >>> Wire("anthropic").messages(view, {})[1].content
        [{'type': 'text', 'text': 'ok'}]
        >>> Wire("openai-responses").messages(view, {})[1].content == view[1].content
        True
    """

    provider: str | None = None
    chained: bool = False

    def messages(self, messages: Sequence[BaseMessage], context: Any) -> Sequence[BaseMessage]:
        """The messages to send (``messages`` itself when nothing changes)."""
        out: Sequence[BaseMessage] = messages
        suspects = [m for m in messages if m.content.__class__ is not str or not m.content]
        if suspects and any(_may_change(m) for m in suspects):
            if self.provider not in (None, "unknown"):
                kept = [strip_opaque(m, keep_for=self.provider) for m in messages]
                if any(a is not b for a, b in zip(kept, messages, strict=True)):
                    out = kept
            if any(_emptied(m) for m in out):
                out = [m for m in out if not _emptied(m)]
        if self.chained and chain_broken(context):
            out = unchained(out)
        return out
