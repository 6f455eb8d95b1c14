"""The conversation's own time: messages carry it, ``ctx_budget`` records it in the history store
(on every backend, sync and async), the loaders pass it, provider requests leave it out, and
lookup records show it with the text's relative time expressions resolved."""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from pathlib import Path
from typing import Any

import fake_providers as fp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from ctx_langgraph import ContextConfig, SQLiteHistoryStore
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.budget.node import make_budget_node
from ctx_langgraph.core.dates import MAX_RESOLVED, day_label, resolve_relative, time_label
from ctx_langgraph.core.timestamps import batch_times, parse_time
from ctx_langgraph.datasets import Conversation, load_locomo, synthetic_conversation
from ctx_langgraph.eval.synthetic import tool_session
from ctx_langgraph.eval.trace import load_trace, save_trace
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.integration import create_context_agent
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.middleware import ContextManagementMiddleware
from ctx_langgraph.testing import MeteringChatModel

UTC = dt.timezone.utc
T0 = dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
T1 = dt.datetime(2023, 5, 9, 8, 30, tzinfo=UTC)
CONFIG = {"configurable": {"thread_id": "t"}}
COUNTER = TiktokenCounter("gpt-4o")


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def budget_node(store: HistoryStore, **config: Any) -> Any:
    return make_budget_node(
        store,
        config=ContextConfig(context_window=100_000, output_reserve=1_000, **config),
        counter=COUNTER,
        compact_node=None,
    )


async def run(node: Any, state: dict[str, Any], mode: str) -> dict[str, Any]:
    """One pass; returns the state after it (the update's context merged in)."""
    if mode == "sync":
        update = node.invoke(state, CONFIG)
    else:
        update = await node.ainvoke(state, CONFIG)
    return {**state, "context": {**state.get("context", {}), **update["context"]}}


async def recorded_times(store: HistoryStore, mode: str) -> dict[str, dt.datetime]:
    """Each event's ``created_at`` as the store reads it back."""
    events = store.read_events("t") if mode == "sync" else await store.aread_events("t")
    return {event.event_id: event.created_at for event in events}


def call(call_id: str, **kwargs: Any) -> AIMessage:
    return AIMessage(
        "", id=f"a-{call_id}", tool_calls=[{"name": "lookup", "args": {}, "id": call_id}], **kwargs
    )


# --------------------------------------------------------------------------- reading a time


@pytest.mark.parametrize(
    "value",
    [
        "2023-05-08T13:56:00Z",
        "2023-05-08T15:56:00+02:00",
        "2023-05-08T13:56",  # naive: UTC
        " 2023-05-08T13:56:00.000z ",
        T0,
        T0.replace(tzinfo=None),
        T0.astimezone(dt.timezone(dt.timedelta(hours=-7))),
        int(T0.timestamp()),
        float(T0.timestamp()),
    ],
)
def test_every_accepted_form_reads_as_the_same_utc_time(value):
    assert parse_time(value) == T0
    assert parse_time(value).tzinfo == UTC


def test_a_date_alone_is_its_midnight_in_utc():
    midnight = dt.datetime(2023, 5, 8, tzinfo=UTC)
    assert parse_time("2023-05-08") == parse_time(dt.date(2023, 5, 8)) == midnight


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("soon", ValueError),
        ("", ValueError),
        ("2023-05-08" * 10, ValueError),  # too long to be a time
        ("2023-13-01", ValueError),
        (True, TypeError),
        (False, TypeError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (1e20, ValueError),
        (int(T0.timestamp() * 1000), ValueError),  # milliseconds are out of range
        (dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5))), ValueError),
        ({"at": "2023-05-08"}, TypeError),
        (["2023-05-08"], TypeError),
    ],
)
def test_a_malformed_time_is_a_typed_error(value, error):
    with pytest.raises(error):
        parse_time(value)


def test_the_first_key_found_wins_additional_kwargs_before_response_metadata():
    message = AIMessage(
        "hi",
        additional_kwargs={"timestamp": "2023-05-08T13:56Z"},
        response_metadata={"created_at": 1_700_000_000},
    )
    assert batch_times([message]).times == [T0]


# --------------------------------------------------------------------------- the record step


async def test_a_message_is_recorded_at_its_own_time_in_each_form(store, mode):
    messages: list[BaseMessage] = [
        HumanMessage("iso", id="iso", additional_kwargs={"created_at": "2023-05-08T15:56+02:00"}),
        AIMessage("epoch", id="epoch", response_metadata={"created_at": int(T1.timestamp())}),
        HumanMessage("naive", id="naive", additional_kwargs={"timestamp": "2023-05-10T09:00"}),
        AIMessage("float", id="float", response_metadata={"timestamp": T1.timestamp() + 0.5}),
        HumanMessage("date", id="date", additional_kwargs={"created_at": "2023-05-11"}),
        AIMessage("aware", id="aware", additional_kwargs={"timestamp": T0}),
    ]
    state = await run(budget_node(store), {"messages": messages}, mode)
    assert await recorded_times(store, mode) == {
        "iso": T0,
        "epoch": T1,
        "naive": dt.datetime(2023, 5, 10, 9, tzinfo=UTC),
        "float": T1 + dt.timedelta(seconds=0.5),
        "date": dt.datetime(2023, 5, 11, tzinfo=UTC),
        "aware": T0,
    }
    assert "record_warnings" not in state["context"].get("report", {})


async def test_a_message_without_a_time_takes_the_one_before_it_else_now(store, mode):
    before = dt.datetime.now(UTC)
    messages: list[BaseMessage] = [
        HumanMessage("no time yet", id="first"),
        HumanMessage("said then", id="dated", additional_kwargs={"created_at": T0.isoformat()}),
        AIMessage("no time of its own", id="after"),
    ]
    await run(budget_node(store), {"messages": messages}, mode)
    times = await recorded_times(store, mode)
    after = dt.datetime.now(UTC)
    assert before - dt.timedelta(seconds=1) <= times["first"] <= after + dt.timedelta(seconds=1)
    assert (times["dated"], times["after"]) == (T0, T0)


async def test_a_tool_result_inherits_its_calls_time_and_a_new_turn_does_not(store, mode):
    node = budget_node(store)
    asked = HumanMessage("look it up", id="h1", additional_kwargs={"created_at": T0.isoformat()})
    called = call("c1", additional_kwargs={"created_at": T1.isoformat()})
    state = await run(node, {"messages": [asked, called]}, mode)
    answered = ToolMessage("found", tool_call_id="c1", id="r1")
    state = await run(node, {**state, "messages": [asked, called, answered]}, mode)
    before = dt.datetime.now(UTC)
    follow_up = HumanMessage("and now?", id="h2")
    await run(node, {**state, "messages": [asked, called, answered, follow_up]}, mode)
    times = await recorded_times(store, mode)
    assert (times["h1"], times["a-c1"], times["r1"]) == (T0, T1, T1)
    assert times["h2"] >= before - dt.timedelta(seconds=1)  # a new turn: now, not T1


async def test_without_any_time_the_store_clock_stamps_the_batch(store, mode):
    before = dt.datetime.now(UTC)
    await run(
        budget_node(store), {"messages": [HumanMessage("a", id="a"), AIMessage("b", id="b")]}, mode
    )
    times = await recorded_times(store, mode)
    assert times["a"] == times["b"] >= before - dt.timedelta(seconds=1)


async def test_a_timestamp_callable_in_the_config_replaces_the_messages_keys(store, mode):
    said = {"h1": T0, "a1": T1}

    def when(message: BaseMessage) -> dt.datetime | None:
        return said.get(str(message.id))

    messages: list[BaseMessage] = [
        HumanMessage("hi", id="h1", additional_kwargs={"created_at": "2001-01-01"}),  # not read
        AIMessage("hello", id="a1"),
        AIMessage("unknown to the callable: the time before it", id="a2"),
    ]
    await run(budget_node(store, timestamp=when), {"messages": messages}, mode)
    assert await recorded_times(store, mode) == {"h1": T0, "a1": T1, "a2": T1}


async def test_malformed_times_never_stop_the_turn_and_are_counted(store, mode, caplog):
    node = budget_node(store)
    messages: list[BaseMessage] = [
        HumanMessage("ok", id="ok", additional_kwargs={"created_at": T0.isoformat()}),
        AIMessage("bool", id="bool", additional_kwargs={"created_at": True}),
        AIMessage("text", id="text", additional_kwargs={"timestamp": "next tuesday"}),
        AIMessage("nan", id="nan", response_metadata={"created_at": math.nan}),
        AIMessage("range", id="range", response_metadata={"timestamp": 10**13}),
    ]
    with caplog.at_level(logging.WARNING, logger="ctx_langgraph.budget.node"):
        state = await run(node, {"messages": messages}, mode)
    assert state["context"]["report"]["record_warnings"] == 4
    warned = [r for r in caplog.records if "could not be read" in r.getMessage()]
    assert len(warned) == 1 and "message bool" in warned[0].getMessage()
    assert state["context"]["report"]["budget"]["decision"] == "proceed"
    times = await recorded_times(store, mode)
    assert [times[m.id] for m in messages if m.id] == [T0] * 5  # each took the time before it
    # the count runs on over the thread's turns
    bad = HumanMessage("later", id="later", additional_kwargs={"created_at": "yesterday"})
    state = await run(node, {**state, "messages": [*messages, bad]}, mode)
    assert state["context"]["report"]["record_warnings"] == 5


async def test_a_datetime_in_a_message_does_not_fork_a_resumed_run(store, mode):
    """The store keeps a datetime in ``additional_kwargs`` as text: a run resumed after a
    half-recorded turn still reads the same message as a replay, not as a fork."""
    node = budget_node(store)
    asked = HumanMessage("hi", id="h1")
    state = await run(node, {"messages": [asked]}, mode)
    reply = AIMessage("hello", id="a1", additional_kwargs={"created_at": T1})
    store.append("t", [reply])  # recorded, then the run died before its checkpoint
    state = await run(node, {**state, "messages": [asked, reply]}, mode)
    assert state["context"]["branch"] == "main"
    assert list(await recorded_times(store, mode)) == ["h1", "a1"]


def test_the_config_refuses_a_timestamp_that_is_not_callable():
    with pytest.raises(TypeError, match="timestamp must be a callable"):
        ContextConfig(timestamp="created_at")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- through the wiring


@tool
def lookup_order(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


def scripted_model() -> MeteringChatModel:
    # a replayed step carries the time it was said, as a conversation's messages do
    step = AIMessage(
        "",
        id="step",
        tool_calls=[{"name": "lookup_order", "args": {"order": "ORD-1"}, "id": "c1"}],
        additional_kwargs={"created_at": T1.isoformat()},
    )
    return MeteringChatModel(replies=[step, "It shipped."])


def asked() -> dict[str, Any]:
    message = HumanMessage(
        "Where is ORD-1?", id="q", additional_kwargs={"created_at": T0.isoformat()}
    )
    return {"messages": [message]}


async def test_create_context_agent_records_the_conversations_time(mode):
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    said_at = {"q": T0 - dt.timedelta(days=1)}  # the callable wins over the message's own key

    def when(message: BaseMessage) -> dt.datetime | None:
        return said_at.get(str(message.id))

    builder = create_context_agent(
        scripted_model(),
        [lookup_order],
        store=store,
        config=ContextConfig(context_window=8_000, output_reserve=1_000, timestamp=when),
        lookup_tool=False,
    )
    graph = builder.compile()
    if mode == "sync":
        graph.invoke(asked(), CONFIG)
    else:
        await graph.ainvoke(asked(), CONFIG)
    times = {e.event_id: e.created_at for e in store.read_events("t")}
    assert times["q"] == T0 - dt.timedelta(days=1)
    store.close()


async def test_the_middleware_records_the_conversations_time(mode):
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    model = scripted_model()
    middleware = ContextManagementMiddleware(
        store,
        model=model,
        tools=[lookup_order],
        config=ContextConfig(context_window=8_000, output_reserve=1_000),
        lookup_tool=False,
    )
    agent = create_agent(model, tools=[lookup_order], middleware=[middleware])
    if mode == "sync":
        agent.invoke(asked(), CONFIG)
    else:
        await agent.ainvoke(asked(), CONFIG)
    times = {e.event_id: e.created_at for e in store.read_events("t")}
    tool_result = next(e for e in store.read_events("t") if e.role == "tool")
    assert times["q"] == T0
    assert tool_result.created_at == T1  # the result of the call said at T1
    store.close()


async def test_the_reply_recorded_on_arrival_keeps_its_time_or_its_questions(mode):
    """ctx_usage records the final reply as it arrives: at the reply's own time, else at the time
    of the message it answers, never at the replay's wall clock."""
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    answer = AIMessage("It shipped.", id="answer", additional_kwargs={"created_at": T1.isoformat()})
    builder = create_context_agent(
        MeteringChatModel(replies=[answer]),
        [],
        store=store,
        config=ContextConfig(context_window=8_000, output_reserve=1_000),
        lookup_tool=False,
    )
    graph = builder.compile()
    second = {
        "messages": [
            HumanMessage("And ORD-2?", id="q2", additional_kwargs={"created_at": T0.isoformat()})
        ]
    }
    builder2 = create_context_agent(
        MeteringChatModel(replies=["Also shipped."]),
        [],
        store=store,
        config=ContextConfig(context_window=8_000, output_reserve=1_000),
        lookup_tool=False,
    )
    graph2 = builder2.compile()
    other = {"configurable": {"thread_id": "t2"}}
    if mode == "sync":
        graph.invoke(asked(), CONFIG)
        graph2.invoke(second, other)
    else:
        await graph.ainvoke(asked(), CONFIG)
        await graph2.ainvoke(second, other)
    times = {e.event_id: e.created_at for e in store.read_events("t")}
    assert times == {"q": T0, "answer": T1}
    (reply,) = [e for e in store.read_events("t2") if e.role == "ai"]
    assert reply.created_at == T0  # no time of its own: the question's
    store.close()


# --------------------------------------------------------------------------- the loaders


def locomo(path: Path) -> Path:
    data: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben", "qa": []}
    data["session_1_date_time"] = "1:56 pm on 8 May, 2023"
    data["session_1"] = [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I climbed yesterday."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice!"},
    ]
    data["session_2_date_time"] = "9:05 am on 2 June, 2023"
    data["session_2"] = [{"speaker": "Ana", "dia_id": "D2:1", "text": "Last week was long."}]
    path.write_text(json.dumps(data))
    return path


def carried(conversation: Conversation) -> list[dt.datetime]:
    return [parse_time(m.additional_kwargs["created_at"]) for m in conversation.messages]


def test_locomo_messages_carry_their_session_time(tmp_path):
    conv = load_locomo(locomo(tmp_path / "c.json"))
    assert (
        carried(conv)
        == conv.created_at
        == [
            T0,
            T0 + dt.timedelta(seconds=30),
            dt.datetime(2023, 6, 2, 9, 5, tzinfo=UTC),
        ]
    )


def test_generated_conversations_carry_their_time():
    for conv in (
        synthetic_conversation(seed=3, sessions=2, turns_per_session=8),
        tool_session(seed=1, turns=24),
    ):
        assert carried(conv) == conv.created_at
        assert len(set(conv.created_at)) > 1


def test_trace_messages_carry_their_time_and_round_trip(tmp_path):
    lines = [
        {
            "role": "user",
            "content": "Where is ORD-1?",
            "id": "u1",
            "created_at": "2023-05-08T13:56Z",
        },
        {"role": "assistant", "content": "Shipped yesterday."},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    conv = load_trace(path)
    assert carried(conv) == conv.created_at
    assert conv.created_at[0] == T0
    save_trace(conv, tmp_path / "back.jsonl")
    back = load_trace(tmp_path / "back.jsonl", name=conv.name)
    assert back.messages == conv.messages and back.created_at == conv.created_at


def test_a_conversation_keeps_one_time_per_message():
    messages = [HumanMessage("a", id="a"), AIMessage("b", id="b")]
    with pytest.raises(ValueError, match="2 messages but 1 created_at"):
        Conversation("c", messages, [T0])
    untimed = Conversation("c", messages, [])
    assert untimed.messages == messages  # no times given: the messages are left as they are


async def test_a_replayed_conversation_is_recorded_at_its_own_days(store, mode, tmp_path):
    conv = load_locomo(locomo(tmp_path / "c.json"))
    node = budget_node(store)
    state: dict[str, Any] = {"messages": []}
    for _, stop in conv.sessions:  # one session per turn, as a replay feeds them
        state = await run(node, {**state, "messages": conv.messages[:stop]}, mode)
    times = await recorded_times(store, mode)
    assert [times[str(m.id)] for m in conv.messages] == conv.created_at


def test_provider_requests_leave_the_time_out():
    stamp = "2023-05-08T13:56:00+00:00"
    messages: list[BaseMessage] = [
        HumanMessage("Where is ORD-1?", additional_kwargs={"created_at": stamp}),
        AIMessage("Checking.", additional_kwargs={"created_at": stamp}),
        HumanMessage("Thanks.", additional_kwargs={"timestamp": stamp}),
    ]
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    responses_usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    anthropic_usage = {"input_tokens": 10, "output_tokens": 2}
    with fp.serve() as server:
        server.json("/v1/chat/completions", fp.chat_completion("c1", usage))
        server.json("/v1/responses", fp.responses_body("r1", responses_usage))
        server.json("/v1/messages", fp.anthropic_message("m1", anthropic_usage))
        common = {"base_url": server.url + "/v1", "api_key": "test-key", "max_retries": 0}
        ChatOpenAI(model="gpt-4o", **common).invoke(messages)
        reply = ChatOpenAI(model="gpt-4.1", use_responses_api=True, **common).invoke(messages)
        ChatAnthropic(
            model="claude-sonnet-4-5", base_url=server.url, api_key="test-key", max_retries=0
        ).invoke(messages)
    sent = {path: json.dumps(body) for path, body in server.requests}
    assert set(sent) == {"/v1/chat/completions", "/v1/responses", "/v1/messages"}
    for path, body in sent.items():
        assert "Where is ORD-1?" in body and stamp not in body, path
    # the Responses API's own reply time is read as the reply's time
    assert batch_times([reply]).times == [dt.datetime.fromtimestamp(1_700_000_000, UTC)]


# --------------------------------------------------------------------------- lookup records


async def lookup_page(store: HistoryStore, mode: str, **args: Any) -> dict[str, Any]:
    lookup = make_history_lookup_tool(store, counter=COUNTER)
    cfg = {"configurable": {"thread_id": "t"}}
    text = (
        lookup.invoke(args, config=cfg)
        if mode == "sync"
        else await lookup.ainvoke(args, config=cfg)
    )
    return json.loads(text)


def seed(store: HistoryStore) -> None:
    store.append(
        "t",
        [
            HumanMessage("I moved the server yesterday; last week was a mess.", id="moved"),
            AIMessage("Noted: the server move is done.", id="noted"),
            HumanMessage("Two days ago the disk failed, and last year too.", id="disk"),
            AIMessage("The disk was replaced on a Friday.", id="replaced"),
        ],
        created_at=[T0, T0, T0 + dt.timedelta(days=1), T0 + dt.timedelta(days=2)],
    )


async def test_a_lookup_record_shows_its_time_day_and_resolved_expressions(store, mode):
    seed(store)
    page = await lookup_page(store, mode, query="server")
    records = {r["seq"]: r for r in page["records"]}
    moved, noted = records[1], records[2]
    assert moved == {
        "hit": True,
        "seq": 1,
        "time": "Mon 8 May 2023 13:56",
        "role": "user",
        "text": "I moved the server yesterday; last week was a mess.",
        "resolved": {
            "yesterday": "Sun 7 May 2023",
            "last week": "the week before Mon 8 May 2023 (Mon 1 - Sun 7 May 2023)",
        },
    }
    assert "resolved" not in noted  # no field when the text has no relative expression
    disk = next(
        r for r in (await lookup_page(store, mode, query="disk failed"))["records"] if r["seq"] == 3
    )
    assert disk["time"] == "Tue 9 May 2023 13:56"
    assert disk["resolved"] == {"two days ago": "Sun 7 May 2023", "last year": "2022"}


async def test_a_date_range_lookup_takes_dates_alone(store, mode):
    seed(store)
    page = await lookup_page(store, mode, since="2023-05-09", until="2023-05-10")
    assert [r["seq"] for r in page["records"]] == [3]
    page = await lookup_page(store, mode, since="2023-05-08T13:56Z", until="2023-05-09")
    assert [r["seq"] for r in page["records"]] == [1, 2]


# --------------------------------------------------------------------------- the resolver


@pytest.mark.parametrize(
    ("said", "text", "resolved"),
    [
        (
            dt.date(2023, 5, 8),
            "last weekend",
            "the weekend before Mon 8 May 2023 (Sat 6 - Sun 7 May 2023)",
        ),
        (
            dt.date(2023, 10, 2),
            "last weekend",
            "the weekend before Mon 2 October 2023 (Sat 30 September - Sun 1 October 2023)",
        ),
        (
            dt.date(2023, 1, 2),
            "last weekend",
            "the weekend before Mon 2 January 2023 (Sat 31 December 2022 - Sun 1 January 2023)",
        ),
        (
            dt.date(2023, 5, 7),
            "last Sunday",
            "Sun 30 April 2023, the Sunday before Sun 7 May 2023",
        ),  # said on a Sunday
        (dt.date(2023, 5, 7), "next Sunday", "Sun 14 May 2023, the Sunday after Sun 7 May 2023"),
        (dt.date(2023, 5, 10), "this Monday", "Mon 8 May 2023"),
        (
            dt.date(2023, 5, 10),
            "broke down last fri on the way",
            "Fri 5 May 2023, the Friday before Wed 10 May 2023",
        ),
        (dt.date(2023, 5, 10), "next Thurs", "Thu 11 May 2023, the Thursday after Wed 10 May 2023"),
        (dt.date(2023, 1, 15), "last month", "December 2022"),
        (dt.date(2023, 3, 31), "a month ago", "February 2023"),
        (dt.date(2024, 2, 29), "a year ago", "2023"),
        (dt.date(2023, 5, 8), "a couple of days ago", "around Sat 6 May 2023"),
        (dt.date(2023, 5, 8), "several years ago", "around 2019"),
        (
            dt.date(2023, 5, 8),
            "in 3 weeks",
            "three weeks after Mon 8 May 2023 (Mon 29 May - Sun 4 June 2023)",
        ),
        (
            dt.date(2023, 5, 8),
            "two weeks from now",
            "two weeks after Mon 8 May 2023 (Mon 22 - Sun 28 May 2023)",
        ),
        (
            dt.date(2023, 7, 17),
            "two weekends ago",
            "two weekends before Mon 17 July 2023 (Sat 8 - Sun 9 July 2023)",
        ),
        (
            dt.date(2023, 8, 23),
            "this week",
            "the week of Wed 23 August 2023 (Mon 21 - Sun 27 August 2023)",
        ),
        (
            dt.date(2023, 6, 9),
            "we met up last week",
            "the week before Fri 9 June 2023 (Mon 29 May - Sun 4 June 2023)",
        ),
        (dt.date(2023, 5, 8), "The Day Before\nYesterday", "Sat 6 May 2023"),
        (dt.date(2023, 5, 8), "tonight", "Mon 8 May 2023"),
        (dt.date(2023, 5, 8), "last night", "Sun 7 May 2023"),
    ],
)
def test_the_resolver_table(said, text, resolved):
    assert list(resolve_relative(text, said).values()) == [resolved]


def test_the_resolver_keeps_a_record_short():
    text = " ".join(f"{n} days ago" for n in range(1, 30)) + " yesterday yesterday"
    found = resolve_relative(text, dt.date(2023, 5, 8))
    assert len(found) == MAX_RESOLVED
    assert list(found)[:2] == ["1 days ago", "2 days ago"]


def test_words_that_only_look_like_time_are_left_alone():
    text = "This sun is hot; I sat next to her; the last time; next steps; yesterdays."
    assert resolve_relative(text, dt.date(2023, 5, 8)) == {}


def test_times_are_shown_to_the_minute_in_utc():
    assert time_label(T0.astimezone(dt.timezone(dt.timedelta(hours=-9)))) == "Mon 8 May 2023 13:56"
    assert day_label(T0) == "Mon 8 May 2023"


FRAGMENTS = st.sampled_from(
    [
        "yesterday", "today", "tomorrow", "last", "this", "next", "week", "weekend", "month",
        "year", "sunday", "fri", "thurs", "ago", "in", "from now", "the day before", "a few",
        "a couple of", "several", "9999", "0", "12", "two", "days", "weeks", "months", "years",
        " ", "\n", "'s",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    text=st.text() | st.lists(FRAGMENTS, max_size=12).map(" ".join),
    said=st.dates() | st.datetimes(timezones=st.just(UTC)),
)
def test_the_resolver_never_raises_on_any_text(text, said):
    resolved = resolve_relative(text, said)
    assert len(resolved) <= MAX_RESOLVED
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in resolved.items())
