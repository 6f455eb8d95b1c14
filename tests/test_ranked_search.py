"""Ranked search: English stems in the index, one BM25 scorer, the same ranking and scores on
every backend (SQLite file, SQLite :memory:, PostgreSQL), sync and async."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctx_langgraph.core.stem import IRREGULAR, stem
from ctx_langgraph.core.text import (
    DOCUMENT_LIMIT,
    STEMS_MARK,
    match_tokens,
    rank_terms,
    rank_tokens,
    search_document,
    token_document,
)
from ctx_langgraph.history import (
    HistoryStore,
    PostgresHistoryStore,
    RankedHit,
    Scope,
    SQLiteHistoryStore,
)
from ctx_langgraph.history import rank as rank_ops
from ctx_langgraph.storage.dialects import scope_key

T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)


def human(n: int, text: str) -> HumanMessage:
    return HumanMessage(text, id=f"m{n}")


def messages(*texts: str) -> list[HumanMessage]:
    return [human(n, text) for n, text in enumerate(texts, start=1)]


def seqs(hits: list[RankedHit]) -> list[int]:
    return [hit.event.seq for hit in hits]


def bm25_oracle(
    texts: dict[int, str], query: str, events: int, found_by: dict[int, str] | None = None
) -> list[tuple[int, float]]:
    """BM25 written out from its definition, over every event having a query stem (few events:
    no candidate bound applies; ``found_by``: the texts that decide which events are found,
    when they differ from the scored ones): (seq, score), best first, ties newest first."""
    stems = rank_terms(query)
    tokens = {seq: rank_tokens(text) for seq, text in texts.items()}
    finding = {seq: rank_tokens(text) for seq, text in (found_by or texts).items()}
    found = {seq: tokens[seq] for seq, words in finding.items() if set(words) & set(stems)}
    if not found:
        return []
    avgdl = sum(len(words) for words in found.values()) / len(found)
    scores = {}
    for seq, words in found.items():
        total = 0.0
        for term in stems:
            df = sum(term in other for other in tokens.values())
            if not df:
                continue
            idf = math.log(1 + (events - df + 0.5) / (df + 0.5))
            tf = words.count(term)
            total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / avgdl))
        scores[seq] = total
    return sorted(scores.items(), key=lambda item: (-item[1], -item[0]))


# ----------------------------------------------------------------------------- stems (pure)


def test_stems_join_inflections_and_irregular_forms():
    for word in ["go", "goes", "going", "went", "gone"]:
        assert stem(word) == "go", word
    assert stem("groups") == stem("group") == "group"
    assert stem("bought") == stem("buying") == "buy"
    assert stem("ate") == stem("eaten") == stem("eating") == "eat"
    assert stem("saw") == stem("seen") == stem("sees") == "see"
    assert stem("made") == stem("making") == "make"
    assert stem("met") == stem("meeting") == "meet"
    assert stem("took") == stem("taken") == stem("takes") == "take"
    assert len(IRREGULAR) >= 40
    assert all(stem(form) == stem(base) for form, base in IRREGULAR.items())


def test_numbers_ids_and_other_scripts_are_not_stemmed():
    assert rank_tokens("2024 a1042 ord 48213 naïve 日本") == [
        "2024",
        "a1042",
        "ord",
        "48213",
        *match_tokens("naïve"),
        *match_tokens("日"),
        *match_tokens("本"),
        *match_tokens("日本"),
    ]
    assert stem("1e5") == "1e5" and stem("running2") == "running2"
    assert rank_terms("ORD-48213 shipped") == ["ord", "48213", "ship"]


def test_rank_terms_drop_glue_words_and_repeats():
    assert rank_terms("What did we eat, and what was eaten?") == ["eat"]
    assert rank_terms("the of and what") == []
    assert rank_terms("Groups group GROUPING") == ["group"]


def test_search_document_holds_tokens_then_the_stems_that_differ():
    assert search_document("order 7 group") is None  # plain, every word its own stem
    assert search_document("we went to the groups") == f"{STEMS_MARK}go group"
    assert (
        search_document("café groups")
        == " ".join([*match_tokens("café"), "groups"]) + f"{STEMS_MARK}group"
    )
    # the token document of schema v4 is the part before the stems
    for text in ["we went to the groups", "café groups", "x\x00 payloads shipped"]:
        document = search_document(text) or ""
        assert (token_document(text) or "") == document.partition(STEMS_MARK)[0]


def test_a_huge_search_document_keeps_tokens_and_stems_within_the_limit():
    text = " ".join(f"w{n}x walking{n}" for n in range(60_000)) + " \x00 shipped"
    document = search_document(text)
    assert document is not None and len(document) <= DOCUMENT_LIMIT
    assert "shipped" not in document  # first seen past the limit


# ----------------------------------------------------------------------------- the store


async def test_went_finds_go_and_going_and_groups_finds_group(api):
    await api.append(
        "t",
        messages(
            "we go hiking on Sunday",
            "going home now",
            "the group met at noon",
            "a parade downtown",
            "he goes there daily",
        ),
    )
    assert sorted(seqs(await api.rank("t", "went"))) == [1, 2, 5]
    assert seqs(await api.rank("t", "groups")) == [3]
    assert seqs(await api.rank("t", "meeting")) == [3]
    # exact search is unchanged: a stem never matches as a word
    assert [h.seq for h in (await api.search("t", "went")).hits] == []
    assert [h.seq for h in (await api.search("t", "go")).hits] == [1]


async def test_scores_are_bm25(api):
    texts = [
        "refund the order today",
        "the refund of order A-1042 came through",
        "order pizza",
        "orders shipped and orders refunded",
        "nothing relevant",
        "an order",
    ]
    await api.append("t", messages(*texts))
    by_seq = dict(enumerate(texts, start=1))
    for query in ["refund order", "refunds", "order A-1042", "shipping orders"]:
        hits = await api.rank("t", query)
        expected = bm25_oracle(by_seq, query, len(texts))
        assert seqs(hits) == [seq for seq, _ in expected], query
        assert [hit.score for hit in hits] == pytest.approx([s for _, s in expected], rel=1e-12)
        assert all(isinstance(hit, RankedHit) and hit.score > 0 for hit in hits)


async def test_candidates_read_a_few_at_a_time_score_as_when_read_at_once(api, monkeypatch):
    """The candidates' texts are read (and counted) in chunks, the first with the counts: scores
    and order do not depend on the chunk size, and every chunk is read."""
    texts = [
        f"refund of order {n} and order {n + 1}" if n % 3 == 0 else f"order {n} refunded"
        for n in range(1, 12)
    ]
    await api.append("t", messages(*texts))
    by_seq = dict(enumerate(texts, start=1))
    for size in (2, 3, 100):
        monkeypatch.setattr(rank_ops, "TEXTS_PER_READ", size)
        for query in ["refund order", "refunded orders 4"]:
            hits = await api.rank("t", query)
            expected = bm25_oracle(by_seq, query, len(texts))
            assert seqs(hits) == [seq for seq, _ in expected], (size, query)
            assert [hit.score for hit in hits] == pytest.approx([s for _, s in expected], rel=1e-12)


async def test_a_speaker_name_counts_as_a_word_of_what_they_said(api):
    said = [
        HumanMessage("I painted a sunrise by the lake", id="c1", name="Caroline"),
        AIMessage("Caroline, I painted a sunset by the lake too", id="m1", name="Melanie"),
        AIMessage("I painted the lake in the morning", id="m2", name="Melanie"),
        HumanMessage("Great weather for painting today", id="c2", name="Caroline"),
        AIMessage("Nothing to add", id="m3", name="Melanie"),
        ToolMessage("painted caroline", tool_call_id="x", name="caroline", id="t1"),
    ]
    await api.append("t", said)
    hits = await api.rank("t", "What did Caroline paint by the lake?")
    # what Caroline said ranks above what was said to her; her message without a word of the
    # query besides her name is not found (names score the events the text finds)
    assert seqs(hits)[0] == 1 and 5 not in seqs(hits)
    # the name's df: the texts with the stem plus the messages of the speakers named so (a
    # tool's name is not a speaker's)
    events = await api.read_events("t")
    plain = {e.seq: e.text for e in events}
    texts = {e.seq: e.text + (f"\n{e.name}" if e.role != "tool" else "") for e in events}
    expected = dict(bm25_oracle(texts, "Caroline lake", len(events), found_by=plain))
    hits = await api.rank("t", "Caroline lake")
    assert {h.event.seq: h.score for h in hits} == pytest.approx(expected, rel=1e-12)
    # without names, nothing changes
    await api.append("u", messages("I painted a sunrise by the lake", "Caroline, the lake"))
    assert seqs(await api.rank("u", "Caroline lake")) == [2, 1]


async def test_rare_words_outweigh_common_ones_and_shorter_texts_win_ties(api):
    common = [f"the weather was nice on day {n}" for n in range(8)]
    await api.append(
        "t",
        messages(
            *common,
            "the weather and my passport",  # 9: rare word
            "weather weather weather",  # 10: the common word thrice
            "my passport expired last month after the trip",  # 11: rare word, longer text
        ),
    )
    hits = await api.rank("t", "passport weather")
    assert seqs(hits)[:3] == [9, 11, 10]
    assert hits[0].score > hits[1].score > hits[2].score
    # one word as often: the shorter text first; equal scores: the newest first
    await api.append(
        "t",
        [human(12, "kayak trip"), human(13, "kayak trip with friends"), human(14, "kayak trip")],
    )
    hits = await api.rank("t", "kayak")
    assert seqs(hits) == [14, 12, 13]
    assert hits[0].score == hits[1].score > hits[2].score


async def test_filters_narrow_the_ranked_events(api):
    await api.append(
        "t",
        [
            HumanMessage("book a flight to Tokyo", id="h1"),
            AIMessage(
                "", id="a1", tool_calls=[{"name": "flights", "args": {"to": "Tokyo"}, "id": "c1"}]
            ),
            ToolMessage("flight booked: Tokyo", tool_call_id="c1", name="flights", id="t1"),
            HumanMessage("and a hotel in Tokyo", id="h2"),
        ],
        created_at=[T0, T0, T0 + dt.timedelta(hours=1), T0 + dt.timedelta(hours=2)],
    )
    assert sorted(seqs(await api.rank("t", "tokyo"))) == [1, 2, 3, 4]
    assert sorted(seqs(await api.rank("t", "tokyo", min_seq=2, max_seq=3))) == [2, 3]
    since = T0 + dt.timedelta(minutes=30)
    assert sorted(seqs(await api.rank("t", "tokyo", since=since))) == [3, 4]
    assert sorted(seqs(await api.rank("t", "tokyo", until=since))) == [1, 2]
    assert sorted(seqs(await api.rank("t", "tokyo", roles="human"))) == [1, 4]
    assert sorted(seqs(await api.rank("t", "tokyo", roles=["ai", "tool"]))) == [2, 3]
    assert sorted(seqs(await api.rank("t", "tokyo", tool_name="flights"))) == [2, 3]
    assert len(await api.rank("t", "tokyo", limit=2)) == 2
    assert await api.rank("t", "tokyo", tool_name="hotels") == []
    assert await api.rank("other", "tokyo") == []  # a thread never written


async def test_the_filters_count_events_for_idf(api):
    """N and df count only the events that pass the filters."""
    texts = ["apple pie", "apple tart", "banana bread", "cherry cake", "apple juice"]
    await api.append("t", messages(*texts))
    hits = await api.rank("t", "apple", min_seq=3)
    expected = bm25_oracle({3: texts[2], 4: texts[3], 5: texts[4]}, "apple", 3)
    assert [(hit.event.seq, hit.score) for hit in hits] == [
        (seq, pytest.approx(score, rel=1e-12)) for seq, score in expected
    ]


async def test_hidden_deleted_and_revised_events(api):
    await api.append("t", messages("we went camping", "camping again", "go camping soon"))
    assert sorted(seqs(await api.rank("t", "camp"))) == [1, 2, 3]
    assert await api.hide_events("t", ["m2"]) == 1
    assert await api.delete_events("t", ["m3"]) == 1
    assert seqs(await api.rank("t", "camping")) == [1]
    await api.append("t", [human(1, "we stayed home")])  # a revision: its old words go
    assert await api.rank("t", "camping") == []
    assert seqs(await api.rank("t", "staying")) == [1]
    assert await api.show_events("t", ["m2"]) == 1
    assert seqs(await api.rank("t", "camps")) == [2]


async def test_the_counts_are_kept_and_brought_up_to_date_with_what_is_appended(api):
    """N and the speakers' counts are counted over the branch once, then only what each append
    added; an edit or a thread made again counts the whole branch again. The scores stay BM25's
    over every event."""
    said = [
        HumanMessage("we sailed to the island", id="c1", name="Caroline"),
        AIMessage("Caroline sailed well", id="m1", name="Melanie"),
        HumanMessage("the island had goats", id="c2", name="Caroline"),
    ]
    counts = api.store.rank_counts

    async def check(query: str) -> None:
        events = await api.read_events("t")
        plain = {e.seq: e.text for e in events}
        texts = {e.seq: e.text + (f"\n{e.name}" if e.name else "") for e in events}
        expected = dict(bm25_oracle(texts, query, len(events), found_by=plain))
        hits = await api.rank("t", query)
        assert {h.event.seq: h.score for h in hits} == pytest.approx(expected, rel=1e-12)

    await api.append("t", said)
    await check("Caroline island")
    assert counts.passes == 1
    for n in range(3):  # turns: a new speaker whose name is a query word, then others
        await api.append("t", [AIMessage(f"a trip {n}", id=f"i{n}", name="Island")])
        await api.append("t", [HumanMessage(f"sailing {n}", id=f"s{n}", name="Caroline")])
        await api.append("t", [HumanMessage(f"the island {n}", id=f"l{n}", name="Melanie")])
        await check("Caroline island")
    assert counts.passes == 1
    assert await api.hide_events("t", ["c2"]) == 1
    await check("Caroline island")
    assert counts.passes == 2
    await api.delete_thread("t")
    await api.append("t", [HumanMessage("an island again", id="x1", name="Jon")])
    await check("island Jon")
    assert counts.passes == 3


async def test_a_count_is_bounded_by_the_head_it_is_stamped_with(api):
    """Events a writer commits while the count runs (beyond the head read first) are neither
    counted under that head nor counted twice later."""
    from ctx_langgraph.history.rank_counts import RankCounts, read_stamped, speaker_counts
    from ctx_langgraph.history.search import SearchFilter, filter_clause

    store = api.store
    await api.append("t", messages("one", "two", "three"))
    found = store.db.run(read_stamped(Scope("t")))
    await api.append("t", messages("one", "two", "three", "four", "five"))  # after the read
    where, args = filter_clause(store.db.dialect, Scope("t"), found.chain, SearchFilter())
    counts = RankCounts()
    assert store.db.run(speaker_counts(Scope("t"), found, where, args, counts)) == {None: 3}
    now = store.db.run(read_stamped(Scope("t")))
    assert store.db.run(speaker_counts(Scope("t"), now, where, args, counts)) == {None: 5}
    assert counts.passes == 1


async def test_branches_rank_their_own_lineage(api):
    await api.append("t", messages("tennis at noon", "more tennis", "tennis finals"))
    branch = Scope("t", branch="b")
    await api.create_branch(branch, "main", 2)
    await api.append(branch, [human(9, "playing tennis on the branch")])
    assert sorted(seqs(await api.rank(branch, "tennis"))) == [1, 2, 3]
    branch_hits = {hit.event.seq: hit.event.event_id for hit in await api.rank(branch, "tennis")}
    assert branch_hits == {1: "m1", 2: "m2", 3: "m9"}
    main_hits = {hit.event.seq: hit.event.event_id for hit in await api.rank("t", "tennis")}
    assert main_hits == {1: "m1", 2: "m2", 3: "m3"}
    assert seqs(await api.rank(branch, "plays")) == [3]
    assert await api.rank("t", "plays") == []


async def test_a_query_without_words_to_rank_by_is_refused(api):
    await api.append("t", messages("anything"))
    for query in ["the of and what", "", "  ?! "]:
        with pytest.raises(ValueError, match="no words to rank by") as caught:
            await api.rank("t", query)
        assert repr(query) in str(caught.value)
    with pytest.raises(ValueError, match="at most 32"):
        await api.rank("t", " ".join(f"word{n}" for n in range(40)))
    with pytest.raises(TypeError, match="query must be a string"):
        await api.rank("t", 42)
    with pytest.raises(ValueError, match="limit must be at least 1"):
        await api.rank("t", "anything", limit=0)
    with pytest.raises(TypeError, match="since must be a datetime"):
        await api.rank("t", "anything", since="yesterday")


async def test_each_stem_reads_only_its_newest_matching_events(api, monkeypatch):
    """A common stem's older events are not read, but every match is counted for its weight."""
    monkeypatch.setattr(rank_ops, "CANDIDATES_PER_STEM", 3)
    texts = [f"walked the dog, day {n}" for n in range(1, 9)] + ["a rare zebra walk"]
    await api.append("t", messages(*texts))
    hits = await api.rank("t", "walking zebra")
    assert seqs(hits) == [9, 8, 7]  # the newest 3 walks (9 among them) and zebra's 9
    idf_walk = math.log(1 + (9 - 9 + 0.5) / (9 + 0.5))  # all 9 counted, though 3 were read
    idf_zebra = math.log(1 + (9 - 1 + 0.5) / 1.5)
    lengths = {seq: len(rank_tokens(texts[seq - 1])) for seq in (7, 8, 9)}
    avgdl = sum(lengths.values()) / 3

    def part(idf: float, seq: int) -> float:
        return idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * lengths[seq] / avgdl))

    assert hits[0].score == pytest.approx(part(idf_walk, 9) + part(idf_zebra, 9), rel=1e-12)
    assert hits[1].score == pytest.approx(part(idf_walk, 8), rel=1e-12)


# ----------------------------------------------------------------------------- every backend alike

QUERIES = [
    "where did we go hiking",
    "refund for order ORD-48213",
    "children bought books",
    "café résumé",
    "你好",
    "meeting",
]
CORPUS = [
    "We went hiking at Yosemite last weekend with the kids.",
    "Going hiking again? Take the children, they loved it.",
    "Did the refund for order ORD-48213 ever come through?",
    "I bought three books; the children read them all.",
    "The café had a great résumé workshop.",
    "我说你好世界",
    "Our meeting moved: we meet on Friday and met twice last week.",
    "hike hike hike",
    "orders refunded: ORD-48213 and ORD-55120",
    "nothing to see here",
]


def _fill(store: HistoryStore) -> None:
    store.setup()
    store.append(
        "t",
        [human(n, text) for n, text in enumerate(CORPUS, start=1)],
        created_at=[T0 + dt.timedelta(minutes=n) for n in range(len(CORPUS))],
    )
    store.create_branch(Scope("t", branch="b"), "main", 5)
    store.append(Scope("t", branch="b"), [human(99, "a branch hike, going uphill")])
    store.hide_events("t", ["m10"])


def _rankings(store: HistoryStore) -> list[list[tuple[str, int, float]]]:
    return [
        [(hit.event.event_id, hit.event.seq, hit.score) for hit in store.rank(scope, query)]
        for scope in ("t", Scope("t", branch="b"))
        for query in QUERIES
    ]


@pytest.mark.postgres
def test_every_backend_ranks_the_same_events_with_the_same_scores(tmp_path, pg_dsn):
    stores = [
        SQLiteHistoryStore.from_path(tmp_path / "h.sqlite"),
        SQLiteHistoryStore.from_path(":memory:"),
        PostgresHistoryStore.from_conn_string(pg_dsn),
    ]
    try:
        for store in stores:
            _fill(store)
        rankings = [_rankings(store) for store in stores]
    finally:
        for store in stores:
            store.close()
    assert rankings[0] == rankings[1] == rankings[2]  # exactly: the same floats
    main, branch = rankings[0][: len(QUERIES)], rankings[0][len(QUERIES) :]
    assert all(main)  # every query found something
    first = dict(zip(QUERIES, main, strict=True))
    assert "m99" in {event_id for event_id, _, _ in branch[0]}  # the branch's own hike
    assert not branch[-1]  # the meeting is past the fork
    assert [seq for _, seq, _ in first["where did we go hiking"]][:2] == [2, 1]  # both words
    assert {event_id for event_id, _, _ in first["children bought books"]} == {"m2", "m4"}


# ----------------------------------------------------------------------------- migration


@pytest.mark.parametrize(
    "backend", ["sqlite_file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_version_5_store_upgrades_and_ranks_by_stems(backend, monkeypatch):
    """Rows written before v6 (no stems in the index) get them: ranked search finds their
    inflections, and exact search finds what it found before."""
    from ctx_langgraph.history import events as event_ops
    from ctx_langgraph.history import rows as _serde
    from ctx_langgraph.storage import migrations
    from ctx_langgraph.storage import runner as base

    def no_segments(*_args: object) -> Any:  # no segment index before v8
        return 0
        yield

    old = messages(
        "We went hiking in the mountains",
        "the children are going to the café",
        "order ORD-48213 shipped",
        "plain words only",
    )
    with monkeypatch.context() as patch:  # the code as it was at schema version 5
        patch.setattr(migrations, "SCHEMA_VERSION", 5)
        patch.setattr(base, "SCHEMA_VERSION", 5)
        patch.setattr(_serde, "search_document", token_document)
        patch.setattr(event_ops, "invalidate_segments", no_segments)
        patch.setattr(event_ops, "drop_vectors", no_segments)  # no vector index before v10
        store = backend.make()
        assert store.setup() == 5
        store.append("t", old)
        store.hide_events("t", ["m4"])
        store.close()
    store = backend.make()
    assert store.setup() == base.SCHEMA_VERSION == 11
    assert sorted(seqs(store.rank("t", "go"))) == [1, 2]
    assert seqs(store.rank("t", "hike")) == [1]
    assert seqs(store.rank("t", "child")) == [2]
    assert seqs(store.rank("t", "ship")) == [3]
    assert store.rank("t", "plain") == []  # hidden
    assert [h.seq for h in store.search("t", "café").hits] == [2]
    assert [h.seq for h in store.search("t", "ORD 48213").hits] == [3]
    assert [h.seq for h in store.search("t", "went hiking").hits] == [1]
    assert store.search("t", "go").hits == ()
    store.append("t", [human(5, "they go shopping")])
    assert sorted(seqs(store.rank("t", "went shopping"))) == [1, 2, 5]
    store.close()


# ----------------------------------------------------------------------------- every look-up indexed


@pytest.mark.parametrize(
    "backend", ["sqlite_file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_ranked_search_reads_through_indexes(backend, monkeypatch):
    from test_history_conformance import _plan

    store = backend.make()
    store.setup()
    store.append("t", messages(*CORPUS))
    ran = []
    run = store.db._run_statement

    def recording(*args):
        ran.append(args[-1])
        return run(*args)

    monkeypatch.setattr(store.db, "_run_statement", recording)
    store.rank("t", "going hiking children", roles=["human"], tool_name="x", min_seq=1)
    store.rank("t", "going hiking children", since=T0)
    monkeypatch.undo()
    statements = [s for s in ran if "ctx_events" in s.sql]
    assert len(statements) >= 4  # the counts, the matches with their texts, the hits
    for stmt in statements:
        plan = _plan(store, backend, stmt.sql, stmt.params)
        if backend.name == "postgres":
            assert "Seq Scan on ctx_events" not in plan, (stmt.sql, plan)
        else:
            assert not re.search(r"^SCAN (e|ctx_events)\b(?!_)", plan, re.M), (stmt.sql, plan)
    store.close()


@pytest.mark.postgres
def test_a_stems_matches_are_found_by_the_thread_lexemes_alone(pg_dsn):
    """On PostgreSQL a word's entry in the full-text index lists one thread's events (each
    lexeme starts with the thread's prefix), and the match checks the thread's columns on the
    rows found, in a form no btree can serve: the planner, which takes the two conditions as
    independent, would otherwise intersect each stem's few matches with a read of the thread's
    every entry (about 1 ms per stem at 10,000 events). Two threads whose prefixes are the same
    still rank only their own events."""
    from ctx_langgraph.storage.tables import search as tables

    store = PostgresHistoryStore.from_conn_string(pg_dsn)
    store.setup()
    store.append("t", messages(*CORPUS))
    store.append("other", messages("going hiking with the children", "hiking again"))
    ran = []
    run = store.db._run_statement

    def recording(*args):
        ran.append(args[-1])
        return run(*args)

    store.db._run_statement = recording
    alone = seqs(store.rank("t", "going hiking children"))
    store.db._run_statement = run
    (matching,) = [s for s in ran if s.sql.startswith("WITH m0")]
    params = [p for p in matching.params if isinstance(p, str)]
    prefix = tables.pg_scope_prefix(scope_key("default", "t"))
    assert all(term.startswith(prefix) for p in params if "|" in p for term in _lexemes(p))
    cte = matching.sql.split(" AS MATERIALIZED ")[1]
    assert "(e.tenant || '') = ?" in cte and "(e.thread_id || '') = ?" in cte
    assert "e.tenant = ?" not in cte and "e.thread_id = ?" not in cte

    with pytest.MonkeyPatch.context() as patch:  # every thread's lexemes start alike
        patch.setattr(tables, "PG_SCOPE_CHARS", 1)
        store.db.run(_reindex(tables), write=True)
        assert seqs(store.rank("t", "going hiking children")) == alone
        assert seqs(store.rank("other", "going hiking children")) == [1, 2]
    store.close()


@pytest.mark.postgres
def test_an_event_of_very_many_words_is_indexed_with_well_formed_lexemes(pg_dsn):
    """A tsvector holds at most 1 MiB of lexeme text, and past that ``array_to_tsvector``
    garbles lexemes without an error: the thread's prefix on each lexeme must not take a
    document of very many distinct words there. The index keeps its first
    ``PG_MAX_LEXEMES`` lexemes, each a word or stem of the event with the thread's prefix."""
    import psycopg

    from ctx_langgraph.storage.tables import search as tables

    store = PostgresHistoryStore.from_conn_string(pg_dsn)
    store.setup()
    dump = " ".join(f"id{n}" for n in range(60_000))  # a 500,000-character dump of ids
    store.append("t", [human(1, dump), human(2, "a short note about id1")])
    prefix = tables.pg_scope_prefix(scope_key("default", "t"))
    with psycopg.connect(pg_dsn) as conn:
        (lexemes,) = conn.execute(
            f"SELECT tsvector_to_array({tables.pg_tsv()}) FROM ctx_events WHERE seq = 1"
        ).fetchone()
    assert len(lexemes) == tables.PG_MAX_LEXEMES
    words = set(dump.split())
    assert all(lexeme.startswith(prefix) for lexeme in lexemes)
    assert {lexeme[len(prefix) :] for lexeme in lexemes} <= words
    assert [h.seq for h in store.search("t", "id1").hits] == [1, 2]  # lexemes sort: id1 first
    assert [h.seq for h in store.search("t", "id12345").hits] == [1]
    store.close()


def _lexemes(tsquery: str) -> list[str]:
    return re.findall(r"'([^']*)'", tsquery)


def _reindex(tables: Any) -> Any:
    from ctx_langgraph.storage.statements import Stmt

    yield Stmt("DROP INDEX ctx_events_tsv")
    yield Stmt(f"CREATE INDEX ctx_events_tsv ON ctx_events USING GIN ({tables.pg_tsv()})")


# ----------------------------------------------------------------------------- property

WORDS = ["walk", "walked", "walking", "went", "go", "goes", "group", "groups", "the", "a",
         "children", "child", "ran", "running", "order", "orders", "7", "café", "日本"]  # fmt: skip


def test_every_hit_has_a_query_stem_and_the_oracle_agrees(store):
    thread_ids = itertools.count()

    @settings(max_examples=25, deadline=None)
    @given(
        texts=st.lists(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), min_size=1, max_size=8
        ),
        query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        hidden=st.sets(st.integers(1, 8), max_size=3),
    )
    def check(texts: list[list[str]], query: list[str], hidden: set[int]) -> None:
        thread = f"p{next(thread_ids)}"
        words = [" ".join(text) for text in texts]
        store.append(thread, [human(n, text) for n, text in enumerate(words, start=1)])
        store.hide_events(thread, [f"m{n}" for n in hidden])
        question = " ".join(query)
        stems = set(rank_terms(question))
        if not stems:
            with pytest.raises(ValueError, match="no words to rank by"):
                store.rank(thread, question)
            return
        hits = store.rank(thread, question)
        for hit in hits:
            assert stems & set(rank_tokens(hit.event.text)), (hit.event.text, question)
            assert hit.event.visible
        shown = {n: text for n, text in enumerate(words, start=1) if n not in hidden}
        expected = bm25_oracle(shown, question, len(shown))[:20]
        assert [hit.event.seq for hit in hits] == [seq for seq, _ in expected]
        assert [hit.score for hit in hits] == pytest.approx([s for _, s in expected], rel=1e-12)

    check()


def test_the_rank_signature_is_the_documented_one():
    import inspect

    for name in ("rank", "arank"):
        parameters = inspect.signature(getattr(HistoryStore, name)).parameters
        assert list(parameters) == [
            "self",
            "scope",
            "query",
            "limit",
            "min_seq",
            "max_seq",
            "since",
            "until",
            "roles",
            "tool_name",
            "mode",
        ]
