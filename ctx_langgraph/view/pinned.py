"""Pinned rules in the view: one system message with a stable id, kept first on every turn."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from langchain_core.messages import BaseMessage, SystemMessage

from ctx_langgraph.view.markers import PINNED_FLAG

__all__ = ["HEADER", "PINNED_MESSAGE_ID", "is_pinned", "pin", "pinned_message"]

PINNED_MESSAGE_ID: Final = "ctx-pinned-rules"
"""The id of the system message holding the pinned rules in the model's view."""
HEADER: Final = "Pinned rules (persistent instructions; they stay in force after any summary):"
"""The first line of the pinned rules' system message."""


def is_pinned(message: BaseMessage) -> bool:
    """Whether a message is the pinned-rules message ``ctx_budget`` keeps in the view."""
    return bool(message.additional_kwargs.get(PINNED_FLAG))


def pinned_message(text: str) -> SystemMessage:
    """The view's pinned-rules message for ``text``."""
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    return SystemMessage(
        f"{HEADER}\n\n{text}",
        id=PINNED_MESSAGE_ID,
        additional_kwargs={PINNED_FLAG: {"sha1": digest}},
    )


def pin(messages: Sequence[BaseMessage], text: str | None) -> tuple[list[BaseMessage], bool]:
    """``messages`` with the pinned-rules message for ``text`` first (or none when ``text`` is
    None), and whether that changed anything."""
    others, current = (
        [m for m in messages if not is_pinned(m)],
        [m for m in messages if is_pinned(m)],
    )
    if text is None:
        return others, bool(current)
    wanted = pinned_message(text)
    if len(current) == 1 and messages[0] is current[0] and current[0].text == wanted.text:
        return list(messages), False
    return [wanted, *others], True
