"""The lines of a summary: items, key statements and key facts with their ``[seq ..., day]``
group (a day holds for the lines after it until another; ``undated`` ends a run), rendered
and read back one section at a time."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from ctx_langgraph.compaction.facts import statement_facts
from ctx_langgraph.errors import SummaryFormatError
from ctx_langgraph.history.types import KeyFact

__all__ = [
    "NONE_MARKER",
    "SEQ_GROUP",
    "STATEMENTS_HEADING",
    "TOOL_NAME",
    "UNDATED",
    "KeyStatement",
    "SummaryItem",
    "check_day",
    "clean_text",
    "dated_lines",
    "excerpt",
    "parse_facts",
    "parse_items",
    "parse_statements",
    "render_fact",
]

NONE_MARKER: Final = "(none)"
UNDATED: Final = "undated"
STATEMENTS_HEADING: Final = "Key statements"
_DAY_TEXT = (
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{1,2} "
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:tember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?) \d{4}"
)
_DAY = re.compile(rf"^{_DAY_TEXT}$")
SEQ_GROUP = re.compile(
    r"\s*[\[(]\s*seqs?\s*:?\s*(\d+(?:\s*[,;]\s*\d+)*)"
    rf"(?:\s*[,;]\s*({_DAY_TEXT}|{UNDATED}))?\s*[\])]\s*$",
    re.I,
)
_SUPERSEDES = re.compile(r"\s*\(supersedes:\s*(.*)\)\s*$", re.I)
_FACT_KIND = re.compile(r"^([A-Za-z][\w -]{0,40}?)(?:\s*\(([\w.-]{1,64})\))?:\s+(.+)$")
TOOL_NAME = re.compile(r"^[\w.-]{1,64}$")
_REPLACES = re.compile(r"\s*\(replaces ([^()]+)\)\s*$")
_QUOTED = re.compile(r'^(?:([^":]{1,60}?):\s+)?"(.*)"$')
_SPEAKER_BAD = re.compile(r'[:"]+')
_SPACES = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """One line: runs of whitespace (newlines included) become one space, ends trimmed.

    Examples:
        >>> clean_text("  use\\n Postgres  ")
        'use Postgres'
    """
    return _SPACES.sub(" ", text).strip()


def check_day(day: str | None, what: str) -> str | None:
    """``day`` when it is a day as summaries show it (``Mon 8 May 2023``) or None; else
    ValueError naming ``what`` carried it."""
    if day is not None and not _DAY.match(day):
        raise ValueError(f"{what}: day {day!r} is not a day like 'Mon 8 May 2023'")
    return day


@dataclass(frozen=True)
class SummaryItem:
    """One line of a summary section, with the seqs of the events it comes from.

    ``supersedes``: the earlier value a user correction replaced; ``day``: the day of its
    latest source event (it needs source seqs).
    """

    text: str
    source_seqs: tuple[int, ...] = ()
    supersedes: str | None = None
    day: str | None = None

    def __post_init__(self) -> None:
        text = clean_text(self.text)
        if not text:
            raise ValueError("a summary item needs a non-empty text")
        seqs = tuple(int(seq) for seq in self.source_seqs)
        if any(seq < 0 for seq in seqs):
            raise ValueError(f"source seqs must not be negative, got {seqs}")
        if self.day is not None and not seqs:
            raise ValueError(f"summary item {text[:40]!r} has a day but no source seq")
        supersedes = clean_text(self.supersedes) if self.supersedes is not None else None
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "source_seqs", seqs)
        object.__setattr__(self, "supersedes", supersedes or None)
        check_day(self.day, "summary item")

    def render(self, shown_day: str | None = None) -> str:
        """The item's line; its day left out when ``shown_day`` (the day in force) is it."""
        line = f"- {self.text}"
        if self.supersedes:
            line += f" (supersedes: {self.supersedes})"
        return line + _seq_group(self.source_seqs, self.day, shown_day)


@dataclass(frozen=True)
class KeyStatement:
    """A short message quoted verbatim (on one line) with who said it, its seq and its day.

    Examples:
        >>> KeyStatement("I moved to  Lisbon\\nyesterday.", 12, "Ann", "Mon 8 May 2023").render()
        '- Ann: "I moved to Lisbon yesterday." [seq 12, Mon 8 May 2023]'
    """

    text: str
    source_seq: int
    speaker: str = ""
    day: str | None = None

    def __post_init__(self) -> None:
        text = clean_text(self.text)
        if not text:
            raise ValueError("a key statement needs a non-empty text")
        if int(self.source_seq) < 0:
            raise ValueError(f"a key statement's seq must not be negative, got {self.source_seq}")
        speaker = clean_text(_SPEAKER_BAD.sub(" ", self.speaker))[:60].strip()
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "source_seq", int(self.source_seq))
        object.__setattr__(self, "speaker", speaker)
        check_day(self.day, "key statement")

    def render(self, shown_day: str | None = None) -> str:
        who = f"{self.speaker}: " if self.speaker else ""
        return f'- {who}"{self.text}"' + _seq_group((self.source_seq,), self.day, shown_day)

    def facts(self) -> list[KeyFact]:
        """The key facts the statement states."""
        return list(_implied(self.text, self.source_seq, self.day))


@lru_cache(maxsize=4096)
def _implied(text: str, seq: int, day: str | None) -> tuple[KeyFact, ...]:
    return tuple(statement_facts(text, seq, day))


def _seq_group(seqs: Sequence[int], day: str | None, shown_day: str | None) -> str:
    if not seqs:
        return ""
    listed = ", ".join(str(seq) for seq in seqs)
    if day != shown_day:
        listed += f", {day or UNDATED}"
    return f" [seq {listed}]"


def _fact_kind(kind: str) -> str:
    kind = clean_text(kind.replace(":", " ").replace("(", " ").replace(")", " "))
    return kind if kind and kind[0].isalpha() else "fact"


def render_fact(fact: KeyFact, shown_day: str | None = None) -> str:
    """A key fact's line: ``- kind (tool): text (replaces old) [seq N]``."""
    replaced = f" (replaces {clean_text(fact.replaces)})" if fact.replaces else ""
    tool = f" ({fact.tool})" if fact.tool else ""
    return f"- {_fact_kind(fact.kind)}{tool}: {clean_text(fact.text)}{replaced}" + _seq_group(
        (fact.source_seq,), fact.day, shown_day
    )


def dated_lines(
    entries: Iterable[tuple[bool, str | None, Callable[[str | None], str]]],
) -> list[str]:
    """Lines of one section from (has seqs, day, render) per entry; a day shown where it changes."""
    shown: str | None = None
    lines = []
    for has_seqs, day, render in entries:
        lines.append(render(shown))
        if has_seqs:
            shown = day
    return lines


def _present(lines: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(number, body) for number, body in lines if clean_text(body) != NONE_MARKER]


def excerpt(text: str, limit: int = 80) -> str:
    """A bad line quoted in an error, cut short."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _split_seqs(body: str) -> tuple[str, tuple[int, ...] | None, str | None]:
    """The body without its ``[seq ...]`` group, the seqs, and the day written there."""
    match = SEQ_GROUP.search(body)
    if match is None:
        return body, None, None
    seqs = tuple(int(seq) for seq in re.split(r"\s*[,;]\s*", match.group(1)))
    return body[: match.start()], seqs, match.group(2)


class _Days:
    """The day in force while reading one section: a written day starts a run."""

    def __init__(self) -> None:
        self.current: str | None = None

    def of(self, seqs: tuple[int, ...] | None, written: str | None) -> str | None:
        if not seqs:
            return None
        if written is not None:
            self.current = None if written.lower() == UNDATED else written.title()
        return self.current


def parse_items(lines: list[tuple[int, str]]) -> tuple[SummaryItem, ...]:
    items = []
    days = _Days()
    for _, body in _present(lines):
        body, seqs, written = _split_seqs(body)
        day = days.of(seqs, written)
        supersedes = _SUPERSEDES.search(body)
        old = None
        if supersedes is not None:
            old, body = supersedes.group(1), body[: supersedes.start()]
        if clean_text(body):
            items.append(SummaryItem(body, seqs or (), supersedes=old, day=day))
    return tuple(items)


def _cited(
    lines: list[tuple[int, str]], what: str, section: str
) -> Iterator[tuple[int, str, str, tuple[int, ...], str | None]]:
    """(line number, body, text, seqs, day) of each line, which must have a ``[seq N]``."""
    days = _Days()
    for number, body in _present(lines):
        text, seqs, written = _split_seqs(body)
        if not seqs:
            raise SummaryFormatError(
                f"{what} {excerpt(body)!r} has no [seq N] naming its source event",
                section=section,
                line=number,
            )
        yield number, body, text, seqs, days.of(seqs, written)


def parse_statements(lines: list[tuple[int, str]]) -> tuple[KeyStatement, ...]:
    statements = []
    for number, body, text, seqs, day in _cited(lines, "key statement", STATEMENTS_HEADING):
        quoted = _QUOTED.match(clean_text(text))
        speaker, said = (quoted.group(1) or "", quoted.group(2)) if quoted else ("", text)
        if not clean_text(said):
            raise SummaryFormatError(
                f"key statement line {excerpt(body)!r} has no text",
                section=STATEMENTS_HEADING,
                line=number,
            )
        statements.append(KeyStatement(said, seqs[0], speaker, day))
    return tuple(statements)


def parse_facts(lines: list[tuple[int, str]]) -> tuple[KeyFact, ...]:
    return tuple(
        _parse_fact(number, body, text, seqs[0], day)
        for number, body, text, seqs, day in _cited(lines, "key fact", "Key facts")
    )


def _parse_fact(number: int, body: str, text: str, seq: int, day: str | None) -> KeyFact:
    kind, tool = "fact", None
    match = _FACT_KIND.match(clean_text(text))
    if match is not None:
        kind, tool, text = clean_text(match.group(1)), match.group(2), match.group(3)
    text = clean_text(text)
    replaced = _REPLACES.search(text)
    if replaced is not None:
        text = clean_text(text[: replaced.start()])
    if not text:
        raise SummaryFormatError(
            f"key fact line {excerpt(body)!r} has no text", section="Key facts", line=number
        )
    return KeyFact(
        text=text,
        source_seq=seq,
        kind=kind,
        replaces=clean_text(replaced.group(1)) if replaced is not None else None,
        day=day,
        tool=tool,
    )
