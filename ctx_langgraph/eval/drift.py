"""Long-term drift: are the facts stated early still stated correctly in the active summary
after many compactions?

Measured per summary generation, for every strategy that summarizes: each time the summary in
the model input changes during the replay, its text is checked against the conversation's
facts whose evidence that summary already covers (:class:`PlantedFact`: the generated
sessions' planted identifiers, amounts, paths and corrections; LoCoMo's answerable questions).
A fact is kept when every content word of its answer is in the summary (as
:func:`~ctx_langgraph.eval.metrics.answer_in_context` checks it) and, for a correction, the superseded
value never reads as current (:func:`~ctx_langgraph.eval.metrics.correction_respected`). The
share of covered facts kept, generation after generation, is the drift curve; a strategy
without summaries has none.

Examples:
    >>> fact = PlantedFact("ORD-94793", ("t44-h",), superseded="ORD-26239")
    >>> check_generation(1, 12, 30, "order ORD-94793, not ORD-26239", frozenset({"t44-h"}), [fact])
    {'generation': 1, 'call': 12, 'turn': 30, 'facts': 1, 'kept': 1, 'share': 1.0}
    >>> check_generation(2, 20, 41, "order ORD-26239", frozenset({"t44-h"}), [fact])["share"]
    0.0
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage
from typing_extensions import TypedDict

from ctx_langgraph.datasets import Conversation, QAItem
from ctx_langgraph.eval.metrics import (
    answer_terms,
    context_words,
    correction_respected,
    normalize,
)
from ctx_langgraph.eval.replay import ReplayTurn

__all__ = [
    "DRIFT_KEYS",
    "GenerationCheck",
    "PlantedFact",
    "check_generation",
    "drift_metrics",
    "evidence_ids",
    "planted_facts",
    "pooled_drift",
    "replayed_ids",
]

DRIFT_KEYS = (
    "drift_generations",
    "drift_facts_final",
    "drift_kept_final",
    "drift_final",
    "drift_mean",
)
"""The drift figures of a run (:func:`drift_metrics`) and of a strategy (:func:`pooled_drift`)."""

_EVIDENCE_ID = re.compile(r"D(\d+):0*(\d+)")


@dataclass(frozen=True)
class PlantedFact:
    """A fact the conversation states, to look for in the summaries that cover it."""

    answer: str
    evidence: tuple[str, ...]
    """Ids of the replayed messages that state it (all must be covered)."""
    superseded: str | None = None
    """A correction's earlier value, which must not read as current."""


class GenerationCheck(TypedDict):
    """One summary generation of a run, checked (``series.json``'s ``drift`` entries)."""

    generation: int
    """1 for the first summary the replay's model input held, then 2, 3, ..."""
    call: int
    """Index of the first replay model call whose input held it."""
    turn: int
    """The turn of that call."""
    facts: int
    """Facts whose evidence the summary covers."""
    kept: int
    """Those still stated correctly in the summary's text."""
    share: float | None
    """``kept / facts`` (``None`` while the summary covers no fact)."""


def evidence_ids(item: QAItem, known: Mapping[str, BaseMessage]) -> list[str]:
    """The question's evidence ids that name messages (LoCoMo writes some as ``D8:06`` or
    several in one string).

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> known = {"D8:6": HumanMessage("x"), "D9:1": HumanMessage("y")}
        >>> evidence_ids(QAItem("q", "a", ("D8:06; D9:1", "D9:1")), known)
        ['D8:6', 'D9:1']
    """
    out: list[str] = []
    for raw in item.evidence:
        if raw in known:
            out.append(raw)
            continue
        out.extend(key for s, t in _EVIDENCE_ID.findall(raw) if (key := f"D{s}:{t}") in known)
    return list(dict.fromkeys(out))


def replayed_ids(conversation: Conversation, turns: Sequence[ReplayTurn]) -> dict[str, str]:
    """Each conversation message's id mapped to the replayed message that carries its text:
    itself, or for an assistant text merged into the one before it, that one's id."""
    replayed = {str(m.id) for turn in turns for m in turn.messages}
    out: dict[str, str] = {}
    carrier: str | None = None
    for message in conversation.messages:
        key = str(message.id)
        if key in replayed:
            carrier = key
        if carrier is not None:
            out[key] = carrier
    return out


def planted_facts(conversation: Conversation, turns: Sequence[ReplayTurn]) -> list[PlantedFact]:
    """The facts to look for: every answerable question (LoCoMo's adversarial ones left out)
    with an answer that has content words and evidence that names replayed messages."""
    known = {str(m.id): m for m in conversation.messages}
    carriers = replayed_ids(conversation, turns)
    facts: list[PlantedFact] = []
    for item in conversation.questions:
        if not item.answerable or not answer_terms(item.answer):
            continue
        evidence = [carriers[e] for e in evidence_ids(item, known) if e in carriers]
        if evidence:
            facts.append(PlantedFact(item.answer, tuple(dict.fromkeys(evidence)), item.superseded))
    return facts


def _kept(summary: str, words: frozenset[str], fact: PlantedFact) -> bool:
    """Every content word of the answer is in the summary (``answer_in_context``) and, for a
    correction, the superseded value never reads as current."""
    if not answer_terms(fact.answer) <= words:
        return False
    if fact.superseded:
        return correction_respected(summary, fact.answer, fact.superseded)
    return True


def check_generation(
    generation: int,
    call: int,
    turn: int,
    summary: str,
    covered: frozenset[str],
    facts: Sequence[PlantedFact],
) -> GenerationCheck:
    """One summary generation checked: of the ``facts`` whose every evidence message is in
    ``covered`` (the ids the summary claims), how many ``summary`` still states correctly."""
    text = normalize(summary)
    words = context_words(text)
    due = [fact for fact in facts if all(e in covered for e in fact.evidence)]
    kept = sum(_kept(text, words, fact) for fact in due)
    share = round(kept / len(due), 4) if due else None
    return GenerationCheck(
        generation=generation, call=call, turn=turn, facts=len(due), kept=kept, share=share
    )


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def pooled_drift(runs: Sequence[Sequence[GenerationCheck]]) -> dict[str, int | float | None]:
    """The drift figures over several runs' generations: how many generations; the facts
    covered and kept at each run's last generation, and their share (``drift_final``); the
    mean share over every generation that covers a fact (``drift_mean``). Without any
    generation the shares are ``None`` (a strategy that never summarized).

    Examples:
        >>> first = check_generation(1, 3, 2, "a 4471-QX", frozenset({"m1"}),
        ...                          [PlantedFact("4471-QX", ("m1",))])
        >>> second = check_generation(2, 9, 5, "nothing", frozenset({"m1"}),
        ...                           [PlantedFact("4471-QX", ("m1",))])
        >>> pooled_drift([[first, second]])
        {'drift_generations': 2, 'drift_facts_final': 1, 'drift_kept_final': 0, 'drift_final': 0.0, 'drift_mean': 0.5}
    """
    lasts = [run[-1] for run in runs if run]
    facts = sum(last["facts"] for last in lasts)
    kept = sum(last["kept"] for last in lasts)
    shares = [check["share"] for run in runs for check in run if check["share"] is not None]
    return {
        "drift_generations": sum(len(run) for run in runs),
        "drift_facts_final": facts,
        "drift_kept_final": kept,
        "drift_final": round(kept / facts, 4) if facts else None,
        "drift_mean": _mean(shares),
    }


def drift_metrics(generations: Sequence[GenerationCheck]) -> dict[str, int | float | None]:
    """The drift figures of one run (:func:`pooled_drift` of its generations)."""
    return pooled_drift([generations])
