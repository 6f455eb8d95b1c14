"""The versioned summary format: a document, its markdown rendering and reading, and a check.

Markdown with fixed headings; items and facts end with their ``[seq ..., day]`` group; a key
fact a key statement quotes is not repeated. Formats v1 and v2 still parse (docs/design.md §6).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Final

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.summary_lines import (
    NONE_MARKER,
    STATEMENTS_HEADING,
    TOOL_NAME,
    KeyStatement,
    SummaryItem,
    check_day,
    clean_text,
    dated_lines,
    excerpt,
    parse_facts,
    parse_items,
    parse_statements,
    render_fact,
)
from ctx_langgraph.compaction.trail import TRAIL_HEADING
from ctx_langgraph.errors import SummaryFormatError
from ctx_langgraph.history.types import KeyFact

__all__ = [
    "LIST_SECTIONS",
    "READABLE_VERSIONS",
    "REQUIRED_SECTIONS",
    "SUMMARY_FORMAT_VERSION",
    "KeyStatement",
    "SummaryDocument",
    "SummaryItem",
    "required_sections",
    "validate_summary",
]

SUMMARY_FORMAT_VERSION: Final = 3
"""The summary format written today (v1 and v2 summaries are still read and merged)."""
READABLE_VERSIONS: Final = (1, 2, 3)
_UNTITLED_VERSION: Final = 2
LIST_SECTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("constraints", "Constraints and preferences"),
    ("done", "Done"),
    ("failed", "Failed attempts"),
    ("decisions", "Decisions"),
    ("open_questions", "Open questions"),
    ("next_steps", "Next steps"),
)
REQUIRED_SECTIONS: Final[tuple[str, ...]] = (
    "Goal",
    *(heading for _, heading in LIST_SECTIONS),
    STATEMENTS_HEADING,
    "Key facts",
)
"""The headings of a summary, in rendering order (every one required up to format v2)."""
_V1_SECTIONS: Final = tuple(h for h in REQUIRED_SECTIONS if h != STATEMENTS_HEADING)


def required_sections(version: int = SUMMARY_FORMAT_VERSION) -> tuple[str, ...]:
    """The headings a summary of format ``version`` must have (none from v3).

    Raises:
        ValueError: this version does not read that format.

    Examples:
        >>> required_sections(1)[-2:], required_sections(2)[-2:], required_sections(3)
        (('Next steps', 'Key facts'), ('Key statements', 'Key facts'), ())
    """
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"format v{version} is not one this version reads ({', '.join(f'v{v}' for v in READABLE_VERSIONS)})"
        )
    return {1: _V1_SECTIONS, 2: REQUIRED_SECTIONS}.get(version, ())


_ALIASES = {
    "goal": "Goal",
    "constraints": "Constraints and preferences",
    "constraints & preferences": "Constraints and preferences",
    "preferences": "Constraints and preferences",
    "failed": "Failed attempts",
    "failures": "Failed attempts",
    "key decisions": "Decisions",
    "questions": "Open questions",
    "statements": STATEMENTS_HEADING,
    "quotes": STATEMENTS_HEADING,
    "facts": "Key facts",
    **{heading.lower(): heading for heading in REQUIRED_SECTIONS},
}
_TITLE = re.compile(r"^#\s*context summary\s*\(format v(\d+)\)\s*$", re.I)
_HEADING = re.compile(r"^#{1,6}\s*([A-Za-z].*?)\s*:?\s*$")
_BOLD_HEADING = re.compile(r"^\*\*(.+?):?\*\*\s*:?\s*$")
_BULLET = re.compile(r"^(?:[-*+\u2022]|\d+[.)])\s+")


def _implied_facts(
    facts: Sequence[KeyFact], statements: Sequence[KeyStatement]
) -> tuple[tuple[KeyFact, ...], int]:
    """The key facts in canonical order (those no statement implies, then the implied ones),
    and how many of them are listed."""
    derived: dict[tuple[str, str], KeyFact] = {}
    for statement in statements:
        for fact in statement.facts():
            derived.setdefault((fact.kind, fact.text), fact)
    if not derived:
        return tuple(facts), len(facts)
    exact = set(derived.values())
    listed: list[KeyFact] = []
    implied: dict[tuple[str, str], KeyFact] = {}
    for fact in facts:
        if replace(fact, source_event_id=None) in exact:
            implied.setdefault((fact.kind, fact.text), fact)
        else:
            listed.append(fact)
    keys = {(fact.kind, fact.text) for fact in listed}
    tail = [implied.get(key, fact) for key, fact in derived.items() if key not in keys]
    return (*listed, *tail), len(listed)


@dataclass(frozen=True)
class SummaryDocument:
    """A structured summary: the goal, what happened, who said what, and the exact facts.

    ``key_facts`` holds every fact; those a key statement implies come last and are not
    repeated in the rendering.

    Examples:
        >>> from ctx_langgraph.history import KeyFact
        >>> doc = SummaryDocument(
        ...     goal="Refund order ORD-1042",
        ...     constraints=(SummaryItem("Use Postgres, not MySQL", (55,), supersedes="Use MySQL"),),
        ...     failed=(SummaryItem("lookup_order failed: timeout after 30s", (12,)),),
        ...     key_facts=(KeyFact("ORD-1042", 3, "id"),),
        ... )
        >>> print(doc.render())
        # Context summary (format v3)
        <BLANKLINE>
        ## Goal
        - Refund order ORD-1042
        <BLANKLINE>
        ## Constraints and preferences
        - Use Postgres, not MySQL (supersedes: Use MySQL) [seq 55]
        <BLANKLINE>
        ## Failed attempts
        - lookup_order failed: timeout after 30s [seq 12]
        <BLANKLINE>
        ## Key facts
        - id: ORD-1042 [seq 3]
        >>> SummaryDocument.parse(doc.render()) == doc
        True

        A statement implies the facts it quotes; days show where they change:

        >>> day = "Mon 8 May 2023"
        >>> doc = SummaryDocument(
        ...     statements=(KeyStatement("Ann's order is ORD-7.", 4, "user", day),),
        ...     key_facts=(KeyFact("ORD-7", 4, "id", day=day), KeyFact("$40.00", 6, "amount", day=day)),
        ... )
        >>> print(doc.render().split("## Key statements\\n")[1])
        - user: "Ann's order is ORD-7." [seq 4, Mon 8 May 2023]
        <BLANKLINE>
        ## Key facts
        - amount: $40.00 [seq 6, Mon 8 May 2023]
        >>> [fact.text for fact in doc.key_facts]
        ['$40.00', 'ORD-7']
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
    statements: tuple[KeyStatement, ...] = ()
    _listed: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "goal", clean_text(self.goal))
        for name, _ in LIST_SECTIONS:
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "statements", tuple(self.statements))
        for fact in self.key_facts:
            check_day(fact.day, f"key fact {fact.text[:40]!r}")
            if fact.tool is not None and not TOOL_NAME.match(fact.tool):
                raise ValueError(
                    f"key fact {fact.text[:40]!r}: tool {fact.tool!r} is not a name of "
                    "letters, digits, '_', '.' or '-'"
                )
        facts, listed = _implied_facts(tuple(self.key_facts), self.statements)
        object.__setattr__(self, "key_facts", facts)
        object.__setattr__(self, "_listed", listed)

    @property
    def listed_facts(self) -> tuple[KeyFact, ...]:
        """The key facts the rendering lists (those no key statement implies)."""
        listed: int = self._listed
        return self.key_facts[:listed]

    def items(self, section: str) -> tuple[SummaryItem, ...]:
        """The items of a list section by field name (``"constraints"``, ``"done"``, ...)."""
        if section not in dict(LIST_SECTIONS):
            raise KeyError(f"no item section {section!r}; expected one of {dict(LIST_SECTIONS)}")
        items: tuple[SummaryItem, ...] = getattr(self, section)
        return items

    def with_event_ids(self, event_ids: Mapping[int, str]) -> SummaryDocument:
        """The same summary with each key fact's ``source_event_id`` looked up by its seq (a
        seq not in ``event_ids`` keeps its id).

        Examples:
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
        """The markdown text: fixed headings in a fixed order (an empty one left out from v3)."""
        sections: list[tuple[str, list[str]]] = [("Goal", [f"- {self.goal}"] if self.goal else [])]
        for name, heading in LIST_SECTIONS:
            items = self.items(name)
            sections.append(
                (heading, dated_lines((bool(i.source_seqs), i.day, i.render) for i in items))
            )
        sections.append(
            (STATEMENTS_HEADING, dated_lines((True, s.day, s.render) for s in self.statements))
        )
        facts = dated_lines((True, f.day, partial(render_fact, f)) for f in self.listed_facts)
        sections.append(("Key facts", facts))
        lines = [f"# Context summary (format v{self.version})"]
        for heading, body in sections:
            if body or heading in required_sections(self.version):
                lines += ["", f"## {heading}", *(body or [f"- {NONE_MARKER}"])]
        return "\n".join(lines)

    @classmethod
    def parse(cls, text: str) -> SummaryDocument:
        """Read a summary back: the inverse of :meth:`render`, tolerant of model output (other
        bullets and heading levels, no title: format v2, extra sections ignored).

        Raises:
            SummaryFormatError: a required section is missing or repeated, a key fact or key
                statement has no ``[seq N]``, or the title names a format not read.

        Examples:
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
            ... - Pay with card ending 4242 [seq 9, Tue 9 May 2023]
            ... ## Key statements
            ... - Ann: "I land at 10:40 on Friday." [seq 3]
            ... ## Key facts
            ... * date: 14 June 2023 [seq 4]
            ... ''')
            >>> doc.goal, doc.constraints[0].text, doc.next_steps[0].source_seqs, doc.next_steps[0].day
            ('Book a flight to Oslo', 'Window seat please', (9,), 'Tue 9 May 2023')
            >>> doc.statements
            (KeyStatement(text='I land at 10:40 on Friday.', source_seq=3, speaker='Ann', day=None),)
            >>> doc.key_facts
            (KeyFact(text='14 June 2023', source_seq=4, kind='date', source_event_id=None, replaces=None, day=None, tool=None),)
            >>> SummaryDocument.parse("## Goal\\n- x")
            Traceback (most recent call last):
            ...
            ctx_langgraph.errors.SummaryFormatError: malformed summary: missing section(s) 'Constraints and preferences', ...
        """
        version, sections = _sections(text)
        goal = " ".join(body for _, body in sections.get("Goal", []) if body != NONE_MARKER)
        lists = {name: parse_items(sections.get(heading, [])) for name, heading in LIST_SECTIONS}
        statements = parse_statements(sections.get(STATEMENTS_HEADING, []))
        facts = parse_facts(sections.get("Key facts", []))
        return cls(goal=goal, key_facts=facts, version=version, statements=statements, **lists)


def _sections(text: str) -> tuple[int, dict[str, list[tuple[int, str]]]]:
    version = _UNTITLED_VERSION
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
        if heading and line.startswith("#") and clean_text(heading.group(1)) == TRAIL_HEADING:
            break  # the artifact trail, always last, is not prose
        known = _ALIASES.get(clean_text(heading.group(1)).lower()) if heading else None
        if heading and known is None and line.startswith("#"):
            current = None
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
    if version not in READABLE_VERSIONS:
        raise SummaryFormatError(
            f"the summary says format v{version}; this version reads "
            f"{', '.join(f'v{v}' for v in READABLE_VERSIONS)}"
        )
    missing = [heading for heading in required_sections(version) if heading not in sections]
    if missing:
        raise SummaryFormatError(
            f"missing section(s) {', '.join(repr(name) for name in missing)}",
            section=missing[0],
        )
    return version, sections


def validate_summary(
    text: str,
    *,
    cap_tokens: int,
    counter: TokenCounter,
    covered_through_seq: int,
    first_seq: int = 1,
) -> list[str]:
    """The problems of a candidate summary (none: valid): empty, over ``cap_tokens``, not
    parsing, or a key fact or statement citing a seq outside ``first_seq..covered_through_seq``.


    Examples:
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
    except (SummaryFormatError, ValueError) as exc:
        problems.append(str(exc))
        return problems
    cited = [(f"key fact {fact.text}", fact.source_seq) for fact in document.listed_facts]
    cited += [(f"key statement {excerpt(s.text, 40)!r}", s.source_seq) for s in document.statements]
    for what, seq in cited:
        if not first_seq <= seq <= covered_through_seq:
            problems.append(
                f"{what} cites seq {seq}, outside the covered range "
                f"{first_seq}..{covered_through_seq}"
            )
    return problems
