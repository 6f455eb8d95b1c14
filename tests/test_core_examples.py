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
