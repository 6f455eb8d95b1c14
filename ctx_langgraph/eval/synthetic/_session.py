"""The session: where the facts, their corrections and the giant outputs go, and the turns
written out as messages."""

from __future__ import annotations

import collections
import datetime as dt
import random
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage

from ctx_langgraph.datasets import Conversation
from ctx_langgraph.eval.synthetic._data import PHRASES, TOOLS
from ctx_langgraph.eval.synthetic._facts import (
    KINDS,
    Fact,
    Subjects,
    cycled,
    fact_fields,
    fact_turn,
    new_value,
    pick_turns,
    question,
)
from ctx_langgraph.eval.synthetic._fillers import FILLERS
from ctx_langgraph.eval.synthetic._giants import GIANTS, giant_turn
from ctx_langgraph.eval.synthetic._words import DialogueTurn, Words

__all__ = ["MAX_TURNS", "TOOL_NAMES", "tool_session", "tool_specs"]

MAX_TURNS = 2000
"""The longest session :func:`tool_session` writes (every planted subject stays unique)."""

_START = dt.datetime(2024, 3, 4, 9, 0, tzinfo=dt.timezone.utc)
_STEP = dt.timedelta(seconds=20)
_TURNS_PER_SESSION = 50
_TURNS_PER_FACT = 10
_TURNS_PER_GIANT = 20
_CORRECTION_GAP = 30

TOOL_NAMES: tuple[str, ...] = tuple(tool["name"] for tool in TOOLS)
"""The tools the assistant calls in a :func:`tool_session`."""


def tool_specs() -> list[dict[str, Any]]:
    """Each tool's name, description and JSON schema of its arguments (a fresh copy per call).

    The shape is the one ``convert_to_openai_tool`` and ``StructuredTool`` accept.

    Examples:
        >>> [spec["name"] for spec in tool_specs()]
        ['search_orders', 'get_invoice', 'read_file', 'run_command']
        >>> tool_specs()[1]["parameters"]["required"]
        ['invoice_id']
    """
    return [
        {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": {
                "type": "object",
                "properties": {tool["argument"]: {"type": "string", "description": tool["about"]}},
                "required": [tool["argument"]],
                "additionalProperties": False,
            },
        }
        for tool in TOOLS
    ]


class _Writer:
    """Turns into messages with stable ids and times."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        self.created_at: list[dt.datetime] = []
        self.sessions: list[tuple[int, int]] = []
        self._clock = _START

    def session(self, number: int) -> None:
        if self.sessions:
            self.sessions[-1] = (self.sessions[-1][0], len(self.messages))
        self.sessions.append((len(self.messages), len(self.messages)))
        self._clock = _START + dt.timedelta(days=number)

    def close(self) -> None:
        self.sessions[-1] = (self.sessions[-1][0], len(self.messages))

    def _add(self, message: BaseMessage) -> None:
        self.messages.append(message)
        self.created_at.append(self._clock)
        self._clock += _STEP

    def turn(self, number: int, turn: DialogueTurn) -> tuple[str, list[str]]:
        """Write one turn; returns the ids of its human message and of its tool messages."""
        human = f"t{number}-h"
        self._add(HumanMessage(turn.request, id=human))
        tools: list[str] = []
        calls = 0
        for step, (preface, batch) in enumerate(turn.cycles, start=1):
            first = calls + 1
            tool_calls = [
                ToolCall(
                    name=call.name,
                    args=dict(call.args),
                    id=f"call_t{number}_{first + offset}",
                    type="tool_call",
                )
                for offset, call in enumerate(batch)
            ]
            self._add(AIMessage(preface, id=f"t{number}-a{step}", tool_calls=tool_calls))
            for offset, call in enumerate(batch):
                calls = first + offset
                tools.append(f"t{number}-tool-{calls}")
                self._add(
                    ToolMessage(
                        call.output,
                        id=tools[-1],
                        tool_call_id=f"call_t{number}_{calls}",
                        name=call.name,
                        status="error" if call.error else "success",
                    )
                )
        self._add(AIMessage(turn.reply, id=f"t{number}-a{len(turn.cycles) + 1}"))
        return human, tools


def tool_session(seed: int = 0, *, turns: int = 300, name: str | None = None) -> Conversation:
    """A long, tool-heavy support-agent session with planted facts and questions about them.

    Deterministic for a seed. Each of the ``turns`` turns is a ``HumanMessage``, zero or more
    cycles of an ``AIMessage`` with 1 to 3 tool calls followed by one ``ToolMessage`` per call
    (in call order), and a final ``AIMessage`` with text and no tool calls. Message ids are
    ``t{turn}-h``, ``t{turn}-a{n}`` and ``t{turn}-tool-{n}``; tool call ids are
    ``call_t{turn}_{n}``. Messages are 20 seconds apart, and a new working session (a day
    later, starting 09:00 UTC) begins every 50 turns.

    About one turn in ten plants a fact (an order, ticket or invoice id, an amount, or a
    path); about one fact in four is corrected by the user at least 30 turns later, and its
    question (category ``correction``) then asks for the new value, with the old one as
    ``superseded``. Every 20 turns or so a tool returns 8,000 to 16,000 characters, some with
    a fact in the middle. 300 turns come to roughly 300,000 characters.

    Examples:
        >>> conv = tool_session(seed=1, turns=12)
        >>> sum(isinstance(m, HumanMessage) for m in conv.messages)
        12
        >>> [m.id for m in conv.messages[:3]]
        ['t1-h', 't1-a1', 't1-tool-1']
        >>> q = conv.questions[0]
        >>> evidence = next(m for m in conv.messages if m.id == q.evidence[0])
        >>> q.answer in evidence.content, q.query.split()[0] in evidence.content
        (True, True)
    """
    if not 1 <= turns <= MAX_TURNS:
        raise ValueError(f"turns must be between 1 and {MAX_TURNS}, got {turns}")
    # Every step draws from one generator, in this order: the session is a function of the seed.
    rng = random.Random(seed)
    giant_turns = _giant_turns(rng, turns)
    facts = _place_facts(rng, turns, giant_turns)
    values = _plant_values(rng, facts)
    _place_corrections(rng, facts, turns, set(giant_turns), values)
    words = Words(rng, values, sorted(v for v in values if v.startswith("/")))
    for fact in facts:
        fact.fields = fact_fields(words, fact)
    writer = _write_turns(words, turns, facts, set(giant_turns))
    return Conversation(
        name or f"tool-session-{seed}",
        writer.messages,
        writer.created_at,
        [question(fact) for fact in facts],
        writer.sessions,
    )


def _giant_turns(rng: random.Random, turns: int) -> list[int]:
    """One turn with a giant output in each stretch of 20 turns, past its first 8."""
    return [
        _TURNS_PER_GIANT * k + rng.randint(8, _TURNS_PER_GIANT - 1)
        for k in range(turns // _TURNS_PER_GIANT)
    ]


def _place_facts(rng: random.Random, turns: int, giant_turns: list[int]) -> list[Fact]:
    """About one fact per ten turns, up to a third of them inside giant outputs; by turn."""
    fact_count = max(1, round(turns / _TURNS_PER_FACT))
    carrying = sorted(rng.sample(giant_turns, min(len(giant_turns) // 3, fact_count)))
    plain = pick_turns(rng, turns, fact_count - len(carrying), set(giant_turns))
    capable = [key for key, kind in KINDS.items() if kind.giant is not None]
    facts = [
        Fact(KINDS[key], turn, "giant")
        for turn, key in zip(carrying, cycled(rng, capable, len(carrying)), strict=True)
    ] + [
        Fact(KINDS[key], turn, rng.choice(("said", "tool")))
        for turn, key in zip(plain, cycled(rng, list(KINDS), len(plain)), strict=True)
    ]
    facts.sort(key=lambda fact: fact.turn)
    return facts


def _plant_values(rng: random.Random, facts: list[Fact]) -> set[str]:
    """Give each fact a subject no other fact has and a value; returns the values taken."""
    subjects = Subjects(rng)
    values: set[str] = set()
    for fact in facts:
        fact.fields = {**subjects.next(fact.kind.subject)}
        fact.fields["value"] = new_value(rng, fact.kind.value, values)
    return values


def _place_corrections(
    rng: random.Random, facts: list[Fact], turns: int, busy: set[int], values: set[str]
) -> None:
    """Correct about one fact in four (keeping at least one uncorrected fact per category), at
    a free turn at least 30 turns after it, with a new value."""
    busy = busy | {fact.turn for fact in facts}
    eligible = [fact for fact in facts if fact.turn + _CORRECTION_GAP <= turns]
    rng.shuffle(eligible)
    wanted = max(2, round(len(facts) / 4))
    left = collections.Counter(fact.kind.category for fact in facts)
    corrected: list[Fact] = []
    for fact in eligible:
        if len(corrected) < wanted and left[fact.kind.category] > 1:
            left[fact.kind.category] -= 1
            corrected.append(fact)
    for fact in sorted(corrected, key=lambda fact: fact.turn):
        later = [t for t in range(fact.turn + _CORRECTION_GAP, turns + 1) if t not in busy]
        if later:
            fact.correction_turn = rng.choice(later)
            busy.add(fact.correction_turn)
            fact.fields["new"] = new_value(rng, fact.kind.value, values)
            fact.fields["old"] = fact.fields["value"]


def _write_turns(words: Words, turns: int, facts: list[Fact], giants: set[int]) -> _Writer:
    """Every turn as messages: a fact, a correction, a giant output or a filler; each fact
    learns the id of the message that states it."""
    by_turn = {fact.turn: fact for fact in facts}
    corrections = {fact.correction_turn: fact for fact in facts if fact.correction_turn}
    fillers = [maker for maker, _ in FILLERS]
    weights = [weight for _, weight in FILLERS]
    writer = _Writer()
    for number in range(1, turns + 1):
        if (number - 1) % _TURNS_PER_SESSION == 0:
            writer.session((number - 1) // _TURNS_PER_SESSION)
        if number in by_turn:
            fact = by_turn[number]
            turn = fact_turn(words, fact)
            human, tools = writer.turn(number, turn)
            fact.evidence = human if turn.evidence_call is None else tools[turn.evidence_call]
        elif number in corrections:
            fact = corrections[number]
            reply = words.pick(PHRASES["corrected_replies"])
            turn = DialogueTurn(fact.kind.correction.format(**fact.fields), (), reply)
            fact.correction_evidence = writer.turn(number, turn)[0]
        elif number in giants:
            writer.turn(number, giant_turn(words, GIANTS[words.pick(list(GIANTS))], None))
        else:
            writer.turn(number, words.rng.choices(fillers, weights)[0](words))
    writer.close()
    return writer
