"""Examples of the internal helpers of core/, lookup/ and memory/, as plain assertions."""

from __future__ import annotations

import asyncio
import datetime as dt

from ctx_langgraph.core.effects import Flow, arun, call, run


def test_effects_run_a_flow_sync_and_async():
    class Store:
        def get(self, key: str) -> str:
            return key.upper()

        async def aget(self, key: str) -> str:
            return key.upper()

    def flow(store: Store) -> Flow[str]:
        value = yield from call(store.get, store.aget, "a")
        return value + "!"

    assert run(flow(Store())) == "A!"
    assert asyncio.run(arun(flow(Store()))) == "A!"


def test_text_examples():
    from ctx_langgraph.core.text import (
        match_tokens,
        query_terms,
        rank_terms,
        rank_tokens,
        search_document,
        stem_counts,
        token_document,
    )

    assert query_terms("Invoice INV-2023-0042, paid?") == ["invoice", "inv", "2023", "0042", "paid"]
    assert query_terms("日本語とEnglish") == ["日本", "本語", "語と", "english"]
    assert match_tokens("Refund refund A-1042") == ["refund", "a", "1042"]
    assert token_document("order A-1042 shipped") is None
    assert token_document("header\x00 payload") == "header payload"
    assert search_document("order A-1042") is None
    assert search_document("order A-1042 shipped") == "|ship"
    assert search_document("header\x00 payloads") == "header payloads|payload"
    assert rank_terms("Where did we go for the groups' dinners?") == ["go", "group", "dinner"]
    assert rank_tokens("Went going, gone: 3 GOES") == ["go", "go", "go", "3", "go"]
    assert stem_counts("Went going, gone: 3 GOES to go", {"go", "3"}) == ({"go": 5, "3": 1}, 7)


def test_dates_examples():
    from ctx_langgraph.core.dates import day_label, resolve_relative, time_label

    assert day_label(dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.timezone.utc)) == "Mon 8 May 2023"
    assert day_label(dt.date(2024, 12, 25)) == "Wed 25 December 2024"
    two_hours = dt.timezone(dt.timedelta(hours=2))
    assert time_label(dt.datetime(2023, 5, 8, 15, 56, tzinfo=two_hours)) == "Mon 8 May 2023 13:56"
    monday = dt.date(2023, 5, 8)
    assert resolve_relative("Yesterday I told you; last year, too.", monday) == {
        "yesterday": "Sun 7 May 2023",
        "last year": "2022",
    }
    assert resolve_relative("We met last Sunday, two days ago.", monday) == {
        "last sunday": "Sun 7 May 2023, the Sunday before Mon 8 May 2023",
        "two days ago": "Sat 6 May 2023",
    }
    assert resolve_relative("In  three months, or next month?", monday) == {
        "in three months": "August 2023",
        "next month": "June 2023",
    }
    assert resolve_relative("The report on the yesterdays of May", monday) == {}
    assert resolve_relative("tomorrow", dt.date(9999, 12, 31)) == {}


def test_blocks_examples():
    from ctx_langgraph.core.blocks import block_reference, payload_label

    assert payload_label("aGVsbG8=") == "base64 5 bytes sha256:2cf24dba"
    assert payload_label(b"hello") == "5 bytes sha256:2cf24dba"
    assert payload_label("%%%%") == "4 chars sha256:9047d738"
    url = {"type": "image_url", "image_url": {"url": "https://x.io/cat.png"}}
    assert block_reference(url) == "[image_url https://x.io/cat.png]"
    source = {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}
    image = block_reference({"type": "image", "source": source})
    assert image == "[image image/png base64 5 bytes sha256:2cf24dba]"
    file = {"type": "file", "file": {"file_id": "file-abc", "filename": "q3.pdf"}}
    assert block_reference(file) == "[file q3.pdf file_id file-abc]"
    assert block_reference({"type": "image"}) == "[image]"


def test_timestamps_examples():
    import pytest
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from ctx_langgraph.core.timestamps import batch_times, own_time, parse_time

    utc = dt.timezone.utc
    assert parse_time("2023-05-08T13:56:00+02:00") == dt.datetime(2023, 5, 8, 11, 56, tzinfo=utc)
    assert parse_time("2023-05-08") == parse_time(dt.date(2023, 5, 8)) == parse_time(1683504000)
    with pytest.raises(ValueError, match="'last tuesday' is not an ISO-8601 date or time"):
        parse_time("last tuesday")
    assert own_time(HumanMessage("hi", additional_kwargs={"created_at": "2023-05-08"})) == (
        "2023-05-08"
    )
    assert own_time(HumanMessage("hi")) is None
    tool_call = AIMessage(
        "",
        tool_calls=[{"name": "f", "args": {}, "id": "c1"}],
        id="a1",
        additional_kwargs={"created_at": "2023-05-08T13:56Z"},
    )
    got = batch_times(
        [
            ToolMessage("42", tool_call_id="c1", id="t1"),
            HumanMessage("thanks", id="h2", additional_kwargs={"timestamp": True}),
        ],
        previous=tool_call,
    )
    assert [when.isoformat() if when else None for when in got.times] == [
        "2023-05-08T13:56:00+00:00",
        "2023-05-08T13:56:00+00:00",
    ]
    assert got.problems == [
        "message h2: a time must be an ISO-8601 string, a datetime or epoch seconds, got bool"
    ]
    assert batch_times([HumanMessage("hi", id="h3")], previous=tool_call).times == [None]


def test_arguments_examples():
    import pytest

    from ctx_langgraph.core.arguments import described, require_instance

    assert (described("history.sqlite"), described(None), described(dict)) == (
        "the string 'history.sqlite'",
        "None",
        "the class dict (not an instance)",
    )
    assert (described("postgresql://app:pw@db/app"), described(3.5), described(3)) == (
        "a connection string",
        "a float",
        "an int",
    )
    require_instance(3, int, where="f(n=...)", what="an int")
    with pytest.raises(TypeError) as raised:
        require_instance("3", int, where="f(n=...)", what="an int", advice="pass 3")
    assert str(raised.value) == "f(n=...) expects an int, got the string '3': pass 3"


def test_call_scope_examples():
    from ctx_langgraph.core.call_scope import calls_in, scope_of_call
    from ctx_langgraph.core.scope import Scope

    with calls_in(Scope("t", tenant="acme", branch="b2")):
        assert scope_of_call({"thread_id": "t"}, None) == Scope("t", "acme", "b2")
    assert scope_of_call({"thread_id": "t", "ctx_tenant": "acme"}, None) == Scope("t", "acme")
    assert scope_of_call({}, Scope("fixed")) == Scope("fixed")


def test_compact_request_examples():
    import pytest

    from ctx_langgraph.core.compact_request import compact_request, read_request
    from ctx_langgraph.errors import CompactRequestError

    assert compact_request("  keep the API design decisions ", requested_by="user") == {
        "instructions": "keep the API design decisions",
        "requested_by": "user",
    }
    with pytest.raises(CompactRequestError) as raised:
        compact_request(42)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "compaction request not served: instructions must be text, got int"
    )
    assert read_request("keep the deploy steps") == (
        {"instructions": "keep the deploy steps", "requested_by": "user"},
        None,
    )
    assert read_request(None) == (None, None)
    assert read_request(True)[0] == {"instructions": None, "requested_by": "user"}
    assert read_request([1, 2]) == (
        None,
        "a compaction request is true, text or a mapping, got list",
    )


def test_cursor_stem_and_stopword_examples():
    from ctx_langgraph.core.cursor import decode_cursor, encode_cursor
    from ctx_langgraph.core.stem import stem
    from ctx_langgraph.core.stopwords import STOPWORDS
    from ctx_langgraph.core.text import query_terms

    assert decode_cursor(encode_cursor({"v": 1, "seq": 7})) == {"v": 1, "seq": 7}
    words = ["going", "goes", "went", "gone", "groups", "bought", "a1042"]
    assert [stem(w) for w in words] == ["go", "go", "go", "go", "group", "buy", "a1042"]
    assert [stem(w) for w in ("shipped", "children", "ate", "2024", "naïve")] == [
        "ship",
        "child",
        "eat",
        "2024",
        "naïve",
    ]
    terms = query_terms("What is the order id of the user?")
    assert [t for t in terms if t not in STOPWORDS] == ["order", "id", "user"]


def test_asks_stream_usage_example():
    from langchain_openai import ChatOpenAI

    from ctx_langgraph.core.stream_usage import asks_stream_usage

    model = ChatOpenAI(model="my-model", base_url="http://127.0.0.1:8000/v1", api_key="x")
    assert (model.stream_usage, asks_stream_usage(model).stream_usage, model.stream_usage) == (
        None,
        True,
        None,
    )
    told = ChatOpenAI(model="m", base_url="http://x/v1", api_key="x", stream_usage=False)
    assert asks_stream_usage(told) is told


def test_ranked_examples():
    from types import SimpleNamespace as E

    from ctx_langgraph.lookup._ranked import focus, fuse, passages

    dump = "id,name,city\n" + "".join(f"A-{n},Ann {n},Oslo\n" for n in range(50))
    dump += "A-77,Tomasz Ferreira,Porto\n"
    start = focus(dump, ["tomasz", "ferreira", "porto"], 100)
    assert dump[start:].splitlines()[0] == "A-77,Tomasz Ferreira,Porto"
    assert focus(dump, ["ann"], 100) == 0
    a, b, c = E(event_id="a", seq=1), E(event_id="b", seq=2), E(event_id="c", seq=3)
    assert [e.event_id for e in fuse([[a, b], [c, b]])] == ["b", "a", "c"]  # type: ignore[list-item]
    hits = [E(event=E(seq=s), score=x) for s, x in ((9, 3.0), (4, 2.8), (5, 2.0))]
    assert [event.seq for event in passages(hits)] == [4, 9, 5]  # type: ignore[arg-type]


def test_segments_and_page_cap_examples():
    from ctx_langgraph.budget.counters import default_counter
    from ctx_langgraph.history.types import Scope, Segment
    from ctx_langgraph.lookup._segments import rank_segments
    from ctx_langgraph.lookup._state import page_cap, useful_page

    def seg(n: int, text: str) -> Segment:
        return Segment(
            str(n), Scope("t"), n, n + 9, 1, 0, "", text, (), None, None, "active", None,
            dt.datetime(2024, 1, 1),
        )  # fmt: skip

    ranked = rank_segments("pottery class", [seg(1, "hiking"), seg(11, "a pottery class")])
    assert [s.first_seq for s, _ in ranked] == [11]
    assert page_cap(1500, None, "history_lookup", default_counter("gpt-4o")) == 1500
    assert (useful_page(1000), useful_page(400)) == (500, 300)


def test_parse_candidates_examples():
    import pytest

    from ctx_langgraph.errors import MemoryExtractionError
    from ctx_langgraph.memory.extract import parse_candidates

    answer = '[{"key": "city", "content": "The user lives in Oslo.", "confidence": 0.8}]'
    assert parse_candidates(answer, ("m1",), set())[0].key == "city"
    with pytest.raises(MemoryExtractionError) as raised:
        parse_candidates("I think the user likes tea", (), set())
    assert str(raised.value) == (
        "memory extraction failed: the answer is not JSON: 'I think the user likes tea'"
    )


def test_format_table_example():
    from ctx_langgraph.core.table import format_table

    assert format_table(["name", "n"], [["a", 1200], ["bb", 3]]).splitlines() == [
        "name |     n",
        "-----+------",
        "a    | 1,200",
        "bb   |     3",
    ]
