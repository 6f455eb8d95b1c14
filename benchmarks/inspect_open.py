"""Inspector benchmark: how long a thread of 100,000 events takes to open in a real browser.

For each size in ``--sizes`` (events in one thread; default 1,000 and 100,000) a store is built
the way an agent leaves it: a tool-heavy conversation (a question, a tool call, its result, an
answer), one booked model call with its request make-up per four events, and a committed
summary generation per 500 events. Then ``ctx-langgraph inspect``'s server is started on
loopback and Debian's headless Chromium (selenium) opens the thread's page: the time from the
request to the page's load event, the newest page (where the thread is now) and the first page
(``?seq=1``); the server's own time to draw the page; and the single ``--html`` file.

    python benchmarks/inspect_open.py [--sizes 1000,100000] [--opens 5] [--pg DSN] [--json]

Figures only, never a failing exit: the 2 s target is printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, Scope, SQLiteHistoryStore
from ctx_langgraph.inspect import export_html, serve
from ctx_langgraph.usage import NormalizedUsage, UsageLedger

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chromium import chromium

OPEN_TARGET_MS = 2_000.0
THREAD = "inspected"
EVENTS_PER_GENERATION = 500
BATCH = 2_000


def _events(first: int, count: int) -> list[BaseMessage]:
    """``count`` events from seq ``first`` on, four to a turn."""
    messages: list[BaseMessage] = []
    for seq in range(first, first + count):
        turn, step = divmod(seq - 1, 4)
        call = f"call-{turn}"
        if step == 0:
            messages.append(
                HumanMessage(
                    f"turn {turn}: what is the state of order A-{turn}? "
                    "Please check the warehouse and the invoice.",
                    id=f"e{seq}",
                )
            )
        elif step == 1:
            messages.append(
                AIMessage(
                    "",
                    id=f"e{seq}",
                    tool_calls=[
                        {"name": "lookup_order", "args": {"order": f"A-{turn}"}, "id": call}
                    ],
                )
            )
        elif step == 2:
            messages.append(
                ToolMessage(
                    f"order A-{turn}: shipped from Leeds, invoice "
                    f"INV-{turn:06d} paid, tracking TRK{turn:08d}. " * 4,
                    id=f"e{seq}",
                    tool_call_id=call,
                    name="lookup_order",
                )
            )
        else:
            messages.append(
                AIMessage(f"Order A-{turn} shipped; invoice INV-{turn:06d} is paid.", id=f"e{seq}")
            )
    return messages


def _makeup(turn: int) -> dict[str, int]:
    tail = 300 + (turn * 37) % 1500
    parts = {
        "system": 120,
        "pinned": 0,
        "tools": 480,
        "memory": 0,
        "summary": 600,
        "trail": 90,
        "lookup": 0,
        "tail": tail,
        "adjustment": 4,
    }
    return parts | {
        "estimate": sum(parts.values()),
        "reserve": 4096,
        "window": 128_000,
        "prefix": 1200,
    }


def build(store: HistoryStore, events: int) -> dict[str, Any]:
    """The thread, its calls and its summary generations; what was built, and how long it took."""
    started = time.perf_counter()
    ledger = UsageLedger(store)
    scope = Scope(THREAD)
    generations = 0
    for first in range(1, events + 1, BATCH):
        store.append(scope, _events(first, min(BATCH, events - first + 1)))
        head = first + min(BATCH, events - first + 1) - 1
        while (generations + 1) * EVENTS_PER_GENERATION <= head - 200:
            generations += 1
            snapshot = store.snapshot(scope, generations * EVENTS_PER_GENERATION)
            candidate = store.create_candidate(
                snapshot,
                summary_text=f"## Summary\nGeneration {generations}: orders up to "
                f"A-{generations * EVENTS_PER_GENERATION // 4} shipped.",
                summarizer_id="bench",
                summary_tokens=40,
            )
            store.commit_candidate(candidate)
    for turn in range(events // 4):
        makeup = _makeup(turn)
        usage = NormalizedUsage(
            provider="openai",
            model="gpt-4o",
            input_total=makeup["estimate"],
            input_uncached=makeup["estimate"],
            cache_read=0,
            cache_write=0,
            output=30,
            reasoning=0,
            response_id=f"resp-{turn}",
        )
        ledger.record(f"openai:resp-{turn}", usage, scope=scope, purpose="answer", makeup=makeup)
    return {
        "events": events,
        "calls": events // 4,
        "generations": generations,
        "build_s": round(time.perf_counter() - started, 1),
    }


def _p50(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def _browser_open(driver: Any, url: str) -> float:
    """Milliseconds from the request to the page's load event, as the browser measures them."""
    driver.get("about:blank")
    driver.get(url)
    return float(
        driver.execute_script(
            "const n = performance.getEntriesByType('navigation')[0];"
            "return n.loadEventEnd - n.startTime;"
        )
    )


def measure(store: HistoryStore, driver: Any, opens: int, tmp: Path) -> dict[str, Any]:
    """The page opened ``opens`` times in the browser (newest and first page), drawn by the
    server, and written as one file."""
    with serve(store, background=True) as server:
        url = server.thread_url(THREAD)
        server_ms, page_bytes = [], 0
        for _ in range(opens):
            started = time.perf_counter()
            with urllib.request.urlopen(url, timeout=60) as response:
                page_bytes = len(response.read())
            server_ms.append((time.perf_counter() - started) * 1000)
        newest = [_browser_open(driver, url) for _ in range(opens)]
        first = [_browser_open(driver, url + "&seq=1") for _ in range(opens)]
        shown = len(driver.find_elements("css selector", "li.event"))
    started = time.perf_counter()
    out = export_html(store, THREAD, tmp / "thread.html")
    html_s = time.perf_counter() - started
    return {
        "server_p50_ms": _p50(server_ms),
        "open_p50_ms": _p50(newest),
        "open_max_ms": round(max(newest), 1),
        "first_page_open_p50_ms": _p50(first),
        "page_bytes": page_bytes,
        "events_on_page": shown,
        "html_export_s": round(html_s, 2),
        "html_bytes": out.stat().st_size,
    }


def run_backend(
    make: Callable[[int], HistoryStore], sizes: list[int], opens: int
) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    with chromium() as driver, tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            store = make(size)
            try:
                store.setup()
                row = build(store, size)
                row |= measure(store, driver, opens, Path(tmp))
            finally:
                store.close()
            row["passed"] = row["open_max_ms"] <= OPEN_TARGET_MS
            rows[str(size)] = row
    small, large = rows[str(sizes[0])], rows[str(sizes[-1])]
    return {
        "sizes": rows,
        "growth_open": round(large["open_p50_ms"] / small["open_p50_ms"], 2),
        "target_ms": OPEN_TARGET_MS,
        "passed": all(r["passed"] for r in rows.values()),
    }


def _sqlite(folder: Path) -> Callable[[int], HistoryStore]:
    return lambda size: SQLiteHistoryStore.from_path(folder / f"inspect-{size}.sqlite")


def _postgres(dsn: str) -> Callable[[int], HistoryStore]:
    import psycopg
    from psycopg import sql

    def make(size: int) -> HistoryStore:
        schema = f"inspect_bench_{size}_{int(time.time())}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        scoped = psycopg.conninfo.make_conninfo(dsn, options=f"-c search_path={schema}")
        return PostgresHistoryStore.from_conn_string(scoped)

    return make


COLUMNS = (
    "events",
    "calls",
    "generations",
    "build_s",
    "server_p50_ms",
    "open_p50_ms",
    "open_max_ms",
    "first_page_open_p50_ms",
    "page_bytes",
    "html_export_s",
    "html_bytes",
)


def table(results: dict[str, Any]) -> str:
    lines = [" | ".join(["backend", *COLUMNS, "< 2 s"])]
    for backend, result in results.items():
        for row in result["sizes"].values():
            cells = [f"{row[c]:,}" if isinstance(row[c], int) else str(row[c]) for c in COLUMNS]
            lines.append(" | ".join([backend, *cells, "pass" if row["passed"] else "FAIL"]))
        lines.append(
            f"{backend}: open p50 at the largest size / the smallest = {result['growth_open']}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="1000,100000", help="events in the thread, e.g. 1000,100000"
    )
    parser.add_argument("--opens", type=int, default=5, help="page opens per measurement")
    parser.add_argument("--pg", metavar="DSN", help="also measure a PostgreSQL history store")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        results = {"sqlite": run_backend(_sqlite(Path(folder)), sizes, args.opens)}
        if args.pg:
            results["postgres"] = run_backend(_postgres(args.pg), sizes, args.opens)
    if args.json:
        print(json.dumps(results | {"wall_s": round(time.perf_counter() - started, 1)}))
    else:
        print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
