"""The inspector as a person sees it: Debian's headless Chromium (through selenium and
ChromeDriver) opens the served page and the ``--html`` file of the demo's thread, on SQLite and
on PostgreSQL, and what it shows is checked against the store; hostile conversation text shows
as text and runs nothing. The SQLite page's screenshot is the one the README shows.

Without Chromium these tests skip, unless ``CTX_REQUIRE_BROWSER=1`` (``scripts/test.sh`` sets it
after installing the browser), where they fail.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, Scope, SQLiteHistoryStore
from ctx_langgraph.inspect import export_html, serve
from ctx_langgraph.makeup import MAKEUP_PARTS
from ctx_langgraph.threads import export_thread, import_thread
from ctx_langgraph.usage import UsageLedger

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = ROOT / "docs" / "images" / "inspector.png"
THREAD = "tool-session-0"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's history file (``ctx-langgraph demo --db FILE``, no comparison)."""
    from ctx_langgraph.eval.demo import run_demo

    folder = tmp_path_factory.mktemp("demo")
    db = folder / "history.sqlite"
    with open(os.devnull, "w") as quiet:
        status = run_demo(
            db=db,
            out_dir=folder / "report",
            turns=120,
            compare=(),
            quiet=True,
            out=quiet,
            progress_stream=quiet,
        )
    assert status == 0
    return db


@contextlib.contextmanager
def _served_cli(*args: str) -> Iterator[str]:
    """``python -m ctx_langgraph.cli inspect ARGS`` in a process of its own; yields the URL it
    prints, stops it with SIGTERM at the end (exit 0)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ctx_langgraph.cli", "inspect", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        match = re.search(r"serving (http://127\.0\.0\.1:\d+/\S*)", line)
        assert match, f"no URL printed: {line!r} {process.stderr.read() if process.stderr else ''}"
        yield match.group(1)
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def _check_against_store(driver: Any, store: HistoryStore, scope: Scope) -> None:
    """What the page says against the store: generations, the active summary's range, the
    number of calls, and one call's parts adding up to its estimate."""
    info = store.branch_info(scope)
    active = store.get_active(scope)
    records = UsageLedger(store).records(scope)
    assert info is not None and active is not None and info.active_generation >= 2

    def attr(element_id: str, name: str) -> str:
        return driver.find_element("id", element_id).get_attribute(name)

    assert driver.title.startswith(scope.thread_id)
    assert int(attr("summary-generations", "data-count")) == info.active_generation
    assert int(attr("active-summary", "data-through")) == active.covered_through_seq
    assert int(attr("active-summary", "data-first")) == active.first_seq
    assert (
        f"covers seqs 1\u2013{active.covered_through_seq}"
        in driver.find_element("id", "active-summary").text
    )
    assert int(attr("model-calls", "data-count")) == len(records)
    assert int(attr("event-count", "data-count")) == info.head_seq
    rows = driver.find_elements("css selector", "tr.call[data-estimate]")
    assert rows, "no call with its make-up"
    row = rows[-1]
    parts = (*MAKEUP_PARTS, "adjustment")
    shown = {p: int(row.get_attribute(f"data-part-{p}")) for p in parts}
    estimate = int(row.get_attribute("data-estimate"))
    assert sum(shown.values()) == estimate
    by_key = {r.call_key: r for r in records}
    recorded = by_key[row.get_attribute("data-call-key")].makeup
    assert recorded is not None and recorded["estimate"] == estimate
    assert {p: recorded[p] for p in parts} == shown
    assert any(r.makeup and r.makeup["summary"] > 0 for r in records)  # a compacted request
    # the bar's summary part leads to the card of the summary version the request held
    link = row.find_element("css selector", "a:has(> rect.part-summary)").get_dom_attribute("href")
    card = driver.find_element("id", link.lstrip("#"))
    assert int(card.get_attribute("data-generation")) == recorded["generation"] >= 1
    # every part the bar draws has its tokens in its tooltip; the timeline shows events
    titles = [
        t.get_attribute("textContent") for t in row.find_elements("css selector", "rect title")
    ]
    assert any(t.startswith("tail: ") for t in titles)
    assert driver.find_elements("css selector", "li.event")
    assert driver.execute_script("return document.scripts.length") == 0
    _check_reading(driver, store, scope, recorded)


def _check_reading(driver: Any, store: HistoryStore, scope: Scope, makeup: dict[str, int]) -> None:
    """What a reader takes from the page's words: the plot's scale and its window and trigger
    lines (the ones the requests were budgeted against), the timeline's last seq, and that the
    oldest summary kept says the earlier ones were pruned (not that it is the first)."""
    plot = driver.find_element("css selector", "svg.plot")
    texts = [t.get_attribute("textContent") for t in plot.find_elements("css selector", "text")]
    assert f"window {makeup['window']:,} tokens" in texts, texts
    assert f"trigger {makeup['trigger']:,} tokens" in texts, texts
    ticks = [int(t.replace(",", "")) for t in texts if re.fullmatch(r"[\d,]+", t)]
    assert ticks[0] == 0 and ticks[-1] >= makeup["window"] and len(ticks) >= 3, ticks
    info = store.branch_info(scope)
    assert info is not None
    pagers = [p.text for p in driver.find_elements("css selector", ".pager span") if p.text]
    assert any(text.endswith(f"\u2013{info.head_seq})") for text in pagers), pagers
    versions = [v for v in store.list_versions(scope) if v.status in ("active", "superseded")]
    oldest = min(versions, key=lambda v: v.generation)
    assert oldest.generation > 1  # the demo's thread pruned its early summaries
    card = driver.find_element("css selector", f'article[data-generation="{oldest.generation}"]')
    said = card.get_attribute("textContent")
    assert "the first generation" not in said
    assert f"{oldest.generation - 1} earlier generations pruned" in said


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_served_page_and_file_of_the_demo_thread_on_sqlite(
    browser: Any, demo_db: Path, tmp_path: Path
) -> None:
    before = _digest(demo_db)
    with _served_cli("--sqlite", str(demo_db), "--thread", THREAD) as url:
        browser.get(url)
        with SQLiteHistoryStore.from_path(demo_db) as store:
            _check_against_store(browser, store, Scope(THREAD))
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SCREENSHOT))
        # the pager reaches the first page, and a key fact's link opens its event
        browser.find_element("link text", "« first").click()
        assert browser.find_element("id", "seq-1").is_displayed()
    assert _digest(demo_db) == before  # served and browsed: not one byte written
    out = tmp_path / "thread.html"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ctx_langgraph.cli",
            "inspect",
            "--sqlite",
            str(demo_db),
            "--thread",
            THREAD,
            "--html",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    browser.get(out.as_uri())
    with SQLiteHistoryStore.from_path(demo_db) as store:
        _check_against_store(browser, store, Scope(THREAD))
    assert SCREENSHOT.stat().st_size > 20_000


@pytest.mark.postgres
def test_served_page_and_file_of_the_demo_thread_on_postgres(
    browser: Any, demo_db: Path, pg_dsn: str, tmp_path: Path
) -> None:
    tenant = f"t{uuid.uuid4().hex[:8]}"
    scope = Scope(THREAD, tenant=tenant)
    with SQLiteHistoryStore.from_path(demo_db) as source:
        document = export_thread(source, THREAD)
    with PostgresHistoryStore.from_conn_string(pg_dsn) as store:
        store.setup()
        import_thread(store, document, into=scope)
        with _served_cli("--pg", pg_dsn, "--tenant", tenant, "--thread", THREAD) as url:
            browser.get(url)
            _check_against_store(browser, store, scope)
        out = export_html(store, THREAD, tmp_path / "pg.html", tenant=tenant)
        browser.get(out.as_uri())
        _check_against_store(browser, store, scope)


HOSTILE = [
    "<script>window.pwned = 1; document.title = 'pwned'</script>",
    "<img src=x onerror=\"window.pwned = 1; document.title = 'pwned'\">",
    '<a href="javascript:window.pwned = 1">click me</a> <svg onload="window.pwned=1"></svg>',
    '</pre></li></ol><iframe src="javascript:parent.pwned=1"></iframe><style>body{display:none}</style>',
]


BIG = "<script>x</script>" + "y" * (10 * 1024 * 1024)


def _hostile_thread(store: HistoryStore, thread: str) -> None:
    messages: list[Any] = []
    for n, text in enumerate(HOSTILE):
        messages.append(HumanMessage(text, id=f"h{n}"))
        messages.append(
            AIMessage(
                text,
                id=f"a{n}",
                tool_calls=[{"name": "<b>tool</b>", "args": {"q": text}, "id": f"c{n}"}],
            )
        )
        messages.append(ToolMessage(text, id=f"t{n}", tool_call_id=f"c{n}", name="history_lookup"))
    messages.append(HumanMessage("big result next", id="big-q"))
    messages.append(
        AIMessage("", id="big-a", tool_calls=[{"name": "dump", "args": {}, "id": "cb"}])
    )
    messages.append(ToolMessage(BIG, id="big", tool_call_id="cb", name="dump"))
    messages += [HumanMessage(f"filler {n}", id=f"f{n}") for n in range(250)]  # two pages
    store.append(thread, messages)


def _nothing_ran(driver: Any, title: str) -> None:
    assert driver.title == title
    assert driver.execute_script("return typeof window.pwned") == "undefined"
    assert driver.execute_script("return document.scripts.length") == 0
    for selector in (
        "li.event img",
        "li.event iframe",
        "li.event svg",
        "[onerror]",
        "[onload]",
        "a[href^='javascript:']",
        "main style",
    ):
        assert driver.find_elements("css selector", selector) == [], selector
    assert driver.find_element("tag name", "body").is_displayed()


def test_hostile_text_shows_as_text_and_runs_nothing(browser: Any, tmp_path: Path) -> None:
    thread = "<img src=x onerror=alert(1)>"
    title = f"{thread} · ctx-langgraph inspector"
    store = SQLiteHistoryStore.from_path(tmp_path / "h.sqlite")
    store.setup()
    _hostile_thread(store, thread)
    out = export_html(store, thread, tmp_path / "hostile.html")
    assert out.stat().st_size < 3_000_000  # the 10 MB result is cut, not copied
    with serve(store, background=True) as server:
        for url in (server.thread_url(thread) + "&page=1", out.as_uri()):
            started = time.perf_counter()
            browser.get(url)
            assert time.perf_counter() - started < 10
            if url.startswith("file:"):
                browser.find_element("css selector", "a[href='#page-1']").click()
            _nothing_ran(browser, title)
            first = browser.find_element("id", "seq-1")
            assert HOSTILE[0] in first.text  # the text itself, shown as text
            assert "click me" in browser.find_element("id", "seq-7").text
            big = browser.find_element("id", "seq-15")
            assert f"cut: {len(BIG):,} characters in all" in big.text
            # still usable: the lookups table shows the hostile arguments as text
            assert HOSTILE[1] in browser.find_element("id", "lookups").text
    store.close()
