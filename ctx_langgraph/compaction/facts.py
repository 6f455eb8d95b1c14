"""Key facts: exact values copied out of a text with patterns, tool-log noise left out,
corrections, and how much each fact is worth (docs/design.md §6)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Final

from langchain_core.messages import AIMessage

from ctx_langgraph.core.dates import day_label
from ctx_langgraph.history.types import HistoryEvent, KeyFact

__all__ = [
    "CORRECTION",
    "corrected",
    "event_facts",
    "extract_key_facts",
    "fact_rank",
    "merge_facts",
    "sentences",
    "stated_facts",
    "statement_facts",
    "tool_facts",
]

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_TIME = r"\d{1,2}:\d{2}(?:\s?(?:[ap]m|[AP]M|[ap]\.m\.))?"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_CURRENCY = r"(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|INR|CNY)"
# Earlier patterns win: their spans are masked before later patterns run.
_FACT_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("url", re.compile(r"\b(?:https?|ftp)://[^\s<>\"'`)\]]+")),
    ("email", re.compile(r"\b[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")),
    ("path", re.compile(r"\b[A-Za-z]:\\[^\s\"'<>|*?]+")),
    ("path", re.compile(r"(?<![\w.:/~-])~?/(?:[\w.-]+/)+[\w.-]+|(?<![\w.:/~-])/[\w-]+\.\w+")),
    ("path", re.compile(r"(?<![\w./@:-])(?:[\w.-]+/)+[\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}\b")),
    ("id", re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")),
    (
        "date",
        re.compile(
            rf"\b\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?(?:Z|[+-]\d{{2}}:?\d{{2}})?)?"
            rf"|(?:\b{_TIME}\s+on\s+)?\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?(?![\w])"
            rf"|(?:\b{_TIME}\s+on\s+)?\b{_MONTH}\s+(?:{_DAY}(?:,?\s+\d{{4}})?|\d{{4}})\b"
            r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
        ),
    ),
    (
        "amount",
        re.compile(
            rf"[$€£¥]\s?{_NUMBER}(?:\s?(?:k|K|m|M|bn|million|billion)\b)?"
            rf"|\b{_NUMBER}\s?(?:{_CURRENCY}|dollars|euros?|pounds)\b"
            rf"|\b{_CURRENCY}\s?{_NUMBER}"
        ),
    ),
    (
        "id",
        re.compile(
            r"(?<![\w#])#\d+\b|\b[A-Z]{2,}[A-Z0-9]*(?:-[A-Z0-9]+)*-\d+(?:-[A-Z0-9]+)*\b"
            r"|\b[A-Z]-\d{3,}\b"
        ),
    ),
    ("id", re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6,}\b")),
    ("name", re.compile(r"\b[A-Z][a-z]+(?:[ \t]+(?:[A-Z][a-z]+|[A-Z]\.))*[ \t]+[A-Z][a-z]+\b")),
)
_NOT_IDS = re.compile(r"^(?:UTF|ISO|SHA|GPT|COVID|MD|HTTP)-")
_NOT_NAME_WORDS_TEXT = """The This That These Those A An I We You He She They It My Our Your His Her Their Its
    Please Thanks Thank Hello Hi Hey Dear Yes No Ok Okay Sure Also And But Or So Then Next Now
    Actually Correction Note If When While After Before Let Can Could Would Should Will Do Does
    Did Is Are Was Were Use Done Failed Error Here There What Why How Where Who Which Good Great
    Sorry Today Tomorrow Yesterday In On At For From To With Of By As Not All Any Every Each
    January February March April May June July August September October November December
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday Context Summary Goal
    Mon Tue Wed Thu Fri Sat Sun Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Last First
    Bye Wow Yeah Yay Yep Yup Nope Oh Ooh Aww Aw Awesome Cool Nice Congrats Congratulations Haha
    Lol Omg Hmm Welcome Glad Love Totally Definitely Really Right Well Hope Happy Cheers Take
    Care See Talk Catch Absolutely Amazing Wonderful Exactly Indeed Agreed Alright Fine Sounds
    Looks Morning Evening Night Wishing Enjoy Sweet Gosh Whoa Woah Ah Ha Hiya Howdy Anyway Btw
    Anytime Yo"""
_NOT_NAME_WORDS = frozenset(_NOT_NAME_WORDS_TEXT.split())
_GREETING = re.compile(r"(?<!.)[A-Z][a-z]+ [A-Z][a-z]+[,!]", re.S)
"""A message opening "Woah Sam!": someone addressed, not a name stated."""

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|^\d{1,2}:\d{2}")
_COLUMNS = re.compile(r"\s{2,}|\t|\s*\|\s*|,(?=\S)")
DUMP_FACTS: Final = 12
"""A tool output with more distinct values than this is a dump: no facts."""
REPEATED: Final = 3
"""A value this many times in one tool output is a column's value, not a fact."""

_TOOL_NAME = re.compile(r"[^\w.-]+")

# Ranks of what a summary keeps (higher outlives lower; docs/design.md §6).
RANK_CORRECTION: Final = 7  # a correction's new value
RANK_CORRECTED: Final = 6  # a correction's quote, a constraint it supersedes
RANK_TOLD: Final = 5  # a short message telling a value
RANK_STATED: Final = 4  # a value, constraint, plan or personal event a person stated
RANK_GOAL: Final = 3
RANK_TOOL: Final = 2  # a value read from a tool; a failed attempt, a decision
RANK_LOW: Final = 1  # what was done, asked and planned next


def _fact_text(kind: str, text: str) -> str | None:
    text = text.rstrip(".,;:!?")
    if kind == "id" and _NOT_IDS.match(text):
        return None
    if kind == "name":
        words = text.split()
        while words and words[0] in _NOT_NAME_WORDS:
            words.pop(0)
        while words and words[-1] in _NOT_NAME_WORDS:
            words.pop()
        if len(words) < 2 or any(word in _NOT_NAME_WORDS for word in words):
            return None
        text = " ".join(words)
    return text or None


def _matches(text: str) -> Iterator[tuple[str, str, int]]:
    """(kind, value, position) of every pattern match, earlier patterns masking later ones."""
    for kind, pattern in _FACT_PATTERNS:
        for match in pattern.finditer(text):
            value = _fact_text(kind, match.group(0))
            if value is None or (kind == "name" and _GREETING.match(text, match.start())):
                continue
            yield kind, value, match.start()
            text = text[: match.start()] + "\0" * len(match.group(0)) + text[match.end() :]


def _first_seen(found: Iterable[tuple[str, str, int]]) -> dict[tuple[str, str], int]:
    """Distinct (kind, value) pairs and where first found, in the order they appear."""
    first: dict[tuple[str, str], int] = {}
    for kind, value, start in found:
        first.setdefault((kind, value), start)
    return dict(sorted(first.items(), key=lambda entry: entry[1]))


def stated_facts(
    text: str, seq: int, day: str | None = None, event_id: str | None = None
) -> list[KeyFact]:
    """The values a person states in ``text``, in the order they appear."""
    return [
        KeyFact(value, seq, kind, event_id, day=day) for kind, value in _first_seen(_matches(text))
    ]


def _line_of(text: str, start: int) -> str:
    return text[text.rfind("\n", 0, start) + 1 : (text.find("\n", start) + 1 or len(text) + 1) - 1]


def _is_noise(kind: str, value: str, line: str, count: int) -> bool:
    """A timestamp, a value repeated down a column, a header or table cell read as a name."""
    if count >= REPEATED:
        return True
    if kind == "date" and _TIMESTAMP.search(value):
        return True
    if kind == "date" and _TIMESTAMP.search(line.lstrip()):
        return True  # the stamp of a log line
    if kind == "name":
        return len([cell for cell in _COLUMNS.split(line.strip()) if cell]) >= 3
    return False


def tool_facts(
    text: str, seq: int, tool: str, day: str | None = None, event_id: str | None = None
) -> list[KeyFact]:
    """The values a tool's output shows, without log noise; none at all from a dump."""
    starts = _first_seen(_matches(text))
    if len(starts) > DUMP_FACTS:
        return []
    tool = _TOOL_NAME.sub("_", tool).strip("_") or "tool"
    return [
        KeyFact(value, seq, kind, event_id, day=day, tool=tool)
        for (kind, value), start in starts.items()
        if not _is_noise(kind, value, _line_of(text, start), text.count(value))
    ]


def event_facts(event: HistoryEvent) -> list[KeyFact]:
    """The facts of one event: a person's words, or a tool's call arguments and output."""
    day = day_label(event.created_at)
    if event.role == "tool":
        name = event.name or (event.tool_names[0] if event.tool_names else "tool")
        return tool_facts(event.text, event.seq, name, day, event.event_id)
    if event.role != "ai":
        return stated_facts(event.text, event.seq, day, event.event_id)
    message = event.message
    facts = stated_facts(message.text, event.seq, day, event.event_id)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            args = " ".join(str(value) for value in call["args"].values())
            facts += tool_facts(args, event.seq, call["name"], day, event.event_id)
    return facts


def extract_key_facts(event: HistoryEvent) -> list[KeyFact]:
    """The exact identifiers, amounts, dates, paths, URLs, emails and names in an event's text,
    each with its source seq, event id and day.

    Examples:
        >>> import datetime as dt
        >>> event = HistoryEvent(7, "m7", "main", "human", None, {}, "Refund INV-2023-0042 "
        ...     "($1,250.00) to ann@example.com by June 14, 2023; see /srv/refunds.log", (), (), 1,
        ...     True, dt.datetime(2023, 6, 1))
        >>> [(fact.kind, fact.text) for fact in extract_key_facts(event)]
        [('id', 'INV-2023-0042'), ('amount', '$1,250.00'), ('email', 'ann@example.com'),
         ('date', 'June 14, 2023'), ('path', '/srv/refunds.log')]
    """
    return stated_facts(event.text, event.seq, day_label(event.created_at), event.event_id)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")
_SPACES = re.compile(r"\s+")
CORRECTION: Final = re.compile(
    r"\b(?:actually|correction|instead of|rather than|scratch that|i meant|on second thought"
    r"|no longer|switch(?:ing)? to|change\b.*?\bto)\b|,\s*not\s+\w|\bnot\s+\S+(?:\s+\S+)?,?\s+but\b",
    re.I,
)
_NEGATED = (
    r"(?:not|instead of|rather than|no longer|isn[\u2019']t|wasn[\u2019']t)\s+(?:the\s+|an?\s+)?"
)


def sentences(text: str) -> list[str]:
    """The sentences of a text, each on one line."""
    parts = (_SPACES.sub(" ", part).strip() for part in _SENTENCE_END.split(text))
    return [part for part in parts if part]


def corrected(text: str, facts: list[KeyFact]) -> tuple[list[KeyFact], set[str]]:
    """The facts without the values a correction negates (each new value marked with the old
    value of its kind it replaces), and those negated values."""
    stale: set[str] = set()
    for sentence in sentences(text):
        if not CORRECTION.search(sentence):
            continue
        for fact in facts:
            if re.search(_NEGATED + re.escape(fact.text) + r"(?!\w)", sentence, re.I):
                stale.add(fact.text)
    if not stale:
        return facts, stale
    kept = [f for f in facts if f.text not in stale]
    kinds = {f.kind: f.text for f in facts if f.text in stale}
    return [replace(f, replaces=kinds.get(f.kind)) for f in kept], stale


def fact_rank(fact: KeyFact) -> int:
    """A correction's new value, then a value a person stated, then one read from a tool."""
    if fact.replaces:
        return RANK_CORRECTION
    return RANK_STATED if fact.tool is None else RANK_TOOL


def merge_facts(facts: Sequence[KeyFact]) -> list[KeyFact]:
    """One fact per (kind, text): its best-ranked mention, the earliest of those; in seq order."""
    best: dict[tuple[str, str], tuple[int, KeyFact]] = {}
    for index, fact in enumerate(facts):
        key = (fact.kind, fact.text)
        held = best.get(key)
        if held is None or (fact_rank(fact), -fact.source_seq) > (
            fact_rank(held[1]),
            -held[1].source_seq,
        ):
            best[key] = (index, fact)
    ordered = sorted(best.values(), key=lambda entry: (entry[1].source_seq, entry[0]))
    return [fact for _, fact in ordered]


def statement_facts(text: str, seq: int, day: str | None = None) -> list[KeyFact]:
    """The facts a quoted statement holds, a correction's negated values left out."""

    return corrected(text, stated_facts(text, seq, day))[0]
