"""Provider items in the view: a reply's server-side compaction item (OpenAI's or Anthropic's,
told apart), the view messages of a provider's stored window, a message without the blocks only
its provider can read, and a request's messages as the model's wire protocol needs them."""

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
"""Content block types only the provider that made them can read."""


_STREAM_KEYS: Final = frozenset({"index", "sub_index"})
"""Keys langchain adds to a block while merging a stream (not the provider's)."""


def provider_block(block: Any) -> dict[str, Any] | None:
    """A content block as its provider wrote it, in every output format langchain produces:
    the block itself (``v0``, ``responses/v1``), or the value of the ``non_standard`` block
    that wraps it (``v1``); without the keys a stream's merge adds. None for a text part.

    Examples:
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


def item_provider(message: BaseMessage, item: Mapping[str, Any]) -> str:
    """Which provider made an opaque ``item`` of ``message``: ``"anthropic"`` or
    ``"openai-responses"``. Both name their compaction ``{"type": "compaction"}``; the
    provider is read from the projection's flag, else the reply's ``model_provider``, else the
    item's shape (Anthropic's block has ``content`` and a ``signature``, OpenAI's item an ``id``).

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
    if made_by == "anthropic":
        return ANTHROPIC
    if made_by == "openai":
        return OPENAI_RESPONSES
    if "id" in item and not ({"content", "signature", "tool_changes"} & item.keys()):
        return OPENAI_RESPONSES
    return ANTHROPIC


def server_compaction(message: BaseMessage) -> tuple[str, dict[str, Any]] | None:
    """The provider and the compaction item a reply carries (server-side compaction), if
    any, in whatever output format and whether streamed or not (:func:`provider_block`).

    An Anthropic block whose ``content`` is null is a compaction that failed, which the API
    treats as a no-op (nothing was dropped): it is not one.

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
            continue  # a failed compaction: the provider dropped nothing
        return provider, item
    return None


def compaction_iterations(message: BaseMessage) -> list[dict[str, Any]]:
    """The usage of the compaction steps a reply reports apart from its own (Anthropic's
    ``usage.iterations`` entries of type ``compaction``, not in the top-level counts). Empty
    when there are none, or when the reply was streamed (langchain-anthropic keeps no
    ``iterations`` from a stream).

    Examples:
        >>> usage = {"input_tokens": 900, "output_tokens": 20, "iterations": [
        ...     {"type": "compaction", "input_tokens": 61000, "output_tokens": 1400},
        ...     {"type": "message", "input_tokens": 900, "output_tokens": 20}]}
        >>> compaction_iterations(AIMessage("ok", response_metadata={"usage": usage}))
        [{'type': 'compaction', 'input_tokens': 61000, 'output_tokens': 1400}]
    """
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
    """``message`` without content blocks only their provider can read (an encrypted
    compaction item); with ``keep_for``, only those another provider made. The same object
    when there is nothing to take out."""
    if not isinstance(message.content, list):
        return message
    kept = []
    for block in message.content:
        item = provider_block(block) or {}
        if item.get("type") in _OPAQUE_BLOCKS and (
            keep_for is None or item_provider(message, item) != keep_for
        ):
            continue
        kept.append(block)
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
        if item.get("type") == "message" and item.get("role") == "user":  # OpenAI's window
            out.append(HumanMessage(item.get("content") or "", id=ident, additional_kwargs=kwargs))
            continue
        tokens = state.get("item_tokens")
        if item.get("type") == "compaction" and isinstance(tokens, int):
            kwargs[PROVIDER_TOKENS] = tokens  # counted as the provider reported, not as ciphertext
        out.append(AIMessage([dict(item)], id=ident, additional_kwargs=kwargs))
    return out


def strip_opaque(message: BaseMessage, *, keep_for: str | None = None) -> BaseMessage:
    """``message`` without a provider's opaque items (:func:`without_provider_items`), as a
    copy flagged so it is never recorded over the original; the same object when it has none.
    In the tail of a view, the projection brings the window, once, for the provider that can
    read it."""
    stripped = without_provider_items(message, keep_for=keep_for)
    if stripped is message:
        return message
    kwargs = {**stripped.additional_kwargs, STRIPPED_FLAG: True}
    return stripped.model_copy(update={"additional_kwargs": kwargs})


def _may_change(message: BaseMessage) -> bool:
    """Whether :meth:`Wire.messages` may take out or strip ``message`` (most need no more look)."""
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
    """The view's prefix is not the one the provider holds for the thread: no baseline was
    measured on it (a compaction dropped it, or none yet), or it was measured in another
    projection epoch (an edit, cleared results, a provider switch). A model chained by
    ``previous_response_id`` must then send the view whole, once.

    Examples:
        >>> chain_broken({"projection_epoch": 2, "baseline": {"projection_epoch": 2}})
        False
        >>> chain_broken({"projection_epoch": 3, "baseline": {"projection_epoch": 2}}), chain_broken({})
        (True, True)
    """
    context = unpack(context) if isinstance(context, Mapping) else {}
    baseline = context.get("baseline")
    if not isinstance(baseline, Mapping):
        return True
    return bool(baseline.get("projection_epoch") != context.get("projection_epoch", 0))


def unchained(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with the provider's response ids taken off the assistant messages' copies,
    so a model with ``use_previous_response_id`` sends them whole and starts a new chain
    instead of continuing one from a reply whose context is no longer the view.

    Examples:
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


@dataclass(frozen=True)
class Wire:
    """What the model's wire protocol needs of a request's messages, applied to the copies
    that go out (the state keeps the messages as they are).

    - ``provider`` (:func:`~ctx_langgraph.providers.provider_key`): an opaque item another
      provider made (an OpenAI compaction item on the way to Anthropic, or Anthropic's block on
      the way to OpenAI, whatever put it in the view) is taken out. None: the model is not
      known, nothing is taken out.
    - An assistant message left with nothing once its opaque item is out (Anthropic's reply
      that paused after compacting, ``pause_after_compaction``) is not sent: an empty assistant
      turn is a request error, on every later turn.
    - ``chained`` (:func:`~ctx_langgraph.providers.chains_responses`): a view the provider
      does not hold is sent whole, once (:func:`chain_broken`, :func:`unchained`).

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
        # only a message with content blocks can carry an opaque item, and only an assistant
        # message with no content can be left empty: the others are passed over unread
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
