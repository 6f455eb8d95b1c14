"""Long-term memory benchmark: what memory adds to a ``ctx_budget`` turn, and how it grows.

One live thread of 1,000 recorded messages. Each turn appends an AI reply and a user message
(every third one states a fact: "my ... is ..."), then runs the whole ``ctx_budget`` node: it
records the two messages, passes the user message through the ``RuleExtractor``, recalls the
user's live records ranked against it, and loads them under the memory budget. Measured with no
memory, and with a memory already holding N records of the same user, on LangGraph's
``InMemoryStore`` and ``SqliteStore``. Next to it, langmem's ``search_memory`` tool reading the
same store and namespace (``store.search``; no embeddings offline, so no semantic ranking).

    python benchmarks/memory.py [--json] [--records 0,100,1000,5000] [--turns 30]

The median turn reads the memory from the process's cache (one version-token read per
namespace); a turn after a write (every third turn here) re-reads the namespace: that is the p95.

Figures only, never a failing exit: the target is printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import gc
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from ctx_langgraph.budget.counters import TiktokenCounter
from ctx_langgraph.budget.node import BudgetNode
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.table import format_table
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.memory import LongTermMemory, MemoryCandidate, MemoryScopes
from ctx_langgraph.state import unpack

with warnings.catch_warnings():  # langmem imports names LangGraph has deprecated
    warnings.simplefilter("ignore", DeprecationWarning)
    from langmem import create_search_memory_tool  # type: ignore[import-untyped]

HISTORY = 1_000
OVERHEAD_TARGET_MS = 10.0  # memory's added median ms per turn at 1,000 records, at most
RUN: Any = {"configurable": {"thread_id": "bench", "user_id": "u-1"}}
ME = MemoryScopes("default", "bench", user_id="u-1")
TOPICS = ["order id", "city", "plan", "manager", "project code", "laptop", "team", "pet"]


def history() -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for n in range(HISTORY // 2):
        out.append(HumanMessage(f"Question {n}: where is parcel P-{n:05d} now?", id=f"h{n}"))
        out.append(AIMessage(f"Parcel P-{n:05d} left the depot on day {n % 28 + 1}.", id=f"a{n}"))
    return out


def seed_records(memory: LongTermMemory, count: int) -> None:
    batch = [
        MemoryCandidate(f"Fact {n}: the user's {TOPICS[n % 8]} {n} is V-{n:05d}.", key=f"k{n}")
        for n in range(count)
    ]
    for start in range(0, count, 500):
        memory.remember(ME, batch[start : start + 500])


def make_store(kind: str, tmp: Path) -> BaseStore:
    if kind == "InMemoryStore":
        return InMemoryStore()
    conn = sqlite3.connect(tmp / f"lts-{time.monotonic_ns()}.sqlite", check_same_thread=False)
    conn.isolation_level = None
    store = SqliteStore(conn)
    store.setup()
    return store


def run(kind: str | None, records: int, turns: int, tmp: Path) -> dict[str, Any]:
    """Median ms of one ``ctx_budget`` turn, and the memory tokens it loaded."""
    counter = TiktokenCounter("gpt-4o")
    store = SQLiteHistoryStore.from_path(tmp / f"history-{time.monotonic_ns()}.sqlite")
    store.setup()
    messages = history()
    store.append("bench", messages)
    memory = None
    if kind is not None:
        memory = LongTermMemory(make_store(kind, tmp), max_tokens=400)
        seed_records(memory, records)
    config = ContextConfig(context_window=10_000_000, output_reserve=16_384)
    node = BudgetNode(store, config, counter=counter, compact_node=None, memory=memory)
    context: dict[str, Any] = {"recorded_through_id": messages[-1].id}
    times: list[float] = []
    tokens: list[int] = []
    gc.collect()
    for turn in range(turns + 3):
        said = (
            f"By the way, my {TOPICS[turn % 8]} is now N-{turn:04d}."
            if turn % 3 == 0
            else f"Any news on parcel P-{turn:05d} and my {TOPICS[turn % 8]}?"
        )
        messages = [
            *messages,
            AIMessage(f"Checked parcel {turn}.", id=f"ra{turn}"),
            HumanMessage(said, id=f"rh{turn}"),
        ]
        began = time.perf_counter()
        update = node.invoke({"messages": messages, "context": context}, RUN)
        spent = time.perf_counter() - began
        context = {**context, **unpack(update["context"])}
        if "messages" in update and memory is not None:  # the memory message moved in or out
            messages = [m for m in update["messages"][1:]]
        if turn >= 3:
            times.append(spent)
            tokens.append(int((unpack(update["context"]).get("memory") or {}).get("tokens", 0)))
    store.close()
    result: dict[str, Any] = {
        "median_ms": round(statistics.median(times) * 1000, 3),
        "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))] * 1000, 3),
        "tokens": max(tokens),
    }
    if memory is not None:
        tool = create_search_memory_tool(
            namespace=memory._namespace("default", "user", "u-1"), store=memory.store
        )
        peer: list[float] = []
        for turn in range(turns):
            began = time.perf_counter()
            tool.invoke(
                {"query": f"my {TOPICS[turn % 8]}", "limit": 20},
                {"configurable": {}},
            )
            peer.append(time.perf_counter() - began)
        result["langmem_search_ms"] = round(statistics.median(peer) * 1000, 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", default="0,100,1000,5000")
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.records.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = run(None, 0, args.turns, Path(tmp))
        rows.append({"store": "(no memory)", "records": 0, **base, "overhead_ms": 0.0})
        for kind in ("InMemoryStore", "SqliteStore"):
            for size in sizes:
                figures = run(kind, size, args.turns, Path(tmp))
                overhead = round(figures["median_ms"] - base["median_ms"], 3)
                rows.append({"store": kind, "records": size, **figures, "overhead_ms": overhead})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [
        [
            row["store"],
            f"{row['records']:,}",
            f"{row['median_ms']:.2f}",
            f"{row['p95_ms']:.2f}",
            f"{row['overhead_ms']:+.2f}",
            f"{row['tokens']:,}",
            f"{row['langmem_search_ms']:.2f}" if "langmem_search_ms" in row else "-",
        ]
        for row in rows
    ]
    headers = [
        "store",
        "records",
        "ctx_budget ms/turn",
        "p95 ms",
        "memory adds ms",
        "memory tokens",
        "langmem search ms",
    ]
    print(f"ctx_budget turn on a {HISTORY:,}-message thread, median of {args.turns} turns\n")
    print(format_table(headers, table))
    print()
    for kind in ("InMemoryStore", "SqliteStore"):
        mine = {r["records"]: r for r in rows if r["store"] == kind}
        if 100 in mine and max(sizes) in mine and max(sizes) > 100:
            growth = mine[max(sizes)]["median_ms"] / mine[100]["median_ms"]
            print(f"{kind}: turn time at {max(sizes):,} records / at 100 records = {growth:.2f}x")
        if 1000 in mine:
            added = mine[1000]["overhead_ms"]
            mark = "PASS" if added <= OVERHEAD_TARGET_MS else "FAIL"
            print(
                f"{kind}: memory adds {added:.2f} ms per turn at 1,000 records (target <= {OVERHEAD_TARGET_MS} ms) {mark}"
            )
        if "langmem_search_ms" in mine.get(1000, {}):
            ratio = mine[1000]["overhead_ms"] / mine[1000]["langmem_search_ms"]
            print(
                f"{kind}: our whole memory step / langmem's search_memory call at 1,000 records = {ratio:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
