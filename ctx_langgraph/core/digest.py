"""A cheap checksum of recorded messages (``context["recorded_digest"]``: first id, count and
CRC-32), to notice a message edited in place by id without reading the store.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["digest", "extend_digest"]


_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def _json(value: Any) -> str:
    return _ENCODER.encode(value)


def digest(messages: Sequence[BaseMessage], start: int = 0) -> int:
    """CRC-32 of the messages' ids, types, names, contents, tool calls and extra fields,
    continued from ``start``."""
    parts = [
        f"{m.id}\x1e{m.type}\x1e{m.name or ''}\x1e"
        f"{m.content if isinstance(m.content, str) else _json(m.content)}\x1e"
        f"{_json(m.tool_calls) if isinstance(m, AIMessage) and m.tool_calls else ''}\x1e"
        f"{_json(m.additional_kwargs) if m.additional_kwargs else ''}\x1f"
        for m in messages
    ]
    # a lone surrogate counts as "?", as in a checkpoint
    return zlib.crc32("".join(parts).encode("utf-8", "replace"), start)


def extend_digest(saved: dict[str, Any] | None, messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """``context["recorded_digest"]`` after ``messages`` were recorded at the end."""
    saved = saved or {}
    first = saved.get("first") or (messages[0].id if messages else None)
    return {
        "first": first,
        "count": int(saved.get("count") or 0) + len(messages),
        "value": digest(messages, int(saved.get("value") or 0)),
    }
