"""The versioned, structured summary format: a document, its markdown rendering, and a check.

A summary is markdown with fixed headings, so a model can write it and a program can read it
back. Items carry the seqs of the events they come from; a user correction names the value it
replaced with ``(supersedes: ...)``; every key fact carries its source seq. Example of the
rendering (``SummaryDocument.render()``)::

    # Context summary (format v1)

    ## Goal
    - Refund order ORD-1042

    ## Constraints and preferences
    - Use Postgres, not MySQL (supersedes: We must use MySQL) [seq 55]
    ...
    ## Key facts
    - id: ORD-1042 [seq 3]

Texts are kept on one line (runs of whitespace collapse to one space). The format reserves a
trailing ``[seq ...]`` group and a ``(supersedes: ...)`` group on item lines, a single bullet
``(none)`` for an empty section, and ``kind:`` before a key fact's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.errors import SummaryFormatError
from ctx_langgraph.history.types import KeyFact

__all__ = [
    "LIST_SECTIONS",
    "REQUIRED_SECTIONS",
    "SUMMARY_FORMAT_VERSION",
    "SummaryDocument",
    "SummaryItem",
    "validate_summary",
]

SUMMARY_FORMAT_VERSION: Final = 1
NONE_MARKER: Final = "(none)"

LIST_SECTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("constraints", "Constraints and preferences"),
    ("done", "Done"),
    ("failed", "Failed attempts"),
    ("decisions", "Decisions"),
    ("open_questions", "Open questions"),
    ("next_steps", "Next steps"),
)
"""(field name, heading) of the item sections, in rendering order."""

REQUIRED_SECTIONS: Final[tuple[str, ...]] = (
    "Goal",
    *(heading for _, heading in LIST_SECTIONS),
    "Key facts",
)
"""The headings every summary must have, in rendering order."""

_ALIASES = {
    "goal": "Goal",
    "constraints": "Constraints and preferences",
    "constraints & preferences": "Constraints and preferences",
    "preferences": "Constraints and preferences",
    "failed": "Failed attempts",
    "failures": "Failed attempts",
    "key decisions": "Decisions",
    "questions": "Open questions",
    "facts": "Key facts",
    **{heading.lower(): heading for heading in REQUIRED_SECTIONS},
}
_TITLE = re.compile(r"^#\s*context summary\s*\(format v(\d+)\)\s*$", re.I)
_HEADING = re.compile(r"^#{1,6}\s*([A-Za-z].*?)\s*:?\s*$")
_BOLD_HEADING = re.compile(r"^\*\*(.+?):?\*\*\s*:?\s*$")
_BULLET = re.compile(r"^(?:[-*+\u2022]|\d+[.)])\s+")
_SEQS = re.compile(r"\s*[\[(]\s*seqs?\s*:?\s*(\d+(?:\s*[,;]\s*\d+)*)\s*[\])]\s*$", re.I)
_SUPERSEDES = re.compile(r"\s*\(supersedes:\s*(.*)\)\s*$", re.I)
_FACT_KIND = re.compile(r"^([A-Za-z][\w -]{0,40}?):\s+(.+)$")
_REPLACES = re.compile(r"\s*\(replaces ([^()]+)\)\s*$")
_SPACES = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """One line: runs of whitespace (newlines included) become one space, ends trimmed.

    Example:
        >>> clean_text("  use\\n Postgres  ")
        'use Postgres'
    """
    return _SPACES.sub(" ", text).strip()


@dataclass(frozen=True)
class SummaryItem:
    """One line of a summary section, with the seqs of the events it comes from.

    ``supersedes`` is the text of the earlier value a user correction replaced. Texts are
    normalized to one line (:func:`clean_text`); an empty text is an error.
    """

    text: str
    source_seqs: tuple[int, ...] = ()
    supersedes: str | None = None

    def __post_init__(self) -> None:
        text = clean_text(self.text)
        if not text:
            raise ValueError("a summary item needs a non-empty text")
        seqs = tuple(int(seq) for seq in self.source_seqs)
        if any(seq < 0 for seq in seqs):
            raise ValueError(f"source seqs must not be negative, got {seqs}")
        supersedes = clean_text(self.supersedes) if self.supersedes is not None else None
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "source_seqs", seqs)
        object.__setattr__(self, "supersedes", supersedes or None)

    def render(self) -> str:
        line = f"- {self.text}"
        if self.supersedes:
            line += f" (supersedes: {self.supersedes})"
        if self.source_seqs:
            line += f" [seq {', '.join(str(seq) for seq in self.source_seqs)}]"
        return line


def _fact_kind(kind: str) -> str:
    kind = clean_text(kind.replace(":", " "))
    return kind if kind and kind[0].isalpha() else "fact"


def render_fact(fact: KeyFact) -> str:
    """A key fact's summary line: ``- kind: text [seq N]``, or ``- kind: text (replaces old)
    [seq N]`` for a corrected value."""
    replaced = f" (replaces {clean_text(fact.replaces)})" if fact.replaces else ""
    return f"- {_fact_kind(fact.kind)}: {clean_text(fact.text)}{replaced} [seq {fact.source_seq}]"


@dataclass(frozen=True)
class SummaryDocument:
    """A structured summary: what the user wants, what happened, and the exact facts.

    Example:
        >>> from ctx_langgraph.history import KeyFact
        >>> doc = SummaryDocument(
        ...     goal="Refund order ORD-1042",
        ...     constraints=(SummaryItem("Use Postgres, not MySQL", (55,), supersedes="Use MySQL"),),
        ...     failed=(SummaryItem("lookup_order failed: timeout after 30s", (12,)),),
        ...     key_facts=(KeyFact("ORD-1042", 3, "id"),),
        ... )
        >>> print(doc.render())
        # Context summary (format v1)
        <BLANKLINE>
        ## Goal
        - Refund order ORD-1042
        <BLANKLINE>
        ## Constraints and preferences
        - Use Postgres, not MySQL (supersedes: Use MySQL) [seq 55]
        <BLANKLINE>
        ## Done
        - (none)
        <BLANKLINE>
        ## Failed attempts
        - lookup_order failed: timeout after 30s [seq 12]
        <BLANKLINE>
        ## Decisions
        - (none)
        <BLANKLINE>
        ## Open questions
        - (none)
        <BLANKLINE>
        ## Next steps
        - (none)
        <BLANKLINE>
        ## Key facts
        - id: ORD-1042 [seq 3]
        >>> SummaryDocument.parse(doc.render()) == doc
        True
    """

    goal: str = ""
    constraints: tuple[SummaryItem, ...] = ()
    done: tuple[SummaryItem, ...] = ()
    failed: tuple[SummaryItem, ...] = ()
    decisions: tuple[SummaryItem, ...] = ()
    open_questions: tuple[SummaryItem, ...] = ()
    next_steps: tuple[SummaryItem, ...] = ()
    key_facts: tuple[KeyFact, ...] = ()
    version: int = SUMMARY_FORMAT_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "goal", clean_text(self.goal))
        for name, _ in LIST_SECTIONS:
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "key_facts", tuple(self.key_facts))

    def items(self, section: str) -> tuple[SummaryItem, ...]:
        """The items of a list section by field name (``"constraints"``, ``"done"``, ...)."""
        if section not in dict(LIST_SECTIONS):
            raise KeyError(f"no item section {section!r}; expected one of {dict(LIST_SECTIONS)}")
        items: tuple[SummaryItem, ...] = getattr(self, section)
        return items

    def with_event_ids(self, event_ids: Mapping[int, str]) -> SummaryDocument:
        """The same summary with each key fact's ``source_event_id`` looked up by its seq.

        The rendered text carries seqs only; use this after :meth:`parse` to restore event ids
        (from the summarized events, and the previous checkpoint's key facts). Facts whose seq
        is not in ``event_ids`` keep the id they have.

        Example:
            >>> doc = SummaryDocument(key_facts=(KeyFact("ORD-7", 4, "id"),))
            >>> doc.with_event_ids({4: "msg-4"}).key_facts[0].source_event_id
            'msg-4'
        """
        facts = tuple(
            replace(fact, source_event_id=event_ids.get(fact.source_seq, fact.source_event_id))
            for fact in self.key_facts
        )
        return replace(self, key_facts=facts)

    def render(self) -> str:
        """The markdown text of the summary: fixed headings, deterministic, no trailing newline."""
        lines = [f"# Context summary (format v{self.version})", "", "## Goal"]
        lines.append(f"- {self.goal or NONE_MARKER}")
        for name, heading in LIST_SECTIONS:
            lines += ["", f"## {heading}"]
            lines += [item.render() for item in self.items(name)] or [f"- {NONE_MARKER}"]
        lines += ["", "## Key facts"]
        lines += [render_fact(fact) for fact in self.key_facts] or [f"- {NONE_MARKER}"]
        return "\n".join(lines)

    @classmethod
    def parse(cls, text: str) -> SummaryDocument:
        """Read a summary back: the inverse of :meth:`render`, tolerant of model output.

        Accepts extra whitespace and blank lines, ``*``/``+``/numbered bullets, lines without a
        bullet, any heading level, a missing title, unknown extra sections (ignored), and items
        without ``[seq ...]``. Key facts without a kind get the kind ``"fact"``.

        Raises:
            SummaryFormatError: a required section heading is missing or repeated, a key fact
                has no ``[seq N]``, or the title names another format version.

        Example:
            >>> doc = SummaryDocument.parse('''
            ... ## Goal
            ... Book a flight to Oslo
            ... ## Constraints and preferences
            ... * Window seat please
            ... ## Done
            ... ## Failed attempts
            ... ## Decisions
            ... ## Open questions
            ... ## Next steps
            ... - Pay with card ending 4242 [seq 9]
            ... ## Key facts
            ... * date: 14 June 2023 [seq 4]
            ... ''')
            >>> doc.goal, doc.constraints[0].text, doc.next_steps[0].source_seqs
            ('Book a flight to Oslo', 'Window seat please', (9,))
            >>> doc.key_facts
            (KeyFact(text='14 June 2023', source_seq=4, kind='date', source_event_id=None, replaces=None),)
            >>> SummaryDocument.parse("## Goal\\n- x")
            Traceback (most recent call last):
            ...
            ctx_langgraph.errors.SummaryFormatError: malformed summary: missing section(s) 'Constraints and preferences', ...
        """
        version = SUMMARY_FORMAT_VERSION
        sections: dict[str, list[tuple[int, str]]] = {}
        current: list[tuple[int, str]] | None = None
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line:
                continue
            title = _TITLE.match(line)
            if title:
                version = int(title.group(1))
                continue
            heading = _HEADING.match(line) or _BOLD_HEADING.match(line)
            known = _ALIASES.get(clean_text(heading.group(1)).lower()) if heading else None
            if heading and known is None and line.startswith("#"):
                current = None  # an extra section: its lines are ignored
                continue
            if known is not None:
                if known in sections:
                    raise SummaryFormatError(
                        f"section {known!r} appears twice", section=known, line=number
                    )
                current = sections[known] = []
                continue
            if current is not None:
                current.append((number, _BULLET.sub("", line, count=1)))
        if version != SUMMARY_FORMAT_VERSION:
            raise SummaryFormatError(
                f"the summary says format v{version}; this version reads v{SUMMARY_FORMAT_VERSION}"
            )
        missing = [heading for heading in REQUIRED_SECTIONS if heading not in sections]
        if missing:
            raise SummaryFormatError(
                f"missing section(s) {', '.join(repr(name) for name in missing)}",
                section=missing[0],
            )
        goal = " ".join(body for _, body in sections["Goal"] if body != NONE_MARKER)
        lists = {name: _parse_items(sections[heading]) for name, heading in LIST_SECTIONS}
        facts = tuple(_parse_fact(number, body) for number, body in _present(sections["Key facts"]))
        return cls(goal=goal, key_facts=facts, version=version, **lists)


def _present(lines: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(number, body) for number, body in lines if clean_text(body) != NONE_MARKER]


def _excerpt(text: str, limit: int = 80) -> str:
    """A bad line quoted in an error, cut so a runaway line does not flood logs."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _split_seqs(body: str) -> tuple[str, tuple[int, ...] | None]:
    match = _SEQS.search(body)
    if match is None:
        return body, None
    seqs = tuple(int(seq) for seq in re.split(r"\s*[,;]\s*", match.group(1)))
    return body[: match.start()], seqs


def _parse_items(lines: list[tuple[int, str]]) -> tuple[SummaryItem, ...]:
    items = []
    for _, body in _present(lines):
        body, seqs = _split_seqs(body)
        supersedes = _SUPERSEDES.search(body)
        old = None
        if supersedes is not None:
            old, body = supersedes.group(1), body[: supersedes.start()]
        if clean_text(body):
            items.append(SummaryItem(body, seqs or (), supersedes=old))
    return tuple(items)


def _parse_fact(number: int, body: str) -> KeyFact:
    text, seqs = _split_seqs(body)
    if not seqs:
        raise SummaryFormatError(
            f"key fact {_excerpt(body)!r} has no [seq N] naming its source event",
            section="Key facts",
            line=number,
        )
    kind = "fact"
    match = _FACT_KIND.match(clean_text(text))
    if match is not None:
        kind, text = clean_text(match.group(1)), match.group(2)
    text = clean_text(text)
    replaced = _REPLACES.search(text)
    if replaced is not None:
        text = clean_text(text[: replaced.start()])
    if not text:
        raise SummaryFormatError(
            f"key fact line {_excerpt(body)!r} has no text", section="Key facts", line=number
        )
    return KeyFact(
        text=text,
        source_seq=seqs[0],
        kind=kind,
        replaces=clean_text(replaced.group(1)) if replaced is not None else None,
    )


def validate_summary(
    text: str,
    *,
    cap_tokens: int,
    counter: TokenCounter,
    covered_through_seq: int,
    first_seq: int = 1,
) -> list[str]:
    """The problems of a candidate summary; an empty list means it is valid.

    Checks: not empty; its real length (``counter.count_text``) within ``cap_tokens``; it parses
    with every required section; every key fact's source seq within
    ``[first_seq, covered_through_seq]`` (a rolling summary covers everything from seq 1, so
    ``first_seq`` stays 1 unless the history before it was deliberately discarded).

    Example:
        >>> from ctx_langgraph.budget import ApproximateCounter
        >>> doc = SummaryDocument(goal="Ship it", key_facts=(KeyFact("ORD-7", 40, "id"),))
        >>> validate_summary(doc.render(), cap_tokens=500, counter=ApproximateCounter(), covered_through_seq=50)
        []
        >>> validate_summary(doc.render(), cap_tokens=500, counter=ApproximateCounter(), covered_through_seq=30)
        ['key fact ORD-7 cites seq 40, outside the covered range 1..30']
    """
    if not text.strip():
        return ["the summary is empty"]
    problems = []
    tokens = counter.count_text(text)
    if tokens > cap_tokens:
        problems.append(f"the summary has {tokens:,} tokens, over the cap of {cap_tokens:,}")
    try:
        document = SummaryDocument.parse(text)
    except SummaryFormatError as exc:
        problems.append(str(exc))
        return problems
    for fact in document.key_facts:
        if not first_seq <= fact.source_seq <= covered_through_seq:
            problems.append(
                f"key fact {fact.text} cites seq {fact.source_seq}, outside the covered range "
                f"{first_seq}..{covered_through_seq}"
            )
    return problems
