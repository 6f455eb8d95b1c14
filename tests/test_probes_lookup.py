"""Hostile arguments, forged cursors and failing stores never raise out of the history lookup.

Every case calls the tool with a tool call (so the result is a ``ToolMessage``), the sync and
the async way, on every backend, and checks that the model gets either a correct page or a short
message saying what was wrong and how to call the tool. The last tests run whole agents
(``create_context_agent`` and ``ContextManagementMiddleware``) whose scripted model sends such
arguments: the run completes and the model reads the messages.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from conftest import BACKENDS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from psycopg import sql

from ctx_langgraph import ContextConfig, ContextManagementMiddleware, create_context_agent
from ctx_langgraph.budget.counters import default_counter
from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, Scope, SQLiteHistoryStore
from ctx_langgraph.lookup import NOTICE, make_history_lookup_tool
from ctx_langgraph.testing import MeteringChatModel

COUNTER = default_counter("gpt-4o")
MAX_TOKENS = 4000
T0 = dt.datetime(2024, 5, 1, 9, 0, tzinfo=dt.timezone.utc)
PLANTED = "INV-2024-0042"
FORK = "main~3-abcd"
MANIFEST = "".join(
    f"manifest line {n}: crate {n * 37 % 1009}, seal S-{n:05d}\n" for n in range(120)
)
USER_SEQS = [1, *range(4, 14), 15]
"""The user messages of thread t1 (see ``seed``)."""
GUIDANCE_CHARS = 700
"""A message to the model stays short, whatever it was sent."""
INT64 = 2**63


def history() -> list[BaseMessage]:
    """Thread t1: seq 1 the planted invoice, 2-3 a tool call and its result, 4-13 notes,
    14 a long tool output, 15 a thank-you."""
    return [
        HumanMessage(f"Please pay invoice {PLANTED} to ACME GmbH.", id="plant"),
        AIMessage("", id="call", tool_calls=[{"name": "track", "args": {"order": 7}, "id": "c1"}]),
        ToolMessage("order 7 is at depot 3", tool_call_id="c1", name="track", id="result"),
        *(HumanMessage(f"note {n}: the weather was fine", id=f"note{n}") for n in range(10)),
        ToolMessage(MANIFEST, tool_call_id="c2", name="manifest", id="big"),
        HumanMessage("Thanks, that is all.", id="thanks"),
    ]


def seed(store: HistoryStore) -> None:
    messages = history()
    store.append("t1", messages, created_at=[T0 + dt.timedelta(minutes=n) for n in range(15)])
    store.append("t2", [HumanMessage(f"Secret of t2: invoice {PLANTED}.", id="t2-secret")])
    fork = Scope("t1", branch=FORK)
    store.create_branch(fork, "main", 3)
    store.append(fork, HumanMessage(f"On the fork: invoice {PLANTED} disputed.", id="fork-1"))


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def probed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[HistoryStore]:
    """One seeded store per backend, shared by the read-only probes of this module."""
    database: tuple[str, str] | None = None
    store: HistoryStore
    if request.param == "sqlite_file":
        store = SQLiteHistoryStore.from_path(tmp_path_factory.mktemp("probes") / "h.sqlite")
    elif request.param == "sqlite_memory":
        store = SQLiteHistoryStore.from_path(":memory:")
    else:
        server = request.getfixturevalue("pg_server_dsn")
        database = (server, f"ctx_probe_{uuid.uuid4().hex[:12]}")
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database[1])))
        dsn = psycopg.conninfo.make_conninfo(server, dbname=database[1])
        store = PostgresHistoryStore.from_conn_string(dsn, max_size=4)
    store.setup()
    seed(store)
    yield store
    await store.aclose()
    if database is not None:
        with psycopg.connect(database[0], autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(database[1])
                )
            )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def memory_probed() -> AsyncIterator[HistoryStore]:
    """A seeded SQLite store in memory, for the cases no store is asked about."""
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    seed(store)
    yield store
    await store.aclose()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def run_config(thread: str = "t1", **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **configurable}}


async def call(
    tool: BaseTool, mode: str, args: Any, cfg: dict[str, Any] | None = None
) -> ToolMessage:
    """The tool called as a tool node calls it; whatever the arguments, a ToolMessage."""
    tool_call = {"name": tool.name, "args": args, "id": "probe-1", "type": "tool_call"}
    cfg = cfg or run_config()
    if mode == "sync":
        result = tool.invoke(tool_call, config=cfg)
    else:
        result = await tool.ainvoke(tool_call, config=cfg)
    assert isinstance(result, ToolMessage)
    assert result.tool_call_id == "probe-1"
    return result


def guidance(message: ToolMessage, *phrases: str) -> str:
    """The message is a short error text for the model, naming what was wrong."""
    text = message.content
    assert isinstance(text, str)
    assert message.status == "error", text[:300]
    assert not text.startswith("{")
    assert len(text) <= GUIDANCE_CHARS, text[:300]
    assert "\x00" not in text
    text.encode("utf-8")  # no lone surrogate: the message can be recorded and sent on
    for phrase in phrases:
        assert phrase in text, text
    return text


def page(message: ToolMessage) -> dict[str, Any]:
    """The message is a page of quoted records within the cap."""
    text = message.content
    assert isinstance(text, str)
    assert message.status == "success", text[:300]
    result = json.loads(text)
    assert result["notice"] == NOTICE
    assert COUNTER.count_text(text) <= MAX_TOKENS
    return result


def seqs(message: ToolMessage) -> list[int]:
    return [record["seq"] for record in page(message)["records"]]


def hits(result: dict[str, Any]) -> list[tuple[int, str]]:
    """The seq and text of a ranked page's matches (not the turns shown after them)."""
    return [(record["seq"], record["text"]) for record in result["records"] if record.get("hit")]


def lookup_tool(store: HistoryStore) -> BaseTool:
    return make_history_lookup_tool(store, max_tokens=MAX_TOKENS, counter=COUNTER)


def cursor_of(payload: Any) -> str:
    return encode_raw(json.dumps(payload))


def encode_raw(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode().rstrip("=")


# --------------------------------------------------------------------------- hostile arguments

Expect = list[int] | tuple[str, ...] | None
"""A list: the page's seqs. A tuple: phrases of the message the model gets. None: a page of
the first records (no filter at all)."""

TIME = "is not an ISO-8601 time"
BAD_CHAR = "contains a NUL or an unpaired surrogate character"
SCHEMA = ("invalid history lookup arguments", "as whole numbers")

ARGUMENTS: dict[str, tuple[Any, Expect]] = {
    # seq bounds past what a 64-bit column holds select exactly what they say
    "min_seq_2_pow_63": ({"min_seq": INT64}, []),
    "max_seq_minus_10_pow_30": ({"max_seq": -(10**30)}, []),
    "both_bounds_past_int64": (
        {"min_seq": -(10**30), "max_seq": 10**30, "role": "user"},
        USER_SEQS,
    ),
    "max_seq_2_pow_64": ({"min_seq": 3, "max_seq": 2**64, "role": "tool"}, [3, 14]),
    "min_seq_int64_max": ({"min_seq": INT64 - 1}, []),
    "min_seq_int64_min": ({"min_seq": -INT64, "max_seq": 2}, [1, 2]),
    "min_seq_just_below_int64_min": ({"min_seq": -INT64 - 1, "max_seq": 1}, [1]),
    "newest_first_max_seq_2_pow_63": (
        {"max_seq": INT64, "role": "user", "newest_first": True},
        USER_SEQS[::-1],
    ),
    "max_seq_zero": ({"max_seq": 0}, []),
    # exact names: bounded, and without characters no database holds
    "tool_name_100k_chars": ({"tool_name": "t" * 100_000}, ("tool_name is 100000 characters",)),
    "tool_name_past_the_like_limit_in_bytes": (
        {"tool_name": "é" * 25_001},
        ("the limit is 200",),
    ),
    "tool_name_201_chars": ({"tool_name": "t" * 201}, ("the limit is 200",)),
    "tool_name_200_chars": ({"tool_name": "t" * 200}, []),
    "tool_name_nul": ({"tool_name": "track\x00"}, (BAD_CHAR, "tool_name=")),
    "tool_name_lone_surrogate": ({"tool_name": "tr\ud800ack"}, (BAD_CHAR,)),
    "tool_name_padded": ({"tool_name": "  track "}, [2, 3]),
    "handle_nul": ({"handle": "history:plant\x00"}, (BAD_CHAR, "handle=")),
    "handle_lone_surrogate": ({"handle": "history:\udfff"}, (BAD_CHAR,)),
    "handle_100k_chars": ({"handle": "history:" + "h" * 100_000}, ("the limit is 1000",)),
    "handle_prefix_only": ({"handle": "history:"}, ("names no record",)),
    "handle_unknown_long": ({"handle": "x" * 900}, ("no record history:xxx",)),
    "handle_known": ({"handle": "history:plant"}, [1]),
    "role_100k_chars": ({"role": "r" * 100_000}, ("is unknown: use user, assistant",)),
    "role_nul": ({"role": "user\x00"}, ("is unknown",)),
    # queries: NUL and lone surrogates are not letters, like punctuation
    "query_with_nul_and_surrogate": ({"query": f"invoice\x00{PLANTED}\ud800"}, [1, 2]),
    "query_only_glue_words": ({"query": "what was the"}, ("only glue words",)),
    # several queries: one ranking, each record once, each hit followed by the turn after it
    # (the planted invoice, then the call; the depot result, then the first note)
    "query_list_two": ({"query": ["invoice", "depot"]}, [1, 2, 3, 4]),
    "query_list_blank_and_glue": ({"query": [" ", "the"]}, ("only glue words",)),
    "query_list_of_six": ({"query": ["invoice"] * 6}, ("lists 6 searches; the limit is 5",)),
    "query_only_nul_and_surrogate": ({"query": "\x00 \ud800"}, ("has no searchable words",)),
    "query_100k_chars": ({"query": "word " * 20_000}, ("the limit is 200",)),
    # times: parsed safely, the calendar's ends included
    "since_100k_chars": ({"since": "2024" * 25_000}, (TIME,)),
    "since_year_1_east_of_utc": ({"since": "0001-01-01T00:00:00+23:59", "role": "user"}, USER_SEQS),
    "until_year_1_east_of_utc": ({"until": "0001-01-01T00:00:00+23:59"}, []),
    "since_year_9999_west_of_utc": ({"since": "9999-12-31T23:59:59-23:59"}, []),
    "until_year_9999_west_of_utc": (
        {"until": "9999-12-31T23:59:59-23:59", "role": "user"},
        USER_SEQS,
    ),
    "since_year_10000": ({"since": "10000-01-01"}, (TIME,)),
    "since_offset_24_hours": ({"since": "2024-05-01T00:00:00+24:00"}, (TIME,)),
    "until_nul": ({"until": "2024-05-01\x00"}, (TIME,)),
    "since_lone_surrogate": ({"since": "2024-05-01\ud800"}, (TIME,)),
    "since_window": ({"since": "2024-05-01T09:03:00Z", "until": "2024-05-01T09:05:00Z"}, [4, 5]),
    # values of the wrong type never reach the tool: the schema answers
    "min_seq_string": ({"min_seq": "abc"}, (*SCHEMA, "min_seq")),
    "min_seq_list": ({"min_seq": [1]}, (*SCHEMA, "min_seq")),
    "max_seq_dict": ({"max_seq": {"a": 1}}, (*SCHEMA, "max_seq")),
    "min_seq_infinity": ({"min_seq": float("inf")}, (*SCHEMA, "min_seq")),
    "max_seq_nan": ({"max_seq": float("nan")}, (*SCHEMA, "max_seq")),
    "min_seq_fraction": ({"min_seq": 2.5}, (*SCHEMA, "min_seq")),
    "max_seq_float_1e30": ({"max_seq": 1e30}, (*SCHEMA, "max_seq")),
    "query_number": ({"query": 5}, (*SCHEMA, "query")),
    "query_list_of_numbers": ({"query": [5]}, (*SCHEMA, "query")),
    "newest_first_null": ({"newest_first": None}, (*SCHEMA, "newest_first")),
    "since_bool": ({"since": True}, (*SCHEMA, "since")),
    "cursor_number": ({"cursor": 7}, (*SCHEMA, "cursor")),
    "arguments_a_list": ([1, 2], SCHEMA),
    "min_seq_bool": ({"min_seq": True, "max_seq": 2}, [1, 2]),
    "nulls_everywhere": ({"query": None, "role": None, "handle": None, "cursor": None}, None),
}


CHECKED_ARGUMENTS = {
    "query_only_glue_words",
    "query_list_blank_and_glue",
    "query_list_of_six",
    "role_100k_chars",
    "role_nul",
    "query_only_nul_and_surrogate",
    "query_100k_chars",
    "handle_prefix_only",
    "since_100k_chars",
    "since_year_10000",
    "since_offset_24_hours",
    "until_nul",
    "since_lone_surrogate",
    *(name for name, (_, expected) in ARGUMENTS.items() if expected and expected[:2] == SCHEMA),
}
"""Cases the tool answers from the arguments alone, whatever the store: run on one backend."""


def check(message: ToolMessage, expected: Expect) -> None:
    if isinstance(expected, tuple):
        guidance(message, *expected)
    elif expected is None:  # no filter at all: the first records
        assert seqs(message)[:3] == [1, 2, 3]
    else:
        assert seqs(message) == expected


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", [name for name in ARGUMENTS if name not in CHECKED_ARGUMENTS])
async def test_hostile_arguments_get_a_page_or_guidance(
    probed: HistoryStore, mode: str, case: str
) -> None:
    args, expected = ARGUMENTS[case]
    check(await call(lookup_tool(probed), mode, args), expected)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", sorted(CHECKED_ARGUMENTS))
async def test_arguments_refused_before_the_store_get_guidance(
    memory_probed: HistoryStore, mode: str, case: str
) -> None:
    args, expected = ARGUMENTS[case]
    check(await call(lookup_tool(memory_probed), mode, args), expected)


# --------------------------------------------------------------------------- forged cursors

CURSOR = ("is not a cursor this tool returned", "exactly as it was given")
EARLIER = ("made by an earlier version of this tool", "search again without the cursor")

CURSORS: dict[str, tuple[str, Expect]] = {
    "after_10_pow_30": (cursor_of({"v": 1, "f": {}, "after": 10**30}), CURSOR),
    "after_int64_max": (cursor_of({"v": 1, "f": {}, "after": INT64 - 1}), []),
    "after_int64_min_newest_first": (
        cursor_of({"v": 1, "f": {"newest_first": True}, "after": -INT64}),
        CURSOR,
    ),
    "after_minus_1": (cursor_of({"v": 1, "f": {}, "after": -1}), CURSOR),
    "after_1e400": (encode_raw('{"v":1,"f":{},"after":1e400}'), CURSOR),
    "after_nan": (encode_raw('{"v":1,"f":{},"after":NaN}'), CURSOR),
    "after_infinity": (encode_raw('{"v":1,"f":{},"after":-Infinity}'), CURSOR),
    "after_string": (cursor_of({"v": 1, "f": {}, "after": "5"}), CURSOR),
    "after_true": (cursor_of({"v": 1, "f": {}, "after": True}), CURSOR),
    "after_4400_digits": (encode_raw('{"v":1,"f":{},"after":' + "9" * 4400 + "}"), CURSOR),
    "after_13_user_records": (cursor_of({"v": 1, "f": {"role": "human"}, "after": 13}), [15]),
    "version_true": (cursor_of({"v": True, "f": {}, "after": 1}), CURSOR),
    "version_float": (cursor_of({"v": 1.0, "f": {}, "after": 1}), CURSOR),
    "filter_min_seq_10_pow_30": (
        cursor_of({"v": 1, "f": {"min_seq": 10**30}, "after": 1}),
        CURSOR,
    ),
    "filter_max_seq_negative": (cursor_of({"v": 1, "f": {"max_seq": -1}, "after": 1}), CURSOR),
    "filter_tool_name_nul": (
        cursor_of({"v": 1, "f": {"tool_name": "track\x00"}, "after": 1}),
        CURSOR,
    ),
    "filter_tool_name_60k": (
        cursor_of({"v": 1, "f": {"tool_name": "t" * 60_000}, "after": 1}),
        CURSOR,
    ),
    "filter_tool_name_300": (
        cursor_of({"v": 1, "f": {"tool_name": "t" * 300}, "after": 1}),
        CURSOR,
    ),
    # a query's cursor of the version that served queries in seq order
    "filter_query_lone_surrogate": (
        encode_raw('{"v":1,"f":{"query":"\\ud800 ' + PLANTED + '"},"after":0}'),
        EARLIER,
    ),
    "filter_query_nul_only": (cursor_of({"v": 1, "f": {"query": "\x00"}, "after": 1}), EARLIER),
    "filter_since_year_1_east": (
        cursor_of(
            {"v": 1, "f": {"since": "0001-01-01T00:00:00+23:59", "role": "human"}, "after": 12}
        ),
        [13, 15],
    ),
    "filter_since_number": (cursor_of({"v": 1, "f": {"since": 5}, "after": 1}), CURSOR),
    "filter_since_garbage": (cursor_of({"v": 1, "f": {"since": "later"}, "after": 1}), CURSOR),
    "filter_role_root": (cursor_of({"v": 1, "f": {"role": "root"}, "after": 1}), CURSOR),
    "filter_role_list": (cursor_of({"v": 1, "f": {"role": ["human"]}, "after": 1}), CURSOR),
    "filter_newest_first_string": (
        cursor_of({"v": 1, "f": {"newest_first": "yes"}, "after": 1}),
        CURSOR,
    ),
    "filters_a_list": (cursor_of({"v": 1, "f": [1], "after": 1}), CURSOR),
    "filter_thread_id": (cursor_of({"v": 1, "f": {"thread_id": "t2"}, "after": 0}), CURSOR),
    "skip_10_pow_30": (cursor_of({"v": 1, "f": {"query": "a b"}, "skip": 10**30}), EARLIER),
    "skip_minus_1": (cursor_of({"v": 1, "f": {}, "skip": -1}), EARLIER),
    "skip_2_pow_62": (cursor_of({"v": 1, "f": {}, "skip": 2**62}), EARLIER),
    # a ranking's cursor
    "ranked_query_lone_surrogate": (
        encode_raw('{"v":2,"f":{"query":["\\ud800 ' + PLANTED + '"]},"skip":0}'),
        [1, 2],
    ),
    "ranked_skip_2_pow_62": (cursor_of({"v": 2, "f": {"query": ["invoice"]}, "skip": 2**62}), []),
    "ranked_skip_10_pow_30": (
        cursor_of({"v": 2, "f": {"query": ["invoice"]}, "skip": 10**30}),
        CURSOR,
    ),
    "ranked_skip_minus_1": (cursor_of({"v": 2, "f": {"query": ["invoice"]}, "skip": -1}), CURSOR),
    "ranked_without_query": (cursor_of({"v": 2, "f": {}, "skip": 0}), CURSOR),
    "ranked_query_a_string": (cursor_of({"v": 2, "f": {"query": "invoice"}, "skip": 0}), CURSOR),
    "ranked_query_nul_only": (cursor_of({"v": 2, "f": {"query": ["\x00"]}, "skip": 0}), CURSOR),
    "ranked_six_queries": (cursor_of({"v": 2, "f": {"query": ["a"] * 6}, "skip": 0}), CURSOR),
    "ranked_after": (cursor_of({"v": 2, "f": {"query": ["invoice"]}, "after": 0}), CURSOR),
    "handle_nul": (cursor_of({"v": 1, "h": "plant\x00", "o": 0, "r": 1}), CURSOR),
    "handle_empty": (cursor_of({"v": 1, "h": "", "o": 0, "r": 1}), CURSOR),
    "handle_5000_chars": (cursor_of({"v": 1, "h": "x" * 5000, "o": 0, "r": 1}), CURSOR),
    "handle_lone_surrogate": (encode_raw('{"v":1,"h":"\\udc00","o":0,"r":1}'), CURSOR),
    "handle_number": (cursor_of({"v": 1, "h": 5, "o": 0, "r": 1}), CURSOR),
    "handle_offset_10_pow_30": (cursor_of({"v": 1, "h": "plant", "o": 10**30, "r": 1}), CURSOR),
    "handle_offset_past_the_end": (
        cursor_of({"v": 1, "h": "plant", "o": 10_000, "r": 1}),
        ("past the end",),
    ),
    "handle_revision_10_pow_30": (
        cursor_of({"v": 1, "h": "plant", "o": 0, "r": 10**30}),
        CURSOR,
    ),
    "handle_offset_negative": (cursor_of({"v": 1, "h": "plant", "o": -1, "r": 1}), CURSOR),
    "handle_other_thread": (cursor_of({"v": 1, "h": "t2-secret", "o": 0, "r": 1}), ("no record",)),
    "nested_lists_3000_deep": (encode_raw("[" * 3000 + "]" * 3000), CURSOR),
    "nested_lists_100k_deep": (encode_raw("[" * 100_000 + "]" * 100_000), CURSOR),
    "nested_dicts_1000_deep": (encode_raw('{"v":' * 1000 + "1" + "}" * 1000), CURSOR),
    "one_megabyte": ("A" * 1_000_000, CURSOR),
    "not_base64": ("%%%%!!!!", CURSOR),
    "base64_of_text": (encode_raw("hello, not json"), CURSOR),
    "base64_of_json_string": (cursor_of("cursor"), CURSOR),
    "base64_of_json_null": (cursor_of(None), CURSOR),
    "base64_of_invalid_utf8": (base64.urlsafe_b64encode(b"\xff\xfe\xfd").decode(), CURSOR),
    "with_nul": ("eyJ2Ijox\x00", CURSOR),
    "with_lone_surrogate": ("eyJ2\ud800", CURSOR),
    "whitespace_only": ("   ", None),
}


DECODED_CURSORS = {
    "after_1e400",
    "after_nan",
    "after_infinity",
    "after_string",
    "after_true",
    "after_4400_digits",
    "version_float",
    "filter_query_nul_only",
    "filter_since_number",
    "filter_since_garbage",
    "filter_role_root",
    "filter_role_list",
    "filter_newest_first_string",
    "filters_a_list",
    "skip_minus_1",
    "skip_10_pow_30",
    "skip_2_pow_62",
    "filter_query_lone_surrogate",
    "ranked_skip_10_pow_30",
    "ranked_skip_minus_1",
    "ranked_without_query",
    "ranked_query_a_string",
    "ranked_query_nul_only",
    "ranked_six_queries",
    "ranked_after",
    "handle_number",
    "handle_offset_negative",
    "nested_lists_3000_deep",
    "nested_lists_100k_deep",
    "nested_dicts_1000_deep",
    "one_megabyte",
    "not_base64",
    "base64_of_text",
    "base64_of_json_string",
    "base64_of_json_null",
    "base64_of_invalid_utf8",
    "with_nul",
    "with_lone_surrogate",
    "whitespace_only",
}
"""Cursors refused (or read) whatever the store: run on one backend."""


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", [name for name in CURSORS if name not in DECODED_CURSORS])
async def test_forged_cursors_get_guidance(probed: HistoryStore, mode: str, case: str) -> None:
    cursor, expected = CURSORS[case]
    check(await call(lookup_tool(probed), mode, {"cursor": cursor}), expected)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", sorted(DECODED_CURSORS))
async def test_undecodable_cursors_get_guidance(
    memory_probed: HistoryStore, mode: str, case: str
) -> None:
    cursor, expected = CURSORS[case]
    check(await call(lookup_tool(memory_probed), mode, {"cursor": cursor}), expected)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_cursor_cut_short_or_edited_gets_guidance(probed: HistoryStore, mode: str) -> None:
    tool = make_history_lookup_tool(probed, max_tokens=300, counter=COUNTER)
    first = page(await call(tool, mode, {"role": "user"}))
    cursor = first["next_cursor"]
    assert cursor
    for forged in (cursor[: len(cursor) // 2], cursor[:-3], cursor[1:], cursor + "A" * 5):
        guidance(await call(tool, mode, {"cursor": forged}), *CURSOR)
    # the cursor as given goes on where the page stopped
    following = page(await call(tool, mode, {"cursor": cursor}))
    assert following["records"][0]["seq"] > first["records"][-1]["seq"]


@pytest.mark.asyncio(loop_scope="module")
async def test_a_cursor_from_another_thread_branch_or_filter_set_reads_only_this_run(
    probed: HistoryStore, mode: str
) -> None:
    tool = make_history_lookup_tool(probed, max_tokens=300, counter=COUNTER)
    first = page(await call(tool, mode, {"query": PLANTED}))
    planted = (1, f"Please pay invoice {PLANTED} to ACME GmbH.")
    assert hits(first) == [planted]
    search = cursor_of({"v": 2, "f": {"query": [PLANTED]}, "skip": 0})
    # the scope is the run's: another thread or branch reads its own records with that cursor
    other = page(await call(tool, mode, {"cursor": search}, run_config("t2")))
    assert [r["text"] for r in other["records"]] == [f"Secret of t2: invoice {PLANTED}."]
    fork = page(await call(tool, mode, {"cursor": search}, run_config(ctx_branch=FORK)))
    assert sorted(hits(fork)) == [planted, (4, f"On the fork: invoice {PLANTED} disputed.")]
    # a filter given with a cursor must be the cursor's own
    text = guidance(await call(tool, mode, {"cursor": search, "tool_name": "x" * 150}))
    assert "pass the cursor alone" in text
    guidance(await call(tool, mode, {"cursor": search, "min_seq": -(10**30)}), "cursor alone")
    # a handle cursor of another thread's record finds nothing here
    handle = cursor_of({"v": 1, "h": "plant", "o": 0, "r": 1})
    assert seqs(await call(tool, mode, {"cursor": handle})) == [1]
    guidance(await call(tool, mode, {"cursor": handle}, run_config("t2")), "no record")
    guidance(
        await call(tool, mode, {"cursor": handle, "handle": "history:" + "y" * 999}),
        "pass the matching handle",
    )


@pytest.mark.asyncio(loop_scope="module")
async def test_a_long_record_read_by_handle_pages_to_the_end(
    probed: HistoryStore, mode: str
) -> None:
    """The checks on handle cursors leave the cursors this tool writes working."""
    tool = make_history_lookup_tool(probed, max_tokens=300, counter=COUNTER)
    text, args = "", {"handle": " history:big "}
    while args:
        result = page(await call(tool, mode, args))
        [record] = result["records"]
        text += record["text"]
        args = {"cursor": result["next_cursor"]} if result["next_cursor"] else {}
    assert text == MANIFEST


# --------------------------------------------------------------------------- any input at all

HOSTILE_TEXT = st.sampled_from(
    [
        "\x00",
        "\ud800",
        "x" * 60_000,
        "é" * 30_000,
        "0001-01-01T00:00:00+23:59",
        "9999-12-31T23:59:59-23:59",
        "history:plant",
        "track",
        PLANTED,
    ]
)
TEXT = st.text(max_size=40) | HOSTILE_TEXT
INTEGER = st.integers() | st.sampled_from([INT64, INT64 - 1, -INT64, -INT64 - 1, 10**30, 2**64])
JSON = st.recursive(
    st.none() | st.booleans() | INTEGER | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
FILTER_NAMES = ["query", "min_seq", "max_seq", "since", "until", "role", "tool_name"]
FILTERS = st.dictionaries(st.sampled_from([*FILTER_NAMES, "newest_first"]), JSON, max_size=4)
CURSOR_TEXT = (
    st.fixed_dictionaries({"v": st.just(1), "f": FILTERS | JSON, "after": INTEGER | JSON})
    | st.fixed_dictionaries({"v": st.just(1), "f": FILTERS | JSON, "skip": INTEGER | JSON})
    | st.fixed_dictionaries(
        {"v": st.just(1), "h": TEXT | JSON, "o": INTEGER | JSON, "r": INTEGER | JSON}
    )
    | JSON
).map(lambda payload: encode_raw(json.dumps(payload))) | TEXT
HOSTILE_ARGUMENTS = st.dictionaries(
    st.sampled_from([*FILTER_NAMES, "newest_first", "handle"]), TEXT | INTEGER | JSON, max_size=4
) | st.fixed_dictionaries({"cursor": CURSOR_TEXT}, optional={"query": TEXT, "min_seq": INTEGER})


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[HistoryStore]:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    seed(store)
    yield store
    store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(args=HOSTILE_ARGUMENTS, use_async=st.booleans())
def test_any_arguments_give_a_page_or_short_guidance(
    fuzzed: HistoryStore, args: dict[str, Any], use_async: bool
) -> None:
    tool = lookup_tool(fuzzed)
    mode = "async" if use_async else "sync"
    message = asyncio.run(call(tool, mode, args))
    if message.status == "error":
        guidance(message)
        return
    result = page(message)
    if result["next_cursor"]:  # a cursor the tool wrote reads on
        assert page(asyncio.run(call(tool, mode, {"cursor": result["next_cursor"]})))


# --------------------------------------------------------------------------- failing stores


def _raising(error: Exception) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    async def afail(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    return fail, afail


STORE_ERRORS: dict[str, tuple[Exception, str]] = {
    "value_error": (ValueError("seq 9223372036854775808 is out of range"), "refused this lookup"),
    "overflow": (
        OverflowError("Python int too large to convert to SQLite INTEGER"),
        "the history lookup failed",
    ),
    "history_store_error": (
        HistoryStoreError("PostgreSQL history store error: boom"),
        "the history lookup failed",
    ),
    "sqlite_operational": (
        sqlite3.OperationalError("LIKE or GLOB pattern too complex"),
        "the history lookup failed",
    ),
    "psycopg_data_error": (
        psycopg.DataError("text fields cannot contain NUL (0x00) bytes"),
        "the history lookup failed",
    ),
    "unicode_encode": (
        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
        "refused this lookup",
    ),
}


@pytest.mark.parametrize("path", ["search", "handle"])
@pytest.mark.parametrize("error", list(STORE_ERRORS))
async def test_a_failing_store_gives_guidance_and_a_warning(
    mode: str,
    path: str,
    error: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    seed(store)
    exc, phrase = STORE_ERRORS[error]
    method = "search" if path == "search" else "get_event"
    fail, afail = _raising(exc)
    monkeypatch.setattr(store, method, fail)
    monkeypatch.setattr(store, "a" + method, afail)
    args = {"query": PLANTED} if path == "search" else {"handle": "history:plant"}
    with caplog.at_level(logging.WARNING, logger="ctx_langgraph.lookup"):
        text = guidance(await call(lookup_tool(store), mode, args), phrase)
    if not isinstance(exc, ValueError):  # a driver's words are logged, not shown
        assert str(exc)[:20] not in text and type(exc).__name__ in text
    [logged] = [r for r in caplog.records if r.name == "ctx_langgraph.lookup"]
    assert logged.levelno == logging.WARNING and logged.exc_info is not None
    store.close()


@pytest.mark.parametrize("kind", ["sqlite_file", "sqlite_memory"])
async def test_a_closed_store_gives_guidance(
    kind: str, mode: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "h.sqlite" if kind == "sqlite_file" else ":memory:"
    store = SQLiteHistoryStore.from_path(path)
    store.setup()
    seed(store)
    tool = lookup_tool(store)
    store.close()
    with caplog.at_level(logging.WARNING, logger="ctx_langgraph.lookup"):
        guidance(await call(tool, mode, {"query": PLANTED}), "the history lookup failed")
    assert any(r.name == "ctx_langgraph.lookup" for r in caplog.records)


# --------------------------------------------------------------------------- whole agents

HOSTILE_CALLS: list[dict[str, Any]] = [
    {"min_seq": INT64},
    {"max_seq": -(10**30), "newest_first": True},
    {"min_seq": 1, "max_seq": 2**64, "tool_name": "é" * 25_001},
    {"tool_name": "track\x00"},
    {"handle": "history:plant\x00"},
    {"cursor": cursor_of({"v": 1, "f": {}, "after": 10**30})},
    {"since": "0001-01-01T00:00:00+23:59", "until": "99999-01-01"},
    {"max_seq": "the last one"},
]
BIG_WINDOW = ContextConfig(context_window=200_000, output_reserve=2_000)


class ScriptedLookups:
    """A model that sends every hostile lookup in turn, one per model call, then answers; it
    keeps the tool messages it was shown."""

    def __init__(self) -> None:
        self.seen: dict[str, ToolMessage] = {}

    def reply(self, turn: int) -> Callable[[list[BaseMessage]], AIMessage]:
        def respond(messages: list[BaseMessage]) -> AIMessage:
            for message in messages:
                if isinstance(message, ToolMessage):
                    self.seen[message.tool_call_id] = message
            if turn == len(HOSTILE_CALLS):
                return AIMessage("I could not find it.")
            tool_call = {"name": "history_lookup", "args": HOSTILE_CALLS[turn], "id": f"h{turn}"}
            return AIMessage("", tool_calls=[tool_call])

        return respond

    def model(self) -> MeteringChatModel:
        return MeteringChatModel(replies=[self.reply(n) for n in range(len(HOSTILE_CALLS) + 1)])


def build_agent(wiring: str, model: MeteringChatModel, store: HistoryStore) -> Any:
    if wiring == "create_context_agent":
        return create_context_agent(model, store=store, config=BIG_WINDOW).compile()
    middleware = ContextManagementMiddleware(store, model=model, config=BIG_WINDOW)
    return create_agent(model, tools=[], middleware=[middleware])


@pytest.mark.parametrize("wiring", ["create_context_agent", "middleware"])
async def test_an_agent_run_survives_hostile_lookups_and_the_model_reads_guidance(
    store: HistoryStore, mode: str, wiring: str
) -> None:
    store.append("r", history()[:3])
    script = ScriptedLookups()
    agent = build_agent(wiring, script.model(), store)
    inputs = {"messages": [HumanMessage("Which invoice did I ask you to pay?", id="ask")]}
    cfg = {"configurable": {"thread_id": "r"}, "recursion_limit": 60}
    result = agent.invoke(inputs, cfg) if mode == "sync" else await agent.ainvoke(inputs, cfg)

    assert result["messages"][-1].content == "I could not find it."
    assert sorted(script.seen) == sorted(f"h{n}" for n in range(len(HOSTILE_CALLS)))
    shown = script.seen
    assert page(shown["h0"])["records"] == []
    assert page(shown["h1"])["records"] == []
    guidance(shown["h2"], "tool_name is 25001 characters long")
    guidance(shown["h3"], BAD_CHAR)
    guidance(shown["h4"], BAD_CHAR)
    guidance(shown["h5"], *CURSOR)
    guidance(shown["h6"], "until='99999-01-01'", TIME)
    guidance(shown["h7"], *SCHEMA)
