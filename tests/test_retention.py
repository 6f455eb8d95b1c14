"""Checkpoint retention: the policy on its own, the CLI, the after-run hooks, and refusals."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import operator
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from ctx_langgraph.cli import main
from ctx_langgraph.errors import RetentionError
from ctx_langgraph.retention import (
    AsyncRetentionHook,
    CheckpointRetention,
    RetentionHook,
    RetentionPolicy,
    created_at,
    decide,
    parse_age,
)
from ctx_langgraph.retention.policy import _Row

NOW = dt.datetime.now(dt.timezone.utc)


def row(cid: str, parent: str | None = None, ns: str = "", **kw: Any) -> _Row:
    fields = {"bytes": 10, "writes": 0, "writes_bytes": 0, "interrupted": False, "root_id": None}
    fields.update(kw)
    return _Row(ns, cid, parent, delta=False, **fields)  # type: ignore[arg-type]


def kept(decisions: list[Any]) -> dict[str, tuple[str, ...]]:
    return {d.checkpoint_id: d.reasons for d in decisions if d.kept}


def test_latest_and_keep_last_per_namespace() -> None:
    rows = [row(f"c{i}", f"c{i - 1}" if i else None) for i in range(6)]
    rows += [row("s1", None, ns="sub"), row("s2", "s1", ns="sub")]
    got = kept(decide("t", rows, RetentionPolicy(keep_last=2), NOW))
    assert got == {
        "c5": ("latest", "keep_last"),
        "c4": ("keep_last",),
        "s2": ("latest", "keep_last"),
        "s1": ("keep_last",),
    }


def test_pending_writes_interrupts_and_fork_points() -> None:
    # c0 - c1 - c2 - c3 (latest) ; c1 - f1 - f2 (a fork from c1, left waiting on an interrupt)
    rows = [
        row("c0"),
        row("c1", "c0", writes=2),  # writes folded into its children: not pending
        row("c2", "c1"),
        row("c3", "c2"),
        row("c1f", "c1"),
        row("c2f", "c1f", writes=1, interrupted=True),
    ]
    rows.sort(key=lambda r: r.checkpoint_id)
    got = kept(decide("t", rows, RetentionPolicy(keep_last=1), NOW))
    # c3 is the newest id; c2f waits on an interrupt; c1 is where the fork started
    assert got == {
        "c3": ("latest", "keep_last"),
        "c2f": ("pending_writes", "interrupt"),
        "c1": ("fork_point",),
    }


def test_keep_within_reads_the_age_from_the_checkpoint_id() -> None:
    old = str(uuid6())
    rows = [row(old), row(str(uuid6()), old)]
    policy = RetentionPolicy(keep_last=1, keep_within=dt.timedelta(hours=1))
    assert len(kept(decide("t", rows, policy, dt.datetime.now(dt.timezone.utc)))) == 2
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)
    assert len(kept(decide("t", rows, policy, later))) == 1
    assert created_at("not-a-uuid") is None and created_at(str(uuid6())) is not None


def test_a_subgraph_call_goes_with_its_root_checkpoint() -> None:
    rows = [row("r1"), row("r2", "r1"), row("r3", "r2")]
    rows += [row("a1", ns="tools:task-a", root_id="r1"), row("b1", ns="tools:task-b", root_id="r3")]
    decisions = decide("t", rows, RetentionPolicy(keep_last=1), NOW)
    assert set(kept(decisions)) == {"r3", "b1"}
    (gone_call,) = [d for d in decisions if d.checkpoint_id == "a1"]
    assert gone_call.reasons == ("subgraph call of a removed checkpoint",)


@given(
    parents=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=30),
    keep_last=st.integers(min_value=1, max_value=8),
    pending=st.sets(st.integers(min_value=0, max_value=30)),
)
def test_policy_invariants(parents: list[int], keep_last: int, pending: set[int]) -> None:
    # a random checkpoint tree: checkpoint i's parent is an earlier one
    rows = [
        row(f"c{i:03d}", f"c{min(p, i - 1):03d}" if i else None, writes=int(i in pending))
        for i, p in enumerate(parents)
    ]
    decisions = decide("t", rows, RetentionPolicy(keep_last=keep_last), NOW)
    by_id = {d.checkpoint_id: d for d in decisions}
    newest = sorted(by_id, reverse=True)
    assert all(by_id[c].kept for c in newest[:keep_last])  # the newest K, the latest among them
    children: dict[str, int] = {}
    for r in rows:
        if r.parent_id:
            children[r.parent_id] = children.get(r.parent_id, 0) + 1
    for r in rows:
        decision = by_id[r.checkpoint_id]
        if r.writes and not children.get(r.checkpoint_id):
            assert decision.kept  # a run that can still resume
        ancestor = r.parent_id if decision.kept else None
        while ancestor:  # every branching ancestor of a kept checkpoint
            assert by_id[ancestor].kept or children[ancestor] < 2
            ancestor = by_id[ancestor].parent_id
        if not decision.kept:
            assert decision.reasons == ()


def test_policy_and_age_validation() -> None:
    with pytest.raises(ValueError, match="keep_last"):
        RetentionPolicy(keep_last=0)
    with pytest.raises(ValueError, match="keep_within"):
        RetentionPolicy(keep_within=dt.timedelta(0))
    assert parse_age("2w") == dt.timedelta(weeks=2)
    with pytest.raises(ValueError, match="7d"):
        parse_age("soon")


# ---------------------------------------------------------------------- on real savers


class Counter(TypedDict):
    items: Annotated[list[int], operator.add]


def counter_graph(saver: Any) -> Any:
    builder = StateGraph(Counter)
    builder.add_node("step", lambda s: {"items": [len(s["items"])]})
    builder.add_edge(START, "step")
    return builder.compile(checkpointer=saver)


def test_unsupported_savers_and_sync_calls_on_async_savers_are_refused(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match="checkpointer"):
        CheckpointRetention(object())  # type: ignore[arg-type]

    async def main_() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
            with pytest.raises(RetentionError, match="aprune"):
                CheckpointRetention(saver).prune("t")
            assert (await CheckpointRetention(saver).aprune("t")).decisions == ()

    asyncio.run(main_())


def test_a_delta_channel_thread_is_refused_and_left_alone(tmp_path: Any) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "d.sqlite")) as saver:
        graph = counter_graph(saver)
        for _ in range(3):
            graph.invoke({"items": []}, {"configurable": {"thread_id": "plain"}})
        config = {"configurable": {"thread_id": "delta", "checkpoint_ns": ""}}
        for step in range(3):
            checkpoint = {**empty_checkpoint(), "id": str(uuid6(clock_seq=step))}
            meta = {"step": step, "counters_since_delta_snapshot": {"items": step}}
            config = saver.put(config, checkpoint, meta, {})  # type: ignore[arg-type]
        retention = CheckpointRetention(saver, RetentionPolicy(keep_last=1))
        with pytest.raises(RetentionError, match="DeltaChannel"):
            retention.prune("delta")
        report = retention.prune()  # every thread: the delta one is skipped and named
        assert report.threads == ("plain",) and report.refused[0].startswith("delta:")
        assert len(list(saver.list({"configurable": {"thread_id": "delta"}}))) == 3


def test_cli_prunes_a_sqlite_file_and_reports(tmp_path: Any, capsys: Any) -> None:
    path = tmp_path / "c.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = counter_graph(saver)
        for thread in ("x", "y"):
            for _ in range(4):
                graph.invoke({"items": []}, {"configurable": {"thread_id": thread}})
    argv = ["retention", "--sqlite", str(path), "--keep-last", "2"]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 kept, 20 removed" in out and "dry run" in out
    assert main([*argv, "--thread", "x", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["kept"], report["removed"], report["threads"]) == (2, 10, ["x"])
    assert report["bytes_freed"] > 0
    with SqliteSaver.from_conn_string(str(path)) as saver:
        assert len(list(saver.list({"configurable": {"thread_id": "x"}}))) == 2
        assert len(list(saver.list({"configurable": {"thread_id": "y"}}))) == 12
    assert main(["retention", "--sqlite", str(tmp_path / "nope"), "--keep-last", "2"]) == 2
    assert main([*argv, "--keep-within", "soon"]) == 2
    assert (
        main(["retention", "--postgres", "postgresql://nobody@127.0.0.1:1/x", "--keep-last", "1"])
        == 2
    )
    err = capsys.readouterr().err
    assert "no such file" in err and "7d" in err and "ctx-langgraph retention:" in err


def test_the_after_run_hook_prunes_every_n_runs() -> None:
    saver = InMemorySaver()
    hook = RetentionHook(CheckpointRetention(saver, RetentionPolicy(keep_last=2)), every=3)
    graph = counter_graph(saver).with_config(callbacks=[hook])
    run = {"configurable": {"thread_id": "h"}}
    for _ in range(7):
        graph.invoke({"items": []}, run)
    assert len(hook.reports) == 2  # after runs 3 and 6
    # 2 kept at run 6, then run 7 added three
    assert len(list(saver.list(run))) == 5
    assert graph.get_state(run).values["items"] == list(range(7))


def test_the_async_hook_prunes_with_an_async_saver(tmp_path: Any) -> None:
    async def main_() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "h.sqlite")) as saver:
            retention = CheckpointRetention(saver, RetentionPolicy(keep_last=1))
            hook = AsyncRetentionHook(retention, every=2)
            graph = counter_graph(saver).with_config(callbacks=[hook])
            run = {"configurable": {"thread_id": "h"}}
            for _ in range(4):
                await graph.ainvoke({"items": []}, run)
            assert len(hook.reports) == 2
            assert len([c async for c in saver.alist(run)]) == 1
            assert (await graph.aget_state(run)).values["items"] == [0, 1, 2, 3]

    asyncio.run(main_())


def test_a_failing_prune_never_breaks_the_run(caplog: Any) -> None:
    class Broken(CheckpointRetention):
        def prune(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("database is down")

    saver = InMemorySaver()
    hook = RetentionHook(Broken(saver), every=1)
    graph = counter_graph(saver).with_config(callbacks=[hook])
    assert graph.invoke({"items": []}, {"configurable": {"thread_id": "b"}}) == {"items": [0]}
    assert "database is down" in caplog.text
