"""The inspector without a browser: what the pages hold against the store, on every backend;
the server's routes (read only, one tenant, the policy on every response); the command line's
exits; and a database the inspector opens is left byte for byte as it was."""

from __future__ import annotations

import hashlib
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctx_langgraph.cli import main
from ctx_langgraph.history import HistoryStore, Scope, SQLiteHistoryStore
from ctx_langgraph.inspect import export_html, open_sqlite_readonly, serve, thread_html
from ctx_langgraph.inspect.page import CSP
from ctx_langgraph.inspect.reads import PAGE_SIZE, check_schema, list_threads
from ctx_langgraph.usage import UsageLedger
from tests.conftest import Backend


def _conversation(store: HistoryStore, scope: Scope | str, turns: int) -> None:
    messages = []
    for n in range(turns):
        messages += [
            HumanMessage(f"question {n}: where is order A-{n}?", id=f"h{n}"),
            AIMessage(
                "",
                id=f"a{n}",
                tool_calls=[{"name": "history_lookup", "args": {"query": f"A-{n}"}, "id": f"c{n}"}],
            ),
            ToolMessage(
                f"order A-{n} shipped", id=f"t{n}", tool_call_id=f"c{n}", name="history_lookup"
            ),
            AIMessage(f"A-{n} shipped.", id=f"r{n}"),
        ]
    store.append(scope, messages)


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_the_page_holds_what_the_store_holds_on_every_backend(backend: Backend) -> None:
    store = backend.make()
    store.setup()
    _conversation(store, "t1", 60)  # 240 events: two pages
    store.hide_events("t1", ["h3"])
    store.delete_events("t1", ["h4"])
    store.append("t1", [HumanMessage("question 5, revised", id="h5")])
    html = thread_html(store, "t1")
    assert 'id="event-count" data-count="240"' in html
    assert 'id="model-calls" data-count="0"' in html  # no model call booked
    assert 'id="summary-generations" data-count="0"' in html  # no summary yet
    assert f"page 2 of 2 (seqs {PAGE_SIZE + 1}\u2013240)" in html  # the real last seq
    first = thread_html(store, "t1", seq=13)
    assert 'id="seq-13"' in first and 'id="seq-201"' not in first
    assert re.search(r'id="seq-13".*?badge hidden', first, re.S)
    assert re.search(r'id="seq-17".*?badge deleted', first, re.S)
    assert re.search(r'id="seq-21".*?revised \(revision 2\)', first, re.S)
    assert "History lookups (50, newest first)" in html  # the newest 50 of 60
    check_schema(store)


def test_tool_calls_are_paired_with_their_results() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    _conversation(store, "t1", 2)
    html = thread_html(store, "t1")
    # the call at seq 2 points to its result at seq 3, and the result back to the call
    assert re.search(r'id="seq-2".*?→ result <a class="seq" href="#seq-3">#3</a>', html, re.S)
    assert re.search(r'id="seq-3".*?result of <a class="seq" href="#seq-2">#2</a>', html, re.S)


@pytest.fixture
def served(tmp_path: Path):
    store = SQLiteHistoryStore.from_path(tmp_path / "h.sqlite")
    store.setup()
    _conversation(store, Scope("ours", tenant="acme"), 3)
    _conversation(store, Scope("theirs", tenant="other"), 3)
    with serve(store, tenant="acme", background=True) as server:
        yield server, store
    store.close()


def test_the_server_shows_one_tenant_and_only_reads(served) -> None:
    server, store = served
    status, headers, html = _get(server.url)
    assert status == 200 and "ours" in html and "theirs" not in html
    assert headers["Content-Security-Policy"].startswith(CSP)
    assert "script-src" not in CSP and "unsafe-inline" not in CSP and "default-src 'none'" in CSP
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert _get(server.thread_url("ours"))[0] == 200
    assert _get(server.thread_url("theirs"))[0] == 404  # another tenant's thread: not here
    assert _get(server.url + "nothing")[0] == 404
    assert _get(server.thread_url("ours") + "&page=abc")[0] == 400
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert _get(server.thread_url("ours"), method)[0] == 405
    assert _get(server.thread_url("ours"), "HEAD")[0] == 200
    assert server.url.startswith("http://127.0.0.1:")
    assert len(store.read_events(Scope("ours", tenant="acme"))) == 12


def test_another_host_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctx_langgraph.inspect.server as server_module

    class Unbound:  # (nothing listens: only the warning is under test)
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

    monkeypatch.setattr(server_module, "InspectorServer", Unbound)
    store = SQLiteHistoryStore.from_path(":memory:")
    with pytest.warns(UserWarning, match="beyond this machine"):
        serve(store, host="0.0.0.0")
    with warnings_none():
        serve(store, host="127.0.0.2")
        serve(store, host="localhost")


class warnings_none:
    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc: object) -> None:
        self._catch.__exit__(*exc)
        assert not self.caught, [str(w.message) for w in self.caught]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_cli_writes_one_file_and_leaves_the_database_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "h.sqlite"
    with SQLiteHistoryStore.from_path(db) as store:
        store.setup()
        _conversation(store, "t1", 5)
    before = _digest(db)
    out = tmp_path / "t1.html"
    assert main(["inspect", "--sqlite", str(db), "--thread", "t1", "--html", str(out)]) == 0
    assert "one file" in capsys.readouterr().out
    html = out.read_text()
    assert 'id="event-count" data-count="20"' in html
    assert "http://" not in html and "https://" not in html  # no asset from anywhere
    assert _digest(db) == before
    with open_sqlite_readonly(db) as store:
        assert [t.thread_id for t in list_threads(store, "default")] == ["t1"]
        with pytest.raises(Exception, match=r"readonly|read-only|read only"):
            store.append("t1", [HumanMessage("x", id="x")])


@pytest.mark.parametrize(
    "case",
    [
        "missing file",
        "not sqlite",
        "not a history store",
        "unknown thread",
        "html without thread",
        "malformed dsn",
        "unreachable dsn",
    ],
)
def test_bad_inputs_exit_2_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "h.sqlite"
    with SQLiteHistoryStore.from_path(db) as store:
        store.setup()
        _conversation(store, "t1", 1)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    other = tmp_path / "other.sqlite"
    import sqlite3

    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.close()
    out = str(tmp_path / "o.html")
    argv = {
        "missing file": [
            "--sqlite",
            str(tmp_path / "nope.sqlite"),
            "--thread",
            "t1",
            "--html",
            out,
        ],
        "not sqlite": ["--sqlite", str(junk), "--thread", "t1", "--html", out],
        "not a history store": ["--sqlite", str(other), "--thread", "t1", "--html", out],
        "unknown thread": ["--sqlite", str(db), "--thread", "nobody", "--html", out],
        "html without thread": ["--sqlite", str(db), "--html", out],
        "malformed dsn": ["--pg", "host=127.0.0.1 port=notaport ===", "--thread", "t1"],
        "unreachable dsn": ["--pg", "postgresql://nobody@127.0.0.1:1/none", "--thread", "t1"],
    }[case]
    assert main(["inspect", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ctx-langgraph inspect: error:") and "\n" not in err, err
    assert not Path(out).exists()


def test_a_store_at_another_schema_is_refused_not_migrated(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "h.sqlite"
    with SQLiteHistoryStore.from_path(db) as store:
        store.setup()
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM ctx_migrations WHERE v = (SELECT max(v) FROM ctx_migrations)")
    conn.commit()
    conn.close()
    before = _digest(db)
    assert (
        main(["inspect", "--sqlite", str(db), "--thread", "t1", "--html", str(tmp_path / "o.html")])
        == 2
    )
    assert _digest(db) == before


def test_export_html_pages_the_newest_events(tmp_path: Path) -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    _conversation(store, "t1", 150)  # 600 events: three pages
    html = export_html(store, "t1", tmp_path / "t.html", max_events=400).read_text()
    assert (
        'id="page-1"' not in html
        and 'id="page-2"' in html
        and 'class="page last" id="page-3"' in html
    )
    assert "the 200 earlier ones are covered" in html
    assert 'href="#seq-150"' not in html  # not in the file: shown as text, not a dead link


def test_failed_and_fallback_compactions_are_marked(tmp_path: Path) -> None:
    """A summarizer that always fails: the tries are ``failed`` versions, the spans that could
    not wait are covered by the fallback; the page marks both, on the bar and on the cards,
    and a call's bar leads to the summary version and the tail it held."""
    from tests.test_recorded_makeup import FailingSummarizer, graph_of, run_turns, turns

    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    run_turns(graph_of(store, summarizer=FailingSummarizer()), turns(30), "sync")
    versions = store.list_versions("t")
    failed = [v for v in versions if v.status == "failed" and v.summary_text is None]
    fallback = [v for v in versions if v.metadata["compaction"]["fallback"] and v.summary_text]
    assert failed and fallback
    html = thread_html(store, "t")
    assert html.count('<rect class="cov failed"') >= min(len(failed), 24) > 0
    assert re.search(r'class="version status-failed"[^>]*data-status="failed"', html)
    assert '<span class="badge fallback">fallback</span>' in html
    assert "by the fallback summarizer" in html and "model overloaded" in html
    active = store.get_active("t")
    assert active is not None
    # the newest call held the active summary: its summary part leads to that version's card
    newest = re.findall(r'<tr class="call".*?</tr>', html, re.S)[-1]
    card = re.search(rf'id="(summary-g{active.generation}-[0-9a-f]+)"', html)
    assert card and f'href="#{card.group(1)}"><rect class="part part-summary"' in newest
    assert f"#seq-{active.covered_through_seq + 1}" in newest


def test_the_threads_memories_show_with_their_source_and_expiry(tmp_path: Path) -> None:
    import datetime as dt

    from langgraph.store.sqlite import SqliteStore

    from ctx_langgraph.memory import LongTermMemory, MemoryCandidate, MemoryScopes

    db, memories = tmp_path / "h.sqlite", tmp_path / "memories.sqlite"
    with SQLiteHistoryStore.from_path(db) as store:
        store.setup()
        _conversation(store, "t1", 2)
    with SqliteStore.from_conn_string(str(memories)) as lts:
        lts.setup()
        memory = LongTermMemory(lts, extractor=None, ttl=dt.timedelta(days=30))
        candidate = MemoryCandidate("The order is <b>A-1</b>", key="order", scope="thread")
        memory.remember(MemoryScopes("default", "t1"), [candidate], seqs={"h1": 5})
    out = tmp_path / "t1.html"
    argv = ["inspect", "--sqlite", str(db), "--thread", "t1", "--html", str(out)]
    assert main([*argv, "--memory-sqlite", str(memories)]) == 0
    section = out.read_text().split('id="memory"')[1].split("</section>")[0]
    assert "Long-term memory (1)" in section and "The order is &lt;b&gt;A-1&lt;/b&gt;" in section
    assert f"{dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30):%Y-%m-%d}" in section
    assert main(argv) == 0  # no memory store given: said so
    assert "No memory store given" in out.read_text()


def test_a_call_and_its_result_are_paired_across_a_page_edge() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    store.append("t1", [HumanMessage(f"filler {n}", id=f"f{n}") for n in range(PAGE_SIZE - 2)])
    _conversation(
        store, "t1", 1
    )  # the call is the page's last seq, its result the next page's first
    first = thread_html(store, "t1", page=1)
    second = thread_html(store, "t1", page=2)
    assert (
        f'→ result <a class="seq" href="/thread?id=t1&amp;branch=main&amp;seq={PAGE_SIZE + 1}'
        in first
    )
    assert (
        f'result of <a class="seq" href="/thread?id=t1&amp;branch=main&amp;seq={PAGE_SIZE}'
        in second
    )


def _plot(html: str) -> str:
    found = re.search(r'<svg class="plot".*?</svg>', html, re.S)
    assert found, "no plot"
    return found.group(0)


def _y_of(plot: str) -> tuple[dict[int, float], dict[str, float]]:
    """The plot's y-axis as a reader sees it: each tick's value at its height, and each
    labelled horizontal line (window, trigger) at its height."""
    ticks = {
        int(value.replace(",", "")): float(y)
        for y, value in re.findall(
            r'<text class="axis tick"[^>]*? y="([\d.]+)"[^>]*>([\d,]+)<', plot
        )
    }
    lines = {
        name: float(y)
        for name, y in re.findall(r'<line class="plot-(window|trigger)"[^>]*? y1="([\d.]+)"', plot)
    }
    return ticks, lines


def _height(ticks: dict[int, float], value: float) -> float:
    """Where ``value`` sits on the axis the ticks draw (linear, as a reader reads it)."""
    (low, y_low), (high, y_high) = min(ticks.items()), max(ticks.items())
    return y_low + (value - low) / (high - low) * (y_high - y_low)


def test_the_input_token_plot_has_a_scale_and_the_window_and_trigger_lines(
    backend: Backend,
) -> None:
    from tests.test_recorded_makeup import CONFIG, graph_of, run_turns, turns

    store = backend.make()
    store.setup()
    run_turns(graph_of(store), turns(8), "sync")
    budget = CONFIG.resolve()
    plot = _plot(thread_html(store, "t"))
    ticks, lines = _y_of(plot)
    assert len(ticks) >= 3 and min(ticks) == 0, ticks  # a scale from 0, with its numbers
    assert max(ticks) >= budget.context_window  # the window is on the scale, not off it
    assert f"window {budget.context_window:,} tokens" in plot
    assert f"trigger {budget.trigger:,} tokens" in plot
    assert abs(lines["window"] - _height(ticks, budget.context_window)) < 1
    assert abs(lines["trigger"] - _height(ticks, budget.trigger)) < 1
    # the highest measured request is drawn at its height on that scale
    highest = max(r.usage.input_total or 0 for r in UsageLedger(store).records("t"))
    points = re.search(r'<polyline class="plot-tokens" points="([^"]+)"', plot)
    assert points
    top = min(float(p.split(",")[1]) for p in points.group(1).split())
    assert abs(top - _height(ticks, highest)) < 1


def test_a_plot_of_calls_without_a_makeup_has_a_scale_but_no_window(tmp_path: Path) -> None:
    from ctx_langgraph.inspect.reads import CallPoint
    from ctx_langgraph.inspect.svg import calls_plot

    plot = calls_plot(
        [CallPoint("answer", 1_234, None, None), CallPoint("answer", 2_500, None, None)]
    )
    ticks, lines = _y_of(plot)
    assert min(ticks) == 0 and max(ticks) >= 2_500 and lines == {}
    assert "window" not in plot  # not known: not drawn, not guessed


def test_the_last_page_says_the_threads_real_last_seq(backend: Backend, tmp_path: Path) -> None:
    store = backend.make()
    store.setup()
    _conversation(store, "t1", 148)  # 592 events
    store.append("t1", [HumanMessage(f"one more {n}", id=f"m{n}") for n in range(3)])  # 595
    last = thread_html(store, "t1")
    assert "page 3 of 3 (seqs 401\u2013595)" in last
    assert "page 1 of 3 (seqs 1\u2013200)" in thread_html(store, "t1", page=1)
    assert "page 3 of 3 (seqs 401\u2013595)" in thread_html(store, "t1", seq=595)
    html = export_html(store, "t1", tmp_path / "t.html").read_text()
    assert "page 3 of 3 (seqs 401\u2013595)" in html and "\u2013600" not in html


def _summaries(store: HistoryStore, thread: str, throughs: list[int]) -> None:
    for through in throughs:
        store.commit_candidate(
            store.create_candidate(
                store.snapshot(thread, through), summary_text=f"Goal: orders\nDone: to {through}"
            )
        )


def _changes_of(html: str, generation: int) -> str:
    card = re.search(
        rf'<article class="version[^"]*" id="summary-g{generation}-.*?</article>', html, re.S
    )
    assert card, generation
    changes = re.search(r"<h4>changes.*", card.group(0), re.S)
    assert changes
    return re.sub(r"<[^>]+>", " ", changes.group(0))


def test_the_oldest_kept_summary_says_how_many_earlier_ones_were_pruned(backend: Backend) -> None:
    store = backend.make()
    store.setup()
    _conversation(store, "t1", 10)
    _summaries(store, "t1", [4, 8, 12, 16, 20, 24, 28])
    store.prune_versions("t1", keep=2)  # generations 5 and 6 superseded, 7 active
    html = thread_html(store, "t1")
    oldest = _changes_of(html, 5)
    assert "the first generation" not in oldest
    assert "the oldest kept" in oldest and "4 earlier generations pruned" in oldest
    assert "changes from generation 5" in _changes_of(html, 6)  # a diff where one is known


def test_the_first_generation_is_still_called_the_first(backend: Backend) -> None:
    store = backend.make()
    store.setup()
    _conversation(store, "t1", 4)
    _summaries(store, "t1", [4, 8])
    html = thread_html(store, "t1")
    assert "the first generation" in _changes_of(html, 1)
    assert "pruned" not in _changes_of(html, 1)
