"""Key statements: the short messages a summary quotes verbatim (a correction, a value, a
decision, a plan, a constraint, a personal event), and how much each is worth."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from langchain_core.messages import AIMessage

from ctx_langgraph.compaction.facts import (
    CORRECTION,
    RANK_CORRECTED,
    RANK_STATED,
    RANK_TOLD,
    sentences,
    stated_facts,
    statement_facts,
)
from ctx_langgraph.compaction.summary_lines import KeyStatement, clean_text
from ctx_langgraph.core.dates import day_label
from ctx_langgraph.history.types import HistoryEvent

__all__ = ["MAX_STATEMENT_CHARS", "statement_of", "statement_rank"]
MAX_STATEMENT_CHARS: Final = 300


DECISION: Final = re.compile(
    r"\b(?:decided|decide to|will use|i[\u2019']ll use|chose|choose to|going with|opted|settled on)\b",
    re.I,
)
CONSTRAINT: Final = re.compile(
    r"^(?:\S+[,:]\s+)?(?:please\s+)?(?:(?:don[\u2019']t|do not)(?!\s+(?:worry|let|give up|stop"
    r"|hesitate|be\b))|(?:never|always)(?!\s+(?:give up|say|up|good|great|nice|fun|so|been|a|an"
    r"|the|here|there|happy|glad|welcome)\b)|avoid|make sure(?!\s+(?:you|to)\s+(?:take care"
    r"|enjoy|have fun|rest))|only|use|stick to|remember to)\b"
    r"|\b(?:you|we|they)\s+(?:must|should|shouldn[\u2019']t|ha(?:ve|s) to|need to|can[\u2019']t"
    r"|cannot|may not)\s+(?!have\b|be so\b)"
    r"|\b(?:must|should)\s+(?:use|go|stay|run|never|always|not|only)\b"
    r"|\b(?:prefer(?:s|red)?|please use|instead of|required|mandatory|from now on|going forward"
    r"|in every|every time|at all times|until (?:further notice|[a-z]+ (?:has|have) )"
    r"|no later than)\b",
    re.I,
)
"""A rule or preference ("we must use MySQL"), not an encouragement ("don't worry")."""
_PLAN = re.compile(
    r"\b(?:plan(?:ning)? to|planned|intend(?:ing)? to|tomorrow|next (?:week|weekend|month|year"
    r"|time|summer|winter|spring|fall)|this (?:weekend|summer|winter|spring|fall)|scheduled"
    r"|booked|sign(?:ed)? up)\b",
    re.I,
)
_REMEMBER = re.compile(
    r"\b(?:keep (?:it|this|that|them) (?:for later|in mind|safe)|keep in mind"
    r"|(?:(?<![\w\s])\s*|^|please\s+)remember (?:this|it)\b|don[\u2019']t forget (?:this|it|that)\b"
    r"|do not forget|note (?:this|it) down"
    r"|note down|for the record|for later|save (?:it|this|that))\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:I|I[\u2019'](?:m|ve|d|ll)|[Ww]e|[Mm]y|[Oo]ur|[Mm]e|[Uu]s)\b")
_WHEN = re.compile(
    r"\b(?:yesterday|last (?:week|weekend|month|year|night|time|summer|winter|spring|fall"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|ago|recently|this (?:week"
    r"|weekend|morning|month|year|summer)|since)\b",
    re.I,
)
_DID = re.compile(
    r"\b(?:I|[Ww]e)(?:[\u2019']ve| have)?\s+(?:just\s+|finally\s+|recently\s+|also\s+|already\s+)?"
    r"(?:[a-z]{3,}ed|got|went|made|took|bought|met|won|lost|began|saw|ran|wrote|built|found"
    r"|joined|left|read|gave|sold|taught|caught|flew|drove|rode|became|brought|started"
    r"|finished|moved|adopted|visited|tried)\b(?![\u2019'])"
)
_ASKED = re.compile(
    r"\?$|^(?:\S+[!,:]\s+)?(?:please|pls|can|could|would|will) (?:you|we|someone)\b|^(?:\S+[!,:]\s+)?"
    r"(?:please|find|check|look|tell|show|pull|open|read|send)\b",
    re.I,
)
_SPEAKERS = {"human": "user", "ai": "assistant"}


@lru_cache(maxsize=4096)
def statement_rank(statement: KeyStatement) -> int | None:
    """How much a statement is worth quoting (None: not a key statement); the assistant's
    words rank one lower than a person's."""
    text = statement.text
    parts = sentences(text)
    told = [part for part in parts if not _ASKED.search(part)]
    asks_value = any(stated_facts(part, statement.source_seq) for part in parts)
    if len(text.split()) < 3 or not (told or asks_value):
        return None
    lower = 1 if statement.speaker == _SPEAKERS["ai"] else 0
    if any(f.replaces for f in statement_facts(text, statement.source_seq)) or any(
        CORRECTION.search(part) and CONSTRAINT.search(part) for part in parts
    ):
        return RANK_CORRECTED - lower  # a value, or a rule, corrected
    if _REMEMBER.search(text) or any(stated_facts(part, statement.source_seq) for part in told):
        return RANK_TOLD - lower
    if asks_value:
        return RANK_STATED - lower  # a value asked about
    if DECISION.search(text) or _PLAN.search(text) or CONSTRAINT.search(text):
        return RANK_STATED - lower
    if _DID.search(text) or (_FIRST_PERSON.search(text) and _WHEN.search(text)):
        return RANK_STATED - lower  # a personal event
    return None


def statement_of(event: HistoryEvent) -> tuple[KeyStatement, int] | None:
    """The event as a key statement with its rank, when a person said something short worth
    keeping."""

    if event.role not in _SPEAKERS:
        return None
    text = event.text
    if event.role == "ai":
        message = event.message
        text = message.text if isinstance(message, AIMessage) else text
    text = clean_text(text)
    if not text or len(text) > MAX_STATEMENT_CHARS:
        return None
    speaker = event.name or _SPEAKERS[event.role]
    statement = KeyStatement(text, event.seq, speaker, day_label(event.created_at))
    rank = statement_rank(statement)
    return None if rank is None else (statement, rank)
