"""What the server benchmarks share: ``langgraph dev`` started and stopped on a free loopback
port, a scratch PostgreSQL schema, the client driver of one thread, and the checks of a thread
against the history store.

Used by ``server_load.py`` (many threads, double-texting, a restart) and ``chaos.py`` (faults
injected while runs are in flight). Only the processes started here are stopped, by their id (a
process group of their own); all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict

from ctx_langgraph.compaction.cut import pairing_problems
from ctx_langgraph.core.scope import Scope
from ctx_langgraph.history import HistoryStore
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

    def kill(self) -> None:
        """SIGKILL to its process group (a crash: no shutdown, nothing flushed), and wait."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
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
    sent: dict[str, str] = field(default_factory=dict)
    """Human message id -> text, of every run sent (completed or not)."""
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
    log.sent[mid] = text
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
        self.run_kwargs: dict[str, Any] = {}
        """Passed to every run the driver creates (``config``, ...)."""

    def fail(self, turn: int, kind: str, message: str) -> None:
        self.log.failures.append({"turn": turn, "kind": kind, "message": message[:400]})

    async def wait_turn(self, turn: int, payload: dict[str, Any]) -> None:
        mid, text = _message_id(payload)
        began = time.perf_counter()
        try:
            values = await self.client.runs.wait(
                self.log.thread_id, GRAPH, input=payload, **self.run_kwargs
            )
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
                self.log.thread_id,
                GRAPH,
                input=payload,
                stream_mode=["messages", "debug"],
                **self.run_kwargs,
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
            run_a = await self.client.runs.create(thread, GRAPH, input=first, **self.run_kwargs)
        except Exception as exc:
            self.fail(turn, _error_kind(exc), str(exc))
            return
        run_b = None
        try:
            run_b = await self.client.runs.create(
                thread, GRAPH, input=second, multitask_strategy=strategy, **self.run_kwargs
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


def state_scope(thread_id: str, values: dict[str, Any]) -> Scope:
    """The thread's branch in the store, as the server's state names it (``context["branch"]``:
    the package may fork a thread onto a new branch when a turn runs from an older checkpoint)."""
    branch = (values.get("context") or {}).get("branch") or "main"
    return Scope(thread_id, branch=str(branch))


def check_thread(
    store: HistoryStore,
    log: ThreadLog,
    values: dict[str, Any],
    *,
    expected: dict[str, str] | None = None,
    allowed: Collection[str] | None = None,
) -> dict[str, int]:
    """One thread's invariants, from the store (the branch the state names) and the server's
    final state.

    ``expected``: message id -> text that must be on the branch as sent (default: what the
    client sent in runs that completed and received from them); ``allowed``: the human message
    ids the branch may hold (default: of runs that completed or were interrupted).
    """
    messages: list[BaseMessage] = messages_from_dict(
        [{"type": m["type"], "data": m} for m in values.get("messages") or []]
    )
    scope = state_scope(log.thread_id, values)
    events = store.read_events(scope)
    by_id: dict[str, Any] = {}
    duplicated = 0
    for event in events:
        duplicated += event.event_id in by_id
        by_id[event.event_id] = event
    if expected is None:
        expected = {**log.landed, **log.received}
    if allowed is None:
        allowed = {**log.landed, **log.interrupted}.keys()
    lost = [i for i in expected if i not in by_id]
    altered = [i for i in expected if i in by_id and str(by_id[i].message.text) != expected[i]]
    kept = [i for i in log.withdrawn if i in by_id]
    humans = [e for e in events if e.role == "human"]
    foreign = [e.event_id for e in humans if e.event_id not in allowed]
    duplicated += len([t for t, n in Counter(e.text for e in humans).items() if n > 1])
    active = store.get_active(scope)
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


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
