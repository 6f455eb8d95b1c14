"""``ctx-langgraph export``: everything remembered of one thread, as JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctx_langgraph.cli.args import UsageError, check_postgres, one_line, output_file, sqlite_tables
from ctx_langgraph.errors import HistoryStoreError, MemoryStoreError, ScopeError
from ctx_langgraph.history import HistoryStore, Scope, SQLiteHistoryStore

if TYPE_CHECKING:
    from ctx_langgraph.memory import LongTermMemory

__all__ = [
    "add_export_parser",
    "add_history_options",
    "add_memory_options",
    "check_history_database",
    "check_memory_databases",
    "open_memory_store",
    "open_store",
]


def _export(args: argparse.Namespace) -> int:
    """Everything remembered of one thread as JSON: its history, summaries, ledger, memories."""
    from ctx_langgraph.threads import export_thread

    try:
        scope = Scope(args.thread, tenant=args.tenant)
    except ScopeError as exc:
        raise UsageError(f"--thread {args.thread!r} --tenant {args.tenant!r}: {exc}") from None
    where = check_history_database(args)
    check_memory_databases(args)  # (before opening any)
    with contextlib.ExitStack() as stack:
        store = open_store(stack, args, scope, where)
        memory = open_memory_store(stack, args)
        try:
            document = export_thread(store, scope, ledger=not args.no_ledger, memory=memory)
        except ScopeError as exc:  # the thread has no history: nothing to export
            print(f"ctx-langgraph export: error: {one_line(exc)}", file=sys.stderr)
            return 1
        except (HistoryStoreError, MemoryStoreError) as exc:
            print(f"ctx-langgraph export: error: {one_line(exc)}", file=sys.stderr)
            return 1
    _write_document(document, args.out)
    return 0


def check_history_database(args: argparse.Namespace) -> str:
    """Check the history store's database (``--sqlite`` or ``--postgres``) is there, before
    opening it; names the option."""
    if args.sqlite:
        sqlite_tables(args.sqlite, "--sqlite")
        return f"--sqlite {args.sqlite!r}"
    check_postgres(args.postgres, "--postgres")
    return "--postgres"


def check_memory_databases(args: argparse.Namespace) -> None:
    """Check the memory database ``--memory-sqlite``/``--memory-postgres`` names is there."""
    if args.memory_sqlite and "store" not in sqlite_tables(args.memory_sqlite, "--memory-sqlite"):
        raise UsageError(
            f"--memory-sqlite {args.memory_sqlite!r} holds no LangGraph store (no 'store' "
            "table): point it at the file your SqliteStore of memories writes"
        )
    if args.memory_postgres:
        check_postgres(
            args.memory_postgres,
            "--memory-postgres",
            table="store",
            hint=": point it at the database your PostgresStore of memories writes",
        )


def open_store(
    stack: contextlib.ExitStack[Any], args: argparse.Namespace, scope: Scope, where: str
) -> HistoryStore:
    """The history store ``--sqlite`` or ``--postgres`` names, open until ``stack`` closes."""
    from ctx_langgraph.history import PostgresHistoryStore

    try:
        store: HistoryStore = stack.enter_context(
            SQLiteHistoryStore.from_path(args.sqlite)
            if args.sqlite
            else PostgresHistoryStore.from_conn_string(args.postgres)
        )
        store.branch_info(scope)  # reads the schema version first
    except HistoryStoreError as exc:
        raise UsageError(
            f"{where}: not a history store this version reads ({exc}); point it at the "
            "store your agent's history goes to"
        ) from None
    return store


def open_memory_store(
    stack: contextlib.ExitStack[Any], args: argparse.Namespace
) -> LongTermMemory | None:
    """The long-term memory ``--memory-sqlite``/``--memory-postgres`` names (checked first), if
    any, open until ``stack`` closes."""
    check_memory_databases(args)
    from ctx_langgraph.memory import LongTermMemory

    if not (args.memory_sqlite or args.memory_postgres):
        return None
    if args.memory_sqlite:
        from langgraph.store.sqlite import SqliteStore

        lts: Any = stack.enter_context(SqliteStore.from_conn_string(args.memory_sqlite))
    else:
        from langgraph.store.postgres import PostgresStore

        lts = stack.enter_context(PostgresStore.from_conn_string(args.memory_postgres))
    return LongTermMemory(lts, extractor=None)


def _write_document(document: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if not out:
        print(text)
        return
    try:
        Path(out).write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out {str(out)!r}: cannot write ({exc.strerror})") from None
    print(
        f"ctx-langgraph export: {len(document['events'])} events, "
        f"{len(document['summaries'])} summary versions, "
        f"{len(document.get('memories') or [])} memories -> {out}"
    )


_EXPORT_DESCRIPTION = """\
Everything the history store remembers of one thread, as one JSON document: its messages
on every branch (hidden ones marked, each with its earlier revisions; deleted ones are
gone), the edit log, every version of its summary, its usage ledger (unless --no-ledger)
and, with --memory-sqlite or --memory-postgres, the long-term memories taken from it.
Offline and read only; writes the JSON to --out, else to stdout (import_thread reads
it back).

Exit status 1 when the store has no history for the thread (there is nothing to export);
2 when the store cannot be opened or is not a history store."""

_EXPORT_EXAMPLES = """\
examples:
  ctx-langgraph export --sqlite history.sqlite --thread T --out thread.json
  ctx-langgraph export --postgres "$DSN" --thread T --tenant acme --memory-postgres "$DSN"
"""


def add_history_options(parser: argparse.ArgumentParser) -> None:
    """``--sqlite``/``--postgres`` (the history store), ``--thread`` and ``--tenant``."""
    history = parser.add_mutually_exclusive_group(required=True)
    history.add_argument("--sqlite", metavar="PATH", help="the SQLite history store file")
    history.add_argument("--postgres", metavar="DSN", help="the PostgreSQL history store")
    parser.add_argument("--thread", required=True, help="the thread id")
    parser.add_argument("--tenant", default="default", help="the thread's tenant")


def add_memory_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--memory-sqlite``/``--memory-postgres``: the LangGraph store of long-term memories
    (``what``: ``"to export too"``), none by default."""
    memories = parser.add_mutually_exclusive_group()
    memories.add_argument(
        "--memory-sqlite",
        metavar="PATH",
        help=f"a SqliteStore of long-term memories {what} (default: no memories)",
    )
    memories.add_argument(
        "--memory-postgres",
        metavar="DSN",
        help=f"a PostgresStore of long-term memories {what} (default: no memories)",
    )


def add_export_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="one thread's raw history, summary versions, usage ledger and memories as JSON "
        "(read only)",
        description=_EXPORT_DESCRIPTION,
        epilog=_EXPORT_EXAMPLES,
    )
    add_history_options(export)
    add_memory_options(export, "to export too")
    export.add_argument("--no-ledger", action="store_true", help="leave the usage ledger out")
    export.add_argument(
        "--out",
        type=output_file,
        metavar="FILE",
        help="write the JSON here (default: stdout)",
    )
    export.set_defaults(run=_export)
