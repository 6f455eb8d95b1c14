"""Tool results in the view: a preview of an oversized one, a placeholder of an old one (and its
call with the arguments cleared); the original stays in the history store under the message's id.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from ctx_langgraph.view.markers import CAPPED_FLAG, CLEARED_FLAG, INPUTS_CLEARED_FLAG

__all__ = ["capped", "cleared", "cleared_inputs"]


def capped(
    message: ToolMessage,
    text: str,
    cap: int,
    seq: int | None,
    *,
    original_tokens: int | None = None,
    count_text: Callable[[str], int] | None = None,
) -> ToolMessage:
    """Head and tail of an oversized tool result, with a handle to the original (a preview keeps
    the original's numbers); its size is ``original_tokens``, else ``count_text(text)``."""
    budget_chars = max(200, cap * 3)
    head, tail = text[: budget_chars // 2], text[-budget_chars // 4 :]
    earlier = message.additional_kwargs.get(CAPPED_FLAG) or {}
    original = earlier.get("original_tokens") or original_tokens
    if not original:
        assert count_text is not None, "pass original_tokens or count_text"
        original = count_text(text)
    original = int(original)
    characters = earlier.get("characters") if earlier else len(text)
    seq = seq if seq is not None else earlier.get("seq")
    handle = f"history:{message.id}"
    body = (
        f"{head}\n\n[... tool output capped: {original:,} tokens"
        + (f", {characters:,} characters" if characters else "")
        + f". The full result is kept as {handle}"
        + (f" (seq {seq})" if seq else "")
        + f'; page through it by calling history_lookup with handle="{handle}". Last part '
        f"follows ...]\n\n{tail}"
    )
    return message.model_copy(
        update={
            "content": body,
            "additional_kwargs": {
                **message.additional_kwargs,
                CAPPED_FLAG: {
                    "handle": handle,
                    "seq": seq,
                    "original_tokens": original,
                    "characters": characters,
                },
            },
        }
    )


def cleared(
    message: ToolMessage,
    tokens: int,
    seq: int | None,
    *,
    text: str | None = None,
    inputs_cleared: bool = False,
) -> ToolMessage:
    """A placeholder (``text``, else one naming the handle) for an old tool result, marked as
    LangChain's ``ClearToolUsesEdit`` marks it."""
    handle = f"history:{message.id}"
    if text is None:
        text = (
            f"[tool result cleared to save context: {tokens:,} tokens; kept as {handle}"
            + (f" (seq {seq})" if seq else "")
            + ("; its call's arguments were cleared too" if inputs_cleared else "")
            + f'; read it again by calling history_lookup with handle="{handle}"]'
        )
    return message.model_copy(
        update={
            "content": text,
            "artifact": None,
            "additional_kwargs": {
                **message.additional_kwargs,
                CLEARED_FLAG: {"handle": handle, "tokens": tokens},
            },
            "response_metadata": {
                **message.response_metadata,
                "context_editing": {"cleared": True, "strategy": "clear_tool_uses"},
            },
        }
    )


_CALL_BLOCKS = {"tool_use": "input", "tool_call": "args", "function_call": "arguments"}


def cleared_inputs(message: AIMessage, call_ids: Collection[str]) -> AIMessage:
    """``message`` with the arguments of the tool calls ``call_ids`` replaced by ``{}`` wherever
    a provider reads them; every call keeps its id and name."""
    ids = set(call_ids) | set(message.additional_kwargs.get(INPUTS_CLEARED_FLAG) or ())
    tool_calls = [
        {**call, "args": {}} if call.get("id") in ids else call for call in message.tool_calls
    ]
    content: str | list[Any] = message.content
    if isinstance(content, list):
        content = [_without_arguments(block, ids) for block in content]
    kwargs = dict(message.additional_kwargs)
    raw_calls = kwargs.get("tool_calls")
    if isinstance(raw_calls, list):
        kwargs["tool_calls"] = [
            {**raw, "function": {**raw["function"], "arguments": "{}"}}
            if isinstance(raw, dict)
            and raw.get("id") in ids
            and isinstance(raw.get("function"), dict)
            else raw
            for raw in raw_calls
        ]
    kwargs[INPUTS_CLEARED_FLAG] = sorted(ids)
    editing = dict(message.response_metadata.get("context_editing") or {})
    editing["cleared_tool_inputs"] = sorted(ids)
    return message.model_copy(
        update={
            "content": content,
            "tool_calls": tool_calls,
            "additional_kwargs": kwargs,
            "response_metadata": {**message.response_metadata, "context_editing": editing},
        }
    )


def _without_arguments(block: Any, ids: set[str]) -> Any:
    if not isinstance(block, dict):
        return block
    field = _CALL_BLOCKS.get(str(block.get("type")))
    if field is None or (block.get("id") not in ids and block.get("call_id") not in ids):
        return block
    return {**block, field: "{}" if field == "arguments" else {}}
