"""Storage benchmark: bytes on disk after 500-2,000 turns, plain vs ours vs ours + retention.

The same seeded replay (each turn a ~500-character user message and a ~500-character scripted
reply) runs through three agents on one thread each, on SQLite and on PostgreSQL:

- **plain**: a LangGraph-docs-style ``StateGraph(MessagesState)`` agent (the default
  ``add_messages`` channel, one model node, no context management);
- **ours**: the same agent + ``add_context_management`` (a 16k window, so it compacts every few
  dozen turns), no checkpoint retention;
- **ours_retention**: ours + ``CheckpointRetention(saver, RetentionPolicy(keep_last=10))``
  pruning the thread every ``--prune-every`` (10) turns and once more before each measurement.

At each turn count (the same thread goes on from one to the next) the checkpointer's tables and
our history store's tables are compacted (SQLite: ``VACUUM``; PostgreSQL: ``VACUUM FULL``) and
their bytes on disk are read; ``--breakdown`` also shows them per table, index and big column.
SQLite and PostgreSQL run side by side, one process each.

    python benchmarks/storage.py [--pg DSN] [--json] [--turns 500,1000,2000] [--breakdown]

Figures only, never a failing exit: the targets (at the largest turn count, per backend:
ours_retention <= 4x the raw message bytes, growth over the previous count <= 1.1x the turn
ratio, plain >= 100x ours_retention) are printed with a pass/fail mark, and are in ``--json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import secrets
import shutil
import sqlite3
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from psycopg import sql
from psycopg.rows import dict_row

from ctx_langgraph import (
    ContextConfig,
    HistoryStore,
    PostgresHistoryStore,
    SQLiteHistoryStore,
    add_context_management,
)
from ctx_langgraph.core.table import format_table
from ctx_langgraph.retention import CheckpointRetention, RetentionPolicy
from ctx_langgraph.testing import MeteringChatModel

# The targets, checked at the largest turn count run (and the one before it), per backend:
RAW_TARGET = 4.0  # ours_retention bytes / raw message bytes, at most
GROWTH_SLACK = 1.1  # ours_retention: largest / previous count at most 1.1x the turn ratio (2.2x)
PLAIN_TARGET = 100.0  # plain bytes / ours_retention bytes, at least
KEEP_LAST = 10
CONFIG = ContextConfig(  # a 16k window: usable 14,000, compaction above 11,200, down to 7,000
    context_window=16_000,
    output_reserve=2_000,
    keep_recent_tokens=4_000,
    summary_max_tokens=1_000,
)
VARIANTS = ("plain", "ours", "ours_retention")
THREAD_ID = "bench"
THREAD: Any = {"configurable": {"thread_id": THREAD_ID}}
PG_CHECKPOINT_TABLES = [
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
]
MB = 1_000_000
SQLITE_COLUMNS = [  # (table, column): stored bytes shown in the breakdown
    ("checkpoints", "checkpoint"),
    ("writes", "value"),
    ("ctx_events", "content"),
    ("ctx_events", "text"),
    ("ctx_usage_calls", "raw"),
    ("ctx_checkpoints", "summary_text"),
    ("ctx_checkpoints", "key_facts"),
]
POSTGRES_COLUMNS = [  # pg_column_size: after TOAST compression
    ("checkpoints", "checkpoint"),
    ("checkpoint_blobs", "blob"),
    ("checkpoint_writes", "blob"),
    ("ctx_events", "content"),
    ("ctx_events", "text"),
    ("ctx_usage_calls", "raw"),
    ("ctx_checkpoints", "summary_text"),
    ("ctx_checkpoints", "key_facts"),
]
GROUPS = [  # (part of the breakdown, relation name prefixes); the first match wins
    ("events FTS index", ("ctx_events_fts", "ctx_events_tsv")),
    ("events", ("ctx_events", "sqlite_autoindex_ctx_events_")),
    ("event revisions", ("ctx_event_revisions", "sqlite_autoindex_ctx_event_revisions")),
    ("event edits", ("ctx_event_edits",)),
    ("summaries", ("ctx_checkpoints", "sqlite_autoindex_ctx_checkpoints")),
    ("usage ledger", ("ctx_usage", "sqlite_autoindex_ctx_usage")),
    ("checkpoint blobs", ("checkpoint_blobs",)),
    ("checkpoint writes", ("checkpoint_writes", "writes", "sqlite_autoindex_writes")),
    ("checkpoints", ("checkpoints", "sqlite_autoindex_checkpoints")),
]
# fmt: off
CITIES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Leeds", "Porto Alegre", "Hamburg", "Quito",
          "Tallinn", "Busan", "Valencia", "Calgary"]
FEATURES = ["priority support", "extended warranty", "bulk export", "SSO", "audit logs",
            "usage alerts", "the read replica", "the nightly backfill", "rate limits"]
PEOPLE = ["Amara", "Jonas", "Mei", "Tomasz", "Lucia", "Dev", "Ingrid", "Kofi", "Rosa", "Yusuf"]
USER_SENTENCES = [
    "For the migration plan, step {n} covers the schema, the backfill and the rollback checklist.",
    "{p} in {c} wants {f} switched on before day {n}, but the budget review is still open.",
    "Order {o} went to the wrong depot in {c}; can you tell me what the carrier said?",
    "Last time we agreed that {p} owns {f} and reports to the {c} office every {n} weeks.",
    "Please keep in mind that the {c} customers were promised {f} by the end of the quarter.",
    "I checked the dashboard this morning and error rate was {n}.{m}% after the {f} change.",
    "Could you draft a short note for {p} explaining why {f} slipped by {n} days?",
    "The invoice {o} shows {n} seats instead of {m}, which does not match the contract.",
    "We also need a fallback if the {c} data centre is down during the {f} rollout.",
    "My question is whether {f} should be tested in {c} first or rolled out everywhere.",
]
REPLY_SENTENCES = [
    "Understood: {p} owns {f}, and the {c} office gets the update every {n} weeks.",
    "The rollback checklist for step {n} should list the schema change, the backfill and the "
    "read path, in that order.",
    "I would test {f} in {c} first: it has the smallest traffic and a team that knows the setup.",
    "Order {o} was rerouted through the {c} depot; the carrier expects delivery in {n} days.",
    "Here is a draft for {p}: {f} moved by {n} days because the load test found a regression.",
    "An error rate of {n}.{m}% is above the alert threshold, so I would pause the {f} change.",
    "The contract for invoice {o} lists {m} seats; I will ask billing to correct the {n}.",
    "For the fallback, route {c} traffic to the nearest region and keep {f} behind a flag.",
    "Noted that the {c} customers expect {f} this quarter; I will add it to the release notes.",
    "To summarize the plan: schema first, then backfill, then the switch, with {p} signing off.",
]
VOCABULARY = """the a to and of in that is for it on with as we be this are have not at but by from
you they or will can if so all our there about more was one would when what just also their
been some them than then could which like out into only other time now should need because
after before over still first very most same these those each any much many where while
team plan data order customer office report review budget week month quarter day change
release service account invoice contract support issue ticket region traffic error rate load
test backup schema table index query cache server client user owner manager vendor price
cost limit alert metric dashboard log deploy rollout rollback flag feature migration delay
risk note draft email call meeting agenda decision question answer reason detail update
status result number figure total share margin target estimate forecast sales payment refund
shipment depot carrier address package delivery warehouse stock supplier product version
check ask tell send move keep start stop finish write read open close agree expect promise
confirm approve reject raise lower cover track fix break fail pass hold wait look find
new old late early small large slow fast clear short long next last main busy careful quiet
simple safe ready free full final current previous likely possible"""
WORDS = VOCABULARY.split()
# fmt: on


# --------------------------------------------------------------------------- the replay


WORD_WEIGHTS = [1 / (rank + 3) for rank in range(len(WORDS))]  # Zipf-like, as words in prose


def _sentence(rng: random.Random, templates: list[str]) -> str:
    """A topical template (names, ids, numbers) or free words; the mix compresses about as
    well as English prose does, which matters where the database compresses (PostgreSQL TOAST)."""
    if rng.random() < 0.35:
        return rng.choice(templates).format(
            p=rng.choice(PEOPLE),
            c=rng.choice(CITIES),
            f=rng.choice(FEATURES),
            o=f"ORD-{rng.randint(10_000, 99_999)}",
            n=rng.randint(2, 30),
            m=rng.randint(0, 9),
        )
    words = rng.choices(WORDS, WORD_WEIGHTS, k=rng.randint(8, 18))
    return " ".join([words[0].capitalize(), *words[1:]]) + rng.choice(".?.!.")


def _text(rng: random.Random, templates: list[str], length: int) -> str:
    """Seeded sentences joined until the text holds about ``length`` characters."""
    parts: list[str] = []
    while sum(map(len, parts)) + len(parts) < length - 40:
        parts.append(_sentence(rng, templates))
    return " ".join(parts)


def make_replay(seed: int, turns: int) -> list[tuple[str, str]]:
    """``turns`` (user message, assistant reply) pairs, each text ~500 characters; the turn
    number opens the user message so every user text is unique."""
    rng = random.Random(seed)
    return [
        (f"Turn {t}. " + _text(rng, USER_SENTENCES, 490), _text(rng, REPLY_SENTENCES, 500))
        for t in range(1, turns + 1)
    ]


def compressed_share(replay: list[tuple[str, str]]) -> float:
    """zlib's compressed size of the replay's text / its size (English prose: about 0.35)."""
    text = "".join(u + a for u, a in replay).encode()
    return len(zlib.compress(text)) / len(text)


def raw_bytes(replay: list[tuple[str, str]], turns: int) -> int:
    """UTF-8 bytes of every message content of the first ``turns`` turns (user + assistant)."""
    return sum(len(u.encode()) + len(a.encode()) for u, a in replay[:turns])


def scripted_model(replay: list[tuple[str, str]]) -> MeteringChatModel:
    """Answers each user message with its scripted reply (looked up by the user text, so an
    extra model call could never shift the script)."""
    answers = dict(replay)

    def answer(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(answers[str(messages[-1].content)])

    return MeteringChatModel(replies=[answer])


def docs_style(model: MeteringChatModel) -> StateGraph[Any, Any, Any, Any]:
    """An agent as the LangGraph docs write it: ``MessagesState``, one model node."""

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", call_model)
    builder.add_edge(START, "agent")
    return builder


# --------------------------------------------------------------------------- backends


@dataclass
class Opened:
    """One variant's checkpointer and history store (``None`` for plain), and how to close them."""

    saver: BaseCheckpointSaver[Any]
    store: HistoryStore | None
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


@dataclass
class Measured:
    """Bytes on disk of one variant at one turn count."""

    total: int
    relations: dict[str, int]
    """Bytes per table (rows, with TOAST on PostgreSQL) and per index, by name."""
    indexes: set[str]
    """Which of the relations are indexes (the FTS index's shadow tables count as one)."""
    columns: dict[str, int]
    """Stored bytes of the big columns, and row counts (``table rows``), inside the tables."""
    uncompacted: int = 0
    """The total before ``VACUUM`` / ``VACUUM FULL``: what the disk holds if nobody runs it."""


class Backend(Protocol):
    name: str

    def open(self, variant: str) -> Opened: ...

    def measure(self, variant: str) -> Measured:
        """Compact, then read the bytes."""
        ...

    def discard(self, variant: str) -> None:
        """Free the variant's disk space once it is measured."""
        ...


class SQLiteBackend:
    """A checkpoint file and a history file per variant in a temp dir. Bytes: the files (main +
    WAL) after ``wal_checkpoint(TRUNCATE)``, then ``VACUUM`` and ``wal_checkpoint(TRUNCATE)``
    again when the file has free pages."""

    name = "sqlite"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def _files(self, variant: str) -> list[Path]:
        files = [self.workdir / f"{variant}.checkpoints.sqlite"]
        return files if variant == "plain" else [*files, self.workdir / f"{variant}.history.sqlite"]

    def open(self, variant: str) -> Opened:
        checkpoints, *history = self._files(variant)
        conn = sqlite3.connect(str(checkpoints), check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        opened = Opened(saver, None, [conn.close])
        if history:
            store = SQLiteHistoryStore.from_path(history[0])
            store.setup()
            opened.store = store
            opened.closers.append(store.close)
        return opened

    def measure(self, variant: str) -> Measured:
        measured = Measured(0, {}, set(), {})
        for path in self._files(variant):
            conn = sqlite3.connect(str(path), isolation_level=None)
            wal = path.with_name(path.name + "-wal")
            try:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                measured.uncompacted += path.stat().st_size
                # An append-only file has no free pages (plain's): VACUUM would only rewrite it.
                if conn.execute("PRAGMA freelist_count").fetchone()[0]:
                    conn.execute("VACUUM")
                    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy:
                    progress(f"  note: {path.name}: WAL checkpoint blocked by a reader")
                for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY 1"):
                    measured.relations[name] = size
                measured.indexes |= {
                    name
                    for (name,) in conn.execute(
                        "SELECT name FROM sqlite_schema WHERE type = 'index'"
                        " OR name LIKE 'ctx\\_events\\_fts\\_%' ESCAPE '\\'"
                    )
                }
                tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema")}
                for table, column in SQLITE_COLUMNS:
                    if table in tables:
                        rows, size = conn.execute(
                            f"SELECT COUNT(*), SUM(LENGTH(CAST({column} AS BLOB))) FROM {table}"
                        ).fetchone()
                        measured.columns[f"{table} rows"] = rows
                        measured.columns[f"{table}.{column}"] = size or 0
            finally:
                conn.close()
            measured.total += path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        return measured

    def discard(self, variant: str) -> None:
        for path in self._files(variant):
            for suffix in ("", "-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)


class PostgresBackend:
    """One schema per variant in a fresh database. Bytes: ``pg_total_relation_size`` (heap,
    TOAST, indexes) of the checkpoint tables and the ``ctx_%`` tables after ``VACUUM FULL``."""

    name = "postgres"

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo

    def _conninfo(self, variant: str) -> str:
        return psycopg.conninfo.make_conninfo(self.conninfo, options=f"-c search_path={variant}")

    def open(self, variant: str) -> Opened:
        with psycopg.connect(self.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(variant)))
        conn = psycopg.connect(
            self._conninfo(variant), autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        saver = PostgresSaver(conn)
        saver.setup()
        opened = Opened(saver, None, [conn.close])
        if variant != "plain":
            store = PostgresHistoryStore.from_conn_string(self._conninfo(variant))
            store.setup()
            opened.store = store
            opened.closers.append(store.close)
        return opened

    def _tables(self, conn: psycopg.Connection[Any], variant: str) -> list[str]:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s"
            " AND (tablename = ANY(%s) OR tablename LIKE 'ctx\\_%%')",
            (variant, PG_CHECKPOINT_TABLES),
        ).fetchall()
        return sorted(row[0] for row in rows)

    def measure(self, variant: str) -> Measured:
        measured = Measured(0, {}, set(), {})
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            tables = self._tables(conn, variant)
            for table in tables:
                qualified = f"{variant}.{table}"
                (size,) = conn.execute(
                    "SELECT pg_total_relation_size(%s::regclass)", (qualified,)
                ).fetchone() or (0,)
                measured.uncompacted += size
                conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(variant, table)))
            for table in tables:
                qualified = f"{variant}.{table}"
                total, heap = conn.execute(
                    "SELECT pg_total_relation_size(%s::regclass), pg_table_size(%s::regclass)",
                    (qualified, qualified),
                ).fetchone() or (0, 0)
                measured.total += total
                measured.relations[table] = heap  # heap + TOAST (+ free-space, visibility maps)
                indexes = conn.execute(
                    "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)"
                    " FROM pg_index WHERE indrelid = %s::regclass",
                    (qualified,),
                ).fetchall()
                for index, size in indexes:
                    name = index.removeprefix(f"{variant}.")
                    measured.relations[name] = size
                    measured.indexes.add(name)
            for table, column in POSTGRES_COLUMNS:
                if table in tables:
                    rows, size = conn.execute(
                        sql.SQL("SELECT COUNT(*), SUM(pg_column_size({})) FROM {}").format(
                            sql.Identifier(column), sql.Identifier(variant, table)
                        )
                    ).fetchone() or (0, 0)
                    measured.columns[f"{table} rows"] = rows
                    measured.columns[f"{table}.{column}"] = size or 0
        return measured

    def discard(self, variant: str) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(variant)))


@contextmanager
def sqlite_backend(parent: str | None) -> Iterator[Backend]:
    workdir = tempfile.mkdtemp(prefix="ctx_bench_", dir=parent)
    try:
        yield SQLiteBackend(Path(workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def postgres_backend(dsn: str) -> Iterator[Backend]:
    dbname = f"ctx_bench_{secrets.token_hex(4)}"
    name = sql.Identifier(dbname)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        yield PostgresBackend(psycopg.conninfo.make_conninfo(dsn, dbname=dbname))
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


# --------------------------------------------------------------------------- run and measure


def run_variant(
    backend: Backend,
    variant: str,
    replay: list[tuple[str, str]],
    counts: list[int],
    prune_every: int,
) -> dict[int, Measured]:
    """One thread through the replay; at each turn count (retention first), bytes on disk."""
    opened = backend.open(variant)
    model = scripted_model(replay)
    builder = docs_style(model)
    if opened.store is not None:
        add_context_management(
            builder, model_node="agent", store=opened.store, config=CONFIG, model=model
        )
    graph = builder.compile(checkpointer=opened.saver)
    retention = None
    if variant == "ours_retention":
        retention = CheckpointRetention(opened.saver, RetentionPolicy(keep_last=KEEP_LAST))
    measured: dict[int, Measured] = {}
    done, started = 0, time.perf_counter()
    try:
        for count in counts:
            while done < count:
                graph.invoke({"messages": [HumanMessage(replay[done][0])]}, THREAD)
                done += 1
                if retention is not None and done % prune_every == 0:
                    retention.prune(THREAD_ID)
            if retention is not None:
                retention.prune(THREAD_ID)
            check_thread(graph, opened.store, replay, done)
            ran = time.perf_counter() - started
            measured[count] = backend.measure(variant)
            progress(
                f"  {backend.name} {variant} @{count:,}: {measured[count].total / MB:,.2f} MB "
                f"(turns {ran:.0f} s, measured at {time.perf_counter() - started:.0f} s)"
            )
    finally:
        opened.close()
        backend.discard(variant)
    return measured


def check_thread(
    graph: Any, store: HistoryStore | None, replay: list[tuple[str, str]], turns: int
) -> None:
    """The replay went through as scripted: the last reply is the scripted one, and every
    message is in the state (plain) or in the history store (ours)."""
    messages = graph.get_state(THREAD).values["messages"]
    if messages[-1].content != replay[turns - 1][1]:
        raise SystemExit(f"turn {turns}: the last reply is not the scripted one")
    if store is None:
        recorded, expected = len(messages), 2 * turns
    else:  # ctx_usage records each reply as soon as the model returns it
        recorded, expected = len(store.read_events(THREAD_ID)), 2 * turns
    if recorded != expected:
        raise SystemExit(f"turn {turns}: {recorded} messages recorded, expected {expected}")


def bench(backend: Backend, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figures (bytes per variant and turn count) and the per-relation breakdown."""
    replay = make_replay(args.seed, args.turns[-1])
    figures: dict[str, Any] = {
        "raw_message_bytes": {str(n): raw_bytes(replay, n) for n in args.turns}
    }
    breakdown: dict[str, Any] = {}
    for variant in args.variants:
        measured = run_variant(backend, variant, replay, args.turns, args.prune_every)
        figures[variant] = {str(n): m.total for n, m in measured.items()}
        breakdown[variant] = {
            "relations": by_count({n: m.relations for n, m in measured.items()}),
            "indexes": sorted(set().union(*(m.indexes for m in measured.values()))),
            "columns": by_count({n: m.columns for n, m in measured.items()}),
            "uncompacted_total": {str(n): m.uncompacted for n, m in measured.items()},
        }
    return figures, breakdown


def run_backend(name: str, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`bench` on a fresh SQLite temp dir or PostgreSQL database (one process each)."""
    started = time.perf_counter()
    sqlite = name == "sqlite"
    with sqlite_backend(args.sqlite_path) if sqlite else postgres_backend(args.dsn) as opened:
        ran = bench(opened, args)
    progress(f"  {name} done in {time.perf_counter() - started:.0f} s")
    return ran


def by_count(values: dict[int, dict[str, int]]) -> dict[str, dict[str, int]]:
    """``{count: {name: v}}`` as ``{name: {str(count): v}}``."""
    out: dict[str, dict[str, int]] = {}
    for count, named in values.items():
        for name, value in named.items():
            out.setdefault(name, {})[str(count)] = value
    return out


# --------------------------------------------------------------------------- report


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def growth_target(counts: list[int]) -> float:
    return GROWTH_SLACK * counts[-1] / counts[-2]


def targets(figures: dict[str, Any], counts: list[int]) -> dict[str, Any]:
    """The three targets of one backend at the largest turn count (growth: over the one before
    it): each figure, its limit and whether it is met; a figure that needs a variant or a turn
    count the run did not have is None, and so is its mark."""
    last, previous = counts[-1], counts[-2] if len(counts) > 1 else None
    ours = figures.get("ours_retention")
    plain = figures.get("plain")
    x_raw = growth = plain_x = None
    if ours is not None:
        x_raw = ours[str(last)] / figures["raw_message_bytes"][str(last)]
        if previous is not None:
            growth = ours[str(last)] / ours[str(previous)]
        if plain is not None:
            plain_x = plain[str(last)] / ours[str(last)]
    growth_max = None if previous is None else round(growth_target(counts), 4)

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {
        "turns": last,
        "previous_turns": previous,
        "x_raw": rounded(x_raw),
        "x_raw_max": RAW_TARGET,
        "x_raw_pass": None if x_raw is None else x_raw <= RAW_TARGET,
        "growth": rounded(growth),
        "growth_max": growth_max,
        "growth_pass": None if growth is None or growth_max is None else growth <= growth_max,
        "plain_x": rounded(plain_x),
        "plain_x_min": PLAIN_TARGET,
        "plain_x_pass": None if plain_x is None else plain_x >= PLAIN_TARGET,
    }


def target_lines(backend: str, met: dict[str, Any]) -> list[str]:
    """The targets of one backend, one line each, with a PASS/FAIL mark."""
    mark = {True: "PASS", False: "FAIL", None: "n/a"}
    last = f"@{met['turns']:,}"
    if met["previous_turns"] is None:
        growth = "growth (needs two turn counts)"
    else:
        growth = f"growth {met['turns']:,}/{met['previous_turns']:,}"

    def shown(value: float | None, digits: int) -> str:
        return "n/a" if value is None else f"{value:,.{digits}f}x"

    growth_max = "n/a" if met["growth_max"] is None else f"{met['growth_max']:.2f}x"
    return [
        f"{backend} ours_retention / raw messages {last}: {shown(met['x_raw'], 2)} "
        f"(target <= {met['x_raw_max']:g}x) {mark[met['x_raw_pass']]}",
        f"{backend} ours_retention {growth}: {shown(met['growth'], 2)} "
        f"(target <= {growth_max}) {mark[met['growth_pass']]}",
        f"{backend} plain / ours_retention {last}: {shown(met['plain_x'], 0)} "
        f"(target >= {met['plain_x_min']:g}x) {mark[met['plain_x_pass']]}",
    ]


def table(results: dict[str, Any], counts: list[int]) -> list[str]:
    keys = [str(n) for n in counts]
    headers = ["backend", "variant"]
    for n in counts:
        headers += [f"MB @{n:,}", f"x raw @{n:,}"]
    if len(counts) > 1:
        headers.append(f"growth {counts[-1]:,}/{counts[-2]:,}")
    rows: list[list[object]] = []
    marks: list[str] = []
    for backend, figures in results.items():
        if figures is None:
            continue
        raw = figures["raw_message_bytes"]
        for variant in ("raw_message_bytes", *(v for v in VARIANTS if v in figures)):
            name = "raw messages" if variant == "raw_message_bytes" else variant
            row: list[object] = [backend, name]
            for key in keys:
                size = figures[variant][key]
                row += [round(size / MB, 2), f"{size / raw[key]:,.2f}x"]
            if len(counts) > 1:
                row.append(f"{figures[variant][keys[-1]] / figures[variant][keys[-2]]:.2f}x")
            rows.append(row)
        marks += target_lines(backend, targets(figures, counts))
    return [format_table(headers, rows), "", *marks]


def part_of(relation: str, indexes: list[str]) -> str:
    """The breakdown row a table or index is counted in: its group, rows or indexes."""
    for group, prefixes in GROUPS:
        if relation.startswith(prefixes):
            if group == "events FTS index":
                return group
            return f"{group}: {'indexes' if relation in indexes else 'rows'}"
    return "other (threads, branches, migrations, schema)"


def breakdown_tables(breakdowns: dict[str, Any], counts: list[int]) -> list[str]:
    """Bytes per part (table rows vs indexes), and the big columns inside the rows."""
    keys = [str(n) for n in counts]
    last, messages = keys[-1], 2 * counts[-1]
    headers = ["backend", "variant", "part", *(f"KB @{n:,}" for n in counts)]
    headers += [f"B/message @{counts[-1]:,}", f"share @{counts[-1]:,}"]
    rows: list[list[object]] = []
    column_headers = ["backend", "variant", "column (inside the rows above)"]
    column_headers += [*(f"KB @{n:,}" for n in counts), f"B/row @{counts[-1]:,}"]
    column_rows: list[list[object]] = []
    for backend, variants in breakdowns.items():
        for variant, detail in variants.items():
            parts: dict[str, dict[str, int]] = {}
            for relation, sizes in detail["relations"].items():
                part = parts.setdefault(part_of(relation, detail["indexes"]), {})
                for key, size in sizes.items():
                    part[key] = part.get(key, 0) + size
            total = sum(part.get(last, 0) for part in parts.values()) or 1
            for name, sizes in sorted(parts.items(), key=lambda item: -item[1].get(last, 0)):
                kb = [round(sizes.get(k, 0) / 1000, 1) for k in keys]
                per_message = round(sizes.get(last, 0) / messages)
                share = f"{100 * sizes.get(last, 0) / total:.1f}%"
                rows.append([backend, variant, name, *kb, per_message, share])
            before = detail["uncompacted_total"]
            kb = [round(before.get(k, 0) / 1000, 1) for k in keys]
            per_message = round(before.get(last, 0) / messages)
            compaction = "VACUUM" if backend == "sqlite" else "VACUUM FULL"
            rows.append([backend, variant, f"(total before {compaction})", *kb, per_message, ""])
            columns = detail["columns"]
            for name, sizes in columns.items():
                if name.endswith(" rows"):
                    continue
                count = columns[f"{name.split('.')[0]} rows"].get(last, 0)
                kb = [round(sizes.get(k, 0) / 1000, 1) for k in keys]
                per_row = round(sizes.get(last, 0) / count) if count else 0
                column_rows.append([backend, variant, f"{name} ({count:,} rows)", *kb, per_row])
    return [format_table(headers, rows), "", format_table(column_headers, column_rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg", help="PostgreSQL DSN (default: $CTX_TEST_PG_DSN; else skipped)")
    parser.add_argument("--json", action="store_true", help="print only one JSON object on stdout")
    parser.add_argument("--turns", default="500,1000,2000", help="comma-separated turn counts")
    parser.add_argument("--prune-every", type=int, default=10, help="ours_retention: turns")
    parser.add_argument(
        "--breakdown", action="store_true", help="also bytes per table, index and big column"
    )
    parser.add_argument("--sqlite-path", help="directory for the temporary SQLite files")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated subset of " + ", ".join(VARIANTS) + " (default: all)",
    )
    args = parser.parse_args()
    args.turns = sorted({int(n) for n in args.turns.split(",")})
    args.variants = [v for v in VARIANTS if v in args.variants.split(",")]
    if not args.variants:
        parser.error(f"--variants: choose from {', '.join(VARIANTS)}")
    args.dsn = args.pg or os.environ.get("CTX_TEST_PG_DSN")
    started = time.perf_counter()
    results: dict[str, Any] = {"sqlite": None, "postgres": None}
    breakdowns: dict[str, Any] = {}
    names = ["sqlite", "postgres"] if args.dsn else ["sqlite"]
    pg_note = None
    if not args.dsn:
        pg_note = "note: PostgreSQL skipped (pass --pg DSN or set CTX_TEST_PG_DSN)"
        progress(pg_note)
    # The backends run side by side, one process each: the figures are bytes, not timings,
    # and plain's 2,000 turns take minutes on each.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(names), mp_context=spawn) as pool:
        futures = {name: pool.submit(run_backend, name, args) for name in names}
        for name, future in futures.items():
            results[name], breakdowns[name] = future.result()
    wall = time.perf_counter() - started
    progress(f"done in {wall:.0f} s")
    if args.json:
        document = {
            name: None if figures is None else {**figures, "targets": targets(figures, args.turns)}
            for name, figures in results.items()
        }
        print(json.dumps({**document, "breakdown": breakdowns} if args.breakdown else document))
        return
    replay = make_replay(args.seed, args.turns[-1])
    turns = ", ".join(f"{n:,}" for n in args.turns)
    print(
        f"Storage: bytes on disk (checkpointer + history store) after {turns} turns of ~500 + ~500 "
        f"characters (zlib: {100 * compressed_share(replay):.0f}% of the text); SQLite after "
        f"VACUUM, PostgreSQL after VACUUM FULL; ours_retention: keep_last={KEEP_LAST}, pruned "
        f"every {args.prune_every} turns and before measuring"
    )
    print("\n".join(table(results, args.turns)))
    if args.breakdown:
        print()
        print("\n".join(breakdown_tables(breakdowns, args.turns)))
    linear = f" (linear: {args.turns[-1] / args.turns[-2]:.2f}x)" if len(args.turns) > 1 else ""
    print(
        "x raw = bytes / raw message bytes (UTF-8 of every message content); growth = bytes at the "
        f"largest turn count / at the previous one{linear}. Run: {wall:.0f} s"
    )
    if pg_note:
        print(pg_note)


if __name__ == "__main__":
    main()
