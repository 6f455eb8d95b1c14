"""Planted facts: where they go, their unique subjects and values, how each is stated, and the
question each one answers."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctx_langgraph.datasets import QAItem
from ctx_langgraph.eval.synthetic._data import FACTS, PHRASES, SUBJECTS, WORDS
from ctx_langgraph.eval.synthetic._giants import GIANTS, giant_turn
from ctx_langgraph.eval.synthetic._words import (
    ENVS,
    ITEMS,
    LIMIT_FILES,
    MONTHS,
    PLANS,
    SERVICES,
    Call,
    DialogueTurn,
    Words,
    money,
)

__all__ = [
    "KINDS",
    "Fact",
    "Kind",
    "Subjects",
    "cycled",
    "fact_fields",
    "fact_turn",
    "new_value",
    "pick_turns",
    "question",
]


@dataclass(frozen=True)
class Kind:
    """A kind of planted fact: how it is stated, asked about and corrected."""

    category: str
    value: str
    subject: str
    said: str
    ask: str
    tool: str
    args: dict[str, str]
    output: str
    giant: str | None
    line: str
    question: str
    query: str
    correction: str
    correction_query: str


KINDS: dict[str, Kind] = {key: Kind(**kind) for key, kind in FACTS.items()}
"""Every kind of planted fact by name (``data/facts.json``)."""


@dataclass
class Fact:
    kind: Kind
    turn: int
    mode: str
    """``said`` (the user states it), ``tool`` (a tool output) or ``giant`` (a giant output)."""
    fields: dict[str, Any] = field(default_factory=dict)
    correction_turn: int | None = None
    evidence: str = ""
    correction_evidence: str = ""


def pick_turns(rng: random.Random, turns: int, count: int, taken: set[int]) -> list[int]:
    """``count`` free turns, about 60% of them in the first half."""
    free = [t for t in range(1, turns + 1) if t not in taken]
    half = turns / 2
    first = [t for t in free if t <= half]
    second = [t for t in free if t > half]
    chosen = rng.sample(first, min(len(first), math.ceil(0.6 * count)))
    chosen += rng.sample(second, min(len(second), count - len(chosen)))
    rest = [t for t in free if t not in chosen]
    chosen += rng.sample(rest, min(len(rest), count - len(chosen)))
    return chosen


def cycled(rng: random.Random, options: Sequence[str], count: int) -> list[str]:
    """``count`` of ``options``, each shuffled round using every option once."""
    out: list[str] = []
    while len(out) < count:
        round_ = list(options)
        rng.shuffle(round_)
        out.extend(round_)
    return out[:count]


def new_value(rng: random.Random, kind: str, taken: set[str]) -> str:
    """A planted value of ``kind`` not in ``taken`` (and added to it)."""
    while True:
        if kind == "order":
            value = f"ORD-{rng.randint(10000, 99999)}"
        elif kind == "ticket":
            value = f"TCK-{rng.randint(1000, 9999)}"
        elif kind == "invoice":
            value = f"INV-{rng.choice((2023, 2024))}-{rng.randint(1, 9999):04d}"
        elif kind == "amount":
            value = money(rng, 100, 9999)
        elif kind == "config":
            value = (
                f"/srv/{rng.choice(SERVICES)}/config/{rng.choice(ENVS)}/"
                f"{rng.choice(LIMIT_FILES)}.yaml"
            )
        else:
            value = (
                f"/mnt/backups/{rng.choice(SERVICES)}/nightly/"
                f"acct-{rng.randint(1, 99999):05d}.tar.zst"
            )
        if value not in taken:
            taken.add(value)
            return value


class Subjects:
    """Unique subjects: the n-th customer, company or product differs from all earlier ones."""

    def __init__(self, rng: random.Random) -> None:
        def shuffled(options: Sequence[str]) -> list[str]:
            out = list(options)
            rng.shuffle(out)
            return out

        self.first = shuffled(SUBJECTS["first"])
        self.last = shuffled(SUBJECTS["last"])
        self.cities = shuffled(SUBJECTS["cities"])
        self.company_head = shuffled(SUBJECTS["company_head"])
        self.company_tail = shuffled(SUBJECTS["company_tail"])
        self.product_head = shuffled(SUBJECTS["product_head"])
        self.product_tail = shuffled(SUBJECTS["product_tail"])
        self.counts = {"customer": 0, "company": 0, "product": 0}

    @staticmethod
    def _pair(n: int, heads: Sequence[str], tails: Sequence[str]) -> tuple[str, str]:
        # n -> (n mod H, (n mod H + n div H) mod T) is one-to-one while n div H < T.
        head = n % len(heads)
        return heads[head], tails[(head + n // len(heads)) % len(tails)]

    def next(self, subject: str) -> dict[str, str]:
        n = self.counts[subject]
        self.counts[subject] = n + 1
        if subject == "customer":
            last, city = self._pair(n, self.last, self.cities)
            return {"first": self.first[n % len(self.first)], "last": last, "city": city}
        if subject == "company":
            return {"company": " ".join(self._pair(n, self.company_head, self.company_tail))}
        head, tail = self._pair(n, self.product_head, self.product_tail)
        return {"product": f"{head} {tail}", "slug": f"{head}_{tail}".lower()}


def fact_fields(words: Words, fact: Fact) -> dict[str, Any]:
    """Everything the fact's templates name besides its subject and value."""
    rng = words.rng
    month = words.pick(MONTHS)
    return {
        "item": words.pick(ITEMS),
        "amount": words.amount(),
        "date": words.date(2),
        "date2": words.date(1),
        "date3": words.date(1),
        "day": f"{rng.randint(1, 3):02d}",
        "clock": words.clock(),
        "ms": f"{rng.randint(0, 999):03d}",
        "rid": f"{rng.randint(0, 0xFFFFFFFF):08x}",
        "month": month,
        "month_lower": month.lower(),
        "problem": words.pick(SUBJECTS["problems"]),
        "priority": words.pick(("normal", "high", "urgent")),
        "agent": words.name(),
        "agent2": words.name(),
        "acct": f"ACC-{rng.randint(0, 999999):06d}",
        "plan": words.pick(PLANS),
        "days": rng.randint(7, 90),
        "rpm": rng.choice((90, 150, 450, 900)),
        "burst": rng.choice((20, 40, 80)),
        "team": words.pick(WORDS["teams"]),
        "lineno": rng.randint(5, 60),
        "mm": f"{rng.randint(0, 59):02d}",
        "size": rng.randint(2, 400),
        **fact.fields,
    }


def fact_turn(words: Words, fact: Fact) -> DialogueTurn:
    """The turn that states ``fact``: the user says it, or a tool (or a giant output) shows it."""
    kind, fields = fact.kind, fact.fields
    if fact.mode == "said":
        return DialogueTurn(kind.said.format(**fields), (), words.pick(PHRASES["said_replies"]))
    if fact.mode == "giant":
        assert kind.giant is not None
        return giant_turn(words, GIANTS[kind.giant], kind.line.format(**fields))
    args = {key: template.format(**fields) for key, template in kind.args.items()}
    call = Call(kind.tool, args, kind.output.format(**fields))
    return DialogueTurn(
        words.request(kind.ask.format(**fields)),
        ((words.pick(PHRASES["prefaces"]), (call,)),),
        words.pick(PHRASES["found_replies"]),
        evidence_call=0,
    )


def question(fact: Fact) -> QAItem:
    """The question ``fact`` answers: its value, or for a corrected fact the new value."""
    kind, fields = fact.kind, fact.fields
    text = kind.question.format(**fields)
    if fact.correction_turn is None:
        return QAItem(
            text,
            fields["value"],
            (fact.evidence,),
            category=kind.category,
            query=kind.query.format(**fields),
        )
    return QAItem(
        text,
        fields["new"],
        (fact.correction_evidence,),
        category="correction",
        query=kind.correction_query.format(**fields),
        superseded=fields["old"],
    )
