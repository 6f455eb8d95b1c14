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
import datetime as dt
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict
from langgraph_sdk import get_client

from ctx_langgraph.compaction.cut import pairing_problems
from ctx_langgraph.core.table import format_table
from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, SQLiteHistoryStore
from ctx_langgraph.view.markers import is_synthetic

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
GRAPH = "context_agent"
STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")
STARTUP_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 300.0
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


# ----------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """One ``langgraph dev`` this benchmark starts and stops (its own process group)."""

    workdir: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / "server.log"

    def start(self) -> float:
        """Start it and wait until it answers; the seconds that took."""
        began = time.perf_counter()
        command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
        command += ["--port", str(self.port)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, "--config", str(ROOT / "langgraph.json")],
                cwd=self.workdir,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # stopped with everything it spawned, and nothing else
            )
        self.starts += 1
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited: {self.log_tail()}")
            with contextlib.suppress(OSError), OPENER.open(self.url + "/ok", timeout=2) as answer:
                if answer.status == 200:
                    return time.perf_counter() - began
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"langgraph dev did not answer within {STARTUP_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        """SIGTERM to its process group (SIGKILL after 30 s), and wait for it."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def server_env(workdir: Path, dsn: str | None, args: argparse.Namespace) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # offline model
    env.update(
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        NO_PROXY="127.0.0.1,localhost",
        CTX_CONTEXT_WINDOW=str(args.window),
        CTX_SUMMARIZER_FAILURE_RATE=str(args.summarizer_failure_rate),
        CTX_HISTORY_DB=str(workdir / "history.sqlite"),
        CTX_MEMORY_DB=str(workdir / "memory.sqlite"),
        CTX_EXPLORER_DB=str(workdir / "explorer.sqlite"),
    )
    env.pop("CTX_HISTORY_DSN", None)
    env.pop("CTX_MEMORY_DSN", None)
    if dsn:
        env["CTX_HISTORY_DSN"] = dsn
    return env


@contextlib.contextmanager
def scratch_schema(dsn: str) -> Iterator[str]:
    """A schema of its own in the database (the DSN's search_path), dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"ctx_load_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield psycopg.conninfo.make_conninfo(dsn, options=f"-c search_path={name}")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


# ----------------------------------------------------------------------------- one thread


@dataclass
class ThreadLog:
    """What the client sent and received on one thread, and how its runs went."""

    index: int
    thread_id: str = ""
    landed: dict[str, str] = field(default_factory=dict)
    """Human message id -> text, of runs that completed."""
    withdrawn: dict[str, str] = field(default_factory=dict)
    """Of runs rejected or rolled back: never part of the thread."""
    interrupted: dict[str, str] = field(default_factory=dict)
    """Of runs interrupted by a double-text: in the thread at most once."""
    received: dict[str, str] = field(default_factory=dict)
    """AI message id -> text, received from completed runs."""
    failures: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)
    """Of each streamed run: our nodes' share of the time its nodes ran."""
    executions: list[float] = field(default_factory=list)
    """Of each streamed run: from its first node's start to its last node's end (no queueing)."""
    runs: int = 0


def message_text(index: int, turn: int, rng: random.Random, tag: str = "") -> str:
    """Tool-heavy turns: order questions (ids ending in 7 return a long tracking log), lookups
    of what was said before, statements; each text is the thread's only one (a message
    recorded twice shows as two events with the same text)."""
    order = f"ORD-{rng.randrange(100, 999)}{rng.choice('1234567777')}"
    roll = rng.random()
    if turn > 3 and roll < 0.15:
        return f"Recall ORD-{index}{turn - 3} [{turn}{tag}]"
    if roll < 0.75:
        return f"Where is {order}? (thread {index}, turn {turn}{tag})"
    return f"Note for ORD-{index}{turn}: the customer prefers delivery after 5pm [{turn}{tag}]."


def human(log: ThreadLog, turn: int, text: str, tag: str = "") -> dict[str, Any]:
    mid = f"h-{log.index}-{turn}{tag}-{uuid.uuid4().hex[:6]}"
    return {"messages": [{"type": "human", "content": text, "id": mid}]}


def _message_id(payload: dict[str, Any]) -> tuple[str, str]:
    message = payload["messages"][0]
    return str(message["id"]), str(message["content"])


def _ai_after(values: dict[str, Any], human_id: str) -> dict[str, str]:
    """The AI messages of a run's final state after its human message (the run's own)."""
    messages = values.get("messages") or []
    ids = [m.get("id") for m in messages]
    start = ids.index(human_id) + 1 if human_id in ids else len(messages)
    return {
        str(m["id"]): str(AIMessage(content=m["content"]).text)
        for m in messages[start:]
        if m.get("type") == "ai"
        and not any(k.startswith("ctx_") for k in m.get("additional_kwargs") or {})
    }


def _error_kind(exc: BaseException) -> str:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return f"{type(exc).__name__}{f' {status}' if status else ''}"


def _timestamp(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class Driver:
    """Runs one thread's turns through the client."""

    def __init__(self, client: Any, log: ThreadLog, args: argparse.Namespace) -> None:
        self.client, self.log, self.args = client, log, args
        self.rng = random.Random(f"{args.seed}:{log.index}")

    def fail(self, turn: int, kind: str, message: str) -> None:
        self.log.failures.append({"turn": turn, "kind": kind, "message": message[:400]})

    async def wait_turn(self, turn: int, payload: dict[str, Any]) -> None:
        mid, text = _message_id(payload)
        began = time.perf_counter()
        try:
            values = await self.client.runs.wait(self.log.thread_id, GRAPH, input=payload)
        except Exception as exc:
            self.fail(turn, _error_kind(exc), str(exc))
            return
        self.log.latencies.append(time.perf_counter() - began)
        if isinstance(values, dict) and "__error__" in values:
            error = values["__error__"]
            self.fail(turn, str(error.get("error", "error")), str(error.get("message", "")))
            return
        self.log.landed[mid] = text
        self.log.received.update(_ai_after(values, mid))

    async def stream_turn(self, turn: int, payload: dict[str, Any]) -> None:
        mid, text = _message_id(payload)
        began = time.perf_counter()
        started: dict[str, tuple[str, float]] = {}
        ours = nodes = 0.0
        first = last = None
        received: dict[str, str] = {}
        try:
            async for part in self.client.runs.stream(
                self.log.thread_id, GRAPH, input=payload, stream_mode=["messages", "debug"]
            ):
                if part.event == "error":
                    self.fail(turn, str(part.data.get("error", "error")), str(part.data))
                    return
                if part.event == "messages/complete":
                    for m in part.data:
                        if m.get("type") == "ai" and m.get("id"):
                            received[str(m["id"])] = str(AIMessage(content=m["content"]).text)
                elif part.event == "debug" and isinstance(part.data, dict):
                    data, payload_ = part.data, part.data.get("payload") or {}
                    if data.get("type") == "task":
                        at = _timestamp(data["timestamp"])
                        started[payload_["id"]] = (payload_["name"], at)
                        first = at if first is None else min(first, at)
                    elif data.get("type") == "task_result" and payload_.get("id") in started:
                        name, at = started.pop(payload_["id"])
                        last = _timestamp(data["timestamp"])
                        took = last - at
                        nodes += took
                        ours += took if name.startswith("ctx_") else 0.0
        except Exception as exc:
            self.fail(turn, _error_kind(exc), str(exc))
            return
        wall = time.perf_counter() - began
        self.log.latencies.append(wall)
        if nodes > 0 and first is not None and last is not None:
            self.log.shares.append(ours / nodes)
            self.log.executions.append(last - first)
        self.log.landed[mid] = text
        self.log.received.update(received)

    async def double_text(self, turn: int, strategy: str) -> None:
        """A first run, and a second sent while it is in flight with ``strategy``."""
        first = human(self.log, turn, message_text(self.log.index, turn, self.rng, "a"), "a")
        second = human(self.log, turn, message_text(self.log.index, turn, self.rng, "b"), "b")
        (first_id, first_text), (second_id, second_text) = map(_message_id, (first, second))
        self.log.outcomes[f"{strategy}: sent"] += 1
        self.log.runs += 1  # (two runs this turn)
        thread = self.log.thread_id
        try:
            run_a = await self.client.runs.create(thread, GRAPH, input=first)
        except Exception as exc:
            self.fail(turn, _error_kind(exc), str(exc))
            return
        run_b = None
        try:
            run_b = await self.client.runs.create(
                thread, GRAPH, input=second, multitask_strategy=strategy
            )
        except Exception as exc:
            if (
                strategy == "reject"
                and getattr(getattr(exc, "response", None), "status_code", 0) == 409
            ):
                self.log.refused += 1
                self.log.withdrawn[second_id] = second_text
                self.log.outcomes[f"{strategy}: refused"] += 1
            else:
                self.fail(turn, _error_kind(exc), str(exc))
        for run, mid, text in ((run_a, first_id, first_text), (run_b, second_id, second_text)):
            if run is not None:
                await self.settle(turn, strategy, run, mid, text)

    async def settle(
        self, turn: int, strategy: str, run: dict[str, Any], mid: str, text: str
    ) -> None:
        """Wait for one of the double-text's runs and file its message by how it ended."""
        thread = self.log.thread_id
        with contextlib.suppress(Exception):
            await self.client.runs.join(thread, run["run_id"])
        try:
            status = (await self.client.runs.get(thread, run["run_id"]))["status"]
        except Exception as exc:
            status = (
                "deleted"
                if getattr(getattr(exc, "response", None), "status_code", 0) == 404
                else _error_kind(exc)
            )
        self.log.outcomes[f"{strategy}: {status}"] += 1
        if status == "success":
            self.log.landed[mid] = text
            values = (await self.client.threads.get_state(thread))["values"]
            self.log.received.update(_ai_after(values, mid))
        elif status in ("deleted",) or (strategy == "rollback" and status == "interrupted"):
            self.log.withdrawn[mid] = text
        elif status == "interrupted":
            self.log.interrupted[mid] = text
        else:
            self.fail(turn, f"run {status}", f"{strategy} run {run['run_id']} ended {status}")

    async def turn(self, turn: int) -> None:
        self.log.runs += 1
        if self.log.index < self.args.double_text_threads and turn % 5 == 2:
            strategy = STRATEGIES[(self.log.index + turn // 5) % len(STRATEGIES)]
            await self.double_text(turn, strategy)
            return
        payload = human(self.log, turn, message_text(self.log.index, turn, self.rng))
        if turn % 2:
            await self.stream_turn(turn, payload)
        else:
            await self.wait_turn(turn, payload)


# ----------------------------------------------------------------------------- the checks


def check_thread(store: HistoryStore, log: ThreadLog, values: dict[str, Any]) -> dict[str, int]:
    """One thread's invariants, from the store and the server's final state."""
    messages: list[BaseMessage] = messages_from_dict(
        [{"type": m["type"], "data": m} for m in values.get("messages") or []]
    )
    events = store.read_events(log.thread_id)
    by_id: dict[str, Any] = {}
    duplicated = 0
    for event in events:
        duplicated += event.event_id in by_id
        by_id[event.event_id] = event
    expected = {**log.landed, **log.received}
    lost = [i for i in expected if i not in by_id]
    altered = [i for i in expected if i in by_id and str(by_id[i].message.text) != expected[i]]
    kept = [i for i in log.withdrawn if i in by_id]
    humans = [e for e in events if e.role == "human"]
    foreign = [e.event_id for e in humans if e.event_id not in {**log.landed, **log.interrupted}]
    duplicated += len([t for t, n in Counter(e.text for e in humans).items() if n > 1])
    active = store.get_active(log.thread_id)
    covered = active.covered_through_seq if active else 0
    seq = {e.event_id: e.seq for e in events}
    tail = [str(m.id) for m in messages if not is_synthetic(m)]
    recorded = [e.event_id for e in events if e.seq > covered]
    gaps = [i for i in recorded if i not in tail]
    overlaps = [i for i in tail if i in seq and seq[i] <= covered]
    unrecorded = [i for i in tail if i not in seq]
    summaries = sum(1 for m in messages if m.additional_kwargs.get("ctx_summary"))
    if os.environ.get("CTX_LOAD_DEBUG"):
        for i in altered[:3]:
            print(
                "ALTERED",
                repr(by_id[i].message.text[:200]),
                "|",
                repr(expected[i][:200]),
                file=sys.stderr,
            )
    return {
        "lost": len(lost) + len(unrecorded),
        "duplicated": duplicated + len(foreign),
        "altered": len(altered),
        "kept_withdrawn": len(kept),
        "gaps": len(gaps),
        "overlaps": len(overlaps) + max(0, summaries - 1),
        "orphans": len(pairing_problems(messages)),
        "generation": active.generation if active else 0,
    }


def compaction_outcomes(store: HistoryStore, thread_id: str) -> Counter[str]:
    """The thread's summary versions by status, and the committed ones a fallback wrote (not
    the graph's summarizer, ``flaky:...``)."""
    outcomes: Counter[str] = Counter()
    for version in store.list_versions(thread_id):
        outcomes[version.status] += 1
        written = version.status in ("active", "superseded")
        outcomes["written by the fallback"] += written and not str(
            version.summarizer_id
        ).startswith("flaky:")
    return outcomes


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


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


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
            "p50": round(1000 * _pct(latencies, 0.5), 1),
            "p95": round(1000 * _pct(latencies, 0.95), 1),
        },
        "execution_ms": {
            "p50": round(1000 * _pct(executions, 0.5), 1),
            "p95": round(1000 * _pct(executions, 0.95), 1),
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
