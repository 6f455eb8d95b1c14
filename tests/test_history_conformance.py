"""One conformance suite for every history-store backend (SQLite file, SQLite :memory:,
PostgreSQL), each test run through both the sync and the async API."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from thread_api import threads_of

from ctx_langgraph.errors import (
    CompactionConflict,
    EventConflict,
    HistoryStoreError,
    ScopeError,
    StaleCandidate,
)
from ctx_langgraph.history import HistoryStore, KeyFact, Scope
from ctx_langgraph.storage.statements import Stmt
from ctx_langgraph.threads import delete_thread, export_thread, import_thread

T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)


def human(n: int, text: str | None = None) -> HumanMessage:
    return HumanMessage(text or f"message number {n}", id=f"m{n}")


def turns(start: int, stop: int, text: str = "message number {n}") -> list[HumanMessage]:
    return [HumanMessage(text.format(n=n), id=f"m{n}") for n in range(start, stop)]


# ----------------------------------------------------------------------------- schema


async def test_setup_is_idempotent_and_reports_version(api):
    from ctx_langgraph.history import SCHEMA_VERSION

    assert await api.setup() == SCHEMA_VERSION
    assert await api.setup() == SCHEMA_VERSION


async def test_operations_before_setup_say_so(backend):
    store = backend.make() if backend.shared else None
    if store is None:
        from ctx_langgraph.history import SQLiteHistoryStore

        store = SQLiteHistoryStore.from_path(":memory:")
    try:
        with pytest.raises(HistoryStoreError, match=r"version 0.*call setup\(\)"):
            store.append("t", [human(1)])
        with pytest.raises(HistoryStoreError, match=r"call setup\(\)"):
            await store.aread_events("t")
    finally:
        await store.aclose()


async def test_schema_newer_than_code_is_refused(backend, store):
    store.setup()
    store.db._execute(_raw_insert_migration(99), write=True)
    fresh = backend.make()
    fresh.db._schema_checked = False
    with pytest.raises(HistoryStoreError, match="newer than this ctx-langgraph"):
        fresh.read_events("t")
    with pytest.raises(HistoryStoreError, match="upgrade ctx-langgraph"):
        fresh.setup()


@pytest.mark.parametrize(
    "backend", ["sqlite_file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_a_version_2_store_upgrades_and_keeps_every_event_exact(backend, monkeypatch):
    """Rows written before v3 (full JSON, stored tsvector) read and search the same after it."""
    from langchain_core.messages import AIMessage, message_to_dict

    from ctx_langgraph.history import rows as _serde
    from ctx_langgraph.storage import migrations
    from ctx_langgraph.storage import runner as base

    old = [
        HumanMessage("Refund order A-1042 today", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "refund", "args": {"o": 1}, "id": "c1"}]),
        HumanMessage("Second thought: refund B-7 too", id="h2"),
    ]
    with monkeypatch.context() as patch:  # the code as it was at schema version 2
        patch.setattr(migrations, "SCHEMA_VERSION", 2)
        patch.setattr(base, "SCHEMA_VERSION", 2)
        patch.setattr(_serde, "_compact", lambda record, text: record)
        patch.setattr(_serde, "_content_hash", _hex_content_hash)
        patch.setattr(_serde, "search_document", lambda text: None)
        store = backend.make()
        assert store.setup() == 2
        store.append("t", old)
        store.close()
    store = backend.make()
    assert store.setup() == base.SCHEMA_VERSION
    new = [HumanMessage("Refund order C-9 as well", id="h3")]
    store.append("t", new)
    store.append("t", [HumanMessage("Refund order A-1042 tomorrow", id="h1")])  # a revision
    events = store.read_events("t")
    assert [e.content for e in events] == [
        message_to_dict(m)
        for m in [HumanMessage("Refund order A-1042 tomorrow", id="h1"), *old[1:], *new]
    ]
    assert store.event_revisions("t", "h1") == [(1, message_to_dict(old[0]))]
    assert [h.event_id for h in store.search("t", "refund order").hits] == ["h1", "h3"]
    assert [h.event_id for h in store.search("t", "B 7").hits] == ["h2"]
    store.close()


@pytest.mark.parametrize(
    "backend", ["sqlite_file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_a_version_3_store_upgrades_and_indexes_its_rows_for_search(backend, monkeypatch):
    """Rows written before v4 (no search document) read back the same after it, and those
    whose words the engines split their own way (CJK, rare symbols, very long words) become
    searchable the way new rows are."""
    from ctx_langgraph.history import rows as _serde
    from ctx_langgraph.storage import migrations
    from ctx_langgraph.storage import runner as base

    long_word = "y" * 3000
    old = [
        HumanMessage("我说你好世界", id="h1"),
        HumanMessage("½ cup of sugar", id="h2"),
        HumanMessage("plain refund words", id="h3"),
        HumanMessage(f"résumé {long_word}", id="h4"),
    ]
    with monkeypatch.context() as patch:  # the code as it was at schema version 3
        patch.setattr(migrations, "SCHEMA_VERSION", 3)
        patch.setattr(base, "SCHEMA_VERSION", 3)
        patch.setattr(_serde, "search_document", lambda text: None)
        patch.setattr(_serde, "_content_hash", _hex_content_hash)
        store = backend.make()
        assert store.setup() == 3
        store.append("t", old)
        store.close()
    store = backend.make()
    assert store.setup() == base.SCHEMA_VERSION
    assert [e.message for e in store.read_events("t")] == old

    def found(query: str) -> list[str]:
        return [h.event_id for h in store.search("t", query).hits]

    assert found("你好") == ["h1"] and found("好") == ["h1"]
    assert found("½") == ["h2"] and found("sugar") == ["h2"]
    assert found("refund") == ["h3"]
    assert found("résumé") == ["h4"] and found(long_word) == ["h4"]
    store.append("t", [HumanMessage("now plain text", id="h1")])  # a revision drops the old words
    assert found("你好") == [] and found("plain") == ["h1", "h3"]
    store.close()


@pytest.mark.parametrize(
    "backend", ["sqlite_file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_a_version_4_store_upgrades_in_place_to_binary_hashes_and_one_event_id_index(
    backend, monkeypatch
):
    """Rows written before v5 (hex content hashes, two indexes by event id) upgrade in place:
    the same messages are still duplicates, revisions and branches still work, search and
    export read the same, and an event id is still unique per branch."""
    from langchain_core.messages import message_to_dict

    from ctx_langgraph.core.text import token_document
    from ctx_langgraph.errors import HistoryStoreError
    from ctx_langgraph.history import events as _ops
    from ctx_langgraph.history import rows as _serde
    from ctx_langgraph.history.rows import message_to_row
    from ctx_langgraph.storage import migrations
    from ctx_langgraph.storage import runner as base
    from ctx_langgraph.threads import ops as thread_ops
    from ctx_langgraph.usage import ledger_rows

    event_ops = _ops

    old = [
        HumanMessage("Refund order A-1042 today", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "refund", "args": {"o": 1}, "id": "c1"}]),
        ToolMessage("refunded", tool_call_id="c1", name="refund", id="t1"),
        HumanMessage("Second thought: refund B-7 too", id="h2"),
    ]
    revised = HumanMessage("Refund order A-1042 tomorrow", id="h1")
    on_branch = HumanMessage("On the branch: refund C-3 instead", id="h2")
    branch = Scope("t", branch="retry")
    with monkeypatch.context() as patch:  # the code as it was at schema version 4
        patch.setattr(migrations, "SCHEMA_VERSION", 4)
        patch.setattr(base, "SCHEMA_VERSION", 4)
        patch.setattr(_serde, "_content_hash", _hex_content_hash)
        patch.setattr(_serde, "search_document", token_document)
        patch.setattr(event_ops, "invalidate_segments", _no_segments)  # no index before v8
        patch.setattr(event_ops, "drop_vectors", _no_segments)  # no vector index before v10
        patch.setattr(thread_ops, "_exported_segments", _no_segments)
        for name in ("_CALLS", "_TOTALS"):  # the ledger's columns before v7 (and v9)
            columns = getattr(ledger_rows, name).replace(", cacheable_prefix", "")
            patch.setattr(ledger_rows, name, columns.replace(", makeup", ""))
        store = backend.make()
        assert store.setup() == 4
        store.append("t", old)
        store.append("t", [revised])
        store.create_branch(branch, "main", 3)
        store.append(branch, [on_branch])  # the id of main's seq 4, on another branch
        assert store.hide_events("t", ["t1"]) == 1
        exported = export_thread(store, "t")
        assert {len(h) for h in _column(store, "ctx_events", "content_hash")} == {64}
        store.close()
    store = backend.make()
    assert store.setup() == base.SCHEMA_VERSION == 11
    for table in ("ctx_events", "ctx_event_revisions"):
        assert {(type(h), len(h)) for h in _column(store, table, "content_hash")} == {(bytes, 32)}
    expected = message_to_row(revised).content_hash
    assert store.get_event("t", "h1").content == message_to_dict(revised)
    assert bytes(_column(store, "ctx_events", "content_hash", "h1")[0]) == expected
    assert _event_indexes(store) == _EVENT_INDEXES[backend.name]
    assert _without_time(export_thread(store, "t")) == _without_time(exported)

    again = store.append("t", [revised, *old[1:]])
    assert [(r.seq, r.status) for r in again] == [
        (1, "duplicate"),
        (2, "duplicate"),
        (3, "duplicate"),
        (4, "duplicate"),
    ]
    assert store.append(branch, [on_branch])[0].status == "duplicate"
    inherited = store.append(branch, [revised])[0]  # main's seq 1, found by id through the lineage
    assert (inherited.seq, inherited.status) == (1, "duplicate")
    assert store.event_revisions("t", "h1") == [(1, message_to_dict(old[0]))]
    newer = HumanMessage("Second thought: refund B-8 too", id="h2")
    assert store.append("t", [newer])[0].status == "revised"
    assert store.event_revisions("t", "h2") == [(1, message_to_dict(old[3]))]
    assert store.get_event(branch, "h2").content == message_to_dict(on_branch)
    assert [h.event_id for h in store.search("t", "refund").hits] == ["h1", "a1", "h2"]
    assert [h.event_id for h in store.search("t", "B 8").hits] == ["h2"]
    assert [h.event_id for h in store.search(branch, "C 3").hits] == ["h2"]
    assert store.show_events("t", ["t1"]) == 1 and store.get_event("t", "t1") is not None
    assert store.append("t", [HumanMessage("new after the upgrade", id="h3")])[0].seq == 5

    # the one index by event id still keeps an event id unique per branch
    duplicate = _ops.insert_events(
        "default", "t", [("main", 99, message_to_row(revised), 1, True, store.db.dialect.ts(T0))]
    )
    with pytest.raises(HistoryStoreError):
        store.db._execute(_yield(duplicate), write=True)
    delete_thread(store, "t")
    assert import_thread(store, exported)["events"] == 5
    assert _without_time(export_thread(store, "t")) == _without_time(exported)
    store.close()


@pytest.mark.parametrize(
    "backend", ["sqlite_file", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_every_event_lookup_is_served_by_an_index(backend, monkeypatch):
    """Each statement the store runs against the events table, read through the planner: none
    scans the table, and each look-up by event id uses the index by event id."""

    store = backend.make()
    store.setup()
    ran: list[Stmt] = []
    run = store.db._run_statement

    def recording(*args):
        ran.append(args[-1])
        return run(*args)

    monkeypatch.setattr(store.db, "_run_statement", recording)
    branch = Scope("t", branch="b")
    store.append("t", turns(1, 6, "order {n} shipped to the depot"))
    store.append("t", [human(2, "order 2 went elsewhere"), human(2, "order 2 went elsewhere")])
    store.create_branch(branch, "main", 3)
    store.append(
        branch, [human(4, "another order 4"), *turns(1, 2, "order {n} shipped to the depot")]
    )
    for scope in ("t", branch):
        store.read_events(scope, from_seq=2, to_seq=4)
        store.get_event(scope, "m2")
        store.event_revisions(scope, "m2")
        store.search(scope, "order depot", roles=["human"], tool_name="x", min_seq=1, max_seq=9)
        store.search(scope, newest_first=True, since=T0)
    store.hide_events(branch, ["m1", "m4"])
    store.show_events(branch, ["m1"])
    store.delete_events("t", ["m5"])
    document = export_thread(store, "t")
    delete_thread(store, "t")
    import_thread(store, document)
    monkeypatch.undo()

    statements = [
        s for s in ran if "ctx_events" in s.sql and not s.sql.startswith("INSERT INTO ctx_events ")
    ]
    assert len({s.sql for s in statements}) >= 10  # every kind of look-up above was seen
    for stmt in statements:
        params = stmt.many[0] if stmt.many else stmt.params
        plan = _plan(store, backend, stmt.sql, params)
        if backend.name == "postgres":
            assert "Seq Scan on ctx_events" not in plan, (stmt.sql, plan)
        else:
            assert not re.search(r"^SCAN (e|ctx_events)\b(?!_)", plan, re.M), (stmt.sql, plan)
        if re.search(r"event_id (=|IN)", stmt.sql):
            assert "ctx_events_by_event_id" in plan, (stmt.sql, plan)


_EVENT_INDEXES = {
    "sqlite_file": {"ctx_events_by_event_id", "sqlite_autoindex_ctx_events_1"},
    "postgres": {
        "ctx_events_pkey",
        "ctx_events_tenant_thread_id_branch_seq_key",
        "ctx_events_by_event_id",
        "ctx_events_tsv",
    },
}


def _yield(stmt):
    return (yield stmt)


def _column(store: HistoryStore, table: str, column: str, event_id: str | None = None) -> list:
    from ctx_langgraph.storage.statements import Stmt

    sql = f"SELECT {column} FROM {table}" + ("" if event_id is None else " WHERE event_id = ?")
    rows = store.db._execute(
        _yield(Stmt(sql, () if event_id is None else (event_id,), "all")), write=False
    )
    return [row[0] for row in rows]


def _event_indexes(store: HistoryStore) -> set[str]:
    from ctx_langgraph.storage.statements import Stmt

    if store.db.dialect.name == "postgres":
        sql = (
            "SELECT indexname FROM pg_indexes WHERE tablename = ? AND schemaname = current_schema()"
        )
    else:
        sql = "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?"
    return {
        row[0] for row in store.db._execute(_yield(Stmt(sql, ("ctx_events",), "all")), write=False)
    }


def _without_time(document: dict) -> dict:
    return {key: value for key, value in document.items() if key != "exported_at"}


def _plan(store: HistoryStore, backend, sql: str, params) -> str:
    """The query plan of one statement, as text (PostgreSQL: with sequential scans priced out,
    so a table too small to bother with an index still shows which index could serve)."""
    if backend.name == "postgres":
        import psycopg

        from ctx_langgraph.storage.dialects import to_pyformat

        with psycopg.connect(backend.dsn) as conn:
            conn.execute("SET enable_seqscan = off")
            cur = psycopg.ClientCursor(conn)
            cur.execute("EXPLAIN " + to_pyformat(sql), tuple(params))
            return "\n".join(row[0] for row in cur.fetchall())
    rows = store.db.conn.execute("EXPLAIN QUERY PLAN " + sql, tuple(params)).fetchall()
    return "\n".join(row[-1] for row in rows)


def _no_segments(*_args: object) -> Any:
    """The segment index's reads and writes as schema versions before 8 had them: none."""
    return []
    yield  # a generator, as the operations it stands in for


def _hex_content_hash(canonical: str) -> str:
    """The content hash as schema versions 1 to 4 stored it: 64 hex characters."""
    import hashlib

    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _raw_insert_migration(version: int):
    from ctx_langgraph.storage.statements import Stmt

    yield Stmt("INSERT INTO ctx_migrations (v) VALUES (?)", (version,))


# ----------------------------------------------------------------------------- append


async def test_append_assigns_consecutive_seqs_and_is_idempotent(api):
    results = await api.append("t", turns(1, 6))
    assert [(r.seq, r.status) for r in results] == [(n, "appended") for n in range(1, 6)]
    again = await api.append("t", turns(3, 8))
    assert [(r.event_id, r.seq, r.status) for r in again] == [
        ("m3", 3, "duplicate"),
        ("m4", 4, "duplicate"),
        ("m5", 5, "duplicate"),
        ("m6", 6, "appended"),
        ("m7", 7, "appended"),
    ]
    events = await api.read_events("t")
    assert [e.seq for e in events] == list(range(1, 8))
    assert (await api.branch_info("t")).head_seq == 7


async def test_duplicates_inside_one_batch(api):
    results = await api.append("t", [human(1), human(1), human(2), human(1, "changed")])
    assert [(r.seq, r.revision, r.status) for r in results] == [
        (1, 1, "appended"),
        (1, 1, "duplicate"),
        (2, 1, "appended"),
        (1, 2, "revised"),
    ]
    assert (await api.get_event("t", "m1")).message.content == "changed"


async def test_changed_content_becomes_a_revision(api):
    await api.append("t", turns(1, 4))
    [result] = await api.append("t", [human(2, "message number 2, corrected")])
    assert (result.seq, result.revision, result.status) == (2, 2, "revised")
    event = await api.get_event("t", "m2")
    assert event.revision == 2 and event.message.content == "message number 2, corrected"
    assert [(rev, rec["data"]["content"]) for rev, rec in await api.event_revisions("t", "m2")] == [
        (1, "message number 2")
    ]
    assert (await api.search("t", "corrected")).hits[0].event_id == "m2"
    assert [h.event_id for h in (await api.search("t", "number 2")).hits] == ["m2"]
    assert (await api.branch_info("t")).head_seq == 3


async def test_messages_round_trip_exactly(api):
    messages = [
        SystemMessage("You are terse.", id="s1"),
        HumanMessage(
            content=[
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
            id="h1",
            name="alice",
            additional_kwargs={"source": "web", "nested": {"k": [1, 2.5, None]}},
        ),
        AIMessage(
            content=[
                {"type": "thinking", "thinking": "look up the order", "signature": "sig=="},
                {"type": "text", "text": "Checking two systems."},
            ],
            id="a1",
            tool_calls=[
                {
                    "name": "get_order",
                    "args": {"order_id": "A-1042"},
                    "id": "call_1",
                    "type": "tool_call",
                },
                {
                    "name": "get_refund",
                    "args": {"order_id": "A-1042", "amount": 19.99},
                    "id": "call_2",
                    "type": "tool_call",
                },
            ],
            usage_metadata={
                "input_tokens": 120,
                "output_tokens": 30,
                "total_tokens": 150,
                "input_token_details": {"cache_read": 100},
            },
            response_metadata={"model_name": "gpt-4o-2024-08-06", "finish_reason": "tool_calls"},
        ),
        ToolMessage(
            "order A-1042: shipped",
            tool_call_id="call_1",
            name="get_order",
            id="t1",
            artifact={"raw": [1, 2]},
            status="success",
        ),
        ToolMessage(
            "refund failed: timeout",
            tool_call_id="call_2",
            name="get_refund",
            id="t2",
            status="error",
        ),
        AIMessage(
            "Shipped; the refund lookup failed.",
            id="a2",
            invalid_tool_calls=[
                {
                    "name": "broken",
                    "args": "{not json",
                    "id": "call_3",
                    "error": "bad json",
                    "type": "invalid_tool_call",
                }
            ],
        ),
    ]
    await api.append("t", messages)
    events = await api.read_events("t")
    assert [e.message for e in events] == messages
    assert [e.role for e in events] == ["system", "human", "ai", "tool", "tool", "ai"]
    assert events[2].tool_call_ids == ("call_1", "call_2")
    assert events[2].tool_names == ("get_order", "get_refund")
    assert events[3].tool_call_ids == ("call_1",) and events[3].tool_names == ("get_order",)
    assert "get_order" in events[2].text and "A-1042" in events[2].text


async def test_message_without_id_gets_one(api):
    [result] = await api.append("t", [HumanMessage("no id here")])
    assert result.event_id and result.status == "appended"
    assert (await api.get_event("t", result.event_id)).message.content == "no id here"


async def test_created_at_is_kept_and_validated(api):
    stamps = [T0 + dt.timedelta(minutes=n) for n in range(3)]
    await api.append("t", turns(1, 4), created_at=stamps)
    assert [e.created_at for e in await api.read_events("t")] == stamps
    with pytest.raises(ValueError, match="2 created_at values"):
        await api.append("t", turns(4, 7), created_at=stamps[:2])


async def test_scopes_are_isolated(api):
    await api.append(Scope("t"), turns(1, 3))
    await api.append(Scope("t", tenant="other"), turns(1, 2, "secret {n}"))
    await api.append(Scope("u"), turns(1, 2, "secret {n}"))
    assert [e.seq for e in await api.read_events(Scope("t"))] == [1, 2]
    assert (await api.search(Scope("t"), "secret")).hits == ()
    assert len((await api.search(Scope("t", tenant="other"), "secret")).hits) == 1


async def test_malformed_scope_is_a_scope_error(api):
    for bad in ("", " padded ", "a\x00b", "x" * 300):
        with pytest.raises(ScopeError):
            await api.append(bad, [human(1)])
    with pytest.raises(ScopeError):
        await api.read_events(Scope("t", branch="nope"))
    with pytest.raises(ScopeError):
        await api.append(Scope("t", branch="nope"), [human(1)])


# ----------------------------------------------------------------------------- concurrency


def _assert_gap_free(events, expected_ids):
    assert [e.seq for e in events] == list(range(1, len(expected_ids) + 1))
    assert Counter(e.event_id for e in events) == Counter(expected_ids)


async def test_gap_free_seq_with_four_threads(backend, store):
    workers, rounds = 4, 25
    stores = [backend.make() for _ in range(workers)]
    for s in stores:
        s.db._schema_checked = True
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for r in range(rounds):
                stores[w].append(
                    "t", [HumanMessage(f"w{w} r{r} {k}", id=f"w{w}-{r}-{k}") for k in range(3)]
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    expected = [f"w{w}-{r}-{k}" for w in range(workers) for r in range(rounds) for k in range(3)]
    _assert_gap_free(store.read_events("t"), expected)
    # each batch is contiguous: one transaction per append
    by_batch: dict[str, list[int]] = {}
    for e in store.read_events("t"):
        by_batch.setdefault(e.event_id.rsplit("-", 1)[0], []).append(e.seq)
    assert all(seqs == list(range(seqs[0], seqs[0] + 3)) for seqs in by_batch.values())


async def test_gap_free_seq_with_concurrent_coroutines(store):
    async def work(w: int) -> None:
        for r in range(20):
            await store.aappend("t", [HumanMessage(f"w{w} r{r}", id=f"w{w}-{r}")])

    await asyncio.gather(*(work(w) for w in range(4)))
    _assert_gap_free(
        await store.aread_events("t"), [f"w{w}-{r}" for w in range(4) for r in range(20)]
    )


async def test_racing_appenders_of_the_same_messages_record_each_once(backend, store):
    stores = [backend.make() for _ in range(4)]
    for s in stores:
        s.db._schema_checked = True
    barrier = threading.Barrier(4)

    def work(w: int) -> None:
        barrier.wait()
        for r in range(10):
            stores[w].append("t", turns(r * 5, r * 5 + 5))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _assert_gap_free(store.read_events("t"), [f"m{n}" for n in range(50)])


_PROCESS_WORKER = """
import sys
from langchain_core.messages import HumanMessage
from ctx_langgraph.history import PostgresHistoryStore
dsn, w = sys.argv[1], sys.argv[2]
with PostgresHistoryStore.from_conn_string(dsn) as store:
    for r in range(30):
        store.append("t", [HumanMessage(f"p{w} r{r} {k}", id=f"p{w}-{r}-{k}") for k in range(2)])
"""


@pytest.mark.postgres
async def test_gap_free_seq_with_four_processes_on_postgres(pg_dsn):
    from ctx_langgraph.history import PostgresHistoryStore

    with PostgresHistoryStore.from_conn_string(pg_dsn) as store:
        store.setup()
        procs = [
            subprocess.Popen([sys.executable, "-c", _PROCESS_WORKER, pg_dsn, str(w)])
            for w in range(4)
        ]
        assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
        expected = [f"p{w}-{r}-{k}" for w in range(4) for r in range(30) for k in range(2)]
        _assert_gap_free(store.read_events("t"), expected)


# ----------------------------------------------------------------------------- compaction


async def _commit_through(api, scope, through: int, text: str = "summary"):
    snap = await api.snapshot(scope, through)
    candidate = await api.create_candidate(snap, summary_text=text)
    return await api.commit_candidate(candidate)


async def test_rolling_commits_chain_generations_and_cursor(api):
    await api.append("t", turns(1, 21))
    snap = await api.snapshot("t", 8)
    assert (snap.first_seq, snap.covered_through_seq, snap.base_generation) == (1, 8, 0)
    assert [e.seq for e in snap.events] == list(range(1, 9))
    facts = [KeyFact("order A-1042", source_seq=3, kind="identifier", source_event_id="m3")]
    cand = await api.create_candidate(
        snap,
        summary_text="first",
        key_facts=facts,
        first_kept_event_id="m9",
        summarizer_id="extractive-v1",
        summary_tokens=12,
        metadata={"note": 1},
    )
    assert cand.status == "candidate" and cand.generation == 1 and cand.parent_id is None
    assert await api.get_active("t") is None
    first = await api.commit_candidate(cand)
    assert first.status == "active" and first.committed_at is not None
    assert await api.commit_candidate(cand) == first or (await api.get_active("t")).id == first.id

    snap2 = await api.snapshot("t", 15)
    assert (snap2.first_seq, snap2.base_checkpoint_id, snap2.base_generation) == (9, first.id, 1)
    second = await api.commit_candidate(await api.create_candidate(snap2, summary_text="second"))
    assert (second.generation, second.parent_id, second.first_seq, second.covered_through_seq) == (
        2,
        first.id,
        9,
        15,
    )

    active = await api.get_active("t")
    assert active.id == second.id and active.summary_text == "second"
    versions = await api.list_versions("t")
    assert [(v.generation, v.status) for v in versions] == [(2, "active"), (1, "superseded")]
    stored_first = await api.get_checkpoint(first.id)
    assert stored_first.key_facts == tuple(facts) and stored_first.first_kept_event_id == "m9"
    assert stored_first.metadata == {"note": 1} and stored_first.summary_tokens == 12
    assert (await api.branch_info("t")).active_generation == 2


async def test_snapshot_bounds_are_checked(api):
    await api.append("t", turns(1, 6))
    with pytest.raises(ValueError, match="branch head is seq 5"):
        await api.snapshot("t", 6)
    await _commit_through(api, "t", 3)
    with pytest.raises(ValueError, match="covers through seq 3"):
        await api.snapshot("t", 3)
    with pytest.raises(ValueError, match="no events"):
        await api.snapshot("empty", 1)


async def test_key_facts_must_cite_the_covered_range(api):
    await api.append("t", turns(1, 6))
    snap = await api.snapshot("t", 3)
    with pytest.raises(ValueError, match="outside the covered range"):
        await api.create_candidate(snap, summary_text="s", key_facts=[KeyFact("x", source_seq=4)])


async def test_a_candidate_built_on_an_old_generation_conflicts(api):
    await api.append("t", turns(1, 11))
    old_snap = await api.snapshot("t", 4)
    await _commit_through(api, "t", 5)
    late = await api.create_candidate(old_snap, summary_text="late")
    with pytest.raises(CompactionConflict) as info:
        await api.commit_candidate(late)
    assert (info.value.expected_generation, info.value.actual_generation) == (0, 1)
    assert "generation 0" in str(info.value) and str(Scope("t")) in str(info.value)
    assert (await api.get_checkpoint(late.id)).status == "failed"


async def test_exactly_one_of_eight_workers_wins(backend, store):
    store.append("t", turns(1, 31))
    stores = [backend.make() for _ in range(8)]
    for s in stores:
        s.db._schema_checked = True
    candidates = [
        s.create_candidate(s.snapshot("t", 20), summary_text=f"worker {w}")
        for w, s in enumerate(stores)
    ]
    barrier = threading.Barrier(8)
    outcomes: list[object] = [None] * 8

    def work(w: int) -> None:
        barrier.wait()
        try:
            outcomes[w] = stores[w].commit_candidate(candidates[w])
        except CompactionConflict as exc:
            outcomes[w] = exc

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if not isinstance(o, CompactionConflict)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, CompactionConflict) for o in outcomes if o is not winners[0])
    active = store.get_active("t")
    assert active.id == winners[0].id and active.generation == 1
    statuses = Counter(v.status for v in store.list_versions("t"))
    assert statuses == {"active": 1, "failed": 7}


async def test_exactly_one_of_eight_coroutines_wins(store):
    await store.aappend("t", turns(1, 31))
    candidates = [
        await store.acreate_candidate(await store.asnapshot("t", 20), summary_text=f"c{w}")
        for w in range(8)
    ]
    outcomes = await asyncio.gather(
        *(store.acommit_candidate(c) for c in candidates), return_exceptions=True
    )
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    assert sum(isinstance(o, CompactionConflict) for o in outcomes) == 7


@pytest.mark.parametrize("edit", ["revise", "hide", "delete"])
async def test_edit_inside_the_covered_range_makes_the_candidate_stale(api, edit):
    await api.append("t", turns(1, 11))
    snap = await api.snapshot("t", 6)
    cand = await api.create_candidate(snap, summary_text="built before the edit")
    if edit == "revise":
        await api.append("t", [human(4, "message number 4, edited")])
    elif edit == "hide":
        assert await api.hide_events("t", ["m4"]) == 1
    else:
        assert await api.delete_events("t", ["m4"]) == 1
    with pytest.raises(StaleCandidate, match="seq 4") as info:
        await api.commit_candidate(cand)
    assert info.value.candidate_id == cand.id
    assert (await api.get_checkpoint(cand.id)).status == "failed"
    assert await api.get_active("t") is None
    # a new snapshot sees the edit and commits
    fresh = await _commit_through(api, "t", 6)
    assert fresh.status == "active"


async def test_edit_outside_the_covered_range_does_not_block_commit(api):
    await api.append("t", turns(1, 11))
    cand = await api.create_candidate(await api.snapshot("t", 6), summary_text="s")
    await api.append("t", [human(9, "message number 9, edited")])
    await api.hide_events("t", ["m10"])
    await api.append("t", turns(11, 13))
    assert (await api.commit_candidate(cand)).status == "active"


async def test_mark_failed_and_prune_versions(api):
    await api.append("t", turns(1, 41))
    committed = [await _commit_through(api, "t", n) for n in (5, 10, 15, 20)]
    doomed = await api.create_candidate(await api.snapshot("t", 25), summary_text="will fail")
    failed = await api.mark_failed(doomed, "summarizer timed out")
    assert failed.status == "failed" and failed.error == "summarizer timed out"
    with pytest.raises(HistoryStoreError, match="only a candidate can be committed"):
        await api.commit_candidate(doomed)
    with pytest.raises(HistoryStoreError, match="only a candidate can be marked failed"):
        await api.mark_failed(committed[-1], "too late")
    assert await api.prune_versions("t", keep=1) == 3
    remaining = {v.id: v.status for v in await api.list_versions("t")}
    assert remaining == {committed[-1].id: "active", failed.id: "failed"}
    assert await api.prune_versions("t", keep=0) == 1
    assert (await api.get_active("t")).id == committed[-1].id


@pytest.mark.parametrize("edit", ["revise", "hide", "delete"])
async def test_an_edit_invalidates_every_summary_that_covers_it_and_purges_its_text(api, edit):
    await api.append("t", turns(1, 31, "note {n}: the vault code is SECRET-{n}"))
    kept = await _commit_through(api, "t", 5, "summary through 5: SECRET-3")
    tainted = [
        await _commit_through(api, "t", n, f"summary through {n}: SECRET-8") for n in (10, 20)
    ]
    failed = await api.mark_failed(
        await api.create_candidate(await api.snapshot("t", 25), summary_text="SECRET-8 again"),
        "summarizer timed out",
    )
    if edit == "revise":
        await api.append("t", [human(8, "note 8: (redacted)")])
    elif edit == "hide":
        assert await api.hide_events("t", ["m8"]) == 1
    else:
        assert await api.delete_events("t", ["m8"]) == 1

    for version in tainted:
        stored = await api.get_checkpoint(version.id)
        assert stored.status == "invalid" and stored.error.startswith("invalidated: ")
        assert stored.summary_text is None and stored.key_facts == ()
    assert (await api.get_checkpoint(failed.id)).summary_text is None  # failed versions too
    assert (await api.get_checkpoint(kept.id)).summary_text == "summary through 5: SECRET-3"
    # no active summary now; the generation moves on, so the next one chains after it
    assert await api.get_active("t") is None
    info = await api.branch_info("t")
    assert info.active_checkpoint_id is None and info.active_generation == 4
    rebuilt = await _commit_through(api, "t", 20, "rebuilt from the raw history")
    assert (rebuilt.generation, rebuilt.parent_id, rebuilt.first_seq) == (5, None, 1)
    assert [e.seq for e in (await api.snapshot("t", 30)).events][:1] == [21]


async def test_an_edit_after_the_covered_range_leaves_the_summary_alone(api):
    await api.append("t", turns(1, 21))
    active = await _commit_through(api, "t", 10)
    await api.delete_events("t", ["m15"])
    await api.hide_events("t", ["m16"])
    assert (await api.get_active("t")).id == active.id
    assert (await api.get_checkpoint(active.id)).status == "active"


async def test_an_edit_of_a_shared_event_invalidates_the_branches_that_read_it(api):
    await api.append("t", turns(1, 21))
    shared = await _commit_through(api, "t", 6)
    fork = Scope("t", branch="fork")
    await api.create_branch(fork, "main", 10)
    await api.append(fork, [human(100, "on the fork")])
    forked = await _commit_through(api, fork, 11, "fork summary")
    late = Scope("t", branch="late")
    await api.create_branch(late, "main", 3)  # forked before the edited event
    await api.delete_events(fork, ["m5"])  # a row shared by main and fork
    assert (await api.get_checkpoint(shared.id)).status == "invalid"
    assert (await api.get_checkpoint(forked.id)).status == "invalid"
    assert await api.get_active("t") is None and await api.get_active(fork) is None
    assert (await api.branch_info(late)).active_generation == 0  # it never read seq 5


async def test_delete_thread_forgets_every_branch_and_only_that_thread(api, store):
    from ctx_langgraph.usage import UsageLedger, normalize_usage

    await api.append("t", turns(1, 11))
    await _commit_through(api, "t", 5)
    await api.create_branch(Scope("t", branch="b"), "main", 6)
    await api.append(Scope("t", branch="b"), [human(50)])
    await api.append("t", [human(7, "edited")])  # a revision and an edit log row
    await api.append(Scope("other"), turns(1, 4))
    await api.append(Scope("t", tenant="acme"), turns(1, 4))  # same thread id, other tenant
    usage = normalize_usage({"input_tokens": 10, "output_tokens": 2}, provider="openai")
    ledger = UsageLedger(store)
    ledger.record("openai:r1", usage, scope="t")
    ledger.record("openai:r2", usage, scope="other")

    deleted = await threads_of(api).delete_thread(Scope("t", branch="b"))
    assert deleted["ctx_events"] == 11 and deleted["ctx_checkpoints"] == 1
    assert deleted["ctx_branches"] == 2 and deleted["ctx_event_revisions"] == 1
    assert "ctx_usage_calls" not in deleted  # the ledger stays unless asked
    assert await api.read_events("t") == [] and await api.get_active("t") is None
    assert await api.list_branches("t") == []
    assert not (await api.search("t", "message")).hits
    assert len(await api.read_events("other")) == 3  # other threads and tenants untouched
    assert len(await api.read_events(Scope("t", tenant="acme"))) == 3
    assert ledger.get("openai:r1") is not None
    assert (await threads_of(api).delete_thread("t", ledger=True))["ctx_usage_calls"] == 1
    assert ledger.get("openai:r1") is None and ledger.get("openai:r2") is not None
    await api.append("t", turns(1, 3))  # the thread id can be used again, from seq 1
    assert [e.seq for e in await api.read_events("t")] == [1, 2]


def _thread_picture(store, thread: str, branches=("main", "b")):
    """Everything a reader of the thread can see, to compare two stores by."""
    import json as _json

    from ctx_langgraph.lookup import make_history_lookup_tool

    lookup = make_history_lookup_tool(store)
    picture = {}
    for name in branches:
        scope = Scope(thread, branch=name)
        picture[name] = {
            "events": store.read_events(scope, include_hidden=True),
            "active": store.get_active(scope),
            "versions": store.list_versions(scope),
            "info": store.branch_info(scope),
            "search": store.search(scope, "message").hits,
            "lookup": _json.loads(
                lookup.invoke(
                    {"query": "message number"},
                    config={"configurable": {"thread_id": thread, "ctx_branch": name}},
                )
            ),
        }
    return picture


async def test_export_then_import_reproduces_the_thread_exactly(api, store):
    import json as _json

    from ctx_langgraph.history import SQLiteHistoryStore
    from ctx_langgraph.usage import UsageLedger, normalize_usage

    await api.append("t", turns(1, 21))
    await _commit_through(api, "t", 6, "first summary")
    await _commit_through(api, "t", 12, "second summary")
    await api.create_branch(Scope("t", branch="b"), "main", 14)
    await api.append(Scope("t", branch="b"), [human(70, "message number 70 on b")])
    await api.append("t", [human(18, "message number 18, edited")])  # after the summaries
    await api.hide_events("t", ["m19"])
    UsageLedger(store).record(
        "openai:x1",
        normalize_usage({"input_tokens": 9, "output_tokens": 3}, provider="openai"),
        scope="t",
    )
    document = _json.loads(_json.dumps(await threads_of(api).export_thread("t")))
    assert document["format"] == "ctx-langgraph/thread" and len(document["ledger"]["calls"]) == 1
    before = _thread_picture(store, "t")

    with SQLiteHistoryStore.from_path(":memory:") as fresh:
        fresh.setup()
        counts = import_thread(fresh, document)
        assert counts["events"] == 21 and counts["summaries"] == 2 and counts["ledger_calls"] == 1
        assert _thread_picture(fresh, "t") == before
        assert UsageLedger(fresh).get("openai:x1") == UsageLedger(store).get("openai:x1")
        with pytest.raises(ScopeError, match="already has history"):
            import_thread(fresh, document)
        again = _json.loads(_json.dumps(export_thread(fresh, "t")))

    # and back into this backend, replacing the original
    await threads_of(api).delete_thread("t", ledger=True)
    await threads_of(api).import_thread(again)
    assert _thread_picture(store, "t") == before
    with pytest.raises(ScopeError, match="nothing to export"):
        await threads_of(api).export_thread("nobody")
    with pytest.raises(ValueError, match="not a thread export"):
        await threads_of(api).import_thread({"format": "other"}, into="x")


# ----------------------------------------------------------------------------- search


async def test_search_pages_cover_the_match_set_exactly(api):
    docs = [
        HumanMessage(f"{'invoice' if n % 3 == 0 else 'note'} line {n}", id=f"m{n}")
        for n in range(1, 121)
    ]
    await api.append("t", docs)
    expected = [n for n in range(1, 121) if n % 3 == 0]
    for newest_first in (False, True):
        seen: list[int] = []
        cursor = None
        while True:
            page = await api.search(
                "t", "invoice", limit=7, cursor=cursor, newest_first=newest_first
            )
            seen.extend(hit.seq for hit in page.hits)
            assert page.has_more == (page.next_cursor is not None)
            if not page.has_more:
                break
            cursor = page.next_cursor
            # appends between pages do not shift or duplicate later pages
            await api.append("t", [HumanMessage("late note", id=f"late{len(seen)}")])
        assert len(seen) == len(set(seen))
        assert sorted(seen) == expected
        assert seen == (sorted(seen, reverse=True) if newest_first else sorted(seen))


async def test_search_filters(api):
    stamps = [T0 + dt.timedelta(hours=n) for n in range(6)]
    messages = [
        HumanMessage("please refund order A-1042", id="h1"),
        AIMessage(
            "", id="a1", tool_calls=[{"name": "refund", "args": {"order": "A-1042"}, "id": "c1"}]
        ),
        ToolMessage("refund issued for A-1042", tool_call_id="c1", name="refund", id="t1"),
        AIMessage(
            "", id="a2", tool_calls=[{"name": "lookup_order", "args": {"order": "B-7"}, "id": "c2"}]
        ),
        ToolMessage("order B-7 is pending", tool_call_id="c2", name="lookup_order", id="t2"),
        AIMessage("Refunded A-1042; B-7 is pending.", id="a3"),
    ]
    await api.append("t", messages, created_at=stamps)

    async def ids(query=None, **kw):
        return [h.event_id for h in (await api.search("t", query, **kw)).hits]

    assert await ids("A-1042") == ["h1", "a1", "t1", "a3"]
    assert await ids("refund 1042") == ["h1", "a1", "t1"]
    assert await ids("REFUND", roles=["tool"]) == ["t1"]
    assert await ids(roles="ai") == ["a1", "a2", "a3"]
    assert await ids(tool_name="refund") == ["a1", "t1"]
    assert await ids(tool_name="lookup_order") == ["a2", "t2"]
    assert await ids(tool_name="lookup%") == []
    assert await ids(min_seq=2, max_seq=4) == ["a1", "t1", "a2"]
    assert await ids(since=stamps[2], until=stamps[4]) == ["t1", "a2"]
    assert await ids("pending", since=stamps[5]) == ["a3"]
    assert await ids("nothing-matches-this") == []
    with pytest.raises(ValueError, match="no searchable words"):
        await api.search("t", "?!")
    with pytest.raises(ValueError, match="malformed search cursor"):
        await api.search("t", "refund", cursor="garbage")
    with pytest.raises(ValueError, match="at least 1"):
        await api.search("t", "refund", limit=0)


async def test_hidden_events_are_absent_from_reads_and_search(api):
    await api.append(
        "t", [human(1, "the secret code is 7781"), human(2, "public note"), human(3, "code review")]
    )
    assert await api.hide_events("t", ["m1", "missing"]) == 1
    assert await api.hide_events("t", ["m1"]) == 0
    assert [e.event_id for e in await api.read_events("t")] == ["m2", "m3"]
    assert [e.seq for e in await api.read_events("t", include_hidden=True)] == [1, 2, 3]
    assert [h.event_id for h in (await api.search("t", "code")).hits] == ["m3"]
    assert (await api.search("t", "7781")).hits == ()
    assert await api.get_event("t", "m1") is None
    assert not (await api.get_event("t", "m1", include_hidden=True)).visible
    assert await api.show_events("t", ["m1"]) == 1
    assert [h.event_id for h in (await api.search("t", "code")).hits] == ["m1", "m3"]
    assert await api.delete_events("t", ["m1"]) == 1
    assert await api.get_event("t", "m1", include_hidden=True) is None
    [again] = await api.append("t", [human(4)])
    assert again.seq == 4  # seqs are never reused


# ----------------------------------------------------------------------------- branches


async def test_branch_sees_parent_up_to_the_fork_and_its_own_events(api):
    main = Scope("t")
    await api.append(main, turns(1, 11, "main event {n} apple"))
    branch = Scope("t", branch="retry")
    info = await api.create_branch(branch, "main", 5)
    assert (info.parent_branch, info.fork_seq, info.head_seq) == ("main", 5, 5)
    results = await api.append(branch, [HumanMessage("branch event apple", id="b1")])
    assert results[0].seq == 6
    await api.append(main, [HumanMessage("main late apple", id="late")])

    branch_events = await api.read_events(branch)
    assert [(e.seq, e.event_id, e.branch) for e in branch_events] == [
        *((n, f"m{n}", "main") for n in range(1, 6)),
        (6, "b1", "retry"),
    ]
    assert [h.event_id for h in (await api.search(branch, "apple", limit=50)).hits] == [
        "m1",
        "m2",
        "m3",
        "m4",
        "m5",
        "b1",
    ]
    assert [h.event_id for h in (await api.search(main, "apple", limit=50)).hits] == [
        *(f"m{n}" for n in range(1, 11)),
        "late",
    ]
    assert await api.get_event(branch, "m7") is None
    assert (await api.get_event(branch, "m3")).branch == "main"
    # re-recording a shared message from the forked state is a duplicate, not a copy
    [dup] = await api.append(branch, [turns(3, 4, "main event {n} apple")[0]])
    assert (dup.seq, dup.status) == (3, "duplicate")
    # a message the parent recorded after the fork is new on the branch
    [own] = await api.append(branch, [turns(8, 9, "main event {n} apple")[0]])
    assert (own.seq, own.status) == (7, "appended")
    with pytest.raises(EventConflict, match="inherited"):
        await api.append(branch, [human(2, "rewritten on the branch")])


async def test_nested_branches_and_branch_errors(api):
    await api.append("t", turns(1, 11))
    a = Scope("t", branch="a")
    b = Scope("t", branch="b")
    await api.create_branch(a, "main", 6)
    await api.append(a, [HumanMessage("a7", id="a7"), HumanMessage("a8", id="a8")])
    await api.create_branch(b, "a", 7)
    await api.append(b, [HumanMessage("b8", id="b8")])
    assert [e.event_id for e in await api.read_events(b)] == [
        *(f"m{n}" for n in range(1, 7)),
        "a7",
        "b8",
    ]
    assert [i.scope.branch for i in await api.list_branches("t")] == ["a", "b", "main"]
    # same branch again: no-op; different fork point: error
    assert (await api.create_branch(a, "main", 6)).fork_seq == 6
    with pytest.raises(ScopeError, match="already exists"):
        await api.create_branch(a, "main", 3)
    with pytest.raises(ScopeError, match="outside branch"):
        await api.create_branch(Scope("t", branch="c"), "main", 11)
    with pytest.raises(ScopeError, match="does not exist"):
        await api.create_branch(Scope("t", branch="c"), "ghost", 1)
    with pytest.raises(ScopeError, match="itself"):
        await api.create_branch(a, "a", 1)


async def test_branch_inherits_only_a_summary_of_shared_events(api):
    await api.append("t", turns(1, 21))
    first = await _commit_through(api, "t", 4)
    second = await _commit_through(api, "t", 12)
    early = Scope("t", branch="early")
    late = Scope("t", branch="late")
    before_all = Scope("t", branch="before")
    await api.create_branch(early, "main", 8)
    await api.create_branch(late, "main", 15)
    await api.create_branch(before_all, "main", 2)
    assert (await api.get_active(early)).id == first.id
    assert (await api.get_active(late)).id == second.id
    assert await api.get_active(before_all) is None
    # the branch rolls on from what it inherited, and the parent is not affected
    own = await _commit_through(api, early, 8, "early branch summary")
    assert (own.generation, own.parent_id, own.first_seq) == (2, first.id, 5)
    assert (await api.get_active("t")).id == second.id
    assert (await api.get_checkpoint(first.id)).status == "superseded"
    # an inherited version still in use by a branch is never pruned
    third = await _commit_through(api, "t", 18)
    assert await api.prune_versions("t", keep=0) == 1  # `first` goes; `second` is late's active
    assert await api.get_checkpoint(second.id) is not None
    assert (await api.get_active("t")).id == third.id


# ----------------------------------------------------------------------------- failure


def test_postgres_down_is_a_history_store_error_not_a_hang():
    import socket

    from ctx_langgraph.history import PostgresHistoryStore

    # A listener that accepts TCP but never speaks: the worst case for a client.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    port = silent.getsockname()[1]
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    refused_port = refused.getsockname()[1]
    refused.close()
    try:
        for target in (port, refused_port):
            store = PostgresHistoryStore.from_conn_string(
                f"postgresql://postgres@127.0.0.1:{target}/postgres", connect_timeout=1
            )
            started = time.monotonic()
            with pytest.raises(HistoryStoreError, match=f"cannot reach.*127.0.0.1:{target}"):
                store.setup()
            assert time.monotonic() - started < 10
            store.close()
    finally:
        silent.close()


async def test_postgres_down_async_is_a_history_store_error():
    import socket

    from ctx_langgraph.history import PostgresHistoryStore

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    store = PostgresHistoryStore.from_conn_string(
        f"postgresql://postgres@127.0.0.1:{port}/x", connect_timeout=1
    )
    started = time.monotonic()
    with pytest.raises(HistoryStoreError, match="cannot reach"):
        await store.aappend("t", [human(1)])
    assert time.monotonic() - started < 10
    await store.aclose()


@pytest.mark.postgres
@pytest.mark.parametrize("closed_by", ["aclose", "the loop's end"])
def test_an_event_loop_ends_while_the_async_pool_replaces_a_dropped_connection(pg_dsn, closed_by):
    """A pooled connection the server dropped is discarded and the pool reconnects in the
    background. A worker cancelled during that reconnect swallows the cancel, so a loop ending
    with the pool open (``asyncio.run`` returning, a test's loop closing) waited forever; the
    store closes each loop's pool with the loop, or in ``aclose``, and the loop ends."""
    from ctx_langgraph.history import PostgresHistoryStore

    store = PostgresHistoryStore.from_conn_string(pg_dsn, connect_timeout=2)
    store.setup()

    async def a_run(n: int) -> None:
        await store.aappend("t", [human(n)])
        pool = await store.db._async_pool()
        conn = await pool.getconn()
        await conn.close()  # (as the server would)
        await pool.putconn(conn)  # discarded: the pool reconnects in the background
        for _ in range(3):
            await asyncio.sleep(0)  # the reconnect has started
        if closed_by == "aclose":
            await store.aclose()

    for n in (1, 2):  # a second loop gets a pool of its own
        runner = threading.Thread(target=asyncio.run, args=(a_run(n),), daemon=True)
        runner.start()
        runner.join(timeout=20)
        assert not runner.is_alive(), f"asyncio.run did not return (loop {n})"
    assert not store.db._apools  # nothing kept of the ended loops
    assert [e.seq for e in store.read_events("t")] == [1, 2]
    store.close()


@pytest.mark.postgres
async def test_postgres_server_lost_mid_use(pg_server_dsn, pg_dsn):
    import psycopg

    from ctx_langgraph.history import PostgresHistoryStore

    with PostgresHistoryStore.from_conn_string(pg_dsn, connect_timeout=1) as store:
        store.setup()
        store.append("t", [human(1)])
        await store.aappend("t", [human(2)])
        dbname = psycopg.conninfo.conninfo_to_dict(pg_dsn)["dbname"]
        with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (dbname,),
            )
        # the pooled connections the server dropped are found broken on a transaction's first
        # statement, before anything was sent: each is replaced and the call goes on
        store.append("t", [human(3)])
        await store.aappend("t", [human(4)])
        assert [e.seq for e in store.read_events("t")] == [1, 2, 3, 4]
        # a failure after the first statement is the transaction's own: raised, nothing written
        with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                "AND pid <> pg_backend_pid()",
                (dbname,),
            )
        store.read_events("t")  # (the sync pool's dropped connection replaced)

        def dies_midway() -> Any:
            yield Stmt("SELECT 1", (), "one")
            with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (dbname,),
                )
            yield Stmt("SELECT 2", (), "one")

        with pytest.raises(HistoryStoreError):
            store.db.run(dies_midway())
        store.append("t", [human(5)])
        assert [e.seq for e in store.read_events("t")] == [1, 2, 3, 4, 5]


def test_sqlite_unopenable_or_locked_is_a_history_store_error(tmp_path):
    from ctx_langgraph.history import SQLiteHistoryStore

    with pytest.raises(HistoryStoreError, match="cannot open"):
        SQLiteHistoryStore.from_path(tmp_path / "missing-dir" / "h.sqlite")
    path = tmp_path / "h.sqlite"
    with SQLiteHistoryStore.from_path(path) as owner:
        owner.setup()
        blocker = SQLiteHistoryStore.from_path(path, busy_timeout=0.2)
        blocker.db.conn.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(HistoryStoreError, match="locked"):
            owner_short = SQLiteHistoryStore.from_path(path, busy_timeout=0.2)
            owner_short.append("t", [human(1)])
        assert time.monotonic() - started < 5
        blocker.db.conn.execute("ROLLBACK")
        blocker.close()
        owner_short.close()
        assert owner.append("t", [human(1)])[0].seq == 1
    closed = SQLiteHistoryStore.from_path(":memory:")
    closed.setup()
    closed.close()
    with pytest.raises(HistoryStoreError, match="closed"):
        closed.read_events("t")


def test_history_store_is_the_abstract_interface():
    from ctx_langgraph.history import PostgresHistoryStore, SQLiteHistoryStore

    assert issubclass(SQLiteHistoryStore, HistoryStore) and issubclass(
        PostgresHistoryStore, HistoryStore
    )
    public = {
        n for n in dir(HistoryStore) if not n.startswith("_") and callable(getattr(HistoryStore, n))
    }
    sync = {n for n in public if not (n.startswith("a") and n[1:] in public)}
    # registration and configuration only: nothing to await
    no_io = {"add_edit_listener", "use_index", "search_mode"}
    assert sorted(n for n in sync - no_io if "a" + n not in public) == []
    assert {"append", "search", "snapshot", "commit_candidate", "create_branch", "close"} <= sync


async def test_edits_since_lists_the_edit_log_after_a_version_and_tells_listeners(api, store):
    class Listener:
        def __init__(self) -> None:
            self.heard: list[tuple[str, list[str], str]] = []

        def events_edited(self, scope: Scope, event_ids: list[str], kind: str) -> None:
            self.heard.append((str(scope), list(event_ids), kind))

        async def aevents_edited(self, scope: Scope, event_ids: list[str], kind: str) -> None:
            self.heard.append((str(scope), list(event_ids), kind))

    listener = Listener()
    store.add_edit_listener(listener)
    store.add_edit_listener(listener)  # once only
    await api.append("t", turns(1, 6))
    await api.hide_events("t", ["m2"])
    await api.append("t", [human(3, "edited")])
    await api.delete_events("t", ["m4"])
    await api.show_events("t", ["m2"])
    await api.append(Scope("t", tenant="acme"), turns(1, 3))
    await api.delete_events(Scope("t", tenant="acme"), ["m1"])
    log = await api.edits_since("t", 0)
    assert [(version, seq, kind) for version, _branch, seq, kind in log] == [
        (1, 2, "hide"),
        (2, 3, "revise"),
        (3, 4, "delete"),
        (4, 2, "show"),
    ]
    assert [kind for *_, kind in await api.edits_since("t", 2)] == ["delete", "show"]
    assert await api.edits_since("nobody", 0) == []
    assert listener.heard == [
        ("default/t@main", ["m2"], "hidden"),
        ("default/t@main", ["m3"], "revised"),
        ("default/t@main", ["m4"], "deleted"),
        ("acme/t@main", ["m1"], "deleted"),
    ]
    await api.delete_thread("t")
    assert listener.heard[-1] == ("default/t@main", [], "thread_deleted")
