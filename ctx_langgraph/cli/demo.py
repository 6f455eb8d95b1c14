"""``ctx-langgraph demo``: the context-managed agent through a generated session, then the
strategies side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from ctx_langgraph.cli.args import (
    UsageError,
    compare,
    int_between,
    new_sqlite_file,
    output_dir,
    window,
)
from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.eval.synthetic import MAX_TURNS

__all__ = ["add_demo_parser", "run_demo_command"]


def _demo_db(db: Path) -> None:
    """Create the demo's history store now, so a file SQLite cannot use fails before the run."""
    from ctx_langgraph.history import SQLiteHistoryStore

    try:
        with SQLiteHistoryStore.from_path(db) as store:
            store.setup()
    except HistoryStoreError as exc:
        raise UsageError(f"--db {str(db)!r}: {exc}") from None


def run_demo_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Check the history file, then run the demo.

    Raises:
        UsageError: ``--db`` cannot hold a history store, or a checkpoints file of an earlier
            run lies beside it.
    """
    out = out or sys.stdout
    from ctx_langgraph.eval.demo import run_demo

    if args.db:
        checkpoints = Path(args.db).with_suffix(".checkpoints.sqlite")
        if checkpoints.exists() and checkpoints.stat().st_size > 0:
            raise UsageError(
                f"--db {str(args.db)!r}: its checkpoints file {str(checkpoints)!r} is left from "
                "an earlier run; pass a new path or delete that file"
            )
        _demo_db(Path(args.db))
    return run_demo(
        db=Path(args.db) if args.db else None,
        out_dir=Path(args.out),
        turns=args.turns,
        seed=args.seed,
        window=args.window,
        quiet=args.quiet,
        compare=() if args.no_compare else args.compare,
        out=out,
    )


_DEMO_DESCRIPTION = """\
The context-managed agent (create_context_agent with the history lookup tool) on a
generated tool-heavy support session, offline: a replayed model answers, so no API key
and no network are needed. What the context management does (a compaction starting and
what it covered, tool outputs capped on entry) is printed as it happens, unless --quiet;
the history goes to a SQLite file (--db, else a temporary one).

Then the same session is replayed through the strategies --compare names (ours with the
lookup tool, the two peers and the full history by default; every one (nine) with --compare all;
none with --no-compare); their summary table is printed and the report (metrics.json,
series.json, report.md, plots) is written into --out."""

_DEMO_EXAMPLES = """\
examples:
  ctx-langgraph demo
  ctx-langgraph demo --turns 100 --no-compare --db history.sqlite
  ctx-langgraph demo --window 8192 --compare all --out demo-report --quiet"""


def add_demo_parser(commands: Any) -> None:
    from ctx_langgraph.eval.demo import DEFAULT_TURNS

    parser = commands.add_parser(
        "demo",
        help="the context-managed agent through a generated tool-heavy session, offline, "
        "then the strategies side by side on the same session",
        description=_DEMO_DESCRIPTION,
        epilog=_DEMO_EXAMPLES,
    )
    parser.add_argument(
        "--turns",
        type=int_between(1, MAX_TURNS),
        default=DEFAULT_TURNS,
        help="turns of the session",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated session")
    parser.add_argument(
        "--window", type=window, default=4096, metavar="TOKENS", help="context window in tokens"
    )
    parser.add_argument(
        "--db",
        type=new_sqlite_file,
        metavar="PATH",
        help="a new SQLite history file to keep (default: a temporary one)",
    )
    parser.add_argument(
        "--out", type=output_dir, default="ctx-demo-out", metavar="DIR", help="report directory"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--compare",
        type=compare,
        default="peers",
        metavar="NAMES",
        help="the strategies to compare: peers, all, none, or comma-separated names",
    )
    which.add_argument(
        "--no-compare", action="store_true", help="skip the comparison (--compare none)"
    )
    parser.add_argument("--quiet", action="store_true", help="no per-turn events, no progress")
    parser.set_defaults(run=run_demo_command)
