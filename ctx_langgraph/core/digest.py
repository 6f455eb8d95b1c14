"""A cheap checksum of recorded messages, to notice an edit by id without reading the store.

``add_messages`` replaces a message by id in place (an edit sent with the input, Studio's edit,
``update_state``). The nodes keep ``context["recorded_digest"]``: the checksum of the recorded
part of the state (its first id, its count and the checksum of ids and contents). A state whose
recorded part has the same first id and count but another checksum was edited in place.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["digest", "extend_digest"]


# (one encoder for every call: building one per message costs more than the encoding)
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def _json(value: Any) -> str:
    # (characters kept as they are: a lone surrogate is then "?" below, as in a checkpoint)
    return _ENCODER.encode(value)


def digest(messages: Sequence[BaseMessage], start: int = 0) -> int:
    """CRC-32 of the messages' ids, types, names, contents, tool calls and extra fields,
    continued from ``start``
    (so ``digest(a + b) == digest(b, digest(a))``)."""
    parts = [
        f"{m.id}\x1e{m.type}\x1e{m.name or ''}\x1e"
        f"{m.content if isinstance(m.content, str) else _json(m.content)}\x1e"
        f"{_json(m.tool_calls) if isinstance(m, AIMessage) and m.tool_calls else ''}\x1e"
        f"{_json(m.additional_kwargs) if m.additional_kwargs else ''}\x1f"
        for m in messages
    ]
    # (a lone surrogate counts as "?", as LangGraph's checkpoint serializer stores it: a state
    # read back from a checkpoint is not an edit)
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
