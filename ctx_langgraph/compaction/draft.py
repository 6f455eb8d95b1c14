"""A summary being built, and how it is cut to the cap: the lowest-ranked, oldest parts first
(docs/design.md §6), so a part once dropped never comes back."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.facts import (
    RANK_CORRECTED,
    RANK_GOAL,
    RANK_LOW,
    RANK_STATED,
    RANK_TOOL,
    fact_rank,
)
from ctx_langgraph.compaction.format import LIST_SECTIONS, SUMMARY_FORMAT_VERSION, SummaryDocument
from ctx_langgraph.compaction.statements import statement_rank
from ctx_langgraph.compaction.summary_lines import KeyStatement, SummaryItem, clean_text
from ctx_langgraph.history.types import KeyFact

__all__ = ["Draft", "fit", "part_ranks", "shorten"]

_MAX_SEQS: Final = 6
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS_TEXT = """the and for that this with from into use using used please must should don not never
    always prefer instead actually correction change switch rather than but will would can could
    let lets make sure have has are was were our your you they them its also only just want"""
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_SECTION_RANKS: Final = {
    "constraints": RANK_STATED,
    "failed": RANK_TOOL,
    "decisions": RANK_TOOL,
    "done": RANK_LOW,
    "open_questions": RANK_LOW,
    "next_steps": RANK_LOW,
}
_GOAL_LIMITS: Final = (120, 60)  # the goal shortened to these lengths, then cleared
_CONSTRAINT_LIMITS: Final = (120, 60)


def keywords(text: str) -> set[str]:
    """The content words of a text (what two texts about the same thing share)."""
    return {
        word
        for word in _WORD.findall(text.lower())
        if word not in _STOPWORDS and (len(word) >= 3 or any(ch.isdigit() for ch in word))
    }


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word to at most ``limit`` characters (``...`` marks a cut)."""
    text = clean_text(text)
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 3)]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "..."


def _merge_seqs(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    seqs = tuple(sorted(set(old) | set(new)))
    return seqs if len(seqs) <= _MAX_SEQS else seqs[:1] + seqs[-(_MAX_SEQS - 1) :]


@dataclass
class Draft:
    """A summary being built, turned into a :class:`SummaryDocument` at the end."""

    goal: str = ""
    sections: dict[str, list[SummaryItem]] = field(
        default_factory=lambda: {name: [] for name, _ in LIST_SECTIONS}
    )
    facts: list[KeyFact] = field(default_factory=list)
    statements: list[KeyStatement] = field(default_factory=list)
    limit: int | None = None
    """Items kept per section (the newest)."""
    focus: frozenset[str] = frozenset()
    """Keywords of the request's instructions: a part sharing one ranks one higher."""

    @classmethod
    def of(cls, document: SummaryDocument | None, limit: int | None = None) -> Draft:
        draft = cls(limit=limit)
        if document is not None:
            draft.goal = document.goal
            draft.sections = {name: list(document.items(name)) for name, _ in LIST_SECTIONS}
            draft.facts = list(document.key_facts)
            draft.statements = list(document.statements)
        return draft

    def document(self) -> SummaryDocument:
        return _document(self, frozenset(), 0, 0)

    def add(
        self,
        section: str,
        text: str,
        seq: int,
        supersedes: str | None = None,
        day: str | None = None,
    ) -> None:
        """An item for ``section``; a repeated one moves to the end with the new seq (and day)."""
        text = shorten(text, 200)
        items = self.sections[section]
        for index, item in enumerate(items):
            if item.text.casefold() == text.casefold():
                del items[index]
                seqs = _merge_seqs(item.source_seqs, (seq,))
                items.append(SummaryItem(text, seqs, supersedes or item.supersedes, day))
                return
        items.append(SummaryItem(text, (seq,), supersedes, day))
        if self.limit is not None and len(items) > self.limit:
            del items[: len(items) - self.limit]

    def supersede(self, text: str, seq: int, day: str | None = None) -> bool:
        """A correction replaces the constraint it shares most keywords with (False: none)."""
        keys = keywords(text)
        constraints = self.sections["constraints"]
        best, best_score = None, 0
        for index, item in enumerate(constraints):
            score = len(keys & keywords(item.text))
            if score and score >= best_score:
                best, best_score = index, score
        if best is None:
            return False
        old = constraints.pop(best).text
        self.add("constraints", text, seq, supersedes=old, day=day)
        return True

    def forget(self, stale: set[str]) -> None:
        """Values a correction named as wrong: their facts and the statements quoting them go."""
        if not stale:
            return
        self.facts = [f for f in self.facts if f.text not in stale]
        quoted = re.compile("|".join(rf"(?<!\w){re.escape(value)}(?!\w)" for value in stale))
        self.statements = [s for s in self.statements if not quoted.search(s.text)]


_Part = tuple[str, str, int]
"""What one trim step removes: (what, section, index) of the draft."""


def part_ranks(draft: Draft) -> list[tuple[tuple[int, int, int, int], _Part]]:
    """Every droppable part of the draft with its sort key (rank, seq, kind, index), lowest first."""
    parts: list[tuple[tuple[int, int, int, int], _Part]] = []

    def focused(text: str) -> int:
        return 1 if draft.focus and not draft.focus.isdisjoint(keywords(text)) else 0

    for order, (name, _) in enumerate(LIST_SECTIONS):
        for index, item in enumerate(draft.sections[name]):
            rank = RANK_CORRECTED if item.supersedes else _SECTION_RANKS[name]
            rank += focused(item.text)
            seq = max(item.source_seqs, default=0)
            parts.append(((rank, seq, order, index), ("item", name, index)))
    for index, statement in enumerate(draft.statements):
        rank = (statement_rank(statement) or RANK_GOAL) + focused(statement.text)
        parts.append(((rank, statement.source_seq, 10, index), ("statement", "", index)))
    for index, fact in enumerate(draft.facts):
        rank = fact_rank(fact) + focused(fact.text)
        parts.append(((rank, fact.source_seq, 11, index), ("fact", "", index)))
    for level in range(len(_CONSTRAINT_LIMITS)):
        parts.append(((RANK_GOAL, -2, level, 0), ("shorten", "constraints", level)))
    for level in range(len(_GOAL_LIMITS) + 1):
        parts.append(((RANK_GOAL, -1, level, 0), ("shorten", "goal", level)))
    parts.sort()
    return parts


def _document(
    draft: Draft, removed: frozenset[_Part], goal_level: int, constraint_level: int
) -> SummaryDocument:
    """The draft without the removed parts, its goal and constraints shortened to a level."""
    items: dict[str, tuple[SummaryItem, ...]] = {}
    for name, _ in LIST_SECTIONS:
        kept = [
            item for i, item in enumerate(draft.sections[name]) if ("item", name, i) not in removed
        ]
        if name == "constraints" and constraint_level:
            limit = _CONSTRAINT_LIMITS[constraint_level - 1]
            kept = [
                SummaryItem(
                    shorten(item.text, limit),
                    item.source_seqs,
                    shorten(item.supersedes, limit) if item.supersedes else None,
                    item.day,
                )
                for item in kept
            ]
        items[name] = tuple(kept)
    goal = draft.goal
    if goal_level > len(_GOAL_LIMITS):
        goal = ""
    elif goal_level:
        goal = shorten(goal, _GOAL_LIMITS[goal_level - 1])
    statements = [s for i, s in enumerate(draft.statements) if ("statement", "", i) not in removed]
    statements.sort(key=lambda s: s.source_seq)
    return SummaryDocument(
        goal=goal,
        key_facts=tuple(f for i, f in enumerate(draft.facts) if ("fact", "", i) not in removed),
        statements=tuple(statements),
        version=SUMMARY_FORMAT_VERSION,
        **items,
    )


def fit(draft: Draft, cap_tokens: int, counter: TokenCounter) -> SummaryDocument:
    """The draft after the fewest trim steps that make its rendering fit (a binary search).

    Raises:
        ValueError: even the emptiest summary is over ``cap_tokens``.
    """

    steps = [part for _, part in part_ranks(draft)]

    def trimmed(count: int) -> SummaryDocument:
        taken = steps[:count]
        goal = sum(1 for part in taken if part[:2] == ("shorten", "goal"))
        constraints = sum(1 for part in taken if part[:2] == ("shorten", "constraints"))
        return _document(draft, frozenset(taken), goal, constraints)

    def fits(document: SummaryDocument) -> bool:
        return counter.count_text(document.render()) <= cap_tokens

    document = trimmed(0)
    if fits(document):
        return document
    low, high = 1, len(steps)
    smallest = trimmed(high)
    if not fits(smallest):
        raise ValueError(
            f"cap_tokens={cap_tokens} is below the {counter.count_text(smallest.render())} tokens "
            "of an empty summary; raise the summary cap"
        )
    while low < high:
        middle = (low + high) // 2
        if fits(trimmed(middle)):
            high = middle
        else:
            low = middle + 1
    return trimmed(high)
