"""What a model request holds, measured deterministically: evidence, answers, corrections,
coverage and tool-call pairing.

Each function looks at one request (a list of messages) and, where needed, the conversation
history before it. None of them calls a model.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.core.text import query_terms
from ctx_langgraph.lookup import STOPWORDS

__all__ = [
    "answer_f1",
    "answer_in_context",
    "answer_terms",
    "context_text",
    "context_words",
    "correction_respected",
    "coverage",
    "evidence_available",
    "normalize",
    "orphan_tool_messages",
]

_SPACE = re.compile(r"\s+")
_MARKERS = ("not ", "supersedes", "instead of", "replaces", "no longer", "correction", "was ")
_ARTICLES = frozenset({"a", "an", "the", "and"})


def normalize(text: str) -> str:
    """Whitespace collapsed and case folded: how texts are compared."""
    return _SPACE.sub(" ", text).strip().casefold()


def _record_text(record: dict[str, Any]) -> str:
    """What a model reads of one lookup record: its text, then the other values it shows (time,
    day, resolved dates, role), JSON-decoded; cursors and handles are left out."""
    parts = [str(record.get("text", ""))]

    def values(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                parts.append(str(key))
                values(item)
        elif isinstance(value, list):
            for item in value:
                values(item)
        elif isinstance(value, str):
            parts.append(value)

    for key, value in record.items():
        if key not in ("text", "cut", "event_id"):
            values(value)
    return " ".join(parts)


def _lookup_records(message: ToolMessage) -> list[str] | None:
    try:
        page = json.loads(message.text)
    except ValueError:
        return None
    if not isinstance(page, dict) or not isinstance(page.get("records"), list):
        return None
    return [_record_text(r) for r in page["records"] if isinstance(r, dict)]


def context_text(messages: Sequence[BaseMessage]) -> str:
    """Everything the model reads in a request, normalized; a history lookup page contributes
    each record as the model reads it (JSON-decoded): its text, then its time, day, resolved
    dates and role.

    Examples:
        >>> page = json.dumps({"records": [{"seq": 3, "time": "2023-05-08T13:56Z",
        ...     "day": "Mon 8 May 2023", "role": "user", "text": "I went yesterday."}]})
        >>> context_text([ToolMessage(page, tool_call_id="c1")])
        'i went yesterday. 2023-05-08t13:56z mon 8 may 2023 user'
    """
    parts: list[str] = []
    for message in messages:
        records = _lookup_records(message) if isinstance(message, ToolMessage) else None
        parts.extend(records if records is not None else [message.text])
        if isinstance(message, AIMessage):
            parts.extend(
                json.dumps(call["args"], ensure_ascii=False) for call in message.tool_calls
            )
    return normalize("\n".join(parts))


def evidence_available(context: str, evidence: Iterable[str]) -> tuple[bool, bool]:
    """(every evidence text is verbatim in the context, at least one is).

    Examples:
        >>> evidence_available(normalize("I went to the  support group."), ["i went to the support group.", "nope"])
        (False, True)
    """
    found = [normalize(text) in context for text in evidence]
    return all(found) and bool(found), any(found)


def _words(text: str) -> list[str]:
    return query_terms(text)  # the words the history store indexes


def answer_in_context(context: str, answer: str) -> bool | None:
    """Whether every content word of the answer is in the context (None: the answer has none).

    Examples:
        >>> answer_in_context(normalize("We met on 7 May 2023 in Lisbon"), "7 May 2023")
        True
        >>> answer_in_context(normalize("We met in May"), "7 May 2023")
        False
    """
    wanted = answer_terms(answer)
    if not wanted:
        return None
    return wanted <= set(_words(context))


def answer_terms(answer: str) -> frozenset[str]:
    """The content words of an answer: what :func:`answer_in_context` looks for.

    Examples:
        >>> sorted(answer_terms("the 7 May 2023"))
        ['2023', '7', 'may']
    """
    return frozenset(w for w in _words(answer) if w not in STOPWORDS)


def context_words(context: str) -> frozenset[str]:
    """The words of a context, as :func:`answer_in_context` splits them (to check many
    answers against one context: ``answer_terms(a) <= context_words(c)``)."""
    return frozenset(_words(context))


def correction_respected(context: str, current: str, superseded: str) -> bool:
    """The current value is there, and the superseded one never reads as current: each of its
    occurrences comes before the current value's last one, or right after a word that marks it
    as replaced ("not", "supersedes", "instead of", ...).

    Examples:
        >>> correction_respected(normalize("order is B-2291, not A-1172"), "B-2291", "A-1172")
        True
        >>> correction_respected(normalize("B-2291 ... later: the order is A-1172"), "B-2291", "A-1172")
        False
    """
    new, old = normalize(current), normalize(superseded)
    last_new = context.rfind(new)
    if last_new < 0:
        return False
    start = context.find(old)
    while start >= 0:
        before = context[max(0, start - 40) : start]
        if start > last_new and not any(marker in before for marker in _MARKERS):
            return False
        start = context.find(old, start + 1)
    return True


def answer_f1(prediction: str, answer: str) -> float:
    """Token F1 of a model's answer against the gold answer, as LoCoMo scores it (lower case,
    punctuation and articles dropped).

    Examples:
        >>> round(answer_f1("She went on 7 May 2023.", "7 May 2023"), 2)
        0.67
    """
    predicted = [w for w in _words(prediction) if w not in _ARTICLES]
    gold = [w for w in _words(answer) if w not in _ARTICLES]
    common = sum((Counter(predicted) & Counter(gold)).values())
    if not predicted or not gold or not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def orphan_tool_messages(messages: Sequence[BaseMessage]) -> int:
    """Tool results in a request without their call before them, plus calls without a result.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
        >>> orphan_tool_messages([HumanMessage("hi"), ToolMessage("42", tool_call_id="c1")])
        1
        >>> orphan_tool_messages([HumanMessage("hi"), call, ToolMessage("42", tool_call_id="c1")])
        0
        >>> orphan_tool_messages([HumanMessage("hi"), call])
        1
    """
    called: set[str] = set()
    answered: set[str] = set()
    orphans = 0
    for message in messages:
        if isinstance(message, AIMessage):
            called.update(str(call["id"]) for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            if message.tool_call_id in called:
                answered.add(message.tool_call_id)
            else:
                orphans += 1
    return orphans + len(called - answered)


def coverage(
    present: set[str], claimed: frozenset[str], history: Sequence[str], summaries: int
) -> tuple[bool, bool]:
    """(gap, overlap) of one request.

    ``history`` is every message said before the request, ``present`` the ids of those in it
    verbatim, ``claimed`` the ids its summary says it covers. A gap is a message that is
    neither; an overlap a message that is both, or a request holding two summaries.

    Examples:
        >>> coverage({"m3", "m4"}, frozenset({"m1", "m2"}), ["m1", "m2", "m3", "m4"], 1)
        (False, False)
        >>> coverage({"m4"}, frozenset({"m1", "m2"}), ["m1", "m2", "m3", "m4"], 1)
        (True, False)
        >>> coverage({"m2", "m3", "m4"}, frozenset({"m1", "m2"}), ["m1", "m2", "m3", "m4"], 1)
        (False, True)
    """
    gap = any(m not in present and m not in claimed for m in history)
    overlap = bool(present & claimed) or summaries > 1
    return gap, overlap
