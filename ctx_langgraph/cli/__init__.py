"""The ``ctx-langgraph`` command line: the offline demos, the strategy comparison, checkpoint
retention, thread export and compaction on request.

Exit status: 0 done; 1 the command ran but could not do what was asked (``export``: the
thread has no history; ``retention``: a thread was refused or the database failed midway;
``demo``: a request went over the window; ``compact``: nothing was committed); 2 a bad argument, file, dataset or database,
reported in one line on stderr, ``ctx-langgraph <command>: error: <message>``, before any
work starts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ctx_langgraph.cli.args import ArgumentParser, UsageError, one_line
from ctx_langgraph.cli.compact import add_compact_parser
from ctx_langgraph.cli.demo import add_demo_parser
from ctx_langgraph.cli.eval import add_eval_parser
from ctx_langgraph.cli.export import add_export_parser
from ctx_langgraph.cli.history_demo import add_history_demo_parser, run_demo
from ctx_langgraph.cli.inspector import add_inspect_parser
from ctx_langgraph.cli.retention import add_retention_parser
from ctx_langgraph.errors import ContextBudgetExceeded, DatasetError, DocumentError, ScopeError

__all__ = ["PROG", "build_parser", "main", "run_demo"]

PROG = "ctx-langgraph"
"""The command's name, as installed: ``ctx-langgraph``."""

_DESCRIPTION = """\
Context management for long-running LangGraph agents, from the command line: watch it work
on generated or recorded conversations, measure it against other strategies, and look after
the databases it leaves behind.

Every command runs offline unless told otherwise (a real chat model for eval, or a
PostgreSQL server named by a DSN). "ctx-langgraph COMMAND --help" describes each one."""

_EXAMPLES = """\
examples:
  ctx-langgraph demo --turns 100
  ctx-langgraph eval --format synthetic --sessions 3 --out eval-synthetic
  ctx-langgraph retention --sqlite checkpoints.sqlite --keep-last 10 --keep-within 7d --dry-run
  ctx-langgraph compact --sqlite history.sqlite --thread T --instructions "keep the API decisions"
  ctx-langgraph inspect --sqlite history.sqlite --thread T

exit status: 0 done; 1 ran but could not do it (export: no such thread; retention: a
thread refused; demo: a request over the window; compact: nothing committed); 2 bad arguments, files or databases
(one line on stderr)."""


def build_parser() -> argparse.ArgumentParser:
    """The ``ctx-langgraph`` parser with every subcommand; its errors raise ``UsageError``."""
    parser = ArgumentParser(prog=PROG, description=_DESCRIPTION, epilog=_EXAMPLES)
    commands = parser.add_subparsers(
        title="commands",
        dest="command",
        metavar="COMMAND",
        required=True,
        parser_class=ArgumentParser,
    )
    add_demo_parser(commands)
    add_eval_parser(commands)
    add_history_demo_parser(commands)
    add_retention_parser(commands)
    add_export_parser(commands)
    add_compact_parser(commands)
    add_inspect_parser(commands)
    return parser


def _fail(prog: str, message: object) -> int:
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (2 for a bad input, reported in one line).

    Errors about what the command line names (a value, a file, a dataset, a database) are
    printed as ``ctx-langgraph <command>: error: <message>``; anything else propagates.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return _fail(exc.prog or PROG, exc)
    prog = f"{PROG} {args.command}"
    try:
        return int(args.run(args))
    except (UsageError, DatasetError, DocumentError, ScopeError) as exc:
        return _fail(prog, exc)
    except ContextBudgetExceeded as exc:
        window = getattr(args, "window", None)
        if window is None:
            raise
        return _fail(prog, f"--window {window} is too small for this data: {exc}")
