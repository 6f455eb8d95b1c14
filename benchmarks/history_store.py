"""History store benchmark: batched append throughput and search latency, SQLite vs PostgreSQL.

One load per backend grows the same database through each size in ``--sizes`` (default 100k
then 1M events of LoCoMo-like dialogue, ~550 events per thread) and, at each size, times
thread-scoped ``store.search`` calls of two kinds: a 1-2 word keyword query and a seq-range page.

    python benchmarks/history_store.py [--pg DSN] [--json] [--sizes 100000,1000000] [--sqlite-path DIR]
    python benchmarks/history_store.py --index   # and the vector index (benchmarks/vector_index.py)

Figures only, never a failing exit: the targets are printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vector_index import bench_index, index_rows  # (this folder's module)

SEARCH_P95_TARGET_MS = 50.0  # at 1M events, both backends
APPEND_TARGET_PER_S = 5_000.0  # batched
Kind = Literal["keyword", "range"]
KINDS: tuple[Kind, ...] = ("keyword", "range")

# --------------------------------------------------------------------------- LoCoMo-like corpus

# fmt: off
NAMES = ["Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Audrey",
         "Andrew", "Deborah", "Evan", "Sam", "Calvin", "Dave", "James", "Jolene", "Priya", "Kenji"]
SLOTS = {  # template slot -> the values it is filled with
    "place": ["Paris", "the beach", "Yosemite", "the museum", "Boston", "the farmers market",
              "Tokyo", "Lake Tahoe", "the library", "the park", "Seattle", "grandma's house"],
    "hobby": ["pottery", "painting", "hiking", "camping", "running", "guitar", "baking", "yoga",
              "photography", "chess", "gardening", "kayaking", "volunteering", "knitting"],
    "event": ["LGBTQ support group", "charity race", "art show", "job interview", "concert",
              "book club", "dance class", "family reunion", "adoption meeting", "pride parade"],
    "relation": ["mom", "sister", "kids", "friends", "coworkers", "partner", "grandma", "dog"],
    "time": ["yesterday", "last week", "last weekend", "this morning", "on Friday", "two days ago"],
    "feeling": ["so powerful", "really inspiring", "a bit stressful", "super relaxing", "amazing"],
    "book": ["Becoming", "Dune", "Educated", "Circe", "Matilda", "Beloved", "Wonder", "Atonement"],
    "food": ["lasagna", "tacos", "ramen", "banana bread", "curry", "pancakes", "paella", "dumplings"],
    "item": ["a new camera", "running shoes", "a vintage guitar", "paint supplies", "a tent"],
    "month": ["January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December"],
    "minute": ["00", "15", "30", "45"],
}
TEMPLATES = [
    "I went to the {event} {time} and it was {feeling}.",
    "Wow, that's cool, {other}! What happened at the {event}? Did you meet anyone new?",
    "I've been really into {hobby} lately, it helps me relax after work with the {relation}.",
    "My {relation} and I went {hobby} at {place} {time}, the weather was perfect.",
    "I ordered {item} for ${price}, the order id is {order}, it should arrive on {day} {month}.",
    "Did the refund for order {order} ever come through? It's been {n} days now.",
    "We're planning a trip to {place} on {day} {month}, I can't wait to try {hobby} there!",
    "That sounds {feeling}! How long have you been doing {hobby}, {other}?",
    "Thanks, {other}! I started {hobby} {n} years ago after the {event}.",
    "Remember when we met at the {event} in {place}? That was {n} years ago, in {year}.",
    "I'll be at {place} until {hour}:{minute} pm on {day} {month}, want to meet up?",
    "My {relation} just turned {n} so we threw a party, {feeling} honestly.",
    "I'm reading {book} right now, my {relation} recommended it after the {event}.",
    "We made {food} for dinner {time}, the {relation} loved it, I'll send you the recipe!",
]
COMMON_QUERIES = ["yesterday", "weekend", "party", "trip", "order", "support group", "kids",
                  "years ago", "weather", "meet"]
# fmt: on
_WORD = re.compile(r"[A-Za-z]{4,}|\d{4,}|ORD-\d+")


@dataclass(frozen=True)
class Turn:
    message: BaseMessage
    created_at: dt.datetime


def thread_id(t: int) -> str:
    return f"conv-{t:05d}"


def thread_length(seed: int, t: int) -> int:
    return random.Random(f"{seed}/len/{t}").randint(450, 650)


def turns(seed: int, t: int, length: int | None = None) -> Iterator[Turn]:
    """Thread ``t``'s dialogue; depends only on (seed, t), so every backend and re-read sees it."""
    rng = random.Random(f"{seed}/thread/{t}")
    speakers = rng.sample(NAMES, 2)
    orders: list[str] = []
    when = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=rng.randint(0, 300))
    for seq in range(1, (length or thread_length(seed, t)) + 1):
        if seq % 20 == 1:  # a new session every 20 turns, days apart
            when += dt.timedelta(days=rng.randint(1, 14))
        if rng.random() < 0.1 or not orders:
            orders.append(f"ORD-{rng.randint(10_000, 99_999)}")
        words = {slot: rng.choice(values) for slot, values in SLOTS.items()}
        numbers = {
            "n": rng.randint(2, 40),
            "day": rng.randint(1, 28),
            "year": rng.randint(2015, 2024),
        }
        text = rng.choice(TEMPLATES).format(
            other=speakers[(seq + 1) % 2],
            order=rng.choice(orders[-3:]),
            price=rng.randint(5, 900),
            hour=rng.randint(1, 11),
            **words,
            **numbers,
        )
        cls = HumanMessage if seq % 2 else AIMessage
        yield Turn(cls(f"{speakers[seq % 2]}: {text}", id=f"{thread_id(t)}-m{seq}"), when)
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
        started, reported = time.perf_counter(), self.events
        while self.events < target:
            t = len(self.heads) - 1
            if t < 0 or self.heads[t] == thread_length(self.seed, t):
                t += 1
                self.heads.append(0)
                self._turns = turns(self.seed, t)
            room = thread_length(self.seed, t) - self.heads[t]
            chunk = list(itertools.islice(self._turns, min(self.batch, room, target - self.events)))
            messages, created = [c.message for c in chunk], [c.created_at for c in chunk]
            begin = time.perf_counter()
            self.store.append(thread_id(t), messages, created_at=created)
            self.append_s += time.perf_counter() - begin
            self.heads[t] += len(chunk)
            self.events += len(chunk)
            if self.events - reported >= 50_000 or self.events == target:
                reported = self.events
                progress(
                    f"  {self.events:>9,} events, {len(self.heads):,} threads, "
                    f"{self.events / self.append_s:,.0f} events/s appending "
                    f"({time.perf_counter() - started:.0f}s this stage)"
                )


@dataclass(frozen=True)
class Query:
    kind: Kind
    scope: Scope
    text: str | None = None
    min_seq: int | None = None
    max_seq: int | None = None


def plan_queries(seed: int, heads: list[int], count: int, salt: str = "") -> list[Query]:
    """``count`` queries of each kind on random threads, shuffled; the same for every backend.

    Keywords mix common words (tens to hundreds of hits in the thread), two words of one event,
    and an order id or number of the thread (one to a few hits)."""
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
            event = next(itertools.islice(turns(seed, t), rng.randrange(heads[t]), None))
            words = _WORD.findall(str(event.message.content))
            rare = [w for w in words if w[0].isdigit() or w.startswith("ORD")]
            two = " ".join(rng.sample(words, min(2, len(words))))
            text = rng.choice(rare) if roll < 0.7 and rare else two
        queries.append(Query("keyword", scope, text=text))
    rng.shuffle(queries)
    return queries


def run_query(store: HistoryStore, q: Query) -> int:
    return len(store.search(q.scope, q.text, min_seq=q.min_seq, max_seq=q.max_seq, limit=20).hits)


def measure(
    store: HistoryStore, queries: list[Query], warmup: list[Query]
) -> dict[Kind, list[float]]:
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
"""A store on a fresh database, and what to run after each load stage, before timing searches."""


@contextmanager
def sqlite_backend(parent: str | None) -> Iterator[tuple[HistoryStore, Callable[[], None]]]:
    workdir = tempfile.mkdtemp(prefix="ctx_bench_", dir=parent)
    store = SQLiteHistoryStore.from_path(Path(workdir) / "history.db")
    try:
        yield store, lambda: None  # no ANALYZE: nothing runs it on an embedded store in use
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def postgres_backend(dsn: str) -> Iterator[tuple[HistoryStore, Callable[[], None]]]:
    dbname = f"ctx_bench_{secrets.token_hex(4)}"
    name = sql.Identifier(dbname)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    target = psycopg.conninfo.make_conninfo(dsn, dbname=dbname)
    store = PostgresHistoryStore.from_conn_string(target)

    def settle() -> None:
        # Right after a bulk load the planner has no statistics and the GIN index holds the new
        # rows in its pending list; autovacuum fixes both a little later in production, at a
        # moment we cannot predict. VACUUM ANALYZE reaches that settled state now, so every run
        # times the same plans (while a pending list exists the planner costs the GIN index
        # higher, and the keyword plan and its p95 flip from run to run).
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")

    try:
        yield store, settle
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def bench(backend: Backend, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    result: dict[str, Any] = {f"{m}_{p}_ms": {} for m in ("search", *KINDS) for p in ("p50", "p95")}
    with backend as (store, settle):
        store.setup()
        loader = Loader(store, args.seed, args.batch)
        for size in args.sizes:
            loader.grow_to(size)
            settle()
            warmup = plan_queries(args.seed, loader.heads, 10, salt="/warmup")
            latencies = measure(store, plan_queries(args.seed, loader.heads, args.queries), warmup)
            both = [ms for values in latencies.values() for ms in values]
            for name, values in [("search", both), *latencies.items()]:
                result[f"{name}_p50_ms"][str(size)] = pct(values, 50)
                result[f"{name}_p95_ms"][str(size)] = pct(values, 95)
            progress(f"  searches at {size:,}: p50 {pct(both, 50)} ms, p95 {pct(both, 95)} ms")
        index = None
        if args.index:
            threads = [thread_id(t) for t in range(len(loader.heads))]
            long_thread = lambda n: turns(args.seed, len(threads) + 1, n)  # noqa: E731
            index = bench_index(store, long_thread, threads, args, progress, settle)
    return {
        "append_events_per_s": round(loader.events / loader.append_s),
        **result,
        "events": loader.events,
        "threads": len(loader.heads),
        "append_s": round(loader.append_s, 1),
        "queries_per_kind": args.queries,
        "wall_s": round(time.perf_counter() - started, 1),
        "index": index,
    }


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
    header = ("metric", "sqlite", "postgres", "pg/sqlite", "target", "sqlite", "postgres")
    rows: list[tuple[str, ...]] = [header]

    def row(
        name: str,
        a: float,
        b: float | None,
        fmt: str,
        target: str,
        ok: Callable[[float], bool] | None,
    ) -> None:
        cells = [fmt.format(v) if v is not None else "-" for v in (a, b)]
        marks = [
            "" if ok is None else "-" if v is None else "PASS" if ok(v) else "FAIL" for v in (a, b)
        ]
        rows.append((name, *cells, ratio(b, a), target, *marks))

    def search_ok(ms: float) -> bool:
        return ms <= SEARCH_P95_TARGET_MS

    def append_ok(rate: float) -> bool:
        return rate >= APPEND_TARGET_PER_S

    key = "append_events_per_s"
    row(
        "append, batched (events/s)",
        sq[key],
        pg and pg[key],
        "{:,.0f}",
        f">= {APPEND_TARGET_PER_S:,.0f}",
        append_ok,
    )
    for size in map(str, sizes):
        for metric, what in (("search", "both kinds"), *((k, k) for k in KINDS)):
            for p in ("p50", "p95"):
                key, gated = f"{metric}_{p}_ms", size == big and p == "p95"
                target = f"<= {SEARCH_P95_TARGET_MS:g} ms" if gated else ""
                name = f"{p} @{label(int(size))} {what} (ms)"
                row(
                    name,
                    sq[key][size],
                    pg and pg[key][size],
                    "{:,.2f}",
                    target,
                    search_ok if gated else None,
                )
    if len(sizes) > 1:
        rows.append((f"growth {label(sizes[-1])}/{label(sizes[0])}",))
        for metric in ("search", *KINDS):
            key = f"{metric}_p95_ms"
            growth_pg = ratio(pg[key][big], pg[key][small]) if pg else "-"
            rows.append((f"  p95 {metric}", ratio(sq[key][big], sq[key][small]), growth_pg))
    if sq.get("index"):
        for name, *cells in index_rows(sq, pg):
            if not cells:
                rows.append((name,))
            else:
                a, b, *rest = cells
                rows.append((name, a, b, "", *rest))
    rows = [(*r, *[""] * (len(header) - len(r))) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        f"History store benchmark: {sq['events']:,} events in {sq['threads']:,} threads, "
        f"{sq['queries_per_kind']} searches per kind per size (one thread each, limit 20)",
        f"(the search target is for 1M events; it is marked at the largest size, {label(sizes[-1])})",
    ]
    for r in rows:
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    walls = [f"{name} {b['wall_s']:,.0f}s" for name, b in results.items() if b]
    lines.append(f"wall time (load + searches): {', '.join(walls)}")
    if pg_note:
        lines.append(pg_note)
    return "\n".join(lines)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg", help="PostgreSQL DSN (default: $CTX_TEST_PG_DSN; else skipped)")
    parser.add_argument("--json", action="store_true", help="print only one JSON object on stdout")
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated event counts")
    parser.add_argument("--sqlite-path", help="directory for the temporary SQLite file")
    parser.add_argument("--queries", type=int, default=200, help="queries per kind per size")
    parser.add_argument("--batch", type=int, default=1000, help="most messages per append call")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--index",
        action="store_true",
        help="also embed a long thread with the local model and time searches by meaning",
    )
    parser.add_argument(
        "--index-events", type=int, default=10_000, help="events of the --index thread"
    )
    args = parser.parse_args()
    args.sizes = sorted({int(s) for s in args.sizes.split(",")})
    dsn = args.pg or os.environ.get("CTX_TEST_PG_DSN")
    started = time.perf_counter()
    progress("sqlite:")
    results: dict[str, Any] = {
        "sqlite": bench(sqlite_backend(args.sqlite_path), args),
        "postgres": None,
    }
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
