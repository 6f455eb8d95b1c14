"""The offline, deterministic :class:`ExtractiveSummarizer`: key facts copied with patterns,
short messages quoted whole, the other sections picked by simple cues, cut to the cap."""

from __future__ import annotations

import json
import re
from typing import Final

from langchain_core.messages import AIMessage

from ctx_langgraph.compaction.draft import Draft, fit, keywords, shorten
from ctx_langgraph.compaction.facts import (
    CORRECTION,
    corrected,
    event_facts,
    extract_key_facts,
    merge_facts,
    sentences,
)
from ctx_langgraph.compaction.format import SummaryDocument
from ctx_langgraph.compaction.protocol import SummaryRequest
from ctx_langgraph.compaction.statements import (
    CONSTRAINT,
    DECISION,
    statement_of,
    statement_rank,
)
from ctx_langgraph.compaction.summary_lines import KeyStatement, clean_text
from ctx_langgraph.core.dates import day_label
from ctx_langgraph.history.types import HistoryEvent
from ctx_langgraph.view.markers import LOOKUP_MARK

__all__ = ["ExtractiveSummarizer", "extract_key_facts"]

_NEXT_STEP = re.compile(r"\b(?:next|then i will|then i[\u2019']ll|todo|to-do|will now)\b", re.I)
_FAILURE = re.compile(
    r"\b(?:error|errors|failed|failure|timeout|timed out|exception|traceback)\b", re.I
)
_STATEMENTS_PER_ITEM: Final = 4


def _is_lookup_page(event: HistoryEvent) -> bool:
    artifact = (event.content.get("data") or {}).get("artifact") if event.role == "tool" else None
    return isinstance(artifact, dict) and bool(artifact.get(LOOKUP_MARK))


def _best_statements(statements: list[KeyStatement], limit: int) -> list[KeyStatement]:
    """The ``limit`` best statements (by rank, then the newest), one per seq, in seq order."""
    by_seq = {statement.source_seq: statement for statement in statements}
    ranked = sorted(
        by_seq.values(), key=lambda s: (statement_rank(s) or 0, s.source_seq), reverse=True
    )
    return sorted(ranked[:limit], key=lambda s: s.source_seq)


class ExtractiveSummarizer:
    """An offline, deterministic summarizer: patterns instead of a model, key facts exact.

    Merges the previous summary with the new events: the goal, constraints (corrections
    superseding what they replace), what was done and failed, decisions, open questions, next
    steps, key statements quoted whole, and every identifier, amount, date, path, URL, email
    and name with its source seq and day. Under a tight cap the least important, oldest parts
    go first.

    Examples:
        >>> import datetime as dt
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from ctx_langgraph.budget import ApproximateCounter
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> with SQLiteHistoryStore.from_path(":memory:") as store:
        ...     _ = store.setup()
        ...     _ = store.append("t", [
        ...         HumanMessage("Please refund order ORD-1042 for Ann Lee. We must use MySQL."),
        ...         AIMessage("I will refund $40.00 today."),
        ...         HumanMessage("Actually, use Postgres, not MySQL."),
        ...     ], created_at=dt.datetime(2023, 5, 8, 14, 0, tzinfo=dt.timezone.utc))
        ...     events = store.read_events("t")
        >>> request = SummaryRequest(None, events, 3, cap_tokens=400, counter=ApproximateCounter())
        >>> doc = SummaryDocument.parse(ExtractiveSummarizer().summarize(request))
        >>> doc.goal
        'Please refund order ORD-1042 for Ann Lee. We must use MySQL.'
        >>> doc.constraints
        (SummaryItem(text='Actually, use Postgres, not MySQL.', source_seqs=(3,), supersedes='We must use MySQL.', day='Mon 8 May 2023'),)
        >>> [(s.speaker, s.text) for s in doc.statements]
        [('user', 'Please refund order ORD-1042 for Ann Lee. We must use MySQL.'), ('assistant', 'I will refund $40.00 today.'), ('user', 'Actually, use Postgres, not MySQL.')]
        >>> [(fact.kind, fact.text, fact.source_seq, fact.day) for fact in doc.key_facts]
        [('id', 'ORD-1042', 1, 'Mon 8 May 2023'), ('name', 'Ann Lee', 1, 'Mon 8 May 2023'), ('amount', '$40.00', 2, 'Mon 8 May 2023')]
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
        return fit(self._draft(request), request.cap_tokens, request.counter)

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)

    def _draft(self, request: SummaryRequest) -> Draft:
        draft = Draft.of(request.previous, self.max_items_per_section)
        draft.focus = frozenset(keywords(request.instructions or ""))
        new_questions: set[str] = set()
        calls: dict[str, str] = {}
        for event in request.events:
            if _is_lookup_page(event):  # quoted copies of older events
                draft.add(
                    "done",
                    f"looked up the history ({event.name or 'lookup'})",
                    event.seq,
                    day=day_label(event.created_at),
                )
                continue
            stale = self._facts(draft, event)
            said = statement_of(event)
            if said is not None:
                draft.statements.append(said[0])
            if event.role == "human":
                self._human(draft, event, new_questions, stale)
            elif event.role == "ai":
                self._ai(draft, event, new_questions, calls)
            elif event.role == "tool":
                self._tool(draft, event, calls)
        draft.facts = merge_facts(draft.facts)
        limit = self.max_items_per_section
        draft.statements = _best_statements(draft.statements, limit * _STATEMENTS_PER_ITEM)
        for name, items in draft.sections.items():
            draft.sections[name] = items[-limit:]
        return draft

    @staticmethod
    def _facts(draft: Draft, event: HistoryEvent) -> set[str]:
        """The event's facts into the draft; returns the values a user correction retires."""
        found = event_facts(event)
        stale: set[str] = set()
        if event.role == "human":
            found, stale = corrected(event.text, found)
            if stale:
                draft.forget(stale)
                fixes = ", ".join(f"{f.text} replaces {f.replaces}" for f in found if f.replaces)
                if fixes and any(value in draft.goal for value in stale):
                    draft.goal = shorten(f"[corrected later: {fixes}] {draft.goal}", 240)
        replaced = {f.replaces for f in draft.facts if f.replaces}
        draft.facts += [f for f in found if f.text not in replaced]
        return stale

    @staticmethod
    def _human(draft: Draft, event: HistoryEvent, new_questions: set[str], stale: set[str]) -> None:
        day = day_label(event.created_at)
        if not draft.goal and len(event.text.split()) >= 2:
            draft.goal = shorten(event.text, 200)
        for sentence in sentences(event.text):
            if sentence.endswith("?"):
                draft.add("open_questions", sentence, event.seq, day=day)
                new_questions.add(shorten(sentence, 200))
            elif any(value in sentence for value in stale):
                continue
            elif CORRECTION.search(sentence):
                if not draft.supersede(sentence, event.seq, day) and CONSTRAINT.search(sentence):
                    draft.add("constraints", sentence, event.seq, day=day)
            elif CONSTRAINT.search(sentence):
                draft.add("constraints", sentence, event.seq, day=day)

    @staticmethod
    def _ai(
        draft: Draft, event: HistoryEvent, new_questions: set[str], calls: dict[str, str]
    ) -> None:
        day = day_label(event.created_at)
        message = event.message
        text = message.text
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                rendered = (
                    f"{call['name']}({json.dumps(call['args'], sort_keys=True, default=str)})"
                )
                calls[str(call.get("id"))] = shorten(rendered, 80)
        for sentence in sentences(text):
            if sentence.endswith("?"):
                continue
            if DECISION.search(sentence):
                draft.add("decisions", sentence, event.seq, day=day)
            elif _NEXT_STEP.search(sentence):
                draft.add("next_steps", sentence, event.seq, day=day)
        if (isinstance(message, AIMessage) and message.tool_calls) or not text.strip():
            return
        draft.add("done", shorten(sentences(text)[0], 160), event.seq, day=day)
        # an answer settles this span's questions, and earlier ones it speaks to
        answer = keywords(text)
        draft.sections["open_questions"] = [
            item
            for item in draft.sections["open_questions"]
            if item.text not in new_questions
            and len(keywords(item.text) & answer) < min(2, len(keywords(item.text)) or 1)
        ]
        new_questions.clear()

    @staticmethod
    def _tool(draft: Draft, event: HistoryEvent, calls: dict[str, str]) -> None:
        day = day_label(event.created_at)
        name = event.name or (event.tool_names[0] if event.tool_names else "tool")
        lines = [clean_text(line) for line in event.text.splitlines() if line.strip()]
        status = getattr(event.message, "status", "success")
        failure = next((line for line in lines if _FAILURE.search(line)), None)
        if status == "error" or failure is not None:
            why = failure or (lines[0] if lines else "no detail")
            call = next((calls[i] for i in event.tool_call_ids if i in calls), name)
            draft.add("failed", f"{call} failed: {shorten(why, 120)}", event.seq, day=day)
        else:
            first = shorten(lines[0] if lines else "(empty)", 120)
            draft.add("done", f"{name}: {first}", event.seq, day=day)
