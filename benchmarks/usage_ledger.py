"""Usage ledger benchmark: the per-turn cost of ``ctx_usage`` as the ledger grows.

One ``ctx_usage`` turn = normalize the reply's usage, record it (row lock, running totals
updated by difference) and compute the new baseline. It must not grow with the number of calls
already booked: the table compares it at 1k and 20k booked calls (and the ratio), on SQLite and
PostgreSQL, plus ``normalize_usage`` alone and a duplicate terminal event.

    python benchmarks/usage_ledger.py [--pg DSN] [--json] [--sizes 1000,20000] [--turns 300]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage
from psycopg import sql

from ctx_langgraph.core.table import format_table
from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, SQLiteHistoryStore
from ctx_langgraph.usage import UsageLedger, normalize_usage
from ctx_langgraph.usage.node import make_usage_node

USAGE = {
    "input_tokens": 19_250,
    "output_tokens": 120,
    "total_tokens": 19_370,
    "input_token_details": {"cache_read": 18_000, "cache_creation": 1_200},
}


def reply(n: int) -> AIMessage:
    return AIMessage(
        "ok",
        id=f"a{n}",
        usage_metadata=USAGE,  # type: ignore[arg-type]
        response_metadata={
            "id": f"msg_{n}",
            "model_name": "claude-sonnet-4-5",
            "model_provider": "anthropic",
        },
    )


@contextmanager
def sqlite_store() -> Iterator[HistoryStore]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        SQLiteHistoryStore.from_path(Path(tmp) / "ledger.sqlite") as store,
    ):
        store.setup()
        yield store


@contextmanager
def postgres_store(dsn: str) -> Iterator[HistoryStore]:
    name = f"ctx_bench_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with PostgresHistoryStore.from_conn_string(
            psycopg.conninfo.make_conninfo(dsn, dbname=name)
        ) as store:
            store.setup()
            yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def p(values: list[float], q: int) -> float:
    return round(statistics.quantiles(values, n=100)[q - 1] * 1000, 3)


def timed(fn: Callable[[int], Any], turns: int, start: int) -> list[float]:
    out = []
    for n in range(start, start + turns):
        began = time.perf_counter()
        fn(n)
        out.append(time.perf_counter() - began)
    return out


def measure(store: HistoryStore, sizes: list[int], turns: int) -> dict[str, Any]:
    ledger = UsageLedger(store)
    node = make_usage_node(ledger)
    config = {"configurable": {"thread_id": "bench"}}
    booked = 0
    result: dict[str, Any] = {}
    for size in sizes:
        for n in range(booked, size):  # grow the ledger: other threads' calls
            ledger.record(f"fill:{n}", normalize_usage(reply(n)), scope=f"fill-{n % 200}")
        booked = size
        turn = timed(
            lambda n: node.invoke({"messages": [HumanMessage("q", id=f"h{n}"), reply(n)]}, config),
            turns,
            start=10_000_000 + size,
        )
        duplicate = timed(
            lambda n, size=size: ledger.record(
                f"fill:{n % size}", normalize_usage(reply(n % size)), scope=f"fill-{n % size % 200}"
            ),
            turns,
            start=0,
        )
        result[str(size)] = {
            "turn_p50_ms": p(turn, 50),
            "turn_p95_ms": p(turn, 95),
            "duplicate_p50_ms": p(duplicate, 50),
        }
        print(f"  {size:,} booked calls measured", file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=os.environ.get("CTX_TEST_PG_DSN"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sizes", default="1000,20000")
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    normalize = timed(lambda n: normalize_usage(reply(n)), 2_000, 0)
    results: dict[str, Any] = {
        "normalize_usage_p50_us": round(statistics.median(normalize) * 1e6, 1)
    }
    print("sqlite ...", file=sys.stderr)
    with sqlite_store() as store:
        results["sqlite"] = measure(store, sizes, args.turns)
    if args.pg:
        print("postgres ...", file=sys.stderr)
        with postgres_store(args.pg) as store:
            results["postgres"] = measure(store, sizes, args.turns)
    else:
        results["postgres"] = None
        print("postgres skipped: no --pg and no CTX_TEST_PG_DSN", file=sys.stderr)
    if args.json:
        print(json.dumps(results))
        return

    small, large = str(sizes[0]), str(sizes[-1])
    rows = []
    for backend in ("sqlite", "postgres"):
        figures = results[backend]
        if figures is None:
            continue
        for metric in ("turn_p50_ms", "turn_p95_ms", "duplicate_p50_ms"):
            a, b = figures[small][metric], figures[large][metric]
            rows.append([backend, metric.replace("_", " "), a, b, f"{b / a:.2f}x" if a else "-"])
    print(
        f"ctx_usage per turn (normalize + record + baseline), {args.turns} turns per size; "
        f"normalize_usage alone: {results['normalize_usage_p50_us']} us p50"
    )
    print(
        format_table(
            ["backend", "metric", f"@{int(small):,} calls", f"@{int(large):,} calls", "growth"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
