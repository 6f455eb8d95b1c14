"""Evaluation data: the generated tool-heavy session and JSONL traces."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from ctx_langgraph.datasets import Conversation, QAItem
from ctx_langgraph.errors import DatasetError
from ctx_langgraph.eval.synthetic import MAX_TURNS, TOOL_NAMES, tool_session, tool_specs
from ctx_langgraph.eval.trace import EPOCH, SPACING, load_trace, save_trace

SEEDS = range(5)
START = dt.datetime(2024, 3, 4, 9, 0, tzinfo=dt.timezone.utc)
CATEGORIES = {"identifier", "amount", "path", "correction"}
ARGUMENTS = {spec["name"]: spec["parameters"]["required"] for spec in tool_specs()}


@functools.cache
def session(seed: int, turns: int = 300) -> Conversation:
    return tool_session(seed, turns=turns)


def words(text: str) -> set[str]:
    """Lower-cased runs of letters and digits, the way the history search splits text."""
    return set(re.findall(r"[^\W_]+", text.lower()))


def searchable(message: BaseMessage) -> str:
    """A message's text as a keyword search sees it: content plus tool call names and args."""
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    return " ".join(
        [str(message.content), *(f"{c['name']} {json.dumps(c['args'])}" for c in calls)]
    )


def split_turns(messages: list[BaseMessage]) -> list[list[BaseMessage]]:
    turns: list[list[BaseMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            turns.append([message])
        else:
            assert turns, f"{message.id} comes before the first human message"
            turns[-1].append(message)
    return turns


def turn_of(conv: Conversation) -> dict[str, int]:
    """Message id -> 1-based turn number, from the message order (not from the ids)."""
    return {m.id: n for n, turn in enumerate(split_turns(conv.messages), 1) for m in turn}  # type: ignore[misc]


def check_turn(turn: list[BaseMessage]) -> list[AIMessage]:
    """Check one turn's shape; returns its AI messages that call tools."""
    human, *rest = turn
    assert isinstance(human, HumanMessage) and str(human.content).strip()
    assert rest, f"turn {human.id} has no reply"
    *middle, final = rest
    assert isinstance(final, AIMessage), final.id
    assert not final.tool_calls and str(final.content).strip(), final.id
    callers: list[AIMessage] = []
    index = 0
    while index < len(middle):
        ai = middle[index]
        assert isinstance(ai, AIMessage), ai.id
        assert 1 <= len(ai.tool_calls) <= 3 and not ai.invalid_tool_calls, ai.id
        results = middle[index + 1 : index + 1 + len(ai.tool_calls)]
        assert len(results) == len(ai.tool_calls), ai.id
        for call, result in zip(ai.tool_calls, results, strict=True):
            assert set(call) == {"name", "args", "id", "type"} and call["type"] == "tool_call"
            assert call["name"] in TOOL_NAMES
            assert sorted(call["args"]) == ARGUMENTS[call["name"]]
            assert all(isinstance(v, str) and v for v in call["args"].values())
            assert json.loads(json.dumps(call["args"])) == call["args"]
            assert isinstance(result, ToolMessage), result.id
            assert result.tool_call_id == call["id"] and result.name == call["name"]
            assert result.status in ("success", "error") and str(result.content).strip()
        callers.append(ai)
        index += 1 + len(ai.tool_calls)
    return callers


# -- the generated session: shape ---------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "turns"), [*((seed, 300) for seed in SEEDS), (0, 1), (1, 2), (2, 12), (3, 57)]
)
def test_every_turn_is_a_request_tool_cycles_and_a_final_answer(seed: int, turns: int) -> None:
    conv = session(seed, turns)
    split = split_turns(conv.messages)
    assert len(split) == turns
    callers = [ai for turn in split for ai in check_turn(turn)]
    ids = [m.id for m in conv.messages]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == len(ids)
    call_ids = [call["id"] for ai in callers for call in ai.tool_calls]
    assert len(set(call_ids)) == len(call_ids)
    if turns >= 12:
        assert callers, "a session without any tool call"


@pytest.mark.parametrize("seed", SEEDS)
def test_ids_name_the_turn_and_the_position(seed: int) -> None:
    for number, turn in enumerate(split_turns(session(seed).messages), 1):
        assert turn[0].id == f"t{number}-h"
        ai_ids = [m.id for m in turn if isinstance(m, AIMessage)]
        assert ai_ids == [f"t{number}-a{k}" for k in range(1, len(ai_ids) + 1)]
        tools = [m for m in turn if isinstance(m, ToolMessage)]
        assert [m.id for m in tools] == [f"t{number}-tool-{k}" for k in range(1, len(tools) + 1)]
        assert [m.tool_call_id for m in tools] == [
            f"call_t{number}_{k}" for k in range(1, len(tools) + 1)
        ]


@pytest.mark.parametrize(("seed", "turns"), [(0, 300), (4, 300), (1, 120), (2, 7)])
def test_times_increase_and_sessions_are_working_days(seed: int, turns: int) -> None:
    conv = session(seed, turns)
    assert len(conv.created_at) == len(conv.messages)
    assert conv.created_at[0] == START
    assert all(a < b for a, b in zip(conv.created_at, conv.created_at[1:], strict=False))
    assert len(conv.sessions) == math.ceil(turns / 50)
    assert conv.sessions[0][0] == 0 and conv.sessions[-1][1] == len(conv.messages)
    for (_, stop), (start, _) in zip(conv.sessions, conv.sessions[1:], strict=False):
        assert stop == start
    for day, (start, stop) in enumerate(conv.sessions):
        assert conv.created_at[start] == START + dt.timedelta(days=day)
        steps = {
            b - a
            for a, b in zip(
                conv.created_at[start:stop], conv.created_at[start + 1 : stop], strict=False
            )
        }
        assert steps <= {dt.timedelta(seconds=20)}
        humans = sum(isinstance(m, HumanMessage) for m in conv.messages[start:stop])
        assert isinstance(conv.messages[start], HumanMessage)
        assert humans == (50 if day < len(conv.sessions) - 1 else turns - 50 * day)


def test_a_seed_always_gives_the_same_session() -> None:
    a, b = tool_session(3), tool_session(3)
    assert a.messages == b.messages and a.created_at == b.created_at
    assert a.questions == b.questions and a.sessions == b.sessions
    assert a.name == "tool-session-3"


def test_seeds_give_different_sessions() -> None:
    contents = [[str(m.content) for m in session(seed).messages] for seed in SEEDS]
    answers = [{q.answer for q in session(seed).questions} for seed in SEEDS]
    for i in range(len(contents)):
        for j in range(i + 1, len(contents)):
            assert contents[i] != contents[j]
            assert answers[i] != answers[j]


def test_name_and_turn_limits() -> None:
    assert tool_session(0, turns=3, name="ops").name == "ops"
    for turns in (0, -1, MAX_TURNS + 1):
        with pytest.raises(ValueError, match="turns"):
            tool_session(0, turns=turns)


def test_tool_specs_describe_every_tool_and_are_fresh_copies() -> None:
    specs = tool_specs()
    assert [spec["name"] for spec in specs] == list(TOOL_NAMES)
    assert set(TOOL_NAMES) == {"search_orders", "get_invoice", "read_file", "run_command"}
    for spec in specs:
        assert spec["description"]
        schema = spec["parameters"]
        assert schema["type"] == "object"
        assert list(schema["properties"]) == schema["required"]
        assert all(p["type"] == "string" for p in schema["properties"].values())
        json.dumps(spec)
    specs[0]["parameters"]["required"].append("extra")
    assert tool_specs()[0]["parameters"]["required"] == ["query"]


# -- the generated session: planted facts and questions ------------------------------------


def facts(conv: Conversation) -> list[tuple[QAItem, BaseMessage, BaseMessage | None]]:
    """(question, stating message, correction message or None) for every question."""
    by_id = {m.id: m for m in conv.messages}
    out: list[tuple[QAItem, BaseMessage, BaseMessage | None]] = []
    for q in conv.questions:
        (evidence_id,) = q.evidence
        evidence = by_id[evidence_id]
        if q.category != "correction":
            out.append((q, evidence, None))
            continue
        assert q.superseded is not None
        holders = [m for m in conv.messages if q.superseded in searchable(m)]
        assert len(holders) == 2 and holders[1] is evidence, (q, [m.id for m in holders])
        out.append((q, holders[0], evidence))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_each_answer_is_stated_by_its_evidence_and_nowhere_else(seed: int) -> None:
    conv = session(seed)
    texts = {m.id: searchable(m) for m in conv.messages}
    for q in conv.questions:
        assert len(q.evidence) == 1 and q.evidence[0] in texts
        holders = [mid for mid, text in texts.items() if q.answer in text]
        assert holders == list(q.evidence), q


@pytest.mark.parametrize("seed", SEEDS)
def test_answers_look_like_their_category(seed: int) -> None:
    shapes = {
        "identifier": r"(ORD-\d{5}|TCK-\d{4}|INV-20\d\d-\d{4})",
        "amount": r"\$\d{1,3}(,\d{3})*\.\d\d",
        "path": r"(/[\w.-]+)+\.(yaml|tar\.zst)",
    }
    conv = session(seed)
    for q in conv.questions:
        shape = shapes.get(str(q.category))
        if shape is None:
            assert q.category == "correction" and q.superseded
            assert any(
                re.fullmatch(s, q.answer) and re.fullmatch(s, q.superseded) for s in shapes.values()
            )
        else:
            assert re.fullmatch(shape, q.answer), q
            assert q.superseded is None
        assert q.question.endswith("?") and q.answer not in q.question


@pytest.mark.parametrize("seed", SEEDS)
def test_corrections_come_late_and_state_the_new_value_as_current(seed: int) -> None:
    conv = session(seed)
    turns = turn_of(conv)
    corrected = [(q, s, c) for q, s, c in facts(conv) if c is not None]
    assert 2 <= len(corrected) <= len(conv.questions) // 3
    for q, stating, correction in corrected:
        assert isinstance(correction, HumanMessage)
        text = str(correction.content)
        assert text.startswith("Correction:")
        assert f"{q.answer}, not {q.superseded}" in text
        assert q.superseded is not None and q.superseded in str(stating.content)
        assert q.answer not in str(stating.content)
        assert turns[correction.id] >= turns[stating.id] + 30  # type: ignore[index]


@pytest.mark.parametrize("seed", SEEDS)
def test_each_query_finds_its_evidence_and_only_it(seed: int) -> None:
    conv = session(seed)
    index = {m.id: words(searchable(m)) for m in conv.messages}
    for q in conv.questions:
        assert q.query is not None
        assert 2 <= len(q.query.split()) <= 4
        assert q.answer not in q.query
        terms = words(q.query)
        assert not any(char.isdigit() for char in q.query)
        assert [mid for mid, tokens in index.items() if terms <= tokens] == list(q.evidence), q


@pytest.mark.parametrize("seed", SEEDS)
def test_subject_names_appear_only_in_their_facts_turns(seed: int) -> None:
    conv = session(seed)
    turns = turn_of(conv)
    generic = {"correction", "october", "november", "december", "january", "february"}
    index = {m.id: words(searchable(m)) for m in conv.messages}
    found = facts(conv)
    names = [
        {w.lower() for w in (q.query or "").split() if w[0].isupper()} - generic
        for q, _, _ in found
    ]
    for position, (q, stating, correction) in enumerate(found):
        others = set().union(*(n for i, n in enumerate(names) if i != position))
        own_names = names[position] - others
        assert own_names, q
        own = {turns[stating.id]} | ({turns[correction.id]} if correction else set())  # type: ignore[index]
        for name in own_names:
            where = {turns[mid] for mid, tokens in index.items() if name in tokens}  # type: ignore[index]
            assert where == own, (name, q)


@pytest.mark.parametrize("seed", SEEDS)
def test_categories_and_fact_count(seed: int) -> None:
    conv = session(seed)
    assert len(conv.questions) == 30
    assert {q.category for q in conv.questions} == CATEGORIES
    assert len({q.question for q in conv.questions}) == 30
    small = session(seed, 12)
    assert len(small.questions) == 1 and small.questions[0].category in CATEGORIES - {"correction"}


@pytest.mark.parametrize("seed", SEEDS)
def test_facts_are_spread_with_more_in_the_first_half(seed: int) -> None:
    conv = session(seed)
    turns = turn_of(conv)
    stated = [turns[s.id] for _, s, _ in facts(conv)]  # type: ignore[index]
    first = sum(t <= 150 for t in stated)
    assert first > len(stated) - first
    assert len({(t - 1) // 50 for t in stated}) >= 5
    kinds = {type(s) for _, s, c in facts(conv)}
    assert kinds == {HumanMessage, ToolMessage}


# -- the generated session: giant outputs, parallel and failed calls, size ----------------


@pytest.mark.parametrize("seed", SEEDS)
def test_giant_outputs_some_with_a_fact_in_the_middle(seed: int) -> None:
    conv = session(seed)
    giants = [m for m in conv.messages if len(str(m.content)) >= 8_000]
    assert 13 <= len(giants) <= 16
    assert all(isinstance(m, ToolMessage) and len(str(m.content)) <= 16_000 for m in giants)
    assert all(len(str(m.content)) < 2_000 for m in conv.messages if m not in giants)
    carrying = [(q, s) for q, s, _ in facts(conv) if s in giants]
    assert len(carrying) >= 3
    for q, stating in carrying:
        value = q.superseded if q.category == "correction" else q.answer
        assert value is not None
        position = str(stating.content).index(value) / len(str(stating.content))
        assert 0.3 < position < 0.7, (q, position)


@pytest.mark.parametrize("seed", SEEDS)
def test_parallel_tool_calls(seed: int) -> None:
    conv = session(seed)
    sizes = [len(m.tool_calls) for m in conv.messages if isinstance(m, AIMessage) and m.tool_calls]
    assert sizes.count(2) >= 10 and sizes.count(3) >= 1
    assert max(sizes) == 3


@pytest.mark.parametrize("seed", SEEDS)
def test_failed_calls_are_retried_with_other_arguments(seed: int) -> None:
    failures = 0
    for turn in split_turns(session(seed).messages):
        calls = {c["id"]: c for m in turn if isinstance(m, AIMessage) for c in m.tool_calls}
        for position, message in enumerate(turn):
            if not (isinstance(message, ToolMessage) and message.status == "error"):
                continue
            failures += 1
            assert str(message.content).startswith("Error: ")
            failed = calls[message.tool_call_id]
            later = turn[position + 1 :]
            retries = [
                c
                for m in later
                if isinstance(m, AIMessage)
                for c in m.tool_calls
                if c["name"] == failed["name"] and c["args"] != failed["args"]
            ]
            assert retries, message.id
            results = {m.tool_call_id: m for m in later if isinstance(m, ToolMessage)}
            assert results[str(retries[0]["id"])].status == "success"
    assert failures >= 10


@pytest.mark.parametrize("seed", SEEDS)
def test_size_and_message_lengths(seed: int) -> None:
    conv = session(seed)
    assert 250_000 <= conv.chars <= 450_000
    humans = [len(str(m.content)) for m in conv.messages if isinstance(m, HumanMessage)]
    finals = [
        len(str(m.content)) for m in conv.messages if isinstance(m, AIMessage) and not m.tool_calls
    ]
    for lengths in (humans, finals):
        assert 150 <= statistics.median(lengths) <= 500
        assert min(lengths) >= 40 and max(lengths) <= 600
    assert len(set(humans)) > 100


# -- JSONL traces ---------------------------------------------------------------------------


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    return path


def same_messages(a: list[BaseMessage], b: list[BaseMessage]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert type(x) is type(y)
        assert (x.id, x.content, x.name) == (y.id, y.content, y.name)
        if isinstance(x, AIMessage):
            assert isinstance(y, AIMessage) and x.tool_calls == y.tool_calls
        if isinstance(x, ToolMessage):
            assert isinstance(y, ToolMessage)
            assert (x.tool_call_id, x.status) == (y.tool_call_id, y.status)
    assert a == b


def test_a_generated_session_round_trips(tmp_path: Path) -> None:
    conv = session(1, 120)
    path = tmp_path / "ops.jsonl"
    save_trace(conv, path)
    back = load_trace(path)
    assert back.name == "ops"
    same_messages(back.messages, conv.messages)
    assert back.created_at == conv.created_at
    assert back.questions == conv.questions
    assert back.sessions == conv.sessions and len(conv.sessions) == 3
    assert sum(isinstance(m, ToolMessage) and m.status == "error" for m in back.messages) > 0
    assert load_trace(path, name="other").name == "other"


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    ids = iter(
        draw(st.lists(st.text(min_size=1, max_size=8), min_size=60, max_size=60, unique=True))
    )
    text = st.text(max_size=40)
    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(draw(text), id=next(ids)))
    calls = 0
    for _ in range(draw(st.integers(1, 4))):
        messages.append(
            HumanMessage(
                draw(text), id=next(ids), name=draw(st.none() | st.text(min_size=1, max_size=5))
            )
        )
        for _ in range(draw(st.integers(0, 2))):
            batch = []
            for _ in range(draw(st.integers(1, 3))):
                calls += 1
                args = draw(st.dictionaries(st.text(max_size=6), _json_values, max_size=3))
                batch.append(
                    ToolCall(
                        name=draw(st.sampled_from(TOOL_NAMES)),
                        args=args,
                        id=f"call {calls}",
                        type="tool_call",
                    )
                )
            messages.append(AIMessage(draw(text), id=next(ids), tool_calls=batch))
            for call in batch:
                status = draw(st.sampled_from(["success", "error"]))
                messages.append(
                    ToolMessage(
                        draw(text),
                        id=next(ids),
                        tool_call_id=call["id"],
                        name=call["name"],
                        status=status,
                    )
                )
        messages.append(AIMessage(draw(text), id=next(ids)))
    start = draw(
        st.datetimes(
            min_value=dt.datetime(2000, 1, 1),
            max_value=dt.datetime(2030, 1, 1),
            timezones=st.sampled_from(
                [dt.timezone.utc, dt.timezone(dt.timedelta(hours=-5, minutes=-30))]
            ),
        )
    )
    gaps = draw(st.lists(st.integers(0, 10**6), min_size=len(messages), max_size=len(messages)))
    created = [start + dt.timedelta(microseconds=sum(gaps[: i + 1])) for i in range(len(messages))]
    cuts = sorted(
        draw(st.sets(st.integers(1, len(messages) - 1), max_size=3)) if len(messages) > 1 else set()
    )
    bounds = [0, *cuts, len(messages)]
    sessions = list(itertools.pairwise(bounds))
    known = [m.id for m in messages]
    questions = [
        QAItem(
            draw(text),
            draw(text),
            tuple(draw(st.lists(st.sampled_from(known), max_size=2))),
            category=draw(st.none() | st.sampled_from(sorted(CATEGORIES)) | st.integers(1, 5)),
            query=draw(st.none() | text),
            superseded=draw(st.none() | text),
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    return Conversation("drawn", messages, created, questions, sessions)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(conv=conversations())
def test_any_conversation_round_trips(tmp_path: Path, conv: Conversation) -> None:
    path = tmp_path / "drawn.jsonl"
    save_trace(conv, path)
    back = load_trace(path)
    same_messages(back.messages, conv.messages)
    assert back.created_at == conv.created_at
    assert back.questions == conv.questions
    assert back.sessions == conv.sessions


def test_openai_chat_lines_load(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "chat.jsonl",
        [
            {"role": "system", "content": "You are the billing assistant."},
            "",
            {
                "role": "user",
                "content": "Check ORD-1 and ORD-2.",
                "id": "u1",
                "created_at": "2024-05-01T10:00:00Z",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "search_orders", "arguments": '{"query": "ORD-1"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "search_orders", "arguments": '{"query": "ORD-2"}'},
                    },
                ],
            },
            {
                "role": "tool",
                "content": "ORD-1 shipped",
                "tool_call_id": "c1",
                "name": "search_orders",
            },
            {
                "role": "tool",
                "content": "Error: ORD-2 not found",
                "tool_call_id": "c2",
                "name": "search_orders",
                "status": "error",
            },
            "   ",
            {
                "role": "assistant",
                "content": "ORD-1 shipped; ORD-2 does not exist.",
                "created_at": "2024-05-01T12:00:00+02:00",
            },
            {"question": "Did ORD-1 ship?", "answer": "shipped", "evidence": ["m5"], "category": 1},
        ],
    )
    conv = load_trace(path)
    assert [type(m) for m in conv.messages] == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
        AIMessage,
    ]
    assert [m.id for m in conv.messages] == ["m1", "u1", "m4", "m5", "m6", "m8"]
    ai = conv.messages[2]
    assert isinstance(ai, AIMessage) and ai.content == ""
    assert ai.tool_calls == [
        {"name": "search_orders", "args": {"query": "ORD-1"}, "id": "c1", "type": "tool_call"},
        {"name": "search_orders", "args": {"query": "ORD-2"}, "id": "c2", "type": "tool_call"},
    ]
    failed = conv.messages[4]
    assert (
        isinstance(failed, ToolMessage)
        and failed.status == "error"
        and failed.name == "search_orders"
    )
    # each message carries the time the conversation gives it, not the line's own field
    assert [m.additional_kwargs["created_at"] for m in conv.messages] == [
        when.isoformat() for when in conv.created_at
    ]
    assert conv.created_at == [
        EPOCH,
        dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc),
        dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc) + SPACING,
        dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc) + 2 * SPACING,
        dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc) + 3 * SPACING,
        dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc),
    ]
    assert conv.questions == [QAItem("Did ORD-1 ship?", "shipped", ("m5",), category=1)]
    assert conv.sessions == [(0, 6)]
    assert conv.name == "chat"


def test_langchain_and_openai_lines_mix_with_session_markers(tmp_path: Path) -> None:
    human = {"type": "human", "data": {"content": "hello", "id": "h1"}}
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [
            {"session": "monday"},
            human,
            {"role": "assistant", "content": "hi"},
            {"session": "tuesday"},
            {
                "type": "human",
                "data": {"content": "again"},
                "id": "h2",
                "created_at": "2024-06-02T09:00:00",
            },
            {
                "type": "ai",
                "data": {
                    "content": "",
                    "tool_calls": [{"name": "read_file", "args": {"path": "/x"}, "id": "k1"}],
                },
            },
            {"type": "tool", "data": {"content": "x", "tool_call_id": "k1", "name": "read_file"}},
            {"type": "ai", "data": {"content": "done"}},
        ],
    )
    conv = load_trace(path)
    assert [m.id for m in conv.messages] == ["h1", "m3", "h2", "m6", "m7", "m8"]
    assert [m.content for m in conv.messages] == ["hello", "hi", "again", "", "x", "done"]
    assert conv.sessions == [(0, 2), (2, 6)]
    assert conv.created_at[:2] == [EPOCH, EPOCH + SPACING]
    assert conv.created_at[2] == dt.datetime(2024, 6, 2, 9, tzinfo=dt.timezone.utc)
    assert conv.created_at[5] == conv.created_at[2] + 3 * SPACING


def test_recorded_invalid_tool_calls_and_a_byte_order_mark_are_accepted(tmp_path: Path) -> None:
    ai = {
        "type": "ai",
        "data": {
            "content": "",
            "invalid_tool_calls": [
                {"name": "run_command", "args": "{ls", "id": "bad1", "error": "not JSON"}
            ],
        },
    }
    tool = {
        "type": "tool",
        "data": {"content": "Error: invalid arguments", "tool_call_id": "bad1", "status": "error"},
    }
    path = tmp_path / "recorded.jsonl"
    path.write_text("\ufeff" + "\n".join(json.dumps(x) for x in (_USER, ai, tool)), "utf-8")
    conv = load_trace(path)
    recorded = conv.messages[1]
    assert isinstance(recorded, AIMessage) and recorded.invalid_tool_calls[0]["id"] == "bad1"
    assert [m.id for m in conv.messages] == ["m1", "m2", "m3"]


def _ai_call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "run_command", "arguments": '{"command": "ls"}'},
            }
        ],
    }


_USER = {"role": "user", "content": "hi"}
_BAD_TRACES: dict[str, tuple[list[Any], int, str]] = {
    "invalid JSON": ([_USER, '{"role": "user", "content": '], 2, "invalid JSON"),
    "not an object": ([_USER, "[1, 2]"], 2, "JSON object"),
    "unknown role": (
        [_USER, {"role": "robot", "content": "beep"}],
        2,
        "unknown message role 'robot'",
    ),
    "unknown type": ([{"type": "chatbot", "data": {"content": "x"}}], 1, "unknown message type"),
    "neither message nor question": ([_USER, {"speaker": "x"}], 2, "neither a message"),
    "duplicate id": (
        [{**_USER, "id": "a"}, {"role": "assistant", "content": "x", "id": "a"}],
        2,
        "duplicate message id 'a'",
    ),
    "duplicate generated id": (
        [{**_USER, "id": "m2"}, {"role": "assistant", "content": "x"}],
        2,
        "duplicate message id 'm2'",
    ),
    "unknown evidence": (
        [
            _USER,
            {"role": "assistant", "content": "x"},
            {"question": "q", "answer": "a", "evidence": ["m2", "m9"]},
        ],
        3,
        "'m9'",
    ),
    "unmatched tool result": (
        [_USER, _ai_call("c1"), {"role": "tool", "content": "r", "tool_call_id": "c2"}],
        3,
        "'c2'",
    ),
    "tool result before its call": (
        [_USER, {"role": "tool", "content": "r", "tool_call_id": "c1"}, _ai_call("c1")],
        2,
        "no earlier AI message",
    ),
    "invalid tool arguments": (
        [
            _USER,
            {
                **_ai_call("c1"),
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "run_command", "arguments": "{oops"},
                    }
                ],
            },
        ],
        2,
        "not a valid message",
    ),
    "tool message without call id": (
        [_USER, {"type": "tool", "data": {"content": "x"}}],
        2,
        "not a valid message",
    ),
    "bad created_at": ([_USER, {**_USER, "created_at": "yesterday"}], 2, "ISO 8601"),
    "question without answer": ([_USER, {"question": "q", "evidence": []}], 2, "'answer'"),
    "question with bad evidence": (
        [_USER, {"question": "q", "answer": "a", "evidence": "m1"}],
        2,
        "evidence",
    ),
    "question with unknown key": (
        [_USER, {"question": "q", "answer": "a", "evidense": ["m1"]}],
        2,
        "evidense",
    ),
    "only questions": ([{"question": "q", "answer": "a", "evidence": []}], 1, "no messages"),
    "blank lines only": (["", "   ", ""], 3, "no messages"),
}


@pytest.mark.parametrize("case", sorted(_BAD_TRACES))
def test_malformed_traces_raise_dataset_error_naming_file_and_line(
    tmp_path: Path, case: str
) -> None:
    lines, number, fragment = _BAD_TRACES[case]
    path = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(DatasetError, match=rf"bad\.jsonl, line {number}: .*{re.escape(fragment)}"):
        load_trace(path)


def test_an_empty_or_undecodable_file_raises_dataset_error(tmp_path: Path) -> None:
    assert issubclass(DatasetError, ValueError)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(DatasetError, match=r"empty\.jsonl, line 1: the trace has no messages"):
        load_trace(empty)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(json.dumps(_USER).encode() + b"\n\xff\xfe\n")
    with pytest.raises(DatasetError, match=r"binary\.jsonl, line 2: not UTF-8"):
        load_trace(binary)
