"""Messages to rows and back: exact serialization plus a searchable text projection, and the
history tables' rows read back as records."""

from __future__ import annotations

import hashlib
import json
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
)

from ctx_langgraph.core.blocks import block_reference
from ctx_langgraph.core.text import search_document
from ctx_langgraph.history.types import (
    CompactionCheckpoint,
    HistoryEvent,
    KeyFact,
    Scope,
    Segment,
)
from ctx_langgraph.storage.codec import dumps, json_text, load_names, load_text, store_text
from ctx_langgraph.storage.dialects import Dialect

__all__ = [
    "BRANCH_COLS",
    "CHECKPOINT_COLS",
    "EVENT_COLS",
    "SEGMENT_COLS",
    "EventRow",
    "checkpoint_from_row",
    "event_from_row",
    "expand_record",
    "message_to_row",
    "optional_text",
    "record_of",
    "segment_from_row",
    "stored_optional",
    "text_projection",
]


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
    when it is the row's text."""
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

    Examples:
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


def _block_text(block: Any) -> str:
    """A content block's text (text, reasoning, a tool call or result); any other block by its
    :func:`~ctx_langgraph.core.blocks.block_reference`."""
    if not isinstance(block, dict):
        return block_reference(block)
    kind = block.get("type")
    for key in ("text", "thinking", "reasoning"):
        value = block.get(key)
        if isinstance(value, str):
            return value
    if kind in ("tool_use", "server_tool_use", "tool_call"):
        return f"{block.get('name', '')}({dumps(block.get('input', block.get('args', {})))})"
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, list):
            return "\n".join(text for text in (_block_text(b) for b in inner) if text)
        return "" if inner is None else str(inner)
    if kind in ("text", "thinking", "reasoning") and "summary" not in block:
        value = block.get(kind)  # a text block without text, or with a number for it
        return "" if value is None or isinstance(value, dict | list) else str(value)
    return block_reference(block)


def text_projection(message: BaseMessage) -> str:
    """The text that search indexes for a message: its text, reasoning, tool calls and results.

    Examples:
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
        seen_in_blocks = set(parts)
        calls = (f"{call['name']}({dumps(call['args'])})" for call in message.tool_calls)
        parts.extend(call for call in calls if call not in seen_in_blocks)
    return "\n".join(parts)


def _content_hash(canonical: str) -> bytes:
    """The 32-byte SHA-256 digest of a record's canonical JSON."""
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


EVENT_COLS = (
    "e.seq, e.event_id, e.branch, e.role, e.name, e.content, e.text, e.tool_call_ids, "
    "e.tool_names, e.revision, e.visible, e.created_at"
)


BRANCH_COLS = (
    "branch, parent_branch, fork_seq, head_seq, active_checkpoint_id, active_generation, created_at"
)


CHECKPOINT_COLS = (
    "id, tenant, thread_id, branch, generation, parent_id, first_seq, covered_through_seq, "
    "first_kept_event_id, source_revision, range_hash, summary_text, provider_state, "
    "format_version, summarizer_id, key_facts, summary_tokens, status, error, metadata, "
    "created_at, committed_at"
)


SEGMENT_COLS = (
    "id, tenant, thread_id, branch, first_seq, last_seq, generation, source_revision, "
    "range_hash, summary_text, key_facts, summarizer_id, summary_tokens, status, error, "
    "metadata, created_at"
)


def optional_text(stored: str | None) -> str | None:
    """The text :func:`stored_optional` stored (None stays None)."""
    return None if stored is None else load_text(stored)


def stored_optional(value: str | None) -> str | None:
    """An optional text as a column holds it (see :func:`~ctx_langgraph.storage.codec.store_text`)."""
    return None if value is None else store_text(value)


def event_from_row(d: Dialect, row: Sequence[Any]) -> HistoryEvent:
    """An event read with :data:`EVENT_COLS`."""
    text = load_text(row[6])
    return HistoryEvent(
        seq=int(row[0]),
        event_id=load_text(row[1]),
        branch=row[2],
        role=load_text(row[3]),
        name=optional_text(row[4]),
        content=expand_record(json.loads(row[5]), text),
        text=text,
        tool_call_ids=tuple(json.loads(row[7])),
        tool_names=load_names(row[8]),
        revision=int(row[9]),
        visible=bool(row[10]),
        created_at=d.from_ts(row[11]),
    )


def checkpoint_from_row(d: Dialect, row: Sequence[Any]) -> CompactionCheckpoint:
    """A summary version read with :data:`CHECKPOINT_COLS`."""
    return CompactionCheckpoint(
        id=row[0],
        scope=Scope(row[2], row[1], row[3]),
        generation=int(row[4]),
        parent_id=row[5],
        first_seq=int(row[6]),
        covered_through_seq=int(row[7]),
        first_kept_event_id=optional_text(row[8]),
        source_revision=int(row[9]),
        range_hash=row[10],
        summary_text=optional_text(row[11]),
        provider_state=None if row[12] is None else json.loads(row[12]),
        format_version=int(row[13]),
        summarizer_id=optional_text(row[14]),
        key_facts=tuple(KeyFact.from_json(item) for item in json.loads(row[15])),
        summary_tokens=None if row[16] is None else int(row[16]),
        status=row[17],
        error=optional_text(row[18]),
        metadata=json.loads(row[19]),
        created_at=d.from_ts(row[20]),
        committed_at=None if row[21] is None else d.from_ts(row[21]),
    )


def record_of(content: str, text: str | None) -> dict[str, Any]:
    """The full message record of a stored content column and its text (None: stored whole)."""
    stored: dict[str, Any] = json.loads(content)
    return stored if text is None else expand_record(stored, load_text(text))


def segment_from_row(d: Dialect, row: Sequence[Any]) -> Segment:
    """A segment read with :data:`SEGMENT_COLS`."""
    return Segment(
        id=row[0],
        scope=Scope(row[2], row[1], row[3]),
        first_seq=int(row[4]),
        last_seq=int(row[5]),
        generation=int(row[6]),
        source_revision=int(row[7]),
        range_hash=row[8],
        summary_text=optional_text(row[9]),
        key_facts=tuple(KeyFact.from_json(item) for item in json.loads(row[10])),
        summarizer_id=optional_text(row[11]),
        summary_tokens=None if row[12] is None else int(row[12]),
        status=row[13],
        error=optional_text(row[14]),
        metadata=json.loads(row[15]),
        created_at=d.from_ts(row[16]),
    )
