"""``ctx-langgraph retention``: prune old LangGraph checkpoints by policy."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ctx_langgraph.cli.args import (
    UsageError,
    age,
    check_postgres,
    non_empty,
    one_line,
    positive_int,
    sqlite_tables,
)

__all__ = ["add_retention_parser"]


def _database_errors() -> tuple[type[Exception], ...]:
    """The drivers' own errors: a database failing midway, after the checks passed."""
    import sqlite3

    errors: list[type[Exception]] = [sqlite3.Error]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the postgres extra is not installed
        pass
    else:
        errors.append(psycopg.Error)
    return tuple(errors)


def _retention(args: argparse.Namespace) -> int:
    from ctx_langgraph.errors import RetentionError
    from ctx_langgraph.retention import CheckpointRetention, RetentionPolicy

    policy = RetentionPolicy(keep_last=args.keep_last, keep_within=args.keep_within)
    saver_context: Any
    if args.sqlite:
        from langgraph.checkpoint.sqlite import SqliteSaver

        if "checkpoints" not in sqlite_tables(args.sqlite, "--sqlite"):
            raise UsageError(
                f"--sqlite {args.sqlite!r} holds no LangGraph checkpoints (no 'checkpoints' "
                "table): point it at the file your SqliteSaver writes"
            )
        saver_context = SqliteSaver.from_conn_string(args.sqlite)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        check_postgres(
            args.postgres,
            "--postgres",
            table="checkpoints",
            hint=": point it at the database your PostgresSaver writes",
        )
        saver_context = PostgresSaver.from_conn_string(args.postgres)
    try:
        with saver_context as saver:
            report = CheckpointRetention(saver, policy).prune(args.thread, dry_run=args.dry_run)
    except RetentionError as exc:
        print(f"ctx-langgraph retention: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except _database_errors() as exc:
        print(
            f"ctx-langgraph retention: error: the database failed: {type(exc).__name__}: "
            f"{one_line(exc)}",
            file=sys.stderr,
        )
        return 1
    print(json.dumps(report.to_json()) if args.json else report.table())
    return 0


_RETENTION_DESCRIPTION = """\
Delete old LangGraph checkpoints (and their pending writes) from a SqliteSaver file or a
PostgresSaver database, in place: per thread and checkpoint namespace, keep the newest
--keep-last checkpoints and, with --keep-within, every one younger than that age; the
latest always stays. Only the checkpointer's tables are touched, never the history store.
Use --dry-run to see the report without deleting. Offline: talks to that database only.

Exit status 1 when a thread was refused (its values are rebuilt from older checkpoints,
so nothing of it was deleted) or the database failed midway."""

_RETENTION_EXAMPLES = """\
examples:
  ctx-langgraph retention --sqlite checkpoints.sqlite --keep-last 10 --keep-within 7d --dry-run
  ctx-langgraph retention --postgres "$DSN" --thread customer-7 --keep-last 10 --json"""


def add_retention_parser(commands: Any) -> None:
    retention = commands.add_parser(
        "retention",
        help="prune old LangGraph checkpoints by policy; the history store is never touched",
        description=_RETENTION_DESCRIPTION,
        epilog=_RETENTION_EXAMPLES,
    )
    where = retention.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", metavar="PATH", help="a SqliteSaver database file")
    where.add_argument("--postgres", metavar="DSN", help="a PostgresSaver connection string")
    retention.add_argument(
        "--thread", type=non_empty, help="prune this thread only (default: every thread)"
    )
    retention.add_argument(
        "--keep-last",
        type=positive_int,
        required=True,
        metavar="K",
        help="newest checkpoints to keep per thread (at least 1)",
    )
    retention.add_argument(
        "--keep-within",
        type=age,
        metavar="AGE",
        help="also keep checkpoints younger than this: 30m, 12h, 7d, 2w (default: none)",
    )
    retention.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    retention.add_argument("--json", action="store_true", help="print the report as JSON")
    retention.set_defaults(run=_retention)
