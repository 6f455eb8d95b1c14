"""Conversations as JSONL traces: one message, question or session marker per line.

A message line is either LangChain's dict form (what ``messages_to_dict`` writes,
``{"type": "human", "data": {...}}``) or the OpenAI chat form (``{"role": "user", "content":
...}``, with ``tool_calls`` whose ``function.arguments`` is a JSON string, ``tool_call_id`` and
``name`` on tool results). Either may carry an ``"id"`` and a ``"created_at"`` (ISO 8601). A
question line is ``{"question": ..., "answer": ..., "evidence": [message ids], "category":
..., "query": ..., "superseded": ...}`` (the last three optional). A line ``{"session": ...}``
starts a new session.

:func:`load_trace` reads a trace into a :class:`~ctx_langgraph.datasets.Conversation` and
:func:`save_trace` writes one back, so a conversation survives the round trip.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    convert_to_messages,
    message_to_dict,
    messages_from_dict,
)

from ctx_langgraph.datasets import Conversation, QAItem
from ctx_langgraph.errors import DatasetError

__all__ = ["EPOCH", "SPACING", "load_trace", "save_trace"]

EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
"""When the first message was said, for a trace without ``created_at``."""
SPACING = dt.timedelta(seconds=30)
"""The time after the previous message of a message without ``created_at``."""

_ROLES = frozenset({"human", "user", "ai", "assistant", "system", "developer", "tool"})
_TYPES = frozenset({"human", "ai", "system", "tool"})
_QUESTION_KEYS = frozenset({"question", "answer", "evidence", "category", "query", "superseded"})


@dataclass
class _Reader:
    path: Path
    messages: list[BaseMessage] = field(default_factory=list)
    created_at: list[dt.datetime] = field(default_factory=list)
    questions: list[tuple[int, QAItem]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    call_ids: set[str] = field(default_factory=set)

    def error(self, number: int, problem: str) -> DatasetError:
        return DatasetError(f"{self.path}, line {number}: {problem}")

    def read(self, number: int, line: str) -> None:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise self.error(number, f"invalid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(record, dict):
            raise self.error(number, f"expected a JSON object, got {type(record).__name__}")
        if "question" in record:
            self.questions.append((number, self._question(number, record)))
        elif "role" in record or "type" in record:
            self._message(number, record)
        elif "session" in record:
            self.starts.append(len(self.messages))
        else:
            keys = ", ".join(sorted(record)) or "none"
            raise self.error(
                number,
                f"neither a message (role or type), a question nor a session marker (keys: {keys})",
            )

    def _question(self, number: int, record: dict[str, Any]) -> QAItem:
        unknown = sorted(set(record) - _QUESTION_KEYS)
        if unknown:
            raise self.error(number, f"unknown question keys: {', '.join(unknown)}")
        question, answer = record.get("question"), record.get("answer")
        evidence = record.get("evidence", [])
        category = record.get("category")
        if not isinstance(question, str) or not isinstance(answer, str):
            raise self.error(number, "a question needs 'question' and 'answer' strings")
        if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
            raise self.error(number, "'evidence' must be a list of message ids")
        if category is not None and (
            isinstance(category, bool) or not isinstance(category, (int, str))
        ):
            raise self.error(number, "'category' must be a number or a string")
        optional: dict[str, str | None] = {}
        for key in ("query", "superseded"):
            value = record.get(key)
            if value is not None and not isinstance(value, str):
                raise self.error(number, f"{key!r} must be a string")
            optional[key] = value
        return QAItem(question, answer, tuple(evidence), category, **optional)

    def _message(self, number: int, record: dict[str, Any]) -> None:
        record = dict(record)
        stamp = record.pop("created_at", None)
        given_id = record.pop("id", None) if "data" in record else None
        message = self._convert(number, record)
        message_id = given_id if given_id is not None else message.id
        if message_id is None:
            message_id = f"m{number}"
        if not isinstance(message_id, str) or not message_id:
            raise self.error(number, f"message id must be a non-empty string, got {message_id!r}")
        if message_id in self.ids:
            raise self.error(number, f"duplicate message id {message_id!r}")
        if message.id != message_id:
            message = message.model_copy(update={"id": message_id})
        if isinstance(message, ToolMessage) and message.tool_call_id not in self.call_ids:
            raise self.error(
                number,
                f"tool message {message_id!r} answers tool call {message.tool_call_id!r}, "
                "which no earlier AI message made",
            )
        if isinstance(message, AIMessage):
            calls = [*message.tool_calls, *message.invalid_tool_calls]
            self.call_ids.update(call["id"] for call in calls if call["id"])
        self.ids.add(message_id)
        self.messages.append(message)
        self.created_at.append(self._when(number, stamp))

    def _convert(self, number: int, record: dict[str, Any]) -> BaseMessage:
        langchain_form = "data" in record
        kind = record.get("type") if langchain_form else record.get("role", record.get("type"))
        if kind not in (_TYPES if langchain_form else _ROLES):
            raise self.error(
                number, f"unknown message {'type' if langchain_form else 'role'} {kind!r}"
            )
        try:
            if langchain_form:
                return messages_from_dict([record])[0]
            return convert_to_messages([record])[0]
        except (ValueError, TypeError, KeyError, AttributeError, NotImplementedError) as exc:
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise self.error(number, f"not a valid message: {problem}") from exc

    def _when(self, number: int, stamp: object) -> dt.datetime:
        if stamp is None:
            return self.created_at[-1] + SPACING if self.created_at else EPOCH
        if not isinstance(stamp, str):
            raise self.error(number, f"created_at must be an ISO 8601 string, got {stamp!r}")
        text = stamp[:-1] + "+00:00" if stamp.endswith(("Z", "z")) else stamp
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise self.error(number, f"created_at {stamp!r} is not ISO 8601") from exc
        return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)

    def sessions(self) -> list[tuple[int, int]]:
        bounds = sorted({0, *self.starts, len(self.messages)})
        return [(a, b) for a, b in itertools.pairwise(bounds) if a < b]


def _lines(path: Path) -> tuple[list[tuple[int, str]], int]:
    """The file's non-blank lines with their 1-based numbers, and its number of lines."""
    data = path.read_bytes()
    raws = data.split(b"\n")
    if raws[-1] == b"":
        raws.pop()
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(raws, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}, line {number}: not UTF-8 ({exc.reason})") from exc
        if number == 1:
            line = line.removeprefix("\ufeff")
        if line.strip():
            lines.append((number, line))
    return lines, len(raws)


def load_trace(path: str | Path, *, name: str | None = None) -> Conversation:
    """Read a JSONL trace (messages, questions, session markers) into a :class:`Conversation`.

    Messages without an ``id`` get ``m{line number}``; messages without ``created_at`` are
    said :data:`SPACING` after the previous one (the first at :data:`EPOCH`), and times
    without a zone are UTC. Without session markers the trace is one session. ``name``
    defaults to the file's stem. Raises :class:`~ctx_langgraph.errors.DatasetError`, naming
    the file and line, for invalid JSON, an unknown role or type, a duplicate message id, a
    tool result for a call no earlier AI message made, a question whose evidence names an
    unknown message, and a trace without messages.

    Examples:
        >>> import json, tempfile
        >>> lines = [
        ...     {"role": "user", "content": "Where is order ORD-1?", "id": "u1"},
        ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        ...      "function": {"name": "search_orders", "arguments": '{"query": "ORD-1"}'}}]},
        ...     {"role": "tool", "content": "ORD-1: shipped", "tool_call_id": "c1", "name": "search_orders"},
        ...     {"role": "assistant", "content": "It shipped."},
        ...     {"question": "Did ORD-1 ship?", "answer": "shipped", "evidence": ["m3"]},
        ... ]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp, "orders.jsonl")
        ...     _ = path.write_text("\\n".join(json.dumps(line) for line in lines))
        ...     conv = load_trace(path)
        >>> conv.name, [m.id for m in conv.messages], conv.sessions
        ('orders', ['u1', 'm2', 'm3', 'm4'], [(0, 4)])
        >>> conv.messages[1].tool_calls[0]["args"], conv.questions[0].evidence
        ({'query': 'ORD-1'}, ('m3',))
    """
    path = Path(path)
    reader = _Reader(path)
    lines, count = _lines(path)
    for number, line in lines:
        reader.read(number, line)
    if not reader.messages:
        raise reader.error(max(count, 1), "the trace has no messages (end of file)")
    for number, question in reader.questions:
        missing = [e for e in question.evidence if e not in reader.ids]
        if missing:
            raise reader.error(
                number, f"evidence names unknown message id(s): {', '.join(map(repr, missing))}"
            )
    return Conversation(
        name if name is not None else path.stem,
        reader.messages,
        reader.created_at,
        [question for _, question in reader.questions],
        reader.sessions(),
    )


def save_trace(conversation: Conversation, path: str | Path) -> None:
    """Write ``conversation`` as a JSONL trace that :func:`load_trace` reads back.

    Messages are written in LangChain's dict form with their ``created_at``, then one line per
    question. When the conversation has several sessions, a ``{"session": n}`` line opens each
    one (sessions that tile the messages round-trip exactly). Naive times are read back as UTC.

    Examples:
        >>> import tempfile
        >>> from ctx_langgraph.eval.synthetic import tool_session
        >>> conv = tool_session(seed=2, turns=60)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     save_trace(conv, Path(tmp, "session.jsonl"))
        ...     back = load_trace(Path(tmp, "session.jsonl"), name=conv.name)
        >>> back.messages == conv.messages, back.questions == conv.questions
        (True, True)
        >>> back.created_at == conv.created_at, back.sessions == conv.sessions
        (True, True)
    """
    starts: dict[int, int] = {}
    if len(conversation.sessions) > 1:
        starts = {start: n for n, (start, _) in enumerate(conversation.sessions, start=1)}
    lines: list[str] = []
    for index, (message, when) in enumerate(
        zip(conversation.messages, conversation.created_at, strict=True)
    ):
        if index in starts:
            lines.append(json.dumps({"session": starts[index]}))
        record = {**message_to_dict(message), "created_at": when.isoformat()}
        lines.append(json.dumps(record, ensure_ascii=False))
    for question in conversation.questions:
        item: dict[str, Any] = {
            "question": question.question,
            "answer": question.answer,
            "evidence": list(question.evidence),
        }
        for key in ("category", "query", "superseded"):
            value = getattr(question, key)
            if value is not None:
                item[key] = value
        lines.append(json.dumps(item, ensure_ascii=False))
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
