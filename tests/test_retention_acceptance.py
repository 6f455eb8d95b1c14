"""Acceptance of checkpoint retention, on every checkpointer, with real threads.

Threads are built with a context-managed agent and two small graphs: ~30 turns, a fork
(``update_state`` on an old checkpoint, continued, and a second fork from the first), a run
waiting before its tools (``interrupt_before``), runs waiting on ``interrupt()`` inside a subgraph
call, and runs whose node failed after a parallel node wrote. One of each waits at its thread's
tip; the other is left behind by a fork, so only its pending writes keep it. Then, on each backend:

- the decisions (dry runs of several policies, and the real prune) are exactly what the policy
  says, computed apart from the implementation (``retention_oracle.expected_kept``) from what
  the saver listed before pruning;
- a dry run deletes nothing and decides what the prune then does;
- every kept checkpoint loads as before (values, messages, pending writes, subgraph namespaces),
  ``get_state_history`` lists exactly the kept ones, the links to removed parents are cut, the
  blobs left are exactly those a kept checkpoint references;
- the interrupted and failed runs resume (at the tip from their pending writes), the latest
  resumes;
- the history store is byte-for-byte unchanged, and a thread pruned to its last checkpoint still
  answers a history lookup for turn 1;
- a thread with a ``DeltaChannel`` is refused and left whole.

And on PostgreSQL under load: another process prunes a thread every 5 steps while this one runs
200 steps on it (``tests/retention_pruner.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import operator
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from psycopg import sql
from retention_oracle import (
    Key,
    Saved,
    decision_set,
    expected_kept,
    kept_keys,
    policy_mismatches,
)
from typing_extensions import TypedDict

from ctx_langgraph import (
    ContextConfig,
    ContextState,
    HistoryStore,
    PostgresHistoryStore,
    SQLiteHistoryStore,
    add_context_management,
    create_context_agent,
    make_history_lookup_tool,
)
from ctx_langgraph.errors import RetentionError
from ctx_langgraph.retention import CheckpointRetention, RetentionPolicy, RetentionReport
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply

HERE = Path(__file__).resolve().parent
WINDOW = ContextConfig(
    context_window=4_000,
    output_reserve=500,
    keep_recent_tokens=800,
    summary_max_tokens=300,
    tool_output_cap_tokens=300,
)
TURNS = 30
PLANTED = "LK-88213-Q"
TURN_1 = f"Please remember: my locker code is {PLANTED}. I will ask for it much later."
THREADS = {"main", "approve", "ask", "ask_tip", "flaky", "flaky_tip"}
AGE_GAP = 0.5
"""Seconds between the threads' first part and their forks: where ``keep_within`` cuts."""


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of an order by its id."""
    return f"Order {order_id}: shipped on day {sum(map(ord, order_id)) % 28 + 1}, carrier Nordpost."


def user_turn(turn: int) -> str:
    if turn == 1:
        return TURN_1
    if turn % 4 == 0:
        return f"Where is order ORD-{turn:04d}? Please check the status for me."
    return (
        f"Turn {turn}: a note on the migration plan, step {turn}, covering the schema, the "
        "backfill, the read path, the rollback checklist, the on-call rota and the dashboards "
        "we agreed on last week with the platform team and the two database administrators."
    )


def run_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": 60}


def checkpoint_config(config: RunnableConfig) -> RunnableConfig:
    """A saved checkpoint's config, runnable (the recursion limit of :func:`run_config`)."""
    return {"configurable": dict(config["configurable"]), "recursion_limit": 60}


def context_agent(store: HistoryStore) -> StateGraph:
    model = MeteringChatModel(replies=[tool_agent_reply])
    return create_context_agent(model, [get_order_status], store=store, config=WINDOW)


class Items(TypedDict):
    items: Annotated[list[str], operator.add]


class Question(TypedDict, total=False):
    question: str
    answer: str


@dataclass
class Probe:
    """How often the small graphs' nodes ran, and whether the flaky one fails now."""

    calls: Counter[str] = field(default_factory=Counter)
    fail: bool = False


def ask_graph(probe: Probe) -> StateGraph:
    """``ask`` calls a subgraph that waits on ``interrupt()`` for a question (an item ending in
    "?"), while ``side`` writes in parallel: the waiting checkpoint has ``side``'s write and the
    interrupt as pending writes, and the subgraph call has its own namespace."""

    def confirm(state: Question) -> Question:
        question = state["question"]
        if question.endswith("?"):
            return {"answer": f"answer:{interrupt({'question': question})}"}
        return {"answer": f"noted:{question}"}

    sub = StateGraph(Question)
    sub.add_node("confirm", confirm)
    sub.add_edge(START, "confirm")
    confirmation = sub.compile()

    def ask(state: Items, config: RunnableConfig) -> Items:
        probe.calls["ask"] += 1
        return {"items": [confirmation.invoke({"question": state["items"][-1]}, config)["answer"]]}

    async def aask(state: Items, config: RunnableConfig) -> Items:
        probe.calls["ask"] += 1
        out = await confirmation.ainvoke({"question": state["items"][-1]}, config)
        return {"items": [out["answer"]]}

    def side(state: Items) -> Items:
        probe.calls["side"] += 1
        return {"items": ["side"]}

    builder = StateGraph(Items)
    builder.add_node("ask", RunnableLambda(ask, afunc=aask))
    builder.add_node("side", side)
    builder.add_edge(START, "ask")
    builder.add_edge(START, "side")
    return builder


def flaky_graph(probe: Probe) -> StateGraph:
    """``writer`` and ``failing`` run in parallel; ``failing`` raises (after ``writer`` wrote)
    while ``probe.fail`` is set."""

    def writer(state: Items) -> Items:
        probe.calls["writer"] += 1
        return {"items": ["w"]}

    def failing(state: Items) -> Items:
        probe.calls["failing"] += 1
        if probe.fail:
            time.sleep(0.05)  # the writer's write is saved first
            raise RuntimeError("the flaky dependency is down")
        return {"items": ["f"]}

    builder = StateGraph(Items)
    builder.add_node("writer", writer)
    builder.add_node("failing", failing)
    builder.add_edge(START, "writer")
    builder.add_edge(START, "failing")
    return builder


# ---------------------------------------------------------------------- backends


@dataclass
class Driver:
    """One backend: its saver and history store, driven through the sync or the async API."""

    name: str
    mode: str
    saver: Any
    store: HistoryStore
    dump_store: Callable[[], dict[str, list[Any]]]
    """Every row of the history store's tables (``ctx_*``)."""
    blob_keys: Callable[[], set[tuple[str, str, str, str]]]
    """(thread_id, checkpoint_ns, channel, version) of every stored blob."""

    async def invoke(self, graph: Any, inputs: Any, config: RunnableConfig) -> Any:
        if self.mode == "sync":
            return graph.invoke(inputs, config)
        return await graph.ainvoke(inputs, config)

    async def state(self, graph: Any, config: RunnableConfig) -> Any:
        if self.mode == "sync":
            return graph.get_state(config)
        return await graph.aget_state(config)

    async def history(self, graph: Any, config: RunnableConfig) -> list[Any]:
        if self.mode == "sync":
            return list(graph.get_state_history(config))
        return [s async for s in graph.aget_state_history(config)]

    async def update(
        self, graph: Any, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        if self.mode == "sync":
            return checkpoint_config(graph.update_state(config, values, as_node=as_node))
        return checkpoint_config(await graph.aupdate_state(config, values, as_node=as_node))

    async def tuples(self, thread_id: str) -> list[CheckpointTuple]:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        if self.mode == "sync":
            return list(self.saver.list(config))
        return [t async for t in self.saver.alist(config)]

    async def get_tuple(self, key: Key) -> CheckpointTuple | None:
        thread_id, ns, checkpoint_id = key
        config: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        if self.mode == "sync":
            return self.saver.get_tuple(config)
        return await self.saver.aget_tuple(config)

    async def saved(self, threads: Iterable[str]) -> dict[Key, Saved]:
        found = [Saved.of(t) for thread in sorted(threads) for t in await self.tuples(thread)]
        return {s.key: s for s in found}

    async def prune(
        self, policy: RetentionPolicy, thread_id: str | None = None, *, dry_run: bool = False
    ) -> RetentionReport:
        retention = CheckpointRetention(self.saver, policy)
        if self.mode == "sync":
            return retention.prune(thread_id, dry_run=dry_run)
        return await retention.aprune(thread_id, dry_run=dry_run)


def sqlite_store_rows(path: Path) -> dict[str, list[Any]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '\\'",
                ("ctx\\_%",),
            )
        ]
        rows: dict[str, list[Any]] = {
            "schema": conn.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name LIKE ? ESCAPE '\\' "
                "ORDER BY name",
                ("ctx\\_%",),
            ).fetchall()
        }
        for name in names:
            query = f'SELECT * FROM "{name}"'  # a name read from sqlite_master
            rows[name] = sorted(conn.execute(query).fetchall(), key=repr)
    return rows


def postgres_store_rows(dsn: str) -> dict[str, list[Any]]:
    with psycopg.connect(dsn) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_name LIKE %s",
                ("ctx\\_%",),
            )
        ]
        return {
            name: [
                r[0]
                for r in conn.execute(
                    sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(sql.Identifier(name))
                )
            ]
            for name in names
        }


def postgres_blob_keys(dsn: str) -> set[tuple[str, str, str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT thread_id, checkpoint_ns, channel, version FROM checkpoint_blobs"
        ).fetchall()
    return {(str(a), str(b), str(c), str(d)) for a, b, c, d in rows}


BACKENDS = [
    "memory",
    "memory_async",
    "sqlite",
    "async_sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("async_postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
async def driver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Driver]:
    name: str = request.param
    mode = "async" if name.startswith("async") or name.endswith("async") else "sync"
    no_blobs: Callable[[], set[tuple[str, str, str, str]]] = set
    async with contextlib.AsyncExitStack() as stack:
        if name.startswith("memory"):
            path = tmp_path / "history.sqlite"
            store: HistoryStore = SQLiteHistoryStore.from_path(path)
            memory = InMemorySaver()

            def memory_blobs() -> set[tuple[str, str, str, str]]:
                return {(t, ns, ch, str(v)) for t, ns, ch, v in memory.blobs}

            made = Driver(name, mode, memory, store, lambda: sqlite_store_rows(path), memory_blobs)
        elif "sqlite" in name:
            # one file for the checkpoints and the history store: retention must keep to its tables
            path = tmp_path / "app.sqlite"
            store = SQLiteHistoryStore.from_path(path)
            saver: Any
            if mode == "sync":
                saver = stack.enter_context(SqliteSaver.from_conn_string(str(path)))
                saver.setup()
            else:
                saver = await stack.enter_async_context(
                    AsyncSqliteSaver.from_conn_string(str(path))
                )
                await saver.setup()
            made = Driver(name, mode, saver, store, lambda: sqlite_store_rows(path), no_blobs)
        else:
            dsn: str = request.getfixturevalue("pg_dsn")
            store = PostgresHistoryStore.from_conn_string(dsn)
            if mode == "sync":
                saver = stack.enter_context(PostgresSaver.from_conn_string(dsn))
                saver.setup()
            else:
                saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(dsn))
                await saver.setup()
            made = Driver(
                name,
                mode,
                saver,
                store,
                lambda: postgres_store_rows(dsn),
                lambda: postgres_blob_keys(dsn),
            )
        store.setup()
        stack.callback(store.close)
        yield made


# ---------------------------------------------------------------------- the threads


@dataclass
class Threads:
    """The graphs and the checkpoints the acceptance test comes back to."""

    graphs: dict[str, Any]
    probe: Probe
    interrupted: RunnableConfig
    """``ask``: waiting on ``interrupt()``, left behind by a fork (``ask_tip`` waits at its tip)."""
    interrupted_items: list[str]
    failed: RunnableConfig
    """``flaky``: the failed step, with ``writer``'s write pending, left behind by a fork
    (``flaky_tip`` failed at its tip)."""
    failed_items: list[str]
    boundary: dt.datetime
    """Between the threads' first part and their forks (``AGE_GAP`` either side)."""


async def build_threads(d: Driver) -> Threads:
    probe = Probe()
    graphs = {
        "main": context_agent(d.store).compile(checkpointer=d.saver),
        "approve": context_agent(d.store).compile(checkpointer=d.saver, interrupt_before=["tools"]),
        "ask": ask_graph(probe).compile(checkpointer=d.saver),
        "flaky": flaky_graph(probe).compile(checkpointer=d.saver),
    }
    graphs["ask_tip"], graphs["flaky_tip"] = graphs["ask"], graphs["flaky"]
    main, approve, ask, flaky = (run_config(t) for t in ("main", "approve", "ask", "flaky"))

    for turn in range(1, TURNS + 1):
        await d.invoke(graphs["main"], {"messages": [("user", user_turn(turn))]}, main)
    assert (await d.state(graphs["main"], main)).values["context"]  # context-managed

    for text in (user_turn(2), user_turn(3), "Where is order ORD-4242? I need it today."):
        await d.invoke(graphs["approve"], {"messages": [("user", text)]}, approve)
    assert (await d.state(graphs["approve"], approve)).next == ("tools",)

    await d.invoke(graphs["ask"], {"items": ["a?"]}, ask)
    await d.invoke(graphs["ask"], Command(resume="yes-a"), ask)
    after_a = checkpoint_config((await d.state(graphs["ask"], ask)).config)
    await d.invoke(graphs["ask"], {"items": ["b"]}, ask)
    await d.invoke(graphs["ask"], {"items": ["c?"]}, ask)
    waiting = await d.state(graphs["ask"], ask)
    assert [i.value for i in waiting.interrupts] == [{"question": "c?"}]
    interrupted = checkpoint_config(waiting.config)

    for item in ("1", "2"):
        await d.invoke(graphs["flaky"], {"items": [item]}, flaky)
    after_1 = next(
        checkpoint_config(s.config)
        for s in await d.history(graphs["flaky"], flaky)
        if not s.next and "2" not in s.values["items"]
    )
    probe.fail = True
    with pytest.raises(RuntimeError, match="flaky dependency"):
        await d.invoke(graphs["flaky"], {"items": ["3"]}, flaky)
    failed_state = await d.state(graphs["flaky"], flaky)
    failed = checkpoint_config(failed_state.config)
    failed_tuple = await d.get_tuple(key_of(failed))
    assert failed_tuple is not None and "items" in {w[1] for w in failed_tuple.pending_writes or ()}
    # the same, left at the tip of their threads: resuming them reuses their pending writes
    await d.invoke(graphs["ask_tip"], {"items": ["x?"]}, run_config("ask_tip"))
    probe.fail = False
    await d.invoke(graphs["flaky_tip"], {"items": ["1"]}, run_config("flaky_tip"))
    probe.fail = True
    with pytest.raises(RuntimeError, match="flaky dependency"):
        await d.invoke(graphs["flaky_tip"], {"items": ["2"]}, run_config("flaky_tip"))
    probe.fail = False

    await asyncio.sleep(AGE_GAP)
    boundary = dt.datetime.now(dt.timezone.utc)
    await asyncio.sleep(AGE_GAP)

    # main: fork from an old checkpoint about to call the model, continue it, then fork the fork
    history = await d.history(graphs["main"], main)
    about_to_run = [
        s
        for s in history
        if s.next == ("ctx_budget",) and isinstance(s.values["messages"][-1], HumanMessage)
    ]
    old = about_to_run[len(about_to_run) * 2 // 3]
    fork = await d.update(
        graphs["main"],
        checkpoint_config(old.config),
        {"messages": [HumanMessage("Forked question: where is order ORD-7777?")]},
    )
    out = await d.invoke(graphs["main"], None, fork)
    assert "ORD-7777" in out["messages"][-1].text
    await d.invoke(graphs["main"], {"messages": [("user", user_turn(TURNS + 1))]}, main)
    await d.update(
        graphs["main"],
        fork,
        {"messages": [HumanMessage("Second fork: where is order ORD-8888?")]},
    )
    assert (await d.state(graphs["main"], main)).next == ("ctx_budget",)

    # ask and flaky: fork from before the waiting / failed run and go on from there
    ask_fork = await d.update(graphs["ask"], after_a, {"items": ["fork"]}, as_node="side")
    await d.invoke(graphs["ask"], {"items": ["d"]}, ask_fork)
    await d.invoke(graphs["ask"], {"items": ["e"]}, ask)
    flaky_fork = await d.update(graphs["flaky"], after_1, {"items": ["fork"]}, as_node="writer")
    await d.invoke(graphs["flaky"], {"items": ["4"]}, flaky_fork)
    await d.invoke(graphs["flaky"], {"items": ["5"]}, flaky)

    return Threads(
        graphs,
        probe,
        interrupted,
        list(waiting.values["items"]),
        failed,
        list(failed_state.values["items"]),
        boundary,
    )


def key_of(config: RunnableConfig) -> Key:
    c = config["configurable"]
    return (c["thread_id"], c.get("checkpoint_ns", ""), c["checkpoint_id"])


def with_id(thread_id: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        },
        "recursion_limit": 60,
    }


def added_items(before: list[str], after: list[str]) -> list[str]:
    """What a resumed step added to the items (``get_state`` shows its pending writes already)."""
    added = Counter(after)
    added.subtract(before)
    assert all(n >= 0 for n in added.values()), (before, after)
    return sorted(added.elements())


def describe_snapshot(snapshot: Any) -> tuple[Any, ...]:
    return (
        snapshot.values,
        snapshot.next,
        [i.value for t in snapshot.tasks for i in t.interrupts],
    )


async def root_snapshots(d: Driver, threads: Threads) -> dict[Key, tuple[Any, ...]]:
    """What ``get_state`` shows of every root-namespace checkpoint."""
    snapshots = {}
    for thread, graph in threads.graphs.items():
        for s in await d.history(graph, run_config(thread)):
            snapshots[key_of(s.config)] = describe_snapshot(s)
    return snapshots


# ---------------------------------------------------------------------- checks after a prune


async def check_storage_follows_report(
    d: Driver,
    threads: Threads,
    report: RetentionReport,
    before: dict[Key, Saved],
    snapshots: dict[Key, tuple[Any, ...]],
    blobs_before: set[tuple[str, str, str, str]],
) -> None:
    """The saver holds exactly the kept checkpoints, each loading as before."""
    kept = kept_keys(report)
    pruned_threads = {k[0] for k in before}
    after = await d.saved(pruned_threads)
    assert set(after) == kept, (
        f"left {len(after)}, kept {len(kept)}: not removed {sorted(set(after) - kept)[:3]}, "
        f"lost {sorted(kept - set(after))[:3]}"
    )
    removed = set(before) - kept
    assert report.removed_writes == sum(len(before[k].writes) for k in removed)
    for key in sorted(kept):
        was, now = before[key], after[key]
        parent_kept = was.parent_id is not None and (*key[:2], was.parent_id) in kept
        assert now.parent_id == (was.parent_id if parent_kept else None), key
        assert now.writes == was.writes, key  # its pending writes stay
        assert now.channel_values == was.channel_values, key  # every blob it references stays

    # root namespaces through the graph: values and messages load, the history is the kept ones
    for thread in sorted(pruned_threads):
        graph = threads.graphs[thread]
        kept_ids = sorted((k[2] for k in kept if k[:2] == (thread, "")), reverse=True)
        listed = await d.history(graph, run_config(thread))
        assert [s.config["configurable"]["checkpoint_id"] for s in listed] == kept_ids, thread
        for checkpoint_id in kept_ids:
            snapshot = await d.state(graph, with_id(thread, checkpoint_id))
            assert describe_snapshot(snapshot) == snapshots[(thread, "", checkpoint_id)]
            messages = snapshot.values.get("messages", [])
            assert all(isinstance(m, BaseMessage) for m in messages)

    # a blob stays exactly when a kept checkpoint references it
    referenced = {
        (key[0], key[1], channel, version)
        for key in kept
        for channel, version in before[key].versions
    }
    ours = {b for b in blobs_before if b[0] in pruned_threads}
    blobs_after = d.blob_keys()
    assert {b for b in blobs_after if b[0] in pruned_threads} == ours & referenced
    assert report.removed_blobs == len(ours - referenced)
    assert blobs_after - ours == blobs_before - ours  # other threads' blobs untouched


# ---------------------------------------------------------------------- the acceptance test


async def test_pruning_real_threads_keeps_what_the_policy_says_and_everything_works(
    driver: Driver,
) -> None:
    d = driver
    threads = await build_threads(d)
    graphs = threads.graphs
    saved = await d.saved(THREADS)
    snapshots = await root_snapshots(d, threads)
    store_rows = d.dump_store()
    assert store_rows.get("ctx_events"), "the history store recorded nothing"
    blobs = d.blob_keys()
    assert {b for b in blobs if b[0] in THREADS} <= {
        (*k[:2], ch, v) for k, s in saved.items() for ch, v in s.versions
    }, "a blob no checkpoint references before pruning"
    assert any(":" in s.key[1] for s in saved.values()), "no subgraph call namespace"
    problems: list[str] = []  # policy mismatches, reported at the end so every other check runs

    # dry runs of several policies: exactly the policy's decisions, nothing deleted
    policies = [
        RetentionPolicy(keep_last=1),
        RetentionPolicy(keep_last=3),
        RetentionPolicy(keep_last=10_000),
        None,  # keep_last=2 and keep_within cutting between the first part and the forks
    ]
    for policy in policies:
        started = dt.datetime.now(dt.timezone.utc)
        if policy is None:
            policy = RetentionPolicy(keep_last=2, keep_within=started - threads.boundary)
        report = await d.prune(policy, dry_run=True)
        ended = dt.datetime.now(dt.timezone.utc)
        expected = expected_kept(saved.values(), policy, started)
        assert expected == expected_kept(saved.values(), policy, ended), "keep_within boundary"
        assert report.dry_run and set(report.threads) == THREADS
        assert set(report.kept) | set(report.removed) == set(report.decisions)
        problems += policy_mismatches(report, saved, expected, f"dry run {policy}")
        json.dumps(report.to_json())
        assert isinstance(report.table(), str)
    assert await d.saved(THREADS) == saved, "a dry run deleted something"
    assert d.blob_keys() == blobs and d.dump_store() == store_rows
    # the scenario exercises every rule: each reason keeps something, some subgraph calls go
    expected = expected_kept(saved.values(), RetentionPolicy(keep_last=3), started)
    covered = set().union(*expected.values())
    assert covered == {"latest", "keep_last", "pending_writes", "interrupt", "fork_point"}
    calls = {key[:2] for key in saved if ":" in key[1]}
    assert {key[:2] for key in expected if ":" in key[1]} < calls

    # the prune: what the dry run said, exactly the policy, and the storage follows the report
    policy = RetentionPolicy(keep_last=3)
    dry = await d.prune(policy, dry_run=True)
    report = await d.prune(policy)
    assert not report.dry_run and set(report.threads) == THREADS
    assert decision_set(report) == decision_set(dry)
    problems += policy_mismatches(
        report,
        saved,
        expected_kept(saved.values(), policy, dt.datetime.now(dt.timezone.utc)),
        "prune",
    )
    assert report.removed, "nothing was removed"
    assert report.bytes_freed is None or report.bytes_freed > 0
    assert key_of(threads.interrupted) in kept_keys(report)
    assert key_of(threads.failed) in kept_keys(report)
    await check_storage_follows_report(d, threads, report, saved, snapshots, blobs)
    assert d.dump_store() == store_rows, "retention changed the history store"

    # the waiting, failed and latest runs resume
    # (from a checkpoint id LangGraph replays: it runs the step's tasks again, pending writes
    # or not; at a thread's tip it runs only the tasks without a write)
    out = await d.invoke(graphs["ask"], Command(resume="yes-c"), threads.interrupted)
    assert added_items(threads.interrupted_items, out["items"]) == ["answer:yes-c"]
    out = await d.invoke(graphs["flaky"], None, threads.failed)
    assert added_items(threads.failed_items, out["items"]) == ["f"]
    calls = Counter(threads.probe.calls)
    out = await d.invoke(graphs["ask_tip"], Command(resume="yes-x"), run_config("ask_tip"))
    assert sorted(out["items"]) == ["answer:yes-x", "side", "x?"]
    out = await d.invoke(graphs["flaky_tip"], None, run_config("flaky_tip"))
    assert sorted(out["items"]) == ["1", "2", "f", "f", "w", "w"]
    assert threads.probe.calls - calls == Counter(ask=1, failing=1)  # pending writes reused
    out = await d.invoke(graphs["approve"], None, run_config("approve"))
    assert out["messages"][-1].text.startswith("The get_order_status result says: Order ORD-4242")
    out = await d.invoke(graphs["main"], None, run_config("main"))
    assert out["messages"][-1].text.startswith("The get_order_status result says: Order ORD-8888")

    # main pruned to its last checkpoint: the history store still has everything
    saved = await d.saved({"main"})
    snapshots = await root_snapshots(d, threads)
    store_rows, blobs = d.dump_store(), d.blob_keys()
    active = d.store.get_active("main")
    branches = d.store.list_branches("main")
    policy = RetentionPolicy(keep_last=1)
    report = await d.prune(policy, "main")
    assert set(report.threads) == {"main"}
    expected = expected_kept(saved.values(), policy, dt.datetime.now(dt.timezone.utc))
    assert len(expected) == 1
    problems += policy_mismatches(report, saved, expected, "prune main to 1")
    await check_storage_follows_report(d, threads, report, saved, snapshots, blobs)
    assert d.dump_store() == store_rows, "retention changed the history store"
    assert d.store.get_active("main") == active and active is not None
    assert d.store.list_branches("main") == branches
    lookup = make_history_lookup_tool(d.store)
    args = {"query": "locker code"}
    config = {"configurable": {"thread_id": "main"}}
    page = lookup.invoke(args, config) if d.mode == "sync" else await lookup.ainvoke(args, config)
    assert TURN_1 in [r["text"] for r in json.loads(page)["records"]]
    out = await d.invoke(
        graphs["main"], {"messages": [("user", "Recall locker code")]}, run_config("main")
    )
    assert PLANTED in out["messages"][-1].text

    assert not problems, "the decisions differ from the policy:\n" + "\n".join(problems[:40])


def extend(log: list[str], writes: list[list[str]]) -> list[str]:
    return [*log, *(item for write in writes for item in write)]


class DeltaLog(TypedDict):
    log: Annotated[list[str], DeltaChannel(extend)]


async def test_a_thread_with_a_delta_channel_is_refused_and_left_whole(driver: Driver) -> None:
    d = driver
    builder = StateGraph(DeltaLog)
    builder.add_node("note", lambda state: {"log": [f"note {len(state['log'])}"]})
    builder.add_edge(START, "note")
    graph = builder.compile(checkpointer=d.saver)
    for turn in range(4):
        await d.invoke(graph, {"log": [f"turn {turn}"]}, run_config("delta"))
    saved = await d.saved({"delta"})
    values = (await d.state(graph, run_config("delta"))).values
    assert len(saved) > 4
    with pytest.raises(RetentionError, match="DeltaChannel"):
        await d.prune(RetentionPolicy(keep_last=1), "delta")
    with contextlib.suppress(RetentionError):  # every thread: refused, or skipped
        await d.prune(RetentionPolicy(keep_last=1))
    assert await d.saved({"delta"}) == saved
    assert (await d.state(graph, run_config("delta"))).values == values


# ---------------------------------------------------------------------- PostgreSQL under load


class LoadState(ContextState):
    steps: Annotated[list[int], operator.add]
    """One item per step, in order: a lost step shows as a gap."""


LOAD_STEPS = 200


@pytest.mark.postgres
def test_pruning_from_another_process_while_a_graph_runs_200_steps(
    pg_dsn: str, tmp_path: Path
) -> None:
    with PostgresHistoryStore.from_conn_string(pg_dsn) as store:
        store.setup()
        run_200_steps_while_pruned(store, pg_dsn, tmp_path)


def run_200_steps_while_pruned(
    store: HistoryStore, pg_dsn: str, tmp_path: Path, *pruner_options: str
) -> None:
    model = MeteringChatModel(replies=[tool_agent_reply])

    def call_model(state: LoadState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(LoadState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    add_context_management(builder, model_node="model", store=store, config=WINDOW, model=model)
    stop, errors = tmp_path / "stop", tmp_path / "pruner.err"
    thread = "load"
    config = run_config(thread)
    texts = [
        f"Step {n}: the nightly import finished, batch {n} of {LOAD_STEPS}."
        for n in range(1, LOAD_STEPS + 1)
    ]
    with PostgresSaver.from_conn_string(pg_dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        command = [sys.executable, str(HERE / "retention_pruner.py"), pg_dsn, thread, str(stop)]
        with (
            errors.open("w") as stderr,
            subprocess.Popen(
                [*command, *pruner_options], stdout=subprocess.PIPE, stderr=stderr, text=True
            ) as pruner,
        ):
            try:
                ready = pruner.stdout.readline() if pruner.stdout else ""
                assert ready.strip() == '{"ready": true}', (ready, errors.read_text())
                for n, text in enumerate(texts, start=1):
                    graph.invoke({"messages": [("user", text)], "steps": [n]}, config)
                stop.touch()
                out, _ = pruner.communicate(timeout=60)
            finally:
                if pruner.poll() is None:
                    pruner.kill()
        assert pruner.returncode == 0, errors.read_text()
        reports = [json.loads(line) for line in out.splitlines()]
        pruning = [r for r in reports if r["removed"] > 0]
        assert len(pruning) >= 5, reports
        assert sum(r["during_run"] for r in pruning) >= 5, "the pruner did not overlap the run"
        assert sum(r["removed_blobs"] > 0 for r in pruning) >= 5, reports

        final = graph.get_state(config).values
        assert final["steps"] == list(range(1, LOAD_STEPS + 1))
        assert final["messages"][-1].text == f"Understood: {texts[-1]}"
        for snapshot in graph.get_state_history(config):  # every kept checkpoint loads
            assert snapshot.values["steps"] == list(range(1, len(snapshot.values["steps"]) + 1))
        assert len(list(saver.list({"configurable": {"thread_id": thread}}))) <= 3
        referenced = {
            (ns, ch, str(v))
            for t in saver.list({"configurable": {"thread_id": thread}})
            for ns in [t.config["configurable"]["checkpoint_ns"]]
            for ch, v in t.checkpoint["channel_versions"].items()
        }
        blobs = {(ns, ch, v) for t, ns, ch, v in postgres_blob_keys(pg_dsn) if t == thread}
        assert blobs <= referenced, "orphaned blobs"

    # the history store saw every step once, in order, on one timeline (a lost checkpoint
    # would make the next run look like a fork)
    humans = [e.text for e in store.read_events(thread) if e.role == "human"]
    assert humans == texts
    assert [b.scope.branch for b in store.list_branches(thread)] == ["main"]
