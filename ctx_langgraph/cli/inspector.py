"""``ctx-langgraph inspect``: a thread's history, summaries and model calls in the browser."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctx_langgraph.cli.args import (
    UsageError,
    check_postgres,
    int_between,
    output_file,
    sqlite_tables,
)
from ctx_langgraph.cli.export import add_memory_options, open_memory_store
from ctx_langgraph.errors import HistoryStoreError, ScopeError

if TYPE_CHECKING:
    from ctx_langgraph.history import HistoryStore
    from ctx_langgraph.memory import LongTermMemory

__all__ = ["add_inspect_parser"]


def _readonly_dsn(dsn: str) -> str:
    """The DSN with every transaction read-only: the inspector's connections cannot write."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    options = conninfo_to_dict(dsn).get("options") or ""
    return make_conninfo(dsn, options=f"{options} -c default_transaction_read_only=on".strip())


def _open_history(stack: contextlib.ExitStack[Any], args: argparse.Namespace) -> HistoryStore:
    from ctx_langgraph.inspect import open_sqlite_readonly
    from ctx_langgraph.inspect.reads import check_schema

    if args.sqlite:
        tables = sqlite_tables(args.sqlite, "--sqlite")
        where = f"--sqlite {args.sqlite!r}"
        if "ctx_migrations" not in tables:
            raise UsageError(
                f"{where} is not a ctx-langgraph history store (no ctx_migrations table): point "
                "it at the file your agent's history goes to"
            )
        store: HistoryStore = stack.enter_context(open_sqlite_readonly(args.sqlite))
    else:
        from ctx_langgraph.history import PostgresHistoryStore

        check_postgres(
            args.pg,
            "--pg",
            table="ctx_migrations",
            hint=": point it at the database your agent's history goes to",
        )
        where = "--pg"
        store = stack.enter_context(PostgresHistoryStore.from_conn_string(_readonly_dsn(args.pg)))
    try:
        check_schema(store)
    except HistoryStoreError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return store


def _check_thread(store: HistoryStore, args: argparse.Namespace) -> None:
    from ctx_langgraph.history import Scope

    try:
        scope = Scope(args.thread, tenant=args.tenant, branch=args.branch)
    except ScopeError as exc:
        raise UsageError(f"--thread {args.thread!r}: {exc}") from None
    if store.branch_info(scope) is None:
        raise UsageError(
            f"--thread {args.thread!r}: no history for this thread (tenant {args.tenant!r}, "
            f"branch {args.branch!r}) in this store"
        )


def _stop(*_: object) -> None:
    raise KeyboardInterrupt


def _serve(store: HistoryStore, memory: LongTermMemory | None, args: argparse.Namespace) -> int:
    from ctx_langgraph.inspect import serve

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            server = serve(
                store,
                tenant=args.tenant,
                host=args.host,
                port=args.port,
                memory=memory,
                lookup_tool=args.lookup_tool,
            )
        except OSError as exc:
            raise UsageError(
                f"--host {args.host} --port {args.port}: cannot listen ({exc.strerror})"
            ) from None
    for warning in caught:
        print(f"ctx-langgraph inspect: warning: {warning.message}", file=sys.stderr)
    url = server.thread_url(args.thread, args.branch) if args.thread else server.url
    print(f"ctx-langgraph inspect: serving {url} (read only; Ctrl+C stops)", flush=True)
    signal.signal(signal.SIGTERM, _stop)  # a service manager's stop ends it like Ctrl+C
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from ctx_langgraph.inspect import export_html

    if args.html and not args.thread:
        raise UsageError("--html needs --thread: the file holds one thread's page")
    with contextlib.ExitStack() as stack:
        store = _open_history(stack, args)
        memory = open_memory_store(stack, args)
        if args.thread:
            _check_thread(store, args)
        if not args.html:
            return _serve(store, memory, args)
        try:
            out = export_html(
                store,
                args.thread,
                args.html,
                tenant=args.tenant,
                branch=args.branch,
                memory=memory,
                max_events=args.max_events,
                lookup_tool=args.lookup_tool,
            )
        except OSError as exc:
            raise UsageError(f"--html {str(args.html)!r}: cannot write ({exc.strerror})") from None
    size = Path(out).stat().st_size
    print(f"ctx-langgraph inspect: thread {args.thread!r} -> {out} ({size:,} bytes, one file)")
    return 0


_DESCRIPTION = """\
What the context management did to a conversation, in the browser: the raw history as a
paged timeline (tool calls paired with their results; hidden, deleted and revised events
marked), a coverage bar of every summary generation, the segments and the raw tail, each
summary version (text, key facts linked to their events, artifact trail, what changed),
each model call's request split into the parts the budget counts against the window, the
history lookups the model made and, with --memory-sqlite/--memory-postgres, the thread's
long-term memories.

Offline: serves on 127.0.0.1 (a free port unless --port) until Ctrl+C; --host another address
warns, since the pages have no login. With --html the page of --thread is written to one
self-contained file instead (no server, no network), to attach to a bug report. Read
only: the database is opened read-only and the server answers GET alone."""

_EXAMPLES = """\
examples:
  ctx-langgraph inspect --sqlite history.sqlite
  ctx-langgraph inspect --sqlite history.sqlite --thread T --port 8765
  ctx-langgraph inspect --sqlite history.sqlite --thread T --html thread.html
  ctx-langgraph inspect --pg "$DSN" --tenant acme --thread T --memory-postgres "$DSN"
"""


def add_inspect_parser(commands: Any) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="one thread's history, summaries, model calls and memories in the browser (read only)",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
    )
    history = inspect.add_mutually_exclusive_group(required=True)
    history.add_argument("--sqlite", metavar="PATH", help="the SQLite history store file")
    history.add_argument(
        "--pg", "--postgres", dest="pg", metavar="DSN", help="the PostgreSQL history store"
    )
    inspect.add_argument("--thread", help="open this thread (default: the list of threads)")
    inspect.add_argument("--tenant", default="default", help="the tenant whose threads to show")
    inspect.add_argument("--branch", default="main", help="the thread's branch")
    add_memory_options(inspect, "to show too")
    inspect.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (any but loopback warns)",
    )
    inspect.add_argument(
        "--port",
        type=int_between(0, 65535),
        default=0,
        help="the port; 0 picks a free one, printed",
    )
    inspect.add_argument(
        "--html",
        type=output_file,
        metavar="OUT.html",
        help="write --thread's page to this one file instead of serving (default: serve)",
    )
    inspect.add_argument(
        "--max-events",
        type=int_between(200, 1_000_000),
        default=10_000,
        help="the newest events the --html file holds",
    )
    inspect.add_argument(
        "--lookup-tool",
        default="history_lookup",
        help="the history lookup tool's name",
    )
    inspect.set_defaults(run=_inspect)
