"""Long conversations to replay (:class:`Conversation`): the LoCoMo format and a seeded
synthetic generator."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctx_langgraph.errors import DatasetError

__all__ = ["TIME_KEY", "Conversation", "QAItem", "load_locomo", "stamped", "synthetic_conversation"]

_LOCOMO_TIME = "%I:%M %p on %d %B, %Y"
T = TypeVar("T")


@dataclass(frozen=True)
class QAItem:
    """A question about the conversation, its answer, and the message ids that support it."""

    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int | str | None = None
    """LoCoMo: 1-5 (5: adversarial); generated sessions: ``identifier``, ``amount``, ..."""
    query: str | None = None
    """Keywords that find the evidence (synthetic data only)."""
    superseded: str | None = None
    """Correction questions: the earlier value the answer replaced."""

    @property
    def answerable(self) -> bool:
        """False for LoCoMo's adversarial questions (category 5), whose ``answer`` is a trap."""
        return self.category != 5


TIME_KEY = "created_at"
"""Where a conversation's message carries its time: ``additional_kwargs["created_at"]`` (ISO
8601), recorded as the event's time and never sent to a provider."""


@dataclass(frozen=True)
class Conversation:
    """A conversation to replay: messages with stable ids, when each was said, and questions.

    Each message is given its ``created_at`` time (:data:`TIME_KEY`), so a replay records the
    conversation's own time; ``created_at=[]`` leaves the messages as they are.

    Examples:
        >>> conv = Conversation("c", [HumanMessage("hi", id="m1")],
        ...                     [dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc)])
        >>> conv.messages[0].additional_kwargs
        {'created_at': '2023-05-08T13:56:00+00:00'}

    Raises:
        ValueError: ``created_at`` has times but not one per message.
    """

    name: str
    messages: list[BaseMessage]
    created_at: list[dt.datetime]
    questions: list[QAItem] = field(default_factory=list)
    sessions: list[tuple[int, int]] = field(default_factory=list)
    """(start, stop) message index ranges, one per session."""

    def __post_init__(self) -> None:
        if not self.created_at:
            return
        if len(self.created_at) != len(self.messages):
            raise ValueError(
                f"conversation {self.name!r}: {len(self.messages)} messages but "
                f"{len(self.created_at)} created_at times (one per message, or none)"
            )
        object.__setattr__(
            self,
            "messages",
            [stamped(m, when) for m, when in zip(self.messages, self.created_at, strict=True)],
        )

    @property
    def chars(self) -> int:
        return sum(len(str(m.content)) for m in self.messages)


def load_locomo(path: str | Path) -> Conversation:
    """Load one LoCoMo conversation file: ``speaker_a`` is the human side, message ids are the
    dialog ids (``D3:12``) the QA evidence names, turns are 30 seconds apart.

    Raises:
        DatasetError: the file cannot be read, is not JSON or not one LoCoMo conversation (the
            message names the file and the field).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the file ({exc.strerror or exc})") from exc
    except ValueError as exc:  # not UTF-8, or not JSON
        raise DatasetError(f"{path}: not a JSON file ({exc})") from exc
    if not isinstance(data, dict):
        raise _not_locomo(path, f"the file holds a JSON {_json_type(data)}, not an object")
    speaker_a = _field(path, data, "speaker_a", str)
    messages: list[BaseMessage] = []
    created: list[dt.datetime] = []
    sessions: list[tuple[int, int]] = []
    seen: set[str] = set()
    number = 1
    while f"session_{number}" in data:
        key = f"session_{number}"
        stamp = _field(path, data, f"{key}_date_time", str)
        try:
            when = dt.datetime.strptime(stamp, _LOCOMO_TIME).replace(tzinfo=dt.timezone.utc)
        except ValueError:
            raise _not_locomo(
                path, f"{key}_date_time {stamp!r} is not a time like '1:47 pm on 18 May, 2023'"
            ) from None
        start = len(messages)
        for offset, turn in enumerate(_field(path, data, key, list)):
            where = f"{key}[{offset}]"
            if not isinstance(turn, dict):
                raise _not_locomo(path, f"{where} is a JSON {_json_type(turn)}, not a turn object")
            text = _field(path, turn, "text", str, where)
            speaker = _field(path, turn, "speaker", str, where)
            dia_id = _field(path, turn, "dia_id", str, where)
            if dia_id in seen:
                raise _not_locomo(path, f"{where}.dia_id {dia_id!r} is used by an earlier turn")
            seen.add(dia_id)
            if turn.get("blip_caption"):
                text = f"{text} [image: {turn['blip_caption']}]"
            cls = HumanMessage if speaker == speaker_a else AIMessage
            messages.append(cls(text, id=dia_id, name=speaker))
            created.append(when + dt.timedelta(seconds=30 * offset))
        sessions.append((start, len(messages)))
        number += 1
    if not messages:
        raise _not_locomo(path, "no turn in it (no session_1, or only empty sessions)")
    questions: list[QAItem] = []
    for index, item in enumerate(_field(path, data, "qa", list, default=[])):
        where = f"qa[{index}]"
        if not isinstance(item, dict):
            raise _not_locomo(path, f"{where} is a JSON {_json_type(item)}, not a question object")
        category = item.get("category")
        if category is not None and (
            isinstance(category, bool) or not isinstance(category, int | str)
        ):
            raise _not_locomo(
                path, f"{where}.category is a JSON {_json_type(category)}, not a number or string"
            )
        questions.append(
            QAItem(
                question=_field(path, item, "question", str, where),
                answer=str(item.get("answer", item.get("adversarial_answer", ""))),
                evidence=tuple(map(str, _field(path, item, "evidence", list, where, default=[]))),
                category=category,
            )
        )
    return Conversation(path.stem, messages, created, questions, sessions)


_JSON_TYPES: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), "number")


def _not_locomo(path: Path, problem: str) -> DatasetError:
    return DatasetError(
        f"{path}: not a LoCoMo conversation: {problem}; one conversation is an object with "
        "speaker_a, speaker_b, session_1 (a list of {speaker, dia_id, text} turns), "
        "session_1_date_time, ... and qa"
    )


_MISSING = object()


def _field(
    path: Path,
    data: dict[str, Any],
    key: str,
    kind: type[T],
    where: str = "",
    default: object = _MISSING,
) -> T:
    name = f"{where}.{key}" if where else key
    value = data.get(key, default)
    if value is _MISSING:
        raise _not_locomo(path, f"{name} is missing")
    if not isinstance(value, kind):
        raise _not_locomo(
            path, f"{name} is a JSON {_json_type(value)}, not a JSON {_JSON_TYPES[kind]}"
        )
    return value


_NAMES = ("Maya", "Jon")
_SMALL_TALK = (
    "How was your week? Mine was busy with work and the garden.",
    "I finally tried that new bakery on the corner, the croissants were great.",
    "We watched a documentary about deep sea creatures last night.",
    "My sister called, she says hi and wants to visit in the spring.",
    "The weather has been so strange lately, sunny one hour and raining the next.",
    "I have been reading a novel about a lighthouse keeper, it is slow but lovely.",
    "Work is fine, we are moving offices next month so everything is in boxes.",
    "Went for a long run by the river this morning, felt amazing.",
    "I am thinking about learning to play the piano again.",
    "Did you see the match on Sunday? What a comeback in the last minute.",
    "Our neighbour adopted a puppy and it barks at every leaf.",
    "I cooked a lentil curry yesterday and it turned out better than expected.",
)
_FACTS = (
    (
        "My new apartment is at {n} Linden Street, third floor.",
        "Where is Maya's new apartment?",
        "{n} Linden Street",
        "Linden Street",
    ),
    (
        "The adoption agency interview is booked for {day} June.",
        "When is the adoption agency interview?",
        "{day} June",
        "adoption agency",
    ),
    (
        "I paid ${amount} for the pottery course, materials included.",
        "How much did the pottery course cost?",
        "${amount}",
        "pottery course",
    ),
    (
        "My flight confirmation code is {code}, keep it in case I lose my phone.",
        "What is the flight confirmation code?",
        "{code}",
        "confirmation code",
    ),
    (
        "The band we saw is called {band}, they play every Thursday.",
        "What is the band called?",
        "{band}",
        "band Thursday",
    ),
    (
        "My manager's name is {boss}, she starts on Monday.",
        "What is the new manager's name?",
        "{boss}",
        "manager",
    ),
)
_BANDS = ("The Velvet Owls", "Paper Lanterns", "North Quay", "Glass Harbor")
_BOSSES = ("Priya Raman", "Elena Sousa", "Grace Okafor", "Hana Sato")


def synthetic_conversation(
    seed: int = 0, *, sessions: int = 19, turns_per_session: int = 32
) -> Conversation:
    """A LoCoMo-sized two-person conversation with planted facts and questions about them,
    deterministic for a seed (``ValueError`` when there are fewer turns than facts).

    Examples:
        >>> conv = synthetic_conversation(seed=1, sessions=3, turns_per_session=10)
        >>> len(conv.messages), len(conv.questions)
        (30, 6)
        >>> conv.messages[0].id
        'D1:1'
    """
    total = sessions * turns_per_session
    if sessions < 1 or turns_per_session < 1 or total < len(_FACTS):
        raise ValueError(
            f"a synthetic conversation needs at least one session, one turn per session and "
            f"{len(_FACTS)} turns in all (one per planted fact), got {sessions} session(s) of "
            f"{turns_per_session} turn(s)"
        )
    rng = random.Random(seed)
    planted_at = dict(zip(rng.sample(range(total), len(_FACTS)), range(len(_FACTS)), strict=True))
    values = {
        "n": rng.randint(10, 99),
        "day": rng.randint(2, 28),
        "amount": f"{rng.randint(120, 980)}.{rng.randint(0, 99):02d}",
        "code": "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6)),
        "band": rng.choice(_BANDS),
        "boss": rng.choice(_BOSSES),
    }
    messages: list[BaseMessage] = []
    created: list[dt.datetime] = []
    questions: list[QAItem] = []
    ranges: list[tuple[int, int]] = []
    when = dt.datetime(2023, 5, 8, 18, 0, tzinfo=dt.timezone.utc)
    for session in range(1, sessions + 1):
        start = len(messages)
        for turn in range(1, turns_per_session + 1):
            index = len(messages)
            speaker = _NAMES[(turn - 1) % 2]
            message_id = f"D{session}:{turn}"
            if index in planted_at:
                statement, question, answer, query = _FACTS[planted_at[index]]
                text = statement.format(**values)
                questions.append(
                    QAItem(question, answer.format(**values), (message_id,), query=query)
                )
            else:
                text = rng.choice(_SMALL_TALK)
            cls = HumanMessage if speaker == _NAMES[0] else AIMessage
            messages.append(cls(text, id=message_id, name=speaker))
            created.append(when + dt.timedelta(seconds=30 * (turn - 1)))
        ranges.append((start, len(messages)))
        when += dt.timedelta(days=rng.randint(5, 16), hours=rng.randint(-3, 3))
    return Conversation(f"synthetic-{seed}", messages, created, questions, ranges)


def stamped(message: BaseMessage, when: dt.datetime) -> BaseMessage:
    """``message`` carrying ``when`` as its time (a copy, unless it carries that time already).

    Examples:
        >>> stamped(HumanMessage("hi"), dt.datetime(2023, 5, 8)).additional_kwargs
        {'created_at': '2023-05-08T00:00:00'}
    """
    stamp = when.isoformat()
    if message.additional_kwargs.get(TIME_KEY) == stamp:
        return message
    kwargs = {**message.additional_kwargs, TIME_KEY: stamp}
    return message.model_copy(update={"additional_kwargs": kwargs})


def batches(conversation: Conversation) -> Sequence[tuple[list[BaseMessage], list[dt.datetime]]]:
    """The conversation split by session, as (messages, created_at) pairs to append."""
    return [
        (conversation.messages[start:stop], conversation.created_at[start:stop])
        for start, stop in conversation.sessions
    ]
