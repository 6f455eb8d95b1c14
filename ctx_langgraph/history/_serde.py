"""Messages to rows and back: exact serialization plus a searchable text projection."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from ctx_langgraph.core.text import search_document

__all__ = [
    "EventRow",
    "expand_record",
    "json_text",
    "load_names",
    "load_text",
    "message_from_record",
    "message_to_row",
    "store_names",
    "store_text",
    "text_projection",
]

_ESCAPE = "\ufdd0"
"""Starts a stored text that holds escapes: a Unicode noncharacter, never in ordinary text.
Each character neither backend can store (NUL, a lone surrogate), and the marker itself, is
written as the marker and four hex digits. A text without them is stored unchanged."""
_UNSTORABLE = re.compile("[\x00\ud800-\udfff\ufdd0]")
_UNSTORABLE_NAME = re.compile("[\x00\ud800-\udfff\ufdd0|]")  # '|' separates stored names
_ESCAPED = re.compile("\ufdd0([0-9a-f]{4})")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(value: str, unstorable: re.Pattern[str]) -> str:
    if unstorable.search(value) is None:
        return value
    return _ESCAPE + unstorable.sub(lambda m: f"{_ESCAPE}{ord(m.group()):04x}", value)


def store_text(value: str) -> str:
    """A text as a column holds it on both backends: unchanged, unless it has a NUL byte or a
    lone surrogate (which PostgreSQL, or UTF-8 itself, cannot store); :func:`load_text` undoes it.

    Example:
        >>> store_text("plain") == "plain", load_text(store_text("a\\x00b\\ud800")) == "a\\x00b\\ud800"
        (True, True)
    """
    return _escape(value, _UNSTORABLE)


def load_text(stored: str) -> str:
    """The text :func:`store_text` stored."""
    if not stored.startswith(_ESCAPE):
        return stored
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), stored[1:])


def store_names(names: Sequence[str]) -> str:
    """Tool names as one column, ``|a|b|``, so a name is found as the substring ``|name|``
    (:func:`store_names` of ``[name]``); a ``|`` inside a name is escaped."""
    if not names:
        return ""
    return "|" + "|".join(_escape(name, _UNSTORABLE_NAME) for name in names) + "|"


def load_names(stored: str) -> tuple[str, ...]:
    """The names :func:`store_names` stored."""
    return tuple(load_text(name) for name in stored.split("|") if name)


def json_text(value: Any) -> str:
    """Compact JSON that both backends store: NUL is escaped by JSON itself; a lone surrogate
    makes the whole document ASCII (``\\udXXX`` escapes), which reads back exactly."""
    text = _dumps(value)
    if _SURROGATE.search(text) is not None:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


_COMPACT = "~"
"""Marks a stored record written compactly: ``"d"`` defaults left out, ``"t"`` also the
content, which is the row's ``text`` column."""


@lru_cache(maxsize=32)
def _defaults(kind: str) -> dict[str, Any] | None:
    """The ``data`` a message of this type has when nothing is set (None: unknown type)."""
    templates: dict[str, BaseMessage] = {
        "human": HumanMessage(""),
        "ai": AIMessage(""),
        "tool": ToolMessage("", tool_call_id=""),
        "system": SystemMessage(""),
        "AIMessageChunk": AIMessageChunk(content=""),
    }
    template = templates.get(kind)
    return None if template is None else dict(message_to_dict(template)["data"])


def _compact(record: dict[str, Any], text: str) -> dict[str, Any]:
    """The record without what :func:`expand_record` restores: default fields, and the content
    when it is the row's text. Stored rows are about half as large; reads are exact."""
    defaults = _defaults(str(record.get("type")))
    data = record.get("data")
    if defaults is None or not isinstance(data, dict):
        return record
    small = {k: v for k, v in data.items() if k not in defaults or defaults[k] != v}
    mark = "d"
    content = data.get("content")
    if isinstance(content, str) and content and content == text:
        small.pop("content", None)
        mark = "t"
    return {_COMPACT: mark, "type": record["type"], "data": small}


def expand_record(stored: dict[str, Any], text: str) -> dict[str, Any]:
    """The full ``message_to_dict`` record of a stored row (compact or not).

    Example:
        >>> row = message_to_row(HumanMessage("hello", id="h1"))
        >>> json.loads(row.content_json)
        {'~': 't', 'type': 'human', 'data': {'id': 'h1'}}
        >>> expand_record(json.loads(row.content_json), row.text) == message_to_dict(HumanMessage("hello", id="h1"))
        True
    """
    mark = stored.get(_COMPACT)
    if mark is None:
        return stored
    defaults = _defaults(str(stored["type"])) or {}
    data = {k: (v.copy() if isinstance(v, dict | list) else v) for k, v in defaults.items()}
    data.update(stored["data"])
    if mark == "t":
        data["content"] = text
    return {"type": stored["type"], "data": data}


@dataclass(frozen=True)
class EventRow:
    """A message ready to be written: everything the store needs, computed once."""

    event_id: str
    role: str
    name: str | None
    content_json: str
    content_hash: bytes
    """SHA-256 of the full record (32 bytes): an append of the same id compares it to tell a
    duplicate from a revision."""
    text: str
    tool_call_ids: tuple[str, ...]
    tool_names: tuple[str, ...]
    terms: str | None = None
    """The search document of ``text`` (None: the full-text engines index ``text`` itself)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return str(block)
    kind = block.get("type")
    for key in ("text", "thinking", "reasoning"):
        value = block.get(key)
        if isinstance(value, str):
            return value
    if kind in ("tool_use", "server_tool_use", "tool_call"):
        return f"{block.get('name', '')}({_dumps(block.get('input', block.get('args', {})))})"
    if kind in ("image", "image_url", "file", "audio", "video", "document"):
        return f"[{kind}]"
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, list):
            return "\n".join(_block_text(b) for b in inner)
        return "" if inner is None else str(inner)
    return ""


def text_projection(message: BaseMessage) -> str:
    """The text that search indexes for a message: its text, reasoning, tool calls and results.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> text_projection(AIMessage("", tool_calls=[{"name": "get_order", "args": {"id": 7}, "id": "c1"}]))
        'get_order({"id":7})'
    """
    content = message.content
    parts: list[str] = []
    if isinstance(content, str):
        if content:
            parts.append(content)
    else:
        parts.extend(text for text in (_block_text(block) for block in content) if text)
    if isinstance(message, AIMessage):
        seen_in_blocks = {p for p in parts}
        for call in message.tool_calls:
            rendered = f"{call['name']}({_dumps(call['args'])})"
            if rendered not in seen_in_blocks:
                parts.append(rendered)
    return "\n".join(parts)


def _content_hash(canonical: str) -> bytes:
    """The stored hash of a record's canonical JSON: the 32-byte SHA-256 digest (schema v5;
    before it, the 64-character hex digest)."""
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()


def message_to_row(message: BaseMessage) -> EventRow:
    """Serialize a message exactly (``message_to_dict``) and derive its indexable columns.

    A message without an id gets a fresh UUID, as LangGraph's ``add_messages`` does; pass
    messages with ids to make appends idempotent.
    """
    if not isinstance(message, BaseMessage):
        raise TypeError(f"expected a LangChain BaseMessage, got {type(message).__name__}")
    if not message.id:
        message = message.model_copy(update={"id": str(uuid.uuid4())})
    record = message_to_dict(message)
    text = text_projection(message)
    content_json = json_text(_compact(record, text))
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
    if isinstance(message, AIMessage):
        call_ids = tuple(str(call.get("id") or "") for call in message.tool_calls)
        names = tuple(dict.fromkeys(call["name"] for call in message.tool_calls))
    elif isinstance(message, ToolMessage):
        call_ids = (message.tool_call_id,)
        names = (message.name,) if message.name else ()
    else:
        call_ids, names = (), ()
    return EventRow(
        event_id=str(message.id),
        role=message.type,
        name=message.name,
        content_json=content_json,
        content_hash=_content_hash(canonical),
        text=text,
        tool_call_ids=call_ids,
        tool_names=names,
        terms=search_document(text),
    )


def message_from_record(record: dict[str, Any]) -> BaseMessage:
    """Rebuild a message from its ``message_to_dict`` record."""
    return messages_from_dict([record])[0]
