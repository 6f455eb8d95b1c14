"""Hostile input through the history store's public API, on every backend (SQLite file, SQLite
:memory:, PostgreSQL), each case through the sync and the async methods.

- any text round-trips exactly (NUL bytes, lone surrogates, the store's own escape marker) and
  a message holding it can be recorded again on every turn;
- out-of-range or mistyped arguments raise ValueError / TypeError / a typed store error, never
  an OverflowError or a driver error; seq bounds past the 64-bit range are clamped;
- one search semantics, stated by one table of expected seqs that every backend must return.
"""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)

from ctx_langgraph.errors import ContextManagementError, HistoryStoreError, ScopeError
from ctx_langgraph.history import HistoryEvent, KeyFact, Scope, SearchPage
from ctx_langgraph.history.rows import text_projection


@pytest.fixture
def tid() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


# ----------------------------------------------------------------------------- exact round trip

NUL = "\x00"
HIGH = "\ud800"
LOW = "\udfff"
MARK = "\ufdd0"  # the store's escape marker: must round-trip as ordinary text too


def _tool(text: str, **kw: Any) -> ToolMessage:
    return ToolMessage(text, **kw)


ROUND_TRIP: list[tuple[str, BaseMessage, str | None, tuple[str, ...]]] = [
    # (case id, message, a word search must still find in it, tool names)
    (
        "tool-result-nul",
        _tool("header\x00 payload", tool_call_id="c1", name="fetch", id="t1"),
        "payload",
        ("fetch",),
    ),
    ("user-nul", HumanMessage("a\x00b", id="h-nul"), "a", ()),
    ("only-nul", HumanMessage(NUL, id="h-only-nul"), None, ()),
    ("user-surrogate", HumanMessage(f"bad {HIGH}", id="h-sur"), "bad", ()),
    (
        "low-and-high-surrogates",
        HumanMessage(f"lone {LOW} low and {HIGH}\ud83d high", id="h-sur2"),
        "lone",
        (),
    ),
    (
        "tool-name-and-ids",
        _tool(
            f"result {NUL}{HIGH} body",
            tool_call_id=f"call{NUL}{HIGH}",
            name=f"tool{NUL}name{HIGH}",
            id=f"t{NUL}id{HIGH}",
        ),
        "body",
        (f"tool{NUL}name{HIGH}",),
    ),
    ("message-id-nul", HumanMessage("id with nul", id=f"m{NUL}1"), "nul", ()),
    ("message-id-surrogate", HumanMessage("id with surrogate", id=f"m{HIGH}1"), "surrogate", ()),
    (
        "content-blocks",
        HumanMessage(
            content=[
                {"type": "text", "text": f"block one {NUL} {HIGH} words"},
                {"type": f"x{HIGH}", f"k{NUL}ey": f"v{HIGH}", "n": [LOW, NUL]},
            ],
            id="h-blocks",
            additional_kwargs={f"k{HIGH}": f"v{NUL}", "nested": {NUL: [LOW, f"{MARK}0000"]}},
        ),
        "block",
        (),
    ),
    (
        "ai-tool-call",
        AIMessage(
            f"calling {NUL}",
            id=f"a{NUL}",
            tool_calls=[{"name": f"look{NUL}up", "args": {"q": HIGH}, "id": f"call{NUL}"}],
            response_metadata={"model_name": f"m{HIGH}"},
        ),
        "calling",
        (f"look{NUL}up",),
    ),
    (
        "ai-thinking-blocks",
        AIMessage(
            content=[
                {"type": "thinking", "thinking": f"hmm {HIGH}", "signature": f"s{NUL}"},
                {"type": "text", "text": f"answer {LOW}"},
            ],
            id="a-think",
        ),
        "answer",
        (),
    ),
    ("marker-at-start", HumanMessage(f"{MARK} marker first", id=f"{MARK}id"), "marker", ()),
    (
        "marker-looks-escaped",
        HumanMessage(f"x{MARK}0000 and {MARK}d800 fake", id=f"m{MARK}0000"),
        "fake",
        (),
    ),
    (
        "pipe-in-tool-name",
        _tool("piped", tool_call_id="c", name="a|b", id="t-pipe"),
        "piped",
        ("a|b",),
    ),
    (
        "system-name",
        SystemMessage(f"sys {NUL}{HIGH} rules", name=f"n{NUL}{HIGH}", id="s1"),
        "rules",
        (),
    ),
    ("cjk-and-nul", HumanMessage(f"我说{NUL}你好世界", id="h-cjk"), "你好", ()),
]


@pytest.mark.parametrize(
    ("message", "word", "tool_names"),
    [pytest.param(m, w, n, id=case) for case, m, w, n in ROUND_TRIP],
)
async def test_any_text_round_trips_exactly_and_records_again(api, tid, message, word, tool_names):
    """What is read back equals what was appended, and re-recording the message on the next
    turns (as the budget node does) and revising it keep working."""
    first = await api.append(tid, [HumanMessage("before", id="before"), message])
    assert [r.status for r in first] == ["appended", "appended"]
    assert first[1].event_id == message.id

    [_, event] = await api.read_events(tid)
    assert event.message == message
    assert event.content == message_to_dict(message)
    assert event.text == text_projection(message)
    assert event.event_id == message.id and event.name == message.name
    assert event.tool_names == tool_names
    assert (await api.get_event(tid, message.id)).message == message

    for _ in range(2):  # the next turns record the same message again
        [again] = await api.append(tid, [message])
        assert (again.status, again.seq) == ("duplicate", 2)

    changed = (
        message.model_copy(update={"content": [*message.content, " (edited)"]})
        if isinstance(message.content, list)
        else message.model_copy(update={"content": message.content + " (edited)"})
    )
    [revised] = await api.append(tid, [changed])
    assert (revised.status, revised.revision) == ("revised", 2)
    assert (await api.get_event(tid, message.id)).message == changed
    assert await api.event_revisions(tid, message.id) == [(1, message_to_dict(message))]
    [later] = await api.append(tid, [HumanMessage("later turn", id="after")])
    assert later.seq == 3

    if word is not None:
        assert [h.seq for h in (await api.search(tid, word)).hits] == [2]
    for name in tool_names:
        assert [h.seq for h in (await api.search(tid, tool_name=name)).hits] == [2]
    assert await api.hide_events(tid, [message.id]) == 1
    assert [e.seq for e in await api.read_events(tid)] == [1, 3]
    assert await api.show_events(tid, message.id) == 1
    assert await api.delete_events(tid, [message.id]) == 1
    assert await api.get_event(tid, message.id, include_hidden=True) is None


async def test_a_tool_name_is_matched_literally(api, tid):
    await api.append(
        tid,
        [
            _tool("one", tool_call_id="c1", name="a|b", id="t1"),
            _tool("two", tool_call_id="c2", name="a", id="t2"),
            _tool("three", tool_call_id="c3", name="b_c%", id="t3"),
        ],
    )

    async def seqs(name: str) -> list[int]:
        return [h.seq for h in (await api.search(tid, tool_name=name)).hits]

    assert await seqs("a|b") == [1]
    assert await seqs("a") == [2]
    assert await seqs("b") == []
    assert await seqs("b_c%") == [3]
    assert await seqs("b%") == [] and await seqs("b_c_") == []


async def test_summaries_hold_any_text_exactly(api, tid):
    """A summary citing an event whose id or text has NUL bytes or surrogates commits and
    reads back exactly (compaction is never blocked by such a message)."""
    hostile = f"t{NUL}{HIGH}"
    await api.append(
        tid, [HumanMessage(f"fact {NUL} one", id=hostile), HumanMessage("tail", id="t2")]
    )
    snap = await api.snapshot(tid, 1)
    fact = KeyFact(f"order {NUL}{HIGH} A-1", 1, source_event_id=hostile, replaces=f"B{LOW}")
    candidate = await api.create_candidate(
        snap,
        summary_text=f"summary {NUL} {HIGH} {MARK}",
        key_facts=[fact],
        first_kept_event_id=hostile,
        summarizer_id=f"model{NUL}",
        metadata={"note": HIGH},
    )
    active = await api.commit_candidate(candidate)
    stored = await api.get_active(tid)
    assert stored == active
    assert stored.summary_text == f"summary {NUL} {HIGH} {MARK}"
    assert stored.key_facts == (fact,)
    assert (stored.first_kept_event_id, stored.summarizer_id) == (hostile, f"model{NUL}")
    assert stored.metadata == {"note": HIGH}
    other = await api.create_candidate(await api.snapshot(tid, 2), summary_text="next")
    failed = await api.mark_failed(other, f"bad {NUL}{HIGH}")
    assert failed.error == f"bad {NUL}{HIGH}"
    assert (await api.get_checkpoint(other.id)).error == f"bad {NUL}{HIGH}"


async def test_a_huge_tool_result_is_recorded_and_searchable(api, tid):
    """Text larger than PostgreSQL's 1 MB tsvector limit is stored instead of failing the
    append on every turn; the words of its first 400,000 characters of distinct index tokens
    are searchable, the same on every backend."""
    words = " ".join(f"w{n:06d}" for n in range(100_000))  # 800 kB, every word distinct
    message = _tool(words, tool_call_id="c", name="dump", id="big")
    await api.append(tid, [message])
    [again] = await api.append(tid, [message])
    assert again.status == "duplicate"
    assert (await api.get_event(tid, "big")).message == message
    assert [h.seq for h in (await api.search(tid, "w000001 w010000")).hits] == [1]
    assert (await api.search(tid, "w099999")).hits == ()  # past the search document's limit


# ----------------------------------------------------------------------------- argument bounds

Call = Callable[[Any, str], Awaitable[Any]]


def _cursor(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _shape(result: Any) -> Any:
    if isinstance(result, SearchPage):
        return [hit.seq for hit in result.hits]
    if isinstance(result, HistoryEvent):
        return result.seq
    if isinstance(result, list) and result and isinstance(result[0], HistoryEvent):
        return [event.seq for event in result]
    return result


def _search(*args: Any, **kwargs: Any) -> Call:
    return lambda api, tid: api.search(tid, *args, **kwargs)


def _read(**kwargs: Any) -> Call:
    return lambda api, tid: api.read_events(tid, **kwargs)


ALL = [1, 2, 3]
BOUNDS: list[tuple[str, Call, Any]] = [
    # (case id, call, expected shape of the result, or the exception type)
    ("search-min_seq-2**63", _search(min_seq=2**63), []),
    ("search-min_seq-10**30", _search(min_seq=10**30), []),
    ("search-min_seq-int64-max", _search(min_seq=2**63 - 1), []),
    ("search-min_seq--10**30", _search(min_seq=-(10**30)), ALL),
    ("search-max_seq--10**30", _search(max_seq=-(10**30)), []),
    ("search-max_seq--10", _search(max_seq=-10), []),
    ("search-max_seq-2**64", _search(max_seq=2**64), ALL),
    ("search-range-to-10**40", _search(min_seq=2, max_seq=10**40), [2, 3]),
    ("search-query-and-huge-min", _search("refund", min_seq=10**30), []),
    ("search-min_seq-float", _search(min_seq=1.0), TypeError),
    ("search-min_seq-str", _search(min_seq="1"), TypeError),
    ("search-min_seq-bool", _search(min_seq=True), TypeError),
    ("search-max_seq-nan", _search(max_seq=float("nan")), TypeError),
    ("search-max_seq-inf", _search(max_seq=float("inf")), TypeError),
    ("search-limit-10**30", _search(limit=10**30), ALL),
    ("search-limit-2**63", _search(limit=2**63), ALL),
    ("search-limit-0", _search(limit=0), ValueError),
    ("search-limit-negative", _search(limit=-5), ValueError),
    ("search-limit-float", _search(limit=1.5), TypeError),
    ("search-limit-str", _search(limit="3"), TypeError),
    ("cursor-seq-1e400", _search(cursor=_cursor('{"v":1,"seq":1e400,"desc":false}')), ValueError),
    ("cursor-seq-nan", _search(cursor=_cursor('{"v":1,"seq":NaN,"desc":false}')), ValueError),
    ("cursor-seq-negative", _search(cursor=_cursor('{"v":1,"seq":-1,"desc":false}')), ValueError),
    ("cursor-seq-string", _search(cursor=_cursor('{"v":1,"seq":"5","desc":false}')), ValueError),
    ("cursor-seq-list", _search(cursor=_cursor('{"v":1,"seq":[1],"desc":false}')), ValueError),
    ("cursor-seq-float", _search(cursor=_cursor('{"v":1,"seq":2.0,"desc":false}')), ValueError),
    ("cursor-seq-bool", _search(cursor=_cursor('{"v":1,"seq":true,"desc":false}')), ValueError),
    (
        "cursor-seq-10**30",
        _search(cursor=_cursor(f'{{"v":1,"seq":{10**30},"desc":false}}')),
        ValueError,
    ),
    ("cursor-not-an-object", _search(cursor=_cursor("[1, 2]")), ValueError),
    ("cursor-deeply-nested", _search(cursor=_cursor("[" * 100_000)), ValueError),
    ("cursor-not-base64", _search(cursor="%%%"), ValueError),
    ("cursor-non-ascii", _search(cursor=f"é{HIGH}"), ValueError),
    ("cursor-empty", _search(cursor=""), ValueError),
    ("cursor-not-a-string", _search(cursor=123), ValueError),
    ("cursor-other-order", _search(cursor=_cursor('{"v":1,"seq":1,"desc":true}')), ValueError),
    ("cursor-valid", _search(cursor=_cursor('{"v":1,"seq":1,"desc":false}')), [2, 3]),
    ("tool_name-100k", _search(tool_name="x" * 100_000), []),
    ("tool_name-nul", _search(tool_name=f"ref{NUL}und"), []),
    ("tool_name-surrogate", _search(tool_name=HIGH), []),
    ("tool_name-like-syntax", _search(tool_name="_efun%"), []),
    ("tool_name-pipe", _search(tool_name="refund|"), []),
    ("tool_name-int", _search(tool_name=5), TypeError),
    ("tool_name-exact", _search(tool_name="refund"), [2, 3]),
    ("roles-nul", _search(roles=[f"human{NUL}"]), []),
    ("roles-surrogate", _search(roles=HIGH), []),
    ("roles-int", _search(roles=[5]), TypeError),
    ("roles-repeated", _search(roles=["human"] * 100_000), [1]),
    ("roles-100k-distinct", _search(roles=[f"r{n}" for n in range(100_000)]), ValueError),
    ("query-int", _search(5), TypeError),
    ("query-100k-word", _search("x" * 100_000), []),
    ("query-repeated-50k", _search(" ".join(["order"] * 50_000)), [1]),
    ("query-1000-words", _search(" ".join(f"w{n}" for n in range(1000))), []),
    ("query-1000-words-and-order", _search("order " + " ".join(["w"] * 5000)), []),
    ("query-20k-words", _search(" ".join(f"w{n}" for n in range(20_000))), ValueError),
    ("query-2000-cjk-chars", _search("".join(chr(0x4E00 + n) for n in range(2000))), ValueError),
    ("since-str", _search(since="2024-01-01"), TypeError),
    ("read-from-10**30", _read(from_seq=10**30), []),
    ("read-from-2**63", _read(from_seq=2**63), []),
    ("read-from--10**30", _read(from_seq=-(10**30)), ALL),
    ("read-to--10**30", _read(to_seq=-(10**30)), []),
    ("read-to-2**64", _read(to_seq=2**64), ALL),
    ("read-limit-10**30", _read(limit=10**30), ALL),
    ("read-limit-2**63", _read(limit=2**63), ALL),
    ("read-limit-0", _read(limit=0), ValueError),
    ("read-limit-negative", _read(limit=-1), ValueError),
    ("read-from-str", _read(from_seq="1"), TypeError),
    ("read-from-float", _read(from_seq=1.5), TypeError),
    ("get-nul", lambda api, tid: api.get_event(tid, NUL), None),
    ("get-id-nul", lambda api, tid: api.get_event(tid, f"h1{NUL}"), None),
    ("get-surrogate", lambda api, tid: api.get_event(tid, HIGH), None),
    ("get-100k", lambda api, tid: api.get_event(tid, "x" * 100_000), None),
    ("get-int", lambda api, tid: api.get_event(tid, 123), TypeError),
    ("get-none", lambda api, tid: api.get_event(tid, None), TypeError),
    ("get-exact", lambda api, tid: api.get_event(tid, "h1"), 1),
    ("revisions-nul", lambda api, tid: api.event_revisions(tid, NUL), []),
    ("hide-odd-ids", lambda api, tid: api.hide_events(tid, [NUL, HIGH, "x" * 100_000]), 0),
    ("hide-one-string-id", lambda api, tid: api.hide_events(tid, "h1"), 1),
    ("hide-int-ids", lambda api, tid: api.hide_events(tid, [1]), TypeError),
    ("hide-int", lambda api, tid: api.hide_events(tid, 5), TypeError),
    ("delete-odd-ids", lambda api, tid: api.delete_events(tid, [f"h1{NUL}", HIGH]), 0),
    ("edits-since-10**30", lambda api, tid: api.edits_since(tid, 10**30), []),
    ("edits-since--10**30", lambda api, tid: api.edits_since(tid, -(10**30)), []),
    ("edits-since-float", lambda api, tid: api.edits_since(tid, 0.5), TypeError),
    ("snapshot-10**30", lambda api, tid: api.snapshot(tid, 10**30), ValueError),
    ("snapshot-float", lambda api, tid: api.snapshot(tid, 1.5), TypeError),
    (
        "branch-fork-10**30",
        lambda api, tid: api.create_branch(Scope(tid, branch="b"), "main", 10**30),
        ScopeError,
    ),
    (
        "branch-fork--10**30",
        lambda api, tid: api.create_branch(Scope(tid, branch="b"), "main", -(10**30)),
        ScopeError,
    ),
    (
        "branch-fork-str",
        lambda api, tid: api.create_branch(Scope(tid, branch="b"), "main", "1"),
        TypeError,
    ),
    (
        "branch-from-surrogate",
        lambda api, tid: api.create_branch(Scope(tid, branch="b"), f"main{HIGH}", 0),
        ScopeError,
    ),
    ("scope-surrogate-thread", lambda api, tid: api.read_events(tid + HIGH), ScopeError),
    (
        "scope-surrogate-branch",
        lambda api, tid: api.append(Scope(tid, branch=f"b{HIGH}"), [HumanMessage("x")]),
        ScopeError,
    ),
    ("scope-surrogate-search", lambda api, tid: api.search(f"{HIGH}{tid}", "x"), ScopeError),
    ("scope-nul-thread", lambda api, tid: api.get_event(tid + NUL, "h1"), ScopeError),
    ("checkpoint-nul", lambda api, tid: api.get_checkpoint(NUL), None),
    ("checkpoint-surrogate", lambda api, tid: api.get_checkpoint(HIGH), None),
    ("checkpoint-int", lambda api, tid: api.get_checkpoint(5), TypeError),
    ("commit-nul-id", lambda api, tid: api.commit_candidate(f"c{NUL}"), HistoryStoreError),
    (
        "mark-failed-nul-id",
        lambda api, tid: api.mark_failed(f"c{NUL}", f"r{NUL}"),
        HistoryStoreError,
    ),
    ("prune-keep-10**30", lambda api, tid: api.prune_versions(tid, keep=10**30), 0),
    ("prune-keep-negative", lambda api, tid: api.prune_versions(tid, keep=-1), ValueError),
    ("prune-keep-float", lambda api, tid: api.prune_versions(tid, keep=1.5), TypeError),
    (
        "append-created_at-int",
        lambda api, tid: api.append(tid, [HumanMessage("x", id="n")], created_at=[5]),
        TypeError,
    ),
    (
        "append-created_at-before-year-1-in-utc",
        lambda api, tid: api.append(
            tid,
            [HumanMessage("x", id="n")],
            created_at=dt.datetime.min.replace(tzinfo=dt.timezone(dt.timedelta(hours=23))),
        ),
        ValueError,
    ),
    (
        "append-created_at-after-year-9999-in-utc",
        lambda api, tid: api.append(
            tid,
            [HumanMessage("x", id="n")],
            created_at=dt.datetime.max.replace(tzinfo=dt.timezone(dt.timedelta(hours=-23))),
        ),
        ValueError,
    ),
    (
        "append-not-a-message",
        lambda api, tid: api.append(tid, [f"text {NUL}"]),
        TypeError,
    ),
]


BOUND_GROUPS = sorted({case_id.split("-")[0] for case_id, _, _ in BOUNDS})


async def _outcome(call: Call, api: Any, tid: str) -> Any:
    """The shape of the call's result, or the type of the exception it raised."""
    try:
        return _shape(await call(api, tid))
    except Exception as exc:  # the table checks its type
        return exc


def _matches(outcome: Any, expected: Any) -> bool:
    if not (isinstance(expected, type) and issubclass(expected, BaseException)):
        return not isinstance(outcome, BaseException) and outcome == expected
    return (
        isinstance(outcome, expected)
        # a ValueError or TypeError naming the problem, or the store's own typed error; never
        # an overflow, an encoding error or the driver's own exception
        and isinstance(outcome, ValueError | TypeError | ContextManagementError)
        and not isinstance(outcome, OverflowError | UnicodeError)
        and type(outcome).__module__.split(".")[0] in ("builtins", "ctx_langgraph")
    )


@pytest.mark.parametrize("group", BOUND_GROUPS)
async def test_out_of_range_and_mistyped_arguments(api, group):
    """Every case of the group on a thread of its own: the expected result or error, and the
    store still takes the next turn afterwards."""
    wrong = []
    for case_id, call, expected in BOUNDS:
        if case_id.split("-")[0] != group:
            continue
        tid = f"t-{uuid.uuid4().hex[:12]}"
        await api.append(
            tid,
            [
                HumanMessage("refund order", id="h1"),
                AIMessage("", id="a1", tool_calls=[{"name": "refund", "args": {}, "id": "c1"}]),
                _tool("refund done", tool_call_id="c1", name="refund", id="t1"),
            ],
        )
        outcome = await _outcome(call, api, tid)
        if not _matches(outcome, expected):
            wrong.append(f"{case_id}: expected {expected!r}, got {outcome!r}")
        [after] = await api.append(tid, [HumanMessage("still fine", id="after")])
        if after.seq != 4:
            wrong.append(f"{case_id}: the next append got seq {after.seq}")
    assert not wrong, "\n".join(wrong)


# ----------------------------------------------------------------------------- one search semantics

LONG = "x" * 3000
CORPUS = [
    "我说你好世界",  # 1
    "こんにちは、世界の皆さん",  # 2
    "½ cup and ² more",  # 3
    "invoice INV-2023-0042 was paid",  # 4
    "résumé for the naïve café owner",  # 5
    "Привет мир",  # 6
    "日本語とEnglishの混在",  # 7
    "🎉 party time",  # 8
    f"{LONG} tail",  # 9
    "header payload with tabs\tand\nnewlines",  # 10
    "snake_case_name and CamelCase",  # 11
    'a OR b "quoted" NEAR(x) col:val * %_ end',  # 12
    "plain english words",  # 13
    "re\u0301sume\u0301 decomposed",  # 14: résumé in decomposed form
    "1e5tku science",  # 15
    "⅓ third",  # 16
    "Ünïcödé CASE Folding",  # 17
]

NO_WORDS = ValueError
SEARCH_TABLE: dict[str, list[tuple[str, list[int] | type[Exception]]]] = {
    # query -> the seqs of CORPUS every backend finds, or the error it raises
    "dropped-words": [  # words some full-text parsers drop: found where they are, nowhere else
        ("½", [3]),
        ("²", [3]),
        ("½ ²", [3]),
        ("³", []),
        ("⅓", [16]),
        ("½ ⅓", []),
    ],
    "no-words": [  # punctuation and symbols only, or nothing: nothing to search for
        ("?!...", NO_WORDS),
        ("---", NO_WORDS),
        ("", NO_WORDS),
        ("   ", NO_WORDS),
        ("🎉", NO_WORDS),
        ("*", NO_WORDS),
        ("%_", NO_WORDS),
        (NUL, NO_WORDS),
        (HIGH, NO_WORDS),
    ],
    "emoji": [("🎉 party", [8]), ("party🎉", [8])],
    "cjk": [  # character pairs, and one character on its own
        ("你好", [1]),
        ("世界", [1, 2]),
        ("你好世界", [1]),
        ("好你", []),
        ("好", [1]),
        ("界", [1, 2]),
        ("こんにちは", [2]),
        ("皆さん", [2]),
        ("日本語", [7]),
        ("混在", [7]),
        ("日本語とEnglish", [7]),
    ],
    "scripts": [  # other scripts, case and composition
        ("English", [7, 13]),
        ("résumé", [5, 14]),
        ("RÉSUMÉ", [5, 14]),
        ("naïve café", [5]),
        ("naive", []),
        ("Привет мир", [6]),
        ("ПРИВЕТ", [6]),
        ("ünïcödé case", [17]),
        ("folding", [17]),
    ],
    "long-words": [  # the whole word, exactly
        (LONG, [9]),
        ("x" * 2999, []),
        (LONG + "x", []),
        ("tail", [9]),
    ],
    "numbers": [
        ("INV-2023-0042", [4]),
        ("inv 2023", [4]),
        ("0042", [4]),
        ("42", []),
        ("1e5tku", [15]),
        ("1e5", []),
        ("tku", []),
    ],
    "query-syntax": [  # either engine's query syntax is plain text
        ("a OR b", [12]),
        ('"quoted"', [12]),
        ("NEAR(x)", [12]),
        ("col:val", [12]),
        ("end", [12]),
        ("OR", [12]),
    ],
    "separators": [  # underscores, control characters, NUL bytes and surrogates split words
        ("snake", [11]),
        ("snake_case_name", [11]),
        ("case", [11, 17]),
        ("camelcase", [11]),
        ("tabs newlines", [10]),
        ("payload\x00", [10]),
        ("header\x00payload", [10]),
        (f"tabs{HIGH}newlines", [10]),
        (f"{HIGH}party{LOW}", [8]),
    ],
}


@pytest.mark.parametrize("section", list(SEARCH_TABLE))
async def test_search_semantics_are_one_table_on_every_backend(api, tid, section):
    await api.append(tid, [HumanMessage(text, id=f"m{n}") for n, text in enumerate(CORPUS, 1)])
    wrong = []
    for query, expected in SEARCH_TABLE[section]:
        if isinstance(expected, list):
            found = [hit.seq for hit in (await api.search(tid, query)).hits]
            newest = await api.search(tid, query, newest_first=True, limit=1)
            if found != expected or [hit.seq for hit in newest.hits] != expected[::-1][:1]:
                wrong.append(f"{query[:40]!r}: expected {expected}, found {found}")
        else:
            try:
                found = [hit.seq for hit in (await api.search(tid, query)).hits]
                wrong.append(f"{query[:40]!r}: expected {expected.__name__}, found {found}")
            except expected as exc:
                if "no searchable words" not in str(exc):
                    wrong.append(f"{query[:40]!r}: {exc}")
    assert not wrong, "\n".join(wrong)
