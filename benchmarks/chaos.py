"""Chaos: faults injected while runs are in flight, and the history checked after each one.

Starts its own throwaway PostgreSQL cluster (``initdb`` in a temp directory, a free port on
127.0.0.1; as the ``postgres`` user when run as root) or uses ``--pg DSN``, starts
``langgraph dev`` (``benchmarks/_server.py``) with ``graphs/context_agent.py`` on it (a scratch
schema, a small ``--window`` so threads compact), drives ``--threads`` threads through
``langgraph_sdk`` and, each in its own phase and while runs are in flight, injects:

- ``pg-stop-5``, ``pg-stop-20``: PostgreSQL stopped hard (``pg_ctl stop -m immediate``) for 5 s
  and for 20 s, then started again;
- ``pg-terminate``: the server's connections (``application_name`` ``ctx_chaos``) terminated
  with ``pg_terminate_backend`` every second for 8 s;
- ``pg-freeze-6``: the postmaster and its children frozen (SIGSTOP) for 6 s, then SIGCONT;
- ``server-kill-1``, ``server-kill-2``: the ``langgraph dev`` process group SIGKILLed and started
  again (the in-memory server re-runs the runs it had not snapshotted, up to 10 s of them).

A ``baseline`` phase without a fault runs first. After every phase, once every thread is idle
and has run one more plain turn (a thread whose turn fails twice is dead), every thread is
checked against the store and the server's state:

- ``lost``, ``duplicated``, ``altered``, ``foreign``: messages of the state missing from the
  store's branch (the one ``context["branch"]`` names), recorded twice, recorded with another
  text, or human messages on the branch the client never sent; ``off_timeline``: events on the
  branch that no checkpoint on the way to the state's held (a second timeline appended by a
  re-run, or the events of runs the server lost);
- ``lost_replies``: the model's messages a checkpoint on the way to the state's held that are
  neither in the state nor anywhere in the thread's store (every branch);
- ``gaps``, ``overlaps``: events after the active summary's cursor missing from the state, and
  covered events still in it; ``summary_mismatch``: the state's summary is not the branch's
  active summary; ``orphans``: tool calls and results not paired in the state;
- ``ledger_duplicates`` (one response booked under two call keys), ``ledger_totals`` (totals
  rows not equal to the sum of their calls), ``unbooked_replies`` (answers in the store with no
  ledger record of their response);
- ``loops``: runs with more than 50 ``ctx_budget``/``ctx_compact`` supersteps (from the thread's
  checkpoint history) or stopped by the recursion limit;
- ``failed_without_fault``: runs failed in the baseline phase or in the plain turn after a phase.

Runs failed during a fault are allowed and reported by kind, with the recovery time (from the
fault's end to the first run that succeeded, and until every thread had one).

    python benchmarks/chaos.py [--pg DSN [--pg-datadir DIR]] [--threads 8] [--window 2400]
        [--phases baseline,pg-stop-5,...] [--seed 7] [--json] [--no-check]

An invariant above 0 or a dead thread makes the exit code 1 (``--no-check``: always 0). Only
the processes it started (or the cluster of ``--pg-datadir``) are signalled, by their id; all
traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from _server import (
    ROOT,
    Driver,
    Server,
    ThreadLog,
    check_thread,
    free_port,
    human,
    message_text,
    scratch_schema,
    server_env,
    state_scope,
)
from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict
from langgraph_sdk import get_client

from ctx_langgraph.core.scope import Scope
from ctx_langgraph.core.table import format_table
from ctx_langgraph.history import HistoryStore, PostgresHistoryStore
from ctx_langgraph.state import unpack
from ctx_langgraph.storage.statements import Stmt
from ctx_langgraph.usage.types import COUNT_FIELDS
from ctx_langgraph.view.markers import is_synthetic

APP_NAME = "ctx_chaos"
"""The ``application_name`` of the server's connections: the ones ``pg-terminate`` ends."""
PHASES = (
    "baseline",
    "pg-stop-5",
    "pg-stop-20",
    "pg-terminate",
    "pg-freeze-6",
    "server-kill-1",
    "server-kill-2",
)
PG_PHASES = ("pg-stop-5", "pg-stop-20", "pg-freeze-6")
"""Phases that signal the cluster itself: they need its data directory."""
INVARIANTS = (
    "lost",
    "duplicated",
    "altered",
    "foreign",
    "off_timeline",
    "lost_replies",
    "gaps",
    "overlaps",
    "summary_mismatch",
    "orphans",
    "ledger_duplicates",
    "ledger_totals",
    "unbooked_replies",
    "loops",
    "failed_without_fault",
)
LOOP_SUPERSTEPS = 50
RECURSION_LIMIT = 150
"""Each run's recursion limit: a looping run stops after this many supersteps, not 10,000."""
RUN_TIMEOUT_S = 120.0
IDLE_TIMEOUT_S = 240.0
RECOVERY_TIMEOUT_S = 120.0


# ----------------------------------------------------------------------------- PostgreSQL


def _bindir() -> Path | None:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: p.parts)
    return versions[-1].parent if versions else None


@dataclass
class Cluster:
    """A PostgreSQL cluster this benchmark may stop, start and freeze: its own throwaway one,
    or the one of ``--pg-datadir``."""

    datadir: Path
    bindir: Path
    owner: str | None
    """The user its binaries run as (``postgres`` when we are root), or None: ourselves."""
    options: str = ""
    """``postgres`` options to start it with (its own cluster), or "" (as it is configured)."""
    log: Path | None = None

    def _run(self, *command: str | Path, timeout: float = 90.0) -> None:
        argv = [str(c) for c in command]
        if self.owner:
            argv = ["runuser", "-u", self.owner, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        command: list[str | Path] = [self.bindir / "pg_ctl", "-D", self.datadir, "-w", "-t", "60"]
        if self.log is not None:
            command += ["-l", self.log]
        if self.options:
            command += ["-o", self.options]
        self._run(*command, "start")

    def stop_immediate(self) -> None:
        """``pg_ctl stop -m immediate``: every process quits at once, no checkpoint."""
        self._run(self.bindir / "pg_ctl", "-D", self.datadir, "-m", "immediate", "-w", "stop")

    def postmaster(self) -> int:
        return int((self.datadir / "postmaster.pid").read_text().split()[0])

    def processes(self) -> list[int]:
        """The postmaster and its children (from /proc), postmaster first."""
        root = self.postmaster()
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                text = stat.read_text()
                if int(text.rsplit(")", 1)[1].split()[1]) == root:
                    children.append(int(stat.parent.name))
        return [root, *children]


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[tuple[str, Cluster]]:
    """Its own PostgreSQL cluster in a temp directory on a free loopback port; removed after."""
    bindir = _bindir()
    if bindir is None:
        raise SystemExit(
            "chaos.py: PostgreSQL server binaries not found (initdb); install them "
            "(apt-get install -y postgresql) or pass --pg DSN"
        )
    owner = "postgres" if os.geteuid() == 0 else None
    tmp = Path(tempfile.mkdtemp(prefix="ctx-chaos-pg-"))
    tmp.chmod(0o755)
    if owner:
        shutil.chown(tmp, owner, owner)
    port = free_port()
    # durable as a server should be against a crash of its processes: a commit is in the WAL
    # (the kernel's) before it is acknowledged; fsync is off, the machine does not crash here
    options = (
        f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off "
        "-c synchronous_commit=on -c max_connections=200"
    )
    cluster = Cluster(tmp / "data", bindir, owner, options, tmp / "server.log")
    try:
        cluster._run(
            bindir / "initdb",
            "-D",
            cluster.datadir,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        )
        cluster.start()
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", cluster
    finally:
        with contextlib.suppress(Exception):
            for pid in cluster.processes():  # a frozen cluster does not stop
                os.kill(pid, signal.SIGCONT)
        with contextlib.suppress(Exception):
            cluster.stop_immediate()
        shutil.rmtree(tmp, ignore_errors=True)


def given_cluster(datadir: Path) -> Cluster:
    bindir = _bindir()
    if bindir is None:
        raise SystemExit("chaos.py: --pg-datadir needs the PostgreSQL binaries (pg_ctl)")
    owner = None
    if os.geteuid() == 0:
        import pwd

        name = pwd.getpwuid(datadir.stat().st_uid).pw_name
        owner = None if name == "root" else name
    return Cluster(datadir, bindir, owner)


def terminate_backends(dsn: str) -> int:
    """End the server's connections (ours and everyone else's are left alone)."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (APP_NAME,),
        ).fetchall()
    return len(rows)


# ----------------------------------------------------------------------------- the phases


@dataclass
class Phase:
    """One phase's runs and what the check found after it."""

    name: str
    sent: int = 0
    succeeded: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    fault_start: float | None = None
    fault_end: float | None = None
    first_success: float | None = None
    """After the fault's end: the first run that succeeded."""
    recovered: dict[int, float] = field(default_factory=dict)
    """Thread index -> its first success after the fault's end."""
    fault_note: str = ""
    dead: int = 0
    max_loop: int = 0
    invariants: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def result(self, threads: int) -> dict[str, Any]:
        end = self.fault_end
        recovery = None if end is None or self.first_success is None else self.first_success - end
        every = (
            max(self.recovered.values()) - end
            if end is not None and len(self.recovered) == threads
            else None
        )
        return {
            "phase": self.name,
            "sent": self.sent,
            "succeeded": self.succeeded,
            "failed": sum(self.failed.values()),
            "failed_by_kind": dict(self.failed),
            "fault_s": None
            if end is None or self.fault_start is None
            else round(end - self.fault_start, 1),
            "fault": self.fault_note,
            "recovery_s": None if recovery is None else round(max(recovery, 0.0), 2),
            "recovery_all_s": None if every is None else round(max(every, 0.0), 2),
            "dead_threads": self.dead,
            "max_loop_supersteps": self.max_loop,
            "invariants": {k: self.invariants.get(k, 0) for k in INVARIANTS},
            "examples": self.examples[:12],
        }


class ChaosDriver(Driver):
    """A thread's driver that files each run under the current phase."""

    def __init__(self, client: Any, log: ThreadLog, args: argparse.Namespace) -> None:
        super().__init__(client, log, args)
        self.run_kwargs = {"config": {"recursion_limit": RECURSION_LIMIT}}
        self.next_turn = 0
        self.counted: set[str] = set()
        """Checkpoint ids whose supersteps were counted."""
        self.supersteps: Counter[str] = Counter()
        """Run id -> its ``ctx_budget``/``ctx_compact`` supersteps."""
        self.checkpoints: dict[str, tuple[str | None, frozenset[str]]] = {}
        """Checkpoint id -> its parent's id and the message ids its state held."""
        self.answers: set[str] = set()
        """The ids of the model's messages any checkpoint held."""

    def timeline(self, head: str) -> set[str]:
        """The ids of every message a state held on the way to checkpoint ``head`` (its
        parents back to the thread's first): the thread's timeline as the server knows it."""
        ids: set[str] = set()
        seen: set[str] = set()
        current: str | None = head
        while current and current in self.checkpoints and current not in seen:
            seen.add(current)
            parent, held = self.checkpoints[current]
            ids |= held
            current = parent
        return ids

    async def chaos_turn(self, phase: Phase, text: str | None = None) -> bool:
        """One turn (streamed or waited for, in turn); True when it succeeded."""
        turn = self.next_turn
        self.next_turn += 1
        tag = "" if text is None else "p"
        if text is None:
            text = message_text(self.log.index, turn, self.rng)
        payload = human(self.log, turn, text, tag)
        failures = len(self.log.failures)
        phase.sent += 1
        self.log.runs += 1
        if turn % 2 and not tag:
            await self.stream_turn(turn, payload)
        else:
            await self.wait_turn(turn, payload)
        if len(self.log.failures) > failures:
            for failure in self.log.failures[failures:]:
                phase.failed[failure["kind"]] += 1
                failure["phase"] = phase.name
            return False
        phase.succeeded += 1
        now = time.monotonic()
        if phase.fault_end is not None and now >= phase.fault_end:
            phase.first_success = phase.first_success or now
            phase.recovered.setdefault(self.log.index, now)
        return True

    async def wait_idle(self) -> str:
        """Wait until the thread has no run in flight (the server may be re-running one)."""
        deadline = time.monotonic() + IDLE_TIMEOUT_S
        status = "unknown"
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                status = str((await self.client.threads.get(self.log.thread_id))["status"])
                if status != "busy":
                    return status
            await asyncio.sleep(0.5)
        return status

    async def read_history(self) -> None:
        """Read the thread's new checkpoints: their ``ctx_budget``/``ctx_compact`` supersteps
        per run, their parent and the ids of the messages their state held."""
        before: Any = None
        while True:
            page = await self.client.threads.get_history(
                self.log.thread_id, limit=100, **({"before": before} if before else {})
            )
            if not page:
                return
            for state in page:
                checkpoint_id = str(state["checkpoint"]["checkpoint_id"])
                if checkpoint_id in self.counted:
                    return
                self.counted.add(checkpoint_id)
                parent = (state.get("parent_checkpoint") or {}).get("checkpoint_id")
                held = (state.get("values") or {}).get("messages") or []
                ids = frozenset(str(m["id"]) for m in held if m.get("id"))
                self.checkpoints[checkpoint_id] = (parent and str(parent), ids)
                self.answers |= {
                    str(m["id"])
                    for m in held
                    if m.get("type") == "ai"
                    and m.get("id")
                    and not any(k.startswith("ctx_") for k in m.get("additional_kwargs") or {})
                }
                run_id = str((state.get("metadata") or {}).get("run_id") or "")
                if set(state.get("next") or ()) & {"ctx_budget", "ctx_compact"}:
                    self.supersteps[run_id] += 1
            before = {"configurable": page[-1]["checkpoint"]}
            if len(page) < 100:
                return


async def inject(
    name: str,
    server: Server,
    cluster: Cluster | None,
    admin_dsn: str,
    rng: random.Random,
) -> str:
    """Inject the phase's fault (blocking until it is over); what was done."""
    if name.startswith("pg-stop-"):
        assert cluster is not None
        seconds = float(name.rsplit("-", 1)[1])
        await asyncio.to_thread(cluster.stop_immediate)
        await asyncio.sleep(seconds)
        await asyncio.to_thread(cluster.start)
        return f"pg_ctl stop -m immediate, {seconds:.0f} s down, started again"
    if name == "pg-terminate":
        ended = 0
        for _ in range(8):
            with contextlib.suppress(Exception):
                ended += await asyncio.to_thread(terminate_backends, admin_dsn)
            await asyncio.sleep(1.0)
        return f"pg_terminate_backend: {ended} connections in 8 s"
    if name.startswith("pg-freeze-"):
        assert cluster is not None
        seconds = float(name.rsplit("-", 1)[1])
        pids = cluster.processes()
        try:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            await asyncio.sleep(seconds)
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        return f"SIGSTOP of {len(pids)} processes for {seconds:.0f} s, then SIGCONT"
    if name.startswith("server-kill"):
        server.kill()
        took = await asyncio.to_thread(server.start)
        return f"SIGKILL of the server's process group, started again in {took:.1f} s"
    if name == "baseline":
        return "none"
    raise ValueError(f"unknown phase {name!r}")


async def run_phase(
    name: str,
    drivers: list[ChaosDriver],
    server: Server,
    store: HistoryStore,
    cluster: Cluster | None,
    admin_dsn: str,
    args: argparse.Namespace,
    rng: random.Random,
) -> Phase:
    phase = Phase(name)
    stop = asyncio.Event()

    async def one(driver: ChaosDriver) -> None:
        while not stop.is_set():
            if not await driver.chaos_turn(phase):
                await driver.wait_idle()  # a re-run of the failed run may be under way
                await asyncio.sleep(0.5)

    load = [asyncio.ensure_future(one(d)) for d in drivers]
    if name == "baseline":
        await asyncio.sleep(args.baseline_s)  # longer than the dev server's 10 s snapshots
    else:
        await asyncio.sleep(rng.uniform(1.5, 4.0))  # runs in flight, some not snapshotted
        phase.fault_start = time.monotonic()
        phase.fault_note = await inject(name, server, cluster, admin_dsn, rng)
        if name.startswith("server-kill"):
            client = get_client(url=server.url, timeout=RUN_TIMEOUT_S)
            for driver in drivers:
                driver.client = client
        phase.fault_end = time.monotonic()
        deadline = phase.fault_end + RECOVERY_TIMEOUT_S
        await asyncio.sleep(args.after_s)
        while len(phase.recovered) < len(drivers) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*load)
    await check_phase(phase, drivers, store, admin_dsn)
    return phase


# ----------------------------------------------------------------------------- the checks


def _messages(values: dict[str, Any]) -> list[BaseMessage]:
    return messages_from_dict(
        [{"type": m["type"], "data": m} for m in values.get("messages") or []]
    )


def _is_answer(message: BaseMessage) -> bool:
    return (
        isinstance(message, AIMessage)
        and not is_synthetic(message)
        and not any(k.startswith("ctx_") for k in message.additional_kwargs)
    )


def ledger_problems(dsn: str, thread_ids: list[str]) -> dict[str, Counter[str]]:
    """Per thread: one response booked under two call keys, and totals rows that are not the
    sum of their calls (read from the tables, not through the package)."""
    counts = ", ".join(f"SUM(COALESCE({c}, 0)) AS {c}" for c in COUNT_FIELDS)
    columns = ("calls", "unknown_calls", *COUNT_FIELDS, "cost_nano_usd")
    differs = " OR ".join(f"COALESCE(c.{c}, 0) <> COALESCE(t.{c}, 0)" for c in columns)
    group = "tenant, thread_id, branch, purpose, provider, model"
    found: dict[str, Counter[str]] = {t: Counter() for t in thread_ids}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for thread_id, n in conn.execute(
            "SELECT thread_id, COUNT(*) - 1 FROM ctx_usage_calls WHERE thread_id = ANY(%s) "
            "AND version >= 0 AND response_id IS NOT NULL "
            "GROUP BY thread_id, provider, response_id HAVING COUNT(*) > 1",
            (thread_ids,),
        ).fetchall():
            found[thread_id]["ledger_duplicates"] += int(n)
        for (thread_id,) in conn.execute(
            f"WITH c AS (SELECT {group}, COUNT(*) AS calls, "
            "SUM(CASE WHEN status = 'unknown' THEN 1 ELSE 0 END) AS unknown_calls, "
            f"{counts}, SUM(COALESCE(cost_nano_usd, 0)) AS cost_nano_usd FROM ctx_usage_calls "
            f"WHERE version >= 0 AND thread_id = ANY(%s) GROUP BY {group}), "
            "t AS (SELECT * FROM ctx_usage_totals WHERE thread_id = ANY(%s)) "
            f"SELECT COALESCE(c.thread_id, t.thread_id) FROM c FULL OUTER JOIN t USING ({group}) "
            f"WHERE {differs}",
            (thread_ids, thread_ids),
        ).fetchall():
            found[thread_id]["ledger_totals"] += 1
    return found


def booked_responses(dsn: str, thread_ids: list[str]) -> set[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT response_id FROM ctx_usage_calls WHERE thread_id = ANY(%s) AND version >= 0 "
            "AND response_id IS NOT NULL",
            (thread_ids,),
        ).fetchall()
    return {str(r[0]) for r in rows}


def store_everywhere(store: HistoryStore, thread_id: str) -> dict[str, BaseMessage]:
    """Every message the thread's store holds, on any branch, by id."""
    held: dict[str, BaseMessage] = {}
    for branch in store.list_branches(thread_id) or []:
        for event in store.read_events(Scope(thread_id, branch=branch.scope.branch)):
            held.setdefault(event.event_id, event.message)
    for event in store.read_events(thread_id):
        held.setdefault(event.event_id, event.message)
    return held


async def check_phase(
    phase: Phase, drivers: list[ChaosDriver], store: HistoryStore, dsn: str
) -> None:
    """Wait for every thread to be idle, run one plain turn on each (dead: fails twice), and
    check every thread against the store and the server's state."""
    await asyncio.gather(*(d.wait_idle() for d in drivers))
    probe = Phase(phase.name)

    async def plain(driver: ChaosDriver) -> None:
        for attempt in range(2):
            text = f"Thanks, that is all for now ({phase.name}, attempt {attempt + 1})."
            if await driver.chaos_turn(probe, text):
                return
            phase.invariants["failed_without_fault"] += attempt == 0
            phase.examples.append(f"thread {driver.log.index}: {driver.log.failures[-1]}")
            await driver.wait_idle()
            await asyncio.sleep(3.0)
        phase.dead += 1

    await asyncio.gather(*(plain(d) for d in drivers))
    await asyncio.gather(*(d.wait_idle() for d in drivers))
    if phase.name == "baseline":
        phase.invariants["failed_without_fault"] += sum(phase.failed.values())
    thread_ids = [d.log.thread_id for d in drivers]
    ledger = await asyncio.to_thread(ledger_problems, dsn, thread_ids)
    booked = await asyncio.to_thread(booked_responses, dsn, thread_ids)
    for driver in drivers:
        log = driver.log
        state = await driver.client.threads.get_state(log.thread_id)
        await driver.read_history()
        timeline = driver.timeline(str(state["checkpoint"]["checkpoint_id"]))
        found, details = await asyncio.to_thread(
            check_one, store, log, state["values"], booked, timeline, driver.answers
        )
        phase.examples += details
        found.update(ledger[log.thread_id])
        loops = [r for r, n in driver.supersteps.items() if n > LOOP_SUPERSTEPS]
        recursion = [f for f in log.failures if "Recursion" in f["kind"] + f["message"]]
        found["loops"] = len(loops) + len([f for f in recursion if f.get("phase") == phase.name])
        phase.max_loop = max(phase.max_loop, max(driver.supersteps.values(), default=0))
        for key, value in found.items():
            if value and key in INVARIANTS:
                phase.invariants[key] += value
                phase.examples.append(f"thread {log.index} ({log.thread_id}): {key} {value}")


def check_one(
    store: HistoryStore,
    log: ThreadLog,
    values: dict[str, Any],
    booked: set[str],
    timeline: set[str],
    answers: Collection[str] = (),
) -> tuple[dict[str, int], list[str]]:
    """One thread's invariants after a phase (``timeline``: the message ids the state's
    checkpoints held, back to the thread's first; ``answers``: the model's messages among
    the thread's checkpoints)."""
    messages = _messages(values)
    scope = state_scope(log.thread_id, values)
    expected = {
        str(m.id): (log.sent[str(m.id)] if m.type == "human" else str(m.text))
        for m in messages
        if m.id and ((m.type == "human" and str(m.id) in log.sent) or _is_answer(m))
    }
    found = check_thread(store, log, values, expected=expected, allowed=log.sent.keys())
    found.pop("generation", None)
    found.pop("kept_withdrawn", None)
    branch = store.read_events(scope)
    on_branch = {e.event_id for e in branch}
    lost = [m for m in messages if not is_synthetic(m) and str(m.id) not in on_branch]
    found["lost"] = len(lost)  # (``expected`` is drawn from the state: nothing more to add)
    off = [e for e in branch if e.event_id not in timeline]
    found["off_timeline"] = len(off)
    details = [
        f"off_timeline on {scope}: seq {e.seq} {e.role} {e.event_id} {e.text[:50]!r}"
        for e in off[:3]
    ]
    branch_humans = [e for e in branch if e.role == "human"]
    found["foreign"] = len([e for e in branch_humans if e.event_id not in log.sent])
    found["duplicated"] -= found["foreign"]  # check_thread counts foreign ones as duplicated
    held = store_everywhere(store, log.thread_id)
    in_state = {str(m.id) for m in messages}
    lost_replies = [i for i in answers if i in timeline and i not in in_state and i not in held]
    found["lost_replies"] = len(lost_replies)
    details += [f"lost on {scope}: {m.type} {m.id} {m.text[:50]!r}" for m in lost[:3]]
    details += [f"lost reply on {scope}: {i}" for i in lost_replies[:3]]
    flags = [m.additional_kwargs.get("ctx_summary") for m in messages]
    state_summary = next((f.get("checkpoint_id") for f in flags if isinstance(f, dict)), None)
    active = store.get_active(scope)
    found["summary_mismatch"] = int(state_summary != (active.id if active else None))
    if found["summary_mismatch"] or found["gaps"] or found["overlaps"]:
        flag = next((f for f in flags if isinstance(f, dict)), None)
        stored = active and (active.id, active.generation, active.covered_through_seq)
        covered = active.covered_through_seq if active else 0
        gaps = [e for e in branch if e.seq > covered and e.event_id not in in_state]
        details.append(
            f"summary on {scope}: state {flag}, store (id, generation, covered) {stored}"
        )
        details += _summary_rows(store, scope, state_summary)
        context = unpack(values.get("context"))
        kept = ("branch", "active_checkpoint_id", "active_generation", "recorded_through_id")
        details.append(f"the state's context: { {k: context.get(k) for k in kept} }")
        details += [
            f"gap on {scope}: seq {e.seq} {e.role} {e.event_id} {e.text[:50]!r}" for e in gaps[:3]
        ]
    stored_answers = [
        m
        for m in held.values()
        if _is_answer(m) and str(m.response_metadata.get("id") or "").startswith("metered-")
    ]
    found["unbooked_replies"] = len(
        [m for m in stored_answers if str(m.response_metadata["id"]) not in booked]
    )
    return found, details


def _summary_rows(store: HistoryStore, scope: Any, summary_id: str | None) -> list[str]:
    """What the store holds of a summary the state shows, and of the thread's branches."""

    def read() -> Any:
        return (
            yield Stmt(
                "SELECT id, branch, status, generation, covered_through_seq, parent_id, error "
                "FROM ctx_checkpoints WHERE tenant = ? AND thread_id = ? AND id = ?",
                (scope.tenant, scope.thread_id, summary_id or ""),
                "all",
            )
        )

    rows = store.db.run(read())
    branches = store.list_branches(scope)
    return [
        f"the state's summary in the store: {[tuple(r) for r in rows]}",
        "branches: "
        + "; ".join(
            f"{b.scope.branch} (parent {b.parent_branch} at {b.fork_seq}, head {b.head_seq}, "
            f"active {b.active_checkpoint_id} gen {b.active_generation})"
            for b in branches
        ),
    ]


# ----------------------------------------------------------------------------- the run


def table(result: dict[str, Any]) -> str:
    phases = result["phases"]
    rows = [
        [
            p["phase"],
            p["sent"],
            p["succeeded"],
            p["failed"],
            ", ".join(f"{k}: {v}" for k, v in p["failed_by_kind"].items()) or "-",
            "-" if p["recovery_s"] is None else f"{p['recovery_s']} s",
            "-" if p["recovery_all_s"] is None else f"{p['recovery_all_s']} s",
            p["max_loop_supersteps"],
            p["dead_threads"],
        ]
        for p in phases
    ]
    head = ["phase", "sent", "ok", "failed", "failed by kind", "recovery", "all threads"]
    runs = format_table([*head, "max loop", "dead"], rows)
    checks = format_table(
        ["invariant", *(p["phase"] for p in phases), "total"],
        [[k, *(p["invariants"][k] for p in phases), result["invariants"][k]] for k in INVARIANTS],
    )
    faults = "\n".join(f"  {p['phase']}: {p['fault']}" for p in phases)
    s = result["settings"]
    return (
        f"chaos: {s['threads']} threads, window {s['window']}, seed {s['seed']}, "
        f"{result['wall_s']} s\n{faults}\n\n{runs}\n\n{checks}\n\npassed: {result['passed']}"
    )


async def drive(
    server: Server,
    store: HistoryStore,
    cluster: Cluster | None,
    admin_dsn: str,
    phases: list[str],
    args: argparse.Namespace,
) -> list[Phase]:
    client = get_client(url=server.url, timeout=RUN_TIMEOUT_S)
    drivers = []
    for index in range(args.threads):
        log = ThreadLog(index)
        log.thread_id = (await client.threads.create())["thread_id"]
        drivers.append(ChaosDriver(client, log, args))
    rng = random.Random(args.seed)
    done = []
    for name in phases:
        print(f"  phase {name}", file=sys.stderr)
        phase = await run_phase(name, drivers, server, store, cluster, admin_dsn, args, rng)
        done.append(phase)
        if args.verbose:
            print(json.dumps(phase.result(args.threads)), file=sys.stderr)
    return done


def pick_phases(text: str, cluster: Cluster | None) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    names = [
        "server-kill-1" if n == "server-kill" else n for n in names
    ]  # one kill, by its short name
    unknown = [n for n in names if n not in PHASES]
    if unknown:
        raise SystemExit(f"chaos.py: unknown phases {unknown}; choose from {', '.join(PHASES)}")
    if cluster is None and any(n in PG_PHASES for n in names):
        skipped = [n for n in names if n in PG_PHASES]
        print(
            f"  skipping {', '.join(skipped)}: they stop or freeze the cluster, which needs its "
            "data directory (--pg-datadir) or the benchmark's own cluster (no --pg)",
            file=sys.stderr,
        )
        names = [n for n in names if n not in PG_PHASES]
    return ["baseline", *(n for n in names if n != "baseline")]


def run(args: argparse.Namespace) -> dict[str, Any]:
    began = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.pg:
            base, cluster = (
                args.pg,
                (given_cluster(Path(args.pg_datadir)) if args.pg_datadir else None),
            )
        else:
            print("  starting a throwaway PostgreSQL cluster", file=sys.stderr)
            base, cluster = stack.enter_context(throwaway_cluster())
        phases = pick_phases(args.phases, cluster)
        dsn = stack.enter_context(scratch_schema(base))
        if args.workdir:
            workdir = Path(args.workdir)
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ctx-chaos-")))
        (workdir / "graphs").symlink_to(ROOT / "graphs", target_is_directory=True)
        server_dsn = psycopg.conninfo.make_conninfo(dsn, application_name=APP_NAME)
        args.summarizer_failure_rate = 0.0
        server = Server(workdir, server_env(workdir, server_dsn, args))
        stack.callback(server.stop)
        store = PostgresHistoryStore.from_conn_string(dsn)
        store.setup()
        stack.callback(store.close)
        print(f"  starting langgraph dev on {server.url}", file=sys.stderr)
        server.start()
        try:
            done = asyncio.run(drive(server, store, cluster, dsn, phases, args))
        except Exception:
            print(server.log_tail(), file=sys.stderr)
            raise
    results = [p.result(args.threads) for p in done]
    totals = {k: sum(p["invariants"][k] for p in results) for k in INVARIANTS}
    dead = sum(p["dead_threads"] for p in results)
    return {
        "settings": {
            "threads": args.threads,
            "window": args.window,
            "seed": args.seed,
            "phases": [p["phase"] for p in results],
            "cluster": "given" if args.pg else "throwaway",
        },
        "phases": results,
        "invariants": totals,
        "dead_threads": dead,
        "max_loop_supersteps": max((p["max_loop_supersteps"] for p in results), default=0),
        "wall_s": round(time.perf_counter() - began, 1),
        "passed": dead == 0 and not any(totals.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=None, help="PostgreSQL DSN (else a throwaway cluster)")
    parser.add_argument(
        "--pg-datadir", default=None, help="the --pg cluster's data directory (stop, freeze)"
    )
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--window", type=int, default=2400, help="the graph's context window")
    parser.add_argument("--phases", default=",".join(PHASES[1:]), help="comma-separated")
    parser.add_argument("--baseline-s", type=float, default=12.0, help="the baseline's length")
    parser.add_argument(
        "--after-s", type=float, default=4.0, help="load kept on after a fault, at least"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--workdir", default=None, help="keep the server's directory (server.log) there"
    )
    parser.add_argument("--verbose", action="store_true", help="each phase's figures on stderr")
    parser.add_argument("--no-check", action="store_true", help="exit 0 even if a check fails")
    args = parser.parse_args(argv)
    args.double_text_threads = 0
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0 if result["passed"] or args.no_check else 1


if __name__ == "__main__":
    sys.exit(main())
