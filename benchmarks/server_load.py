"""Server load: the package under the LangGraph server's own API, many threads at once.

Starts ``langgraph dev --no-browser`` (the in-memory runtime of the ``studio`` extra) on a free
loopback port with the repository's ``langgraph.json``, its history store and long-term memory on
PostgreSQL (``--pg DSN``, in a scratch schema dropped at the end) or on SQLite files, and drives
the ``context_agent`` graph with ``langgraph_sdk``'s client only, as an application does:

- ``--threads`` conversations at once, ``--turns`` each: order questions whose tracking logs are
  longer than the tool-output cap (a preview in the state, the whole text in the store), lookups
  and statements, in a ``--window``-token window so every thread compacts several times; the
  turns alternate ``runs.wait`` and ``runs.stream(stream_mode=["messages", "debug"])``;
- the summarizer fails ``--summarizer-failure-rate`` of its calls (raising, empty, garbage,
  slow), through the graph's ``CTX_SUMMARIZER_FAILURE_RATE`` switch;
- double-texting: on ``--double-text-threads`` threads, every fifth turn sends a second run while
  the first is in flight, with ``multitask_strategy`` reject, enqueue, interrupt and rollback in
  turn;
- half way, once no run is in flight, the server is stopped with SIGTERM and started again (its
  state from the server's own persistence, the history from the store), and the threads go on;
- a last plain turn on every thread: a thread whose run fails there is dead.

Then every thread is checked against the store (read directly) and what the client sent and
received: messages lost, duplicated or altered, messages of rejected or rolled-back runs kept,
coverage gaps and overlaps between the active summary and the state's tail, tool calls and
results not paired in the state.

    python benchmarks/server_load.py [--pg DSN] [--threads 32] [--turns 40] [--window 3000]
        [--summarizer-failure-rate 0.2] [--double-text-threads 8] [--no-restart] [--seed 7]
        [--json] [--no-check]

Targets: 0 failed runs other than those ``reject`` refuses, 0 lost, duplicated, altered or kept
messages, 0 gaps, overlaps and orphans, 0 dead threads. A missed target makes the exit code 1
(``--no-check``: always 0). Only the processes it started are stopped, by their id; all traffic
stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _server import (
    ROOT,
    RUN_TIMEOUT_S,
    Driver,
    Server,
    ThreadLog,
    check_thread,
    compaction_outcomes,
    human,
    pct,
    scratch_schema,
    server_env,
)
from langgraph_sdk import get_client

from ctx_langgraph.core.table import format_table
from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, SQLiteHistoryStore

# ----------------------------------------------------------------------------- the run


async def drive(server: Server, store: HistoryStore, args: argparse.Namespace) -> dict[str, Any]:
    client = get_client(url=server.url, timeout=RUN_TIMEOUT_S)
    logs = [ThreadLog(i) for i in range(args.threads)]
    for log in logs:
        log.thread_id = (await client.threads.create())["thread_id"]
    drivers = [Driver(client, log, args) for log in logs]
    half = args.turns // 2 if args.restart else args.turns
    restart_s = 0.0

    async def leg(first: int, last: int) -> None:
        async def one(driver: Driver) -> None:
            for turn in range(first, last):
                await driver.turn(turn)

        await asyncio.gather(*(one(d) for d in drivers))

    began = time.perf_counter()
    await leg(0, half)
    if args.restart:
        stopped = time.perf_counter()
        server.stop()
        await asyncio.to_thread(server.start)
        restart_s = time.perf_counter() - stopped
        client = get_client(url=server.url, timeout=RUN_TIMEOUT_S)
        for driver in drivers:
            driver.client = client
        if args.restart_in_flight:
            await restart_in_flight(server, leg(half, args.turns))
        else:
            await leg(half, args.turns)
    wall = time.perf_counter() - began - restart_s
    dead = 0
    invariants: Counter[str] = Counter()
    generations: list[int] = []
    compactions: Counter[str] = Counter()
    for driver in drivers:  # the last plain turn: a thread that fails here is dead
        failed = len(driver.log.failures)
        await driver.wait_turn(args.turns, human(driver.log, args.turns, "Thanks, that is all."))
        dead += len(driver.log.failures) > failed
        values = (await client.threads.get_state(driver.log.thread_id))["values"]
        found = check_thread(store, driver.log, values)
        generations.append(found.pop("generation"))
        invariants.update(found)
        compactions.update(compaction_outcomes(store, driver.log.thread_id))
    result = figures(logs, wall, restart_s, dead, invariants, generations, args)
    return {**result, "compactions": dict(sorted(compactions.items()))}


async def restart_in_flight(server: Server, turns: Any) -> None:
    """Run ``turns`` and, 3 s in, stop the server (SIGTERM) with runs in flight and start it
    again; a run the restart cuts is a failed run."""
    running = asyncio.ensure_future(turns)
    await asyncio.sleep(3.0)
    server.stop()
    await asyncio.to_thread(server.start)
    await running


def figures(
    logs: list[ThreadLog],
    wall: float,
    restart_s: float,
    dead: int,
    invariants: Counter[str],
    generations: list[int],
    args: argparse.Namespace,
) -> dict[str, Any]:
    latencies = [x for log in logs for x in log.latencies]
    shares = [x for log in logs for x in log.shares]
    executions = [x for log in logs for x in log.executions]
    failures = [f for log in logs for f in log.failures]
    outcomes: Counter[str] = Counter()
    for log in logs:
        outcomes.update(log.outcomes)
    turns = sum(log.runs for log in logs)
    checks = {
        k: invariants.get(k, 0)
        for k in ("lost", "duplicated", "altered", "kept_withdrawn", "gaps", "overlaps", "orphans")
    }
    passed = not failures and dead == 0 and not any(checks.values())
    return {
        "settings": {
            "threads": args.threads,
            "turns": args.turns,
            "window": args.window,
            "summarizer_failure_rate": args.summarizer_failure_rate,
            "double_text_threads": args.double_text_threads,
            "restart": args.restart,
            "backend": "postgres" if args.pg else "sqlite",
        },
        "turns_per_s": round(turns / wall, 2) if wall > 0 else 0.0,
        "latency_ms": {
            "p50": round(1000 * pct(latencies, 0.5), 1),
            "p95": round(1000 * pct(latencies, 0.95), 1),
        },
        "execution_ms": {
            "p50": round(1000 * pct(executions, 0.5), 1),
            "p95": round(1000 * pct(executions, 0.95), 1),
        },
        "our_share": round(statistics.fmean(shares), 3) if shares else None,
        "runs": turns + len(logs),
        "failed_runs": len(failures),
        "refused_by_reject": sum(log.refused for log in logs),
        "errors_by_kind": dict(Counter(f["kind"] for f in failures)),
        "failure_examples": failures[:5],
        "double_texts": dict(sorted(outcomes.items())),
        "restart_s": round(restart_s, 2),
        "dead_threads": dead,
        "invariants": checks,
        "generations": {"min": min(generations, default=0), "max": max(generations, default=0)},
        "wall_s": round(wall, 1),
        "passed": passed,
    }


def table(result: dict[str, Any]) -> str:
    s = result["settings"]
    rows = [
        [
            "threads x turns",
            f"{s['threads']} x {s['turns']} ({s['backend']}, window {s['window']})",
        ],
        ["throughput", f"{result['turns_per_s']} turns/s"],
        [
            "run latency p50 / p95",
            f"{result['latency_ms']['p50']} / {result['latency_ms']['p95']} ms",
        ],
        [
            "run execution p50 / p95 (streamed runs)",
            f"{result['execution_ms']['p50']} / {result['execution_ms']['p95']} ms",
        ],
        ["our nodes' share of it", f"{result['our_share']}"],
        [
            "runs / failed / refused by reject",
            f"{result['runs']} / {result['failed_runs']} / {result['refused_by_reject']}",
        ],
        ["errors by kind", json.dumps(result["errors_by_kind"]) or "-"],
        [
            "summary generations per thread",
            f"{result['generations']['min']} to {result['generations']['max']}",
        ],
        ["restart (stop, start, answer)", f"{result['restart_s']} s"],
        ["dead threads", result["dead_threads"]],
        *([k, v] for k, v in result["invariants"].items()),
        *([f"double-text {k}", v] for k, v in result["double_texts"].items()),
        *([f"summary versions: {k}", v] for k, v in result["compactions"].items()),
        ["passed", result["passed"]],
    ]
    return format_table(["", "value"], rows)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ctx-load-")))
        (workdir / "graphs").symlink_to(ROOT / "graphs", target_is_directory=True)
        dsn = stack.enter_context(scratch_schema(args.pg)) if args.pg else None
        store: HistoryStore = (
            PostgresHistoryStore.from_conn_string(dsn)
            if dsn
            else SQLiteHistoryStore.from_path(workdir / "history.sqlite")
        )
        server = Server(workdir, server_env(workdir, dsn, args))
        stack.callback(server.stop)
        print(f"  starting langgraph dev on {server.url}", file=sys.stderr)
        server.start()
        store.setup()
        stack.callback(store.close)
        try:
            return asyncio.run(drive(server, store, args))
        except Exception:
            print(server.log_tail(), file=sys.stderr)
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=None, help="PostgreSQL DSN (else SQLite files)")
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--window", type=int, default=3000, help="the graph's context window")
    parser.add_argument("--summarizer-failure-rate", type=float, default=0.2)
    parser.add_argument("--double-text-threads", type=int, default=8)
    parser.add_argument("--no-restart", dest="restart", action="store_false")
    parser.add_argument(
        "--restart-in-flight",
        action="store_true",
        help="restart a second time while runs are in flight (a run it cuts is a failed run)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--no-check", action="store_true", help="exit 0 even if a target fails")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0 if result["passed"] or args.no_check else 1


if __name__ == "__main__":
    sys.exit(main())
