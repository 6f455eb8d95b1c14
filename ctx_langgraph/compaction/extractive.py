"""The offline, deterministic :class:`ExtractiveSummarizer` and its exact key-fact patterns.

No model: key facts (identifiers, amounts, dates, paths, URLs, emails, names) are copied out of the
events with patterns, so they stay exact; the other sections are picked by simple cues; the result
is trimmed to the cap, dropping the least valuable parts first.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from langchain_core.messages import AIMessage

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.format import (
    LIST_SECTIONS,
    SummaryDocument,
    SummaryItem,
    clean_text,
)
from ctx_langgraph.compaction.protocol import SummaryRequest
from ctx_langgraph.history.types import HistoryEvent, KeyFact
from ctx_langgraph.view.markers import LOOKUP_MARK

__all__ = ["ExtractiveSummarizer", "extract_key_facts"]

log = logging.getLogger(__name__)

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_TIME = r"\d{1,2}:\d{2}(?:\s?(?:[ap]m|[AP]M|[ap]\.m\.))?"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_CURRENCY = r"(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|INR|CNY)"
# Earlier patterns win: their spans are masked before later patterns run (an id inside a path
# or URL is not a second fact).
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
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday Context Summary Goal"""
_NOT_NAME_WORDS = frozenset(_NOT_NAME_WORDS_TEXT.split())


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


def _is_lookup_page(event: HistoryEvent) -> bool:
    artifact = (event.content.get("data") or {}).get("artifact") if event.role == "tool" else None
    return isinstance(artifact, dict) and bool(artifact.get(LOOKUP_MARK))


def extract_key_facts(event: HistoryEvent) -> list[KeyFact]:
    """The exact identifiers, amounts, dates, paths, URLs, emails and names in an event's text.

    Example:
        >>> import datetime as dt
        >>> event = HistoryEvent(7, "m7", "main", "human", None, {}, "Refund INV-2023-0042 "
        ...     "($1,250.00) to ann@example.com by June 14, 2023; see /srv/refunds.log", (), (), 1,
        ...     True, dt.datetime(2023, 6, 1))
        >>> [(fact.kind, fact.text) for fact in extract_key_facts(event)]
        [('id', 'INV-2023-0042'), ('amount', '$1,250.00'), ('email', 'ann@example.com'),
         ('date', 'June 14, 2023'), ('path', '/srv/refunds.log')]
    """
    text = event.text
    found: dict[tuple[str, str], int] = {}
    for kind, pattern in _FACT_PATTERNS:
        for match in pattern.finditer(text):
            value = _fact_text(kind, match.group(0))
            if value is None:
                continue
            found.setdefault((kind, value), match.start())
            # mask the span (same length, so later positions hold) for the patterns after this one
            text = text[: match.start()] + "\0" * len(match.group(0)) + text[match.end() :]
    return [
        KeyFact(value, event.seq, kind, event.event_id)
        for (kind, value), _ in sorted(found.items(), key=lambda entry: entry[1])
    ]


# ----------------------------------------------------------------------------- extraction

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")
_CONSTRAINT = re.compile(
    r"\b(?:must|should|don[\u2019']t|do not|never|always|prefer(?:s|red)?|please use|instead"
    r"|avoid|make sure|ha(?:ve|s) to|only use|required)\b",
    re.I,
)
_CORRECTION = re.compile(
    r"\b(?:actually|correction|instead of|rather than|scratch that|i meant|on second thought"
    r"|no longer|switch(?:ing)? to|change\b.*?\bto)\b|,\s*not\s+\w|\bnot\s+\S+(?:\s+\S+)?,?\s+but\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:decided|decide to|will use|i[\u2019']ll use|chose|choose to|going with|opted|settled on)\b",
    re.I,
)
_NEXT_STEP = re.compile(r"\b(?:next|then i will|then i[\u2019']ll|todo|to-do|will now)\b", re.I)
_FAILURE = re.compile(
    r"\b(?:error|errors|failed|failure|timeout|timed out|exception|traceback)\b", re.I
)
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS_TEXT = """the and for that this with from into use using used please must should don not never
    always prefer instead actually correction change switch rather than but will would can could
    let lets make sure have has are was were our your you they them its also only just want"""
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_MAX_SEQS = 6


def _keywords(text: str) -> set[str]:
    return {
        word
        for word in _WORD.findall(text.lower())
        if word not in _STOPWORDS and (len(word) >= 3 or any(ch.isdigit() for ch in word))
    }


def _sentences(text: str) -> list[str]:
    return [clean_text(part) for part in _SENTENCE_END.split(text) if clean_text(part)]


def _shorten(text: str, limit: int) -> str:
    text = clean_text(text)
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 3)]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "..."


def _merge_seqs(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    seqs = tuple(sorted(set(old) | set(new)))
    # keep the first mention and the latest ones, so a recurring item does not grow without end
    return seqs if len(seqs) <= _MAX_SEQS else seqs[:1] + seqs[-(_MAX_SEQS - 1) :]


@dataclass
class _Draft:
    """A summary being built: mutable lists, turned into a :class:`SummaryDocument` at the end."""

    goal: str = ""
    sections: dict[str, list[SummaryItem]] = field(
        default_factory=lambda: {name: [] for name, _ in LIST_SECTIONS}
    )
    facts: list[KeyFact] = field(default_factory=list)
    limit: int | None = None
    """Items kept per section (the newest); bounds the work per event on long spans."""

    @classmethod
    def of(cls, document: SummaryDocument | None, limit: int | None = None) -> _Draft:
        draft = cls(limit=limit)
        if document is not None:
            draft.goal = document.goal
            draft.sections = {name: list(document.items(name)) for name, _ in LIST_SECTIONS}
            draft.facts = list(document.key_facts)
        return draft

    def copy(self) -> _Draft:
        sections = {name: list(items) for name, items in self.sections.items()}
        return _Draft(self.goal, sections, list(self.facts), self.limit)

    def document(self) -> SummaryDocument:
        items = {name: tuple(values) for name, values in self.sections.items()}
        return SummaryDocument(
            goal=self.goal,
            constraints=items["constraints"],
            done=items["done"],
            failed=items["failed"],
            decisions=items["decisions"],
            open_questions=items["open_questions"],
            next_steps=items["next_steps"],
            key_facts=tuple(self.facts),
        )

    def add(self, section: str, text: str, seq: int, supersedes: str | None = None) -> None:
        text = _shorten(text, 200)
        items = self.sections[section]
        for index, item in enumerate(items):
            if item.text.casefold() == text.casefold():
                # a repeated item moves to the end: it is recent again
                del items[index]
                seqs = _merge_seqs(item.source_seqs, (seq,))
                items.append(SummaryItem(text, seqs, supersedes or item.supersedes))
                return
        items.append(SummaryItem(text, (seq,), supersedes))
        if self.limit is not None and len(items) > self.limit:
            del items[: len(items) - self.limit]

    def supersede(self, text: str, seq: int) -> None:
        """A user correction replaces the constraint it shares most keywords with (latest on ties)."""
        keys = _keywords(text)
        constraints = self.sections["constraints"]
        best, best_score = None, 0
        for index, item in enumerate(constraints):
            score = len(keys & _keywords(item.text))
            if score and score >= best_score:
                best, best_score = index, score
        old = constraints.pop(best).text if best is not None else None
        self.add("constraints", text, seq, supersedes=old)


_NEGATED = (
    r"(?:not|instead of|rather than|no longer|isn[\u2019']t|wasn[\u2019']t)\s+(?:the\s+|an?\s+)?"
)


def _corrected(text: str, facts: list[KeyFact]) -> tuple[list[KeyFact], set[str]]:
    """A user's correction ("my order id is B-2291, not A-1172"): the values it negates, and
    the event's facts without them, the new values marked with what they replace."""
    stale: set[str] = set()
    for sentence in _sentences(text):
        if not _CORRECTION.search(sentence):
            continue
        for fact in facts:
            if re.search(_NEGATED + re.escape(fact.text) + r"(?!\w)", sentence, re.I):
                stale.add(fact.text)
    if not stale:
        return facts, stale
    kept = [f for f in facts if f.text not in stale]
    kinds = {f.kind: f.text for f in facts if f.text in stale}
    return [replace(f, replaces=kinds.get(f.kind)) for f in kept], stale


def _merge_facts(facts: list[KeyFact]) -> list[KeyFact]:
    """One fact per (kind, text), the earliest seq kept, in seq order (ties keep input order)."""
    earliest: dict[tuple[str, str], tuple[int, KeyFact]] = {}
    for index, fact in enumerate(facts):
        key = (fact.kind, fact.text)
        if key not in earliest or fact.source_seq < earliest[key][1].source_seq:
            earliest[key] = (index, fact)
    ordered = sorted(earliest.values(), key=lambda entry: (entry[1].source_seq, entry[0]))
    return [fact for _, fact in ordered]


_TrimStep = Callable[[_Draft], None]
_DROP_ORDER = ("next_steps", "open_questions", "decisions", "failed", "done")


def _trim_steps(draft: _Draft) -> list[_TrimStep]:
    """Cuts in order of least loss: lower sections' items (oldest first), then shorter
    constraints and goal, then constraints (oldest first), then the goal, then duplicate facts,
    then the newest facts. Key facts go last: they are what a summary must not lose."""

    def drop_oldest(section: str) -> _TrimStep:
        def step(d: _Draft) -> None:
            del d.sections[section][0]

        return step

    def drop_newest_fact(d: _Draft) -> None:
        # a corrected value goes last: it is what keeps the old, wrong one from coming back
        plain = [i for i, fact in enumerate(d.facts) if not fact.replaces]
        del d.facts[plain[-1] if plain else -1]

    def shorten(limit: int) -> _TrimStep:
        def step(d: _Draft) -> None:
            d.goal = _shorten(d.goal, limit)
            d.sections["constraints"] = [
                SummaryItem(
                    _shorten(item.text, limit),
                    item.source_seqs,
                    _shorten(item.supersedes, limit) if item.supersedes else None,
                )
                for item in d.sections["constraints"]
            ]

        return step

    def drop_fact(key: tuple[str, str]) -> _TrimStep:
        def step(d: _Draft) -> None:
            d.facts = [f for f in d.facts if (f.kind, f.text) != key]

        return step

    def clear_goal(d: _Draft) -> None:
        d.goal = ""

    steps: list[_TrimStep] = []
    for section in _DROP_ORDER:
        steps += [drop_oldest(section)] * len(draft.sections[section])
    steps += [shorten(120), shorten(60)]
    steps += [drop_oldest("constraints")] * len(draft.sections["constraints"])
    steps.append(clear_goal)
    seen: set[str] = set()
    duplicates = []
    for fact in draft.facts:
        if fact.text in seen:
            duplicates.append((fact.kind, fact.text))
        seen.add(fact.text)
    steps += [drop_fact(key) for key in reversed(duplicates)]
    steps += [drop_newest_fact] * (len(draft.facts) - len(duplicates))
    return steps


def _fit(draft: _Draft, cap_tokens: int, counter: TokenCounter) -> SummaryDocument:
    """The draft after the fewest trim steps that make its rendering fit (binary search: each
    step shrinks the text, so 'fits after n steps' is monotone up to a token of rounding; the
    result is always checked to fit)."""
    steps = _trim_steps(draft)

    def trimmed(count: int) -> SummaryDocument:
        copy = draft.copy()
        for step in steps[:count]:
            step(copy)
        return copy.document()

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


class ExtractiveSummarizer:
    """An offline, deterministic summarizer: patterns instead of a model, key facts exact.

    Merges the previous summary with the new events: the goal (the first substantial user
    message), user constraints (with corrections marked as superseding the constraint they
    replace), what was done, failed tool calls and why, decisions, open questions, next steps,
    and every identifier, amount, date, path, URL, email and name with its source seq. Previous
    key facts are always kept; when the cap is tight, lower sections go first and key facts last.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from ctx_langgraph.budget import ApproximateCounter
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> with SQLiteHistoryStore.from_path(":memory:") as store:
        ...     _ = store.setup()
        ...     _ = store.append("t", [
        ...         HumanMessage("Please refund order ORD-1042 for Ann Lee. We must use MySQL."),
        ...         AIMessage("I will refund $40.00 today."),
        ...         HumanMessage("Actually, use Postgres, not MySQL."),
        ...     ])
        ...     events = store.read_events("t")
        >>> request = SummaryRequest(None, events, 3, cap_tokens=400, counter=ApproximateCounter())
        >>> doc = SummaryDocument.parse(ExtractiveSummarizer().summarize(request))
        >>> doc.goal
        'Please refund order ORD-1042 for Ann Lee. We must use MySQL.'
        >>> doc.constraints
        (SummaryItem(text='Actually, use Postgres, not MySQL.', source_seqs=(3,), supersedes='We must use MySQL.'),)
        >>> [(fact.kind, fact.text, fact.source_seq) for fact in doc.key_facts]
        [('id', 'ORD-1042', 1), ('name', 'Ann Lee', 1), ('amount', '$40.00', 2)]
    """

    id = "extractive-v1"
    window_tokens: int | None = None

    def __init__(self, max_items_per_section: int = 12) -> None:
        if max_items_per_section < 1:
            raise ValueError(f"max_items_per_section must be >= 1, got {max_items_per_section}")
        self.max_items_per_section = max_items_per_section

    def summarize(self, request: SummaryRequest) -> str:
        return self.summarize_document(request).render()

    def summarize_document(self, request: SummaryRequest) -> SummaryDocument:
        """The summary as a document; unlike its rendering, its key facts keep their event ids."""
        return _fit(self._draft(request), request.cap_tokens, request.counter)

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)

    def _draft(self, request: SummaryRequest) -> _Draft:
        """The merged summary before the cap is applied."""
        draft = _Draft.of(request.previous, self.max_items_per_section)
        new_questions: set[str] = set()
        calls: dict[str, str] = {}
        facts = list(draft.facts)
        for event in request.events:
            if _is_lookup_page(event):
                # quoted copies of older events: their facts were taken from the originals
                draft.add("done", f"looked up the history ({event.name or 'lookup'})", event.seq)
                continue
            found = extract_key_facts(event)
            if event.role == "human":
                found, stale = _corrected(event.text, found)
                if stale:  # the user named these values as wrong: they are no longer facts
                    facts = [f for f in facts if f.text not in stale]
                    fixes = ", ".join(
                        f"{f.text} replaces {f.replaces}" for f in found if f.replaces
                    )
                    if fixes and any(value in draft.goal for value in stale):
                        draft.goal = _shorten(f"[corrected later: {fixes}] {draft.goal}", 240)
            replaced = {f.replaces for f in facts if f.replaces}
            facts += [f for f in found if f.text not in replaced]
            if event.role == "human":
                self._human(draft, event, new_questions)
            elif event.role == "ai":
                self._ai(draft, event, new_questions, calls)
            elif event.role == "tool":
                self._tool(draft, event, calls)
        draft.facts = _merge_facts(facts)
        for name, items in draft.sections.items():
            draft.sections[name] = items[-self.max_items_per_section :]
        return draft

    @staticmethod
    def _human(draft: _Draft, event: HistoryEvent, new_questions: set[str]) -> None:
        if not draft.goal and len(event.text.split()) >= 2:
            draft.goal = _shorten(event.text, 200)
        for sentence in _sentences(event.text):
            if sentence.endswith("?"):
                draft.add("open_questions", sentence, event.seq)
                new_questions.add(_shorten(sentence, 200))
            elif _CORRECTION.search(sentence):
                draft.supersede(sentence, event.seq)
            elif _CONSTRAINT.search(sentence):
                draft.add("constraints", sentence, event.seq)

    @staticmethod
    def _ai(
        draft: _Draft, event: HistoryEvent, new_questions: set[str], calls: dict[str, str]
    ) -> None:
        message = event.message
        text = message.text
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                rendered = (
                    f"{call['name']}({json.dumps(call['args'], sort_keys=True, default=str)})"
                )
                calls[str(call.get("id"))] = _shorten(rendered, 80)
        for sentence in _sentences(text):
            if _DECISION.search(sentence):
                draft.add("decisions", sentence, event.seq)
            elif _NEXT_STEP.search(sentence):
                draft.add("next_steps", sentence, event.seq)
        if (isinstance(message, AIMessage) and message.tool_calls) or not text.strip():
            return
        draft.add("done", _shorten(_sentences(text)[0], 160), event.seq)
        # an answer settles the questions asked in this span, and earlier ones it speaks to
        answer = _keywords(text)
        draft.sections["open_questions"] = [
            item
            for item in draft.sections["open_questions"]
            if item.text not in new_questions
            and len(_keywords(item.text) & answer) < min(2, len(_keywords(item.text)) or 1)
        ]
        new_questions.clear()

    @staticmethod
    def _tool(draft: _Draft, event: HistoryEvent, calls: dict[str, str]) -> None:
        name = event.name or (event.tool_names[0] if event.tool_names else "tool")
        lines = [clean_text(line) for line in event.text.splitlines() if line.strip()]
        status = getattr(event.message, "status", "success")
        failure = next((line for line in lines if _FAILURE.search(line)), None)
        if status == "error" or failure is not None:
            why = failure or (lines[0] if lines else "no detail")
            call = next((calls[i] for i in event.tool_call_ids if i in calls), name)
            draft.add("failed", f"{call} failed: {_shorten(why, 120)}", event.seq)
        else:
            draft.add(
                "done", f"{name}: {_shorten(lines[0] if lines else '(empty)', 120)}", event.seq
            )
