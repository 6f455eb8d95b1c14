"""History store benchmark: batched append throughput and search latency, SQLite vs PostgreSQL.

One load per backend grows the same database through each size in ``--sizes`` (default 100k
then 1M events of LoCoMo-like dialogue, ~550 events per thread) and, at each size, times
thread-scoped ``store.search`` calls of two kinds: a 1-2 word keyword query and a seq-range page.

    python benchmarks/history_store.py [--pg DSN] [--json] [--sizes 100000,1000000] [--sqlite-path DIR]

Figures only, never a failing exit: the targets are printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from psycopg import sql

from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, Scope, SQLiteHistoryStore

SEARCH_P95_TARGET_MS = 50.0  # at 1M events, both backends
APPEND_TARGET_PER_S = 5_000.0  # batched
Kind = Literal["keyword", "range"]
KINDS: tuple[Kind, ...] = ("keyword", "range")

# --------------------------------------------------------------------------- LoCoMo-like corpus

NAMES = ["Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Audrey",
         "Andrew", "Deborah", "Evan", "Sam", "Calvin", "Dave", "James", "Jolene", "Priya", "Kenji"]
PLACES = ["Paris", "the beach", "Yosemite", "the museum", "Boston", "the farmers market", "Tokyo",
          "Lake Tahoe", "the library", "the park", "Seattle", "grandma's house", "the lake", "Denver"]
HOBBIES = ["pottery", "painting", "hiking", "camping", "running", "guitar", "baking", "yoga",
           "photography", "chess", "gardening", "kayaking", "volunteering", "knitting", "surfing"]
EVENTS = ["LGBTQ support group", "charity race", "art show", "job interview", "concert", "book club",
          "dance class", "family reunion", "adoption meeting", "conference", "pride parade"]
RELATIONS = ["mom", "sister", "kids", "friends", "coworkers", "partner", "grandma", "neighbor", "dog"]
TIMES = ["yesterday", "last week", "last weekend", "this morning", "on Friday", "two days ago"]
FEELINGS = ["so powerful", "really inspiring", "a bit stressful", "super relaxing", "amazing"]
BOOKS = ["Becoming", "Dune", "Educated", "Circe", "Matilda", "Beloved", "Wonder", "Atonement"]
FOODS = ["lasagna", "tacos", "ramen", "banana bread", "curry", "pancakes", "paella", "dumplings"]
ITEMS = ["a new camera", "running shoes", "a vintage guitar", "paint supplies", "a tent", "a kayak"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
TEMPLATES = [
    "I went to the {event} {time} and it was {feeling}.",
    "Wow, that's cool, {other}! What happened at the {event}? Did you meet anyone new?",
    "I've been really into {hobby} lately, it helps me relax after work with the {relation}.",
    "My {relation} and I went {hobby} at {place} {time}, the weather was perfect.",
    "I ordered {item} for ${price}, the order id is {order}, it should arrive on {date}.",
    "Did the refund for order {order} ever come through? It's been {n} days now.",
    "We're planning a trip to {place} on {date}, I can't wait to try {hobby} there!",
    "That sounds {feeling}! How long have you been doing {hobby}, {other}?",
    "Thanks, {other}! I started {hobby} {n} years ago after the {event}.",
    "Remember when we met at the {event} in {place}? That was {n} years ago on {date}.",
    "I'll be at {place} until {hour}:{minute} pm on {date}, want to meet up with the {relation}?",
    "My {relation} just turned {n} so we threw a party, {feeling} honestly.",
    "I'm reading {book} right now, my {relation} recommended it after the {event}.",
    "We made {food} for dinner {time}, the {relation} loved it, I'll send you the recipe!",
]
COMMON_QUERIES = ["yesterday", "weekend", "party", "trip", "order", "support group", "kids",
                  "years ago", "weather", "meet"]
_WORD = re.compile(r"[A-Za-z]{4,}|\d{4,}|ORD-\d+")


@dataclass(frozen=True)
class Turn:
    message: BaseMessage
    created_at: dt.datetime


def thread_id(t: int) -> str:
    return f"conv-{t:05d}"


def thread_length(seed: int, t: int) -> int:
    return random.Random(f"{seed}/len/{t}").randint(450, 650)


def turns(seed: int, t: int) -> Iterator[Turn]:
    """Thread ``t``'s dialogue; depends only on (seed, t), so any backend or re-read sees the same."""
    rng = random.Random(f"{seed}/thread/{t}")
    speakers = rng.sample(NAMES, 2)
    orders: list[str] = []
    when = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=rng.randint(0, 300))
    for seq in range(1, thread_length(seed, t) + 1):
        if seq % 20 == 1:  # a new session every ~20 turns, days apart
            when += dt.timedelta(days=rng.randint(1, 14))
        speaker, other = speakers[seq % 2], speakers[(seq + 1) % 2]
        if rng.random() < 0.1 or not orders:
            orders.append(f"ORD-{rng.randint(10_000, 99_999)}")
        text = rng.choice(TEMPLATES).format(
            other=other, event=rng.choice(EVENTS), time=rng.choice(TIMES), hobby=rng.choice(HOBBIES),
            feeling=rng.choice(FEELINGS), relation=rng.choice(RELATIONS), place=rng.choice(PLACES),
            item=rng.choice(ITEMS), book=rng.choice(BOOKS), food=rng.choice(FOODS),
            price=rng.randint(5, 900), order=rng.choice(orders[-3:]),
            date=f"{rng.randint(1, 28)} {rng.choice(MONTHS)}, {rng.randint(2019, 2024)}",
            n=rng.randint(2, 40), hour=rng.randint(1, 11), minute=rng.choice(["00", "15", "30", "45"]),
        )
        cls = HumanMessage if seq % 2 else AIMessage
        yield Turn(cls(f"{speaker}: {text}", id=f"{thread_id(t)}-m{seq}"), when)
        when += dt.timedelta(seconds=rng.randint(20, 300))


# --------------------------------------------------------------------------- load and measure


@dataclass
class Loader:
    """Grows one store thread by thread; only the ``append`` calls are timed."""

    store: HistoryStore
    seed: int
    batch: int
    heads: list[int] = field(default_factory=list)  # events loaded per thread
    events: int = 0
    append_s: float = 0.0
    _turns: Iterator[Turn] = field(default_factory=lambda: iter(()))

    def grow_to(self, target: int) -> None:
        started, last_report = time.perf_counter(), 0
        while self.events < target:
            t = len(self.heads) - 1
            if t < 0 or self.heads[t] == thread_length(self.seed, t):
                t += 1
                self.heads.append(0)
                self._turns = turns(self.seed, t)
            size = min(self.batch, thread_length(self.seed, t) - self.heads[t], target - self.events)
            chunk = [next(self._turns) for _ in range(size)]
            begin = time.perf_counter()
            self.store.append(
                thread_id(t), [c.message for c in chunk], created_at=[c.created_at for c in chunk]
            )
            self.append_s += time.perf_counter() - begin
            self.heads[t] += size
            self.events += size
            if self.events - last_report >= 50_000 or self.events == target:
                last_report = self.events
                rate = self.events / self.append_s
                progress(f"  {self.events:>9,} events, {len(self.heads):,} threads, "
                         f"{rate:,.0f} events/s ({time.perf_counter() - started:.0f}s this stage)")


@dataclass(frozen=True)
class Query:
    kind: Kind
    scope: Scope
    text: str | None = None
    min_seq: int | None = None
    max_seq: int | None = None


def plan_queries(seed: int, heads: list[int], count: int, salt: str = "") -> list[Query]:
    """``count`` queries of each kind on random threads, interleaved; the same for every backend.

    Keywords mix common words (hundreds of hits in a thread), two words of one event, and a rare
    order id or number of that thread (one to a few hits)."""
    rng = random.Random(f"{seed}/queries{salt}/{sum(heads)}")
    queries: list[Query] = []
    for _ in range(count):
        t = rng.randrange(len(heads))
        scope = Scope(thread_id(t))
        start = rng.randint(1, max(1, heads[t] - 50))
        queries.append(Query("range", scope, min_seq=start, max_seq=start + 50))
        roll = rng.random()
        if roll < 0.4:
            text = rng.choice(COMMON_QUERIES)
        else:
            pick = rng.randrange(heads[t])
            event = next(e for i, e in enumerate(turns(seed, t)) if i == pick)
            words = _WORD.findall(str(event.message.content))
            rare = [w for w in words if w[0].isdigit() or w.startswith("ORD")]
            text = rng.choice(rare) if roll < 0.7 and rare else " ".join(rng.sample(words, min(2, len(words))))
        queries.append(Query("keyword", scope, text=text))
    rng.shuffle(queries)
    return queries


def run_query(store: HistoryStore, q: Query) -> int:
    return len(store.search(q.scope, q.text, min_seq=q.min_seq, max_seq=q.max_seq, limit=20).hits)


def measure(store: HistoryStore, queries: list[Query], warmup: list[Query]) -> dict[Kind, list[float]]:
    for q in warmup:
        run_query(store, q)
    latencies: dict[Kind, list[float]] = {kind: [] for kind in KINDS}
    for q in queries:
        begin = time.perf_counter()
        run_query(store, q)
        latencies[q.kind].append((time.perf_counter() - begin) * 1000)
    return latencies


def pct(values: list[float], p: int) -> float:
    return round(statistics.quantiles(values, n=100, method="inclusive")[p - 1], 3)


# --------------------------------------------------------------------------- backends

Backend = AbstractContextManager[tuple[HistoryStore, Callable[[], None]]]
"""A store on a fresh database, and what to run after loading it (before timing searches)."""


@contextmanager
def sqlite_backend(parent: str | None) -> Iterator[tuple[HistoryStore, Callable[[], None]]]:
    workdir = tempfile.mkdtemp(prefix="ctx_bench_", dir=parent)
    store = SQLiteHistoryStore.from_path(Path(workdir) / "history.db")
    try:
        yield store, lambda: None  # no ANALYZE: the store never runs it, so neither do we
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def postgres_backend(dsn: str) -> Iterator[tuple[HistoryStore, Callable[[], None]]]:
    name = f"ctx_bench_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    target = psycopg.conninfo.make_conninfo(dsn, dbname=name)
    store = PostgresHistoryStore.from_conn_string(target)

    def analyze() -> None:
        # Right after a bulk load the planner has no statistics (autovacuum would gather them a
        # little later in production); ANALYZE so we time the plans a settled database gets.
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("ANALYZE")

    try:
        yield store, analyze
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def bench(backend: Backend, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {f"{m}_{p}_ms": {} for m in ("search", *KINDS) for p in ("p50", "p95")}
    with backend as (store, analyze):
        store.setup()
        loader = Loader(store, args.seed, args.batch)
        for size in args.sizes:
            loader.grow_to(size)
            analyze()
            warmup = plan_queries(args.seed, loader.heads, 10, salt="/warmup")
            latencies = measure(store, plan_queries(args.seed, loader.heads, args.queries), warmup)
            both = [ms for values in latencies.values() for ms in values]
            for name, values in [("search", both), *latencies.items()]:
                result[f"{name}_p50_ms"][str(size)] = pct(values, 50)
                result[f"{name}_p95_ms"][str(size)] = pct(values, 95)
            progress(f"  search at {size:,}: p50 {result['search_p50_ms'][str(size)]} ms, "
                     f"p95 {result['search_p95_ms'][str(size)]} ms")
    return {"append_events_per_s": round(loader.events / loader.append_s), **result,
            "events": loader.events, "threads": len(loader.heads), "append_s": round(loader.append_s, 1),
            "queries_per_kind": args.queries}


# --------------------------------------------------------------------------- report


def label(n: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def table(results: dict[str, Any], sizes: list[int], pg_note: str | None) -> str:
    sq, pg = results["sqlite"], results["postgres"]
    big, small = str(sizes[-1]), str(sizes[0])
    rows: list[tuple[str, ...]] = [
        ("metric", "sqlite", "postgres", "pg/sqlite", "target", "sqlite", "postgres")
    ]

    def search_ok(value: float) -> bool:
        return value <= SEARCH_P95_TARGET_MS

    def mark(value: float | None, ok: Callable[[float], bool]) -> str:
        return "-" if value is None else ("PASS" if ok(value) else "FAIL")

    def row(name: str, key: str, size: str | None = None, target: str = "",
            ok: Callable[[float], bool] | None = None, fmt: str = "{:,.2f}") -> None:
        def value(backend: dict[str, Any] | None) -> float | None:
            return None if backend is None else backend[key] if size is None else backend[key][size]

        a, b = value(sq), value(pg)
        marks = (mark(a, ok), mark(b, ok)) if ok else ("", "")
        cells = ["-" if v is None else fmt.format(v) for v in (a, b)]
        rows.append((name, *cells, ratio(b, a), target, *marks))

    row("append, batched (events/s)", "append_events_per_s", None, f">= {APPEND_TARGET_PER_S:,.0f}",
        lambda v: v >= APPEND_TARGET_PER_S, "{:,.0f}")
    for size in map(str, sizes):
        for metric, what in (("search", "both kinds"), *((k, k) for k in KINDS)):
            for p in ("p50", "p95"):
                gated = size == big and p == "p95"
                row(f"{p} @{label(int(size))} {what} (ms)", f"{metric}_{p}_ms", size,
                    f"<= {SEARCH_P95_TARGET_MS:g} ms" if gated else "", search_ok if gated else None)
    if len(sizes) > 1:
        rows.append((f"growth {label(sizes[-1])}/{label(sizes[0])}", "", "", "", "", "", ""))
        for metric in ("search", *KINDS):
            key = f"{metric}_p95_ms"
            rows.append((f"  p95 {metric}", ratio(sq[key][big], sq[key][small]),
                         ratio(pg[key][big], pg[key][small]) if pg else "-", "", "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"History store benchmark: {sq['events']:,} events in {sq['threads']:,} threads, "
             f"{sq['queries_per_kind']} queries per kind per size (search p95 target applies at 1M)"]
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    if pg_note:
        lines.append(pg_note)
    return "\n".join(lines)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg", help="PostgreSQL DSN (default: $CTX_TEST_PG_DSN; skipped if neither)")
    parser.add_argument("--json", action="store_true", help="print only one JSON object on stdout")
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated event counts")
    parser.add_argument("--sqlite-path", help="directory for the temporary SQLite file")
    parser.add_argument("--queries", type=int, default=200, help="queries per kind per size")
    parser.add_argument("--batch", type=int, default=1000, help="most messages per append call")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.sizes = sorted({int(s) for s in args.sizes.split(",")})
    dsn = args.pg or os.environ.get("CTX_TEST_PG_DSN")
    started = time.perf_counter()
    progress("sqlite:")
    results: dict[str, Any] = {"sqlite": bench(sqlite_backend(args.sqlite_path), args), "postgres": None}
    pg_note = None
    if dsn:
        progress("postgres:")
        results["postgres"] = bench(postgres_backend(dsn), args)
    else:
        pg_note = "note: PostgreSQL skipped (pass --pg DSN or set CTX_TEST_PG_DSN)"
        progress(pg_note)
    progress(f"done in {time.perf_counter() - started:.0f}s")
    print(json.dumps(results) if args.json else table(results, args.sizes, pg_note))


if __name__ == "__main__":
    main()
