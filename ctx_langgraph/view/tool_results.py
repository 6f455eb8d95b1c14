"""Tool results in the view: a preview of an oversized one, a placeholder of an old one.

The original always stays in the history store, recorded under the message's id; the view's
copy carries a handle the history lookup tool pages through (docs/design.md §2).

Examples:
    >>> from langchain_core.messages import ToolMessage
    >>> result = ToolMessage("x" * 5_000, tool_call_id="c1", id="t1")
    >>> placeholder = cleared(result, tokens=1_250, seq=7)
    >>> placeholder.text
    '[tool result cleared to save context: 1,250 tokens; kept as history:t1 (seq 7); read it again by calling history_lookup with handle="history:t1"]'
    >>> short = capped(result, result.text, original_tokens=1_250, cap=100, seq=7)
    >>> short.additional_kwargs["ctx_capped"], len(short.text) < 500
    ({'handle': 'history:t1', 'seq': 7, 'original_tokens': 1250}, True)
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.messages import ToolMessage

from ctx_langgraph.view.markers import CAPPED_FLAG, CLEARED_FLAG

__all__ = ["capped", "cleared"]


def capped(
    message: ToolMessage,
    text: str,
    cap: int,
    seq: int | None,
    *,
    original_tokens: int | None = None,
    count_text: Callable[[str], int] | None = None,
) -> ToolMessage:
    """Head and tail of an oversized tool result, with a handle to the original (recorded under
    the message's id; a preview capped again keeps the original's numbers).

    The original's size is ``original_tokens``, else ``count_text(text)`` (counted only when the
    message is not a preview already)."""
    budget_chars = max(200, cap * 3)  # about cap tokens of ordinary text
    head, tail = text[: budget_chars // 2], text[-budget_chars // 4 :]
    earlier = message.additional_kwargs.get(CAPPED_FLAG) or {}
    original = earlier.get("original_tokens") or original_tokens
    if not original:
        assert count_text is not None, "pass original_tokens or count_text"
        original = count_text(text)
    original = int(original)
    seq = seq if seq is not None else earlier.get("seq")
    handle = f"history:{message.id}"
    body = (
        f"{head}\n\n[... tool output capped: {original:,} tokens"
        + ("" if earlier else f", {len(text):,} characters")
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
                CAPPED_FLAG: {"handle": handle, "seq": seq, "original_tokens": original},
            },
        }
    )


def cleared(message: ToolMessage, tokens: int, seq: int | None) -> ToolMessage:
    """A placeholder for an old tool result cleared from the view to save context."""
    handle = f"history:{message.id}"
    return message.model_copy(
        update={
            "content": f"[tool result cleared to save context: {tokens:,} tokens; kept as {handle}"
            + (f" (seq {seq})" if seq else "")
            + f'; read it again by calling history_lookup with handle="{handle}"]',
            "additional_kwargs": {
                **message.additional_kwargs,
                CLEARED_FLAG: {"handle": handle, "tokens": tokens},
            },
        }
    )
