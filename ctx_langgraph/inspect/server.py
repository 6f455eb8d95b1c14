"""Serve the inspector on loopback with the stdlib's ``ThreadingHTTPServer`` (``GET /``: the
tenant's threads, ``GET /thread?id=...``: one thread; nothing else, no other method), or write
one thread's page as a single file."""

from __future__ import annotations

import ipaddress
import logging
import sqlite3
import threading
import warnings
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit

from ctx_langgraph.errors import ContextManagementError, ScopeError
from ctx_langgraph.history import DEFAULT_BRANCH, DEFAULT_TENANT, HistoryStore, Scope
from ctx_langgraph.history.sqlite import SQLiteHistoryStore
from ctx_langgraph.inspect.page import (
    CSP,
    Links,
    document,
    render_events,
    thread_list_page,
    thread_sections,
)
from ctx_langgraph.inspect.reads import (
    PAGE_SIZE,
    ThreadData,
    Timeline,
    list_threads,
    page_of,
    read_thread,
    read_timeline,
)

if TYPE_CHECKING:
    from ctx_langgraph.memory import LongTermMemory

log = logging.getLogger(__name__)

FILE_EVENTS = 10_000
"""The newest events a single-file page holds by default (older ones: the export's JSON)."""

_HEADERS = {
    "Content-Security-Policy": CSP + "; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


def open_sqlite_readonly(path: str | Path) -> SQLiteHistoryStore:
    """A SQLite history store opened read-only (``mode=ro``): the inspector cannot write it.

    Raises:
        ContextManagementError: the file cannot be opened.
    """
    uri = f"{Path(path).absolute().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise ContextManagementError(f"cannot open {str(path)!r} read-only: {exc}") from exc
    return SQLiteHistoryStore(conn)


def _pager(timeline: Timeline, links: Links, scope: Scope | None = None) -> str:
    """Links to the first, previous, next and last pages; served, a form to go to a seq."""

    def go(page: int, label: str) -> str:
        if page == timeline.page or not 1 <= page <= timeline.pages:
            return f'<span class="muted">{label}</span>'
        return f'<a href="{links.page(page)}">{label}</a>'

    jump = (
        '<form method="get" action="/thread">'
        f'<input type="hidden" name="id" value="{escape(scope.thread_id)}">'
        f'<input type="hidden" name="branch" value="{escape(scope.branch)}">'
        '<label>go to seq <input name="seq" size="8" inputmode="numeric"></label> '
        '<button type="submit">go</button></form>'
        if scope is not None
        else ""
    )
    seqs = "no events yet"
    if timeline.last_seq >= timeline.first_seq:
        seqs = f"seqs {timeline.first_seq}\u2013{timeline.last_seq}"
    previous, following = (
        go(timeline.page - 1, "\u2039 previous"),
        go(timeline.page + 1, "next \u203a"),
    )
    return (
        f'<div class="pager">{go(1, "« first")}{previous}'
        f"<span>page {timeline.page} of {timeline.pages} ({seqs})</span>"
        f"{following}{go(timeline.pages, 'last »')}{jump}</div>"
    )


def _thread_page(data: ThreadData, timeline: str, links: Links, home: str = "") -> str:
    """One thread's whole page around its drawn timeline."""
    scope = data.scope
    back = f'<a href="{home}">all threads</a>' if home else ""
    header = (
        f'<span class="scope">thread <code id="thread-id">{escape(scope.thread_id)}</code> · '
        f"tenant <code>{escape(scope.tenant)}</code> · branch "
        f"<code>{escape(scope.branch)}</code></span>{back}"
    )
    body = thread_sections(data, links, timeline)
    return document(f"{scope.thread_id} · ctx-langgraph inspector", body, header=header)


def thread_html(
    store: HistoryStore,
    thread_id: str,
    *,
    tenant: str = DEFAULT_TENANT,
    branch: str = DEFAULT_BRANCH,
    memory: LongTermMemory | None = None,
    page: int | None = None,
    seq: int | None = None,
    lookup_tool: str = "history_lookup",
) -> str:
    """One thread's page as the server draws it (one page of the timeline: ``page``, the page
    holding ``seq``, else the last).

    Raises:
        ScopeError: the store has no history for the thread.
    """
    scope = Scope(thread_id, tenant=tenant, branch=branch)
    base = f"/thread?id={quote(scope.thread_id, safe='')}&branch={quote(scope.branch, safe='')}"
    data = read_thread(store, scope, memory=memory, lookup_tool=lookup_tool)
    timeline = read_timeline(store, data, page_of(seq) if seq is not None else page)

    def seq_href(n: int) -> str:
        shown = timeline.first_seq <= n <= timeline.last_seq
        return f"#seq-{n}" if shown else f"{base}&seq={n}#seq-{n}"

    links = Links(seq=seq_href, page=lambda p: f"{base}&page={p}#timeline")
    pager = _pager(timeline, links, scope)
    return _thread_page(data, f"{pager}{render_events(timeline, data, links)}{pager}", links, "/")


def export_html(
    store: HistoryStore,
    thread_id: str,
    path: str | Path,
    *,
    tenant: str = DEFAULT_TENANT,
    branch: str = DEFAULT_BRANCH,
    memory: LongTermMemory | None = None,
    max_events: int = FILE_EVENTS,
    lookup_tool: str = "history_lookup",
) -> Path:
    """Write one thread's page as one self-contained HTML file (no server, no network, every
    asset inline): to attach to a bug report. The timeline holds the newest ``max_events``
    seqs, paged by anchors (no script).

    Raises:
        ScopeError: the store has no history for the thread.
        OSError: the file cannot be written.

    Examples:
        >>> import tempfile, pathlib
        >>> from langchain_core.messages import HumanMessage
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> _ = store.append("t1", [HumanMessage("<script>alert(1)</script>", id="m1")])
        >>> out = export_html(store, "t1", pathlib.Path(tempfile.mkdtemp()) / "t1.html")
        >>> text = out.read_text()
        >>> "&lt;script&gt;alert(1)&lt;/script&gt;" in text, "<script>alert" in text
        (True, False)
    """
    scope = Scope(thread_id, tenant=tenant, branch=branch)
    data = read_thread(store, scope, memory=memory, lookup_tool=lookup_tool)
    head = data.info.head_seq
    last_page = page_of(max(head, 1))
    first_page = max(1, last_page - max(1, max_events // PAGE_SIZE) + 1)
    first_seq = (first_page - 1) * PAGE_SIZE + 1
    links = Links(
        seq=lambda n: f"#seq-{n}" if first_seq <= n <= head else None,
        page=lambda p: f"#page-{p}",
    )
    pages = []
    if first_seq > 1:
        earlier = f"{first_seq - 1:,} earlier ones are covered by the summaries above"
        pages.append(
            f'<p class="note">This file holds seqs {first_seq}\u2013{head}; the {earlier} '
            "(ctx-langgraph export has them all).</p>"
        )
    # one div a page, shown by CSS when it (or an anchor inside it) is the target, else the last
    for page in range(first_page, last_page + 1):
        timeline = read_timeline(store, data, page)
        pager = _pager(timeline, links) if last_page > 1 else ""
        css = "page last" if page == last_page else "page"
        events = render_events(timeline, data, links)
        pages.append(f'<div class="{css}" id="page-{page}">{pager}{events}</div>')
    out = Path(path)
    out.write_text(_thread_page(data, "".join(pages), links), encoding="utf-8")
    return out


def _positive(value: str | None) -> int | None:
    if not value:
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"expected a positive whole number, got {value[:40]!r}")
    return int(value)


def _message(title: str, text: str) -> str:
    body = f'<main><h2>{escape(title)}</h2><p>{escape(text)}</p><p><a href="/">all threads</a></p></main>'
    return document(title, body)


class _Handler(BaseHTTPRequestHandler):
    server: InspectorServer
    server_version = "ctx-langgraph-inspector"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("inspector: " + format, *args)

    def _send(self, status: HTTPStatus, html: str, *, body: bool = True) -> None:
        data = html.encode("utf-8")
        self.send_response(status)
        headers = {"Content-Type": "text/html; charset=utf-8", "Content-Length": str(len(data))}
        for name, value in {**headers, **_HEADERS}.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _page(self) -> tuple[HTTPStatus, str]:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        server = self.server
        if url.path == "/":
            rows = list_threads(server.store, server.tenant)
            return HTTPStatus.OK, thread_list_page(rows, server.tenant, "/thread?id=")
        if url.path != "/thread" or "id" not in query:
            return HTTPStatus.NOT_FOUND, _message("Not found", "No such page.")
        try:
            html = thread_html(
                server.store,
                query["id"],
                tenant=server.tenant,
                branch=query.get("branch") or DEFAULT_BRANCH,
                memory=server.memory,
                page=_positive(query.get("page")),
                seq=_positive(query.get("seq")),
                lookup_tool=server.lookup_tool,
            )
        except ScopeError as exc:
            return HTTPStatus.NOT_FOUND, _message("No such thread", str(exc))
        except ValueError as exc:
            return HTTPStatus.BAD_REQUEST, _message("Bad request", str(exc))
        return HTTPStatus.OK, html

    def do_GET(self, body: bool = True) -> None:
        try:
            status, html = self._page()
        except ContextManagementError as exc:  # the database went away: say so, keep serving
            status, html = HTTPStatus.SERVICE_UNAVAILABLE, _message("Store unavailable", str(exc))
        self._send(status, html, body=body)

    def do_HEAD(self) -> None:
        self.do_GET(body=False)

    def _refuse(self) -> None:
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED, _message("Read only", "The inspector only reads.")
        )

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _refuse


class InspectorServer(ThreadingHTTPServer):
    """The inspector's HTTP server (use :func:`serve`); a context manager that shuts it down."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        store: HistoryStore,
        *,
        tenant: str,
        memory: LongTermMemory | None,
        lookup_tool: str,
    ) -> None:
        self.store, self.tenant, self.memory, self.lookup_tool = store, tenant, memory, lookup_tool
        self._thread: threading.Thread | None = None
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        """The address to open (``http://127.0.0.1:PORT/``)."""
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"

    def thread_url(self, thread_id: str, branch: str = DEFAULT_BRANCH) -> str:
        """The address of one thread's page."""
        return f"{self.url}thread?id={quote(thread_id, safe='')}&branch={quote(branch, safe='')}"

    def start(self) -> InspectorServer:
        """Serve in a background thread (for a notebook); returns the server."""
        self._thread = threading.Thread(
            target=self.serve_forever, name="ctx-inspector", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close the socket (the store stays open: it is the caller's)."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.server_close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    store: HistoryStore,
    *,
    tenant: str = DEFAULT_TENANT,
    host: str = "127.0.0.1",
    port: int = 0,
    memory: LongTermMemory | None = None,
    lookup_tool: str = "history_lookup",
    background: bool = False,
) -> InspectorServer:
    """The inspector's server over ``store``, showing ``tenant``'s threads only.

    Binds 127.0.0.1 by default (``port=0``: a free port; ``server.url`` says which); another
    ``host`` warns, since the pages show whole conversations to whoever reaches them. With
    ``background`` it serves from a thread at once (a notebook's cell returns); else call
    ``serve_forever()``. Use it as a context manager, or ``close()`` it.

    Examples:
        >>> import urllib.request
        >>> from langchain_core.messages import HumanMessage
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> _ = store.append("t1", [HumanMessage("hello", id="m1")])
        >>> with serve(store, background=True) as server:
        ...     page = urllib.request.urlopen(server.thread_url("t1")).read().decode()
        >>> 'id="seq-1"' in page
        True
    """
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        warnings.warn(
            f"the inspector is listening on {host}, beyond this machine: anyone who reaches "
            "it reads these conversations (it has no login)",
            UserWarning,
            stacklevel=2,
        )
    server = InspectorServer(
        (host, port), store, tenant=tenant, memory=memory, lookup_tool=lookup_tool
    )
    return server.start() if background else server
