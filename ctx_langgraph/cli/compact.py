"""``ctx-langgraph compact``: compact one thread's history now, with optional instructions."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from langchain_core.runnables import RunnableConfig

from ctx_langgraph.cli.args import UsageError, int_between, non_empty, one_line
from ctx_langgraph.cli.export import add_history_options, check_history_database, open_store
from ctx_langgraph.errors import (
    CompactRequestError,
    HistoryStoreError,
    ScopeError,
    SummaryModelError,
)
from ctx_langgraph.history import Scope
from ctx_langgraph.state import CompactionReport

__all__ = ["add_compact_parser"]

_DONE = ("committed", "reconciled")


def _compact(args: argparse.Namespace) -> int:
    from ctx_langgraph.compaction import compact_thread
    from ctx_langgraph.compaction.summarizers import default_summarizer
    from ctx_langgraph.config import ContextConfig

    try:
        scope = Scope(args.thread, tenant=args.tenant, branch=args.branch)
    except ScopeError as exc:
        raise UsageError(f"--thread {args.thread!r}: {exc}") from None
    config = ContextConfig(
        context_window=args.window,
        output_reserve=min(4_096, args.window // 4),
        keep_recent_tokens=min(args.keep_recent_tokens, args.window // 2),
        summary_max_tokens=args.summary_max_tokens,
    )
    try:
        summarizer = default_summarizer(None, summary_model=args.summary_model, config=config)
    except SummaryModelError as exc:
        raise UsageError(str(exc)) from None
    where = check_history_database(args)
    run: RunnableConfig = {
        "configurable": {
            "thread_id": scope.thread_id,
            "ctx_tenant": scope.tenant,
            "ctx_branch": scope.branch,
        }
    }
    with contextlib.ExitStack() as stack:
        store = open_store(stack, args, scope, where)
        try:
            report = compact_thread(
                store,
                run,
                args.instructions,
                requested_by="user",
                summarizer=summarizer,
                context_config=config,
            )
        except CompactRequestError as exc:
            raise UsageError(str(exc)) from None
        except HistoryStoreError as exc:
            print(f"ctx-langgraph compact: error: {one_line(exc)}", file=sys.stderr)
            return 1
    status = str(report.get("status"))
    if args.json:
        print(json.dumps(report, default=str))
    else:
        print(_line(report, scope))
    return 0 if status in _DONE else 1


def _line(report: CompactionReport, scope: Scope) -> str:
    status = report.get("status")
    if status in _DONE:
        requested = report.get("requested") or {}
        focus = requested.get("instructions")
        return (
            f"ctx-langgraph compact: thread {scope.thread_id!r}: {status}, summary generation "
            f"{report.get('generation')} covers messages 1-{report.get('covered_through_seq')} "
            f"({report.get('summary_tokens')} tokens, {report.get('summarizer', 'the active one')})"
            + (f", instructions: {focus!r}" if focus else "")
        )
    why = "; ".join(report.get("problems") or []) or report.get("error") or ""
    if status == "nothing_to_cover":
        why = why or "everything is within the kept tail (--keep-recent-tokens)"
    return f"ctx-langgraph compact: thread {scope.thread_id!r}: {status}" + (
        f": {one_line(why)}" if why else ""
    )


_COMPACT_DESCRIPTION = """\
Summarize the older part of one thread now, whatever its budget says, as Claude Code's
/compact does: the summary version is committed in the history store by compare-and-swap,
with the instructions recorded beside it, and the agent's graph applies it to its state at
its next turn. A failing summarizer keeps the previous summary. Offline by default (the
extractive summarizer); --summary-model names a chat model ("openai:gpt-4o-mini") to write it.

Exit status 1 when nothing was committed (nothing to cover, or the summarizer failed: the
reason is printed); 2 for a bad argument or a database that is not a history store."""

_COMPACT_EXAMPLES = """\
examples:
  ctx-langgraph compact --sqlite history.sqlite --thread T --instructions "keep the API decisions"
  ctx-langgraph compact --postgres "$DSN" --thread T --tenant acme --keep-recent-tokens 0 --json
"""


def add_compact_parser(commands: Any) -> None:
    compact = commands.add_parser(
        "compact",
        help="summarize one thread's older messages now, with optional instructions",
        description=_COMPACT_DESCRIPTION,
        epilog=_COMPACT_EXAMPLES,
    )
    add_history_options(compact)
    compact.add_argument("--branch", default="main", help="the thread's branch")
    compact.add_argument(
        "--instructions",
        type=non_empty,
        metavar="TEXT",
        help="what the summary must keep above all (default: none)",
    )
    compact.add_argument(
        "--keep-recent-tokens",
        type=int_between(0),
        default=2_000,
        metavar="N",
        help="tokens of the newest messages kept verbatim, not summarized",
    )
    compact.add_argument(
        "--window",
        type=int_between(1_024, what="tokens of context window"),
        default=128_000,
        metavar="TOKENS",
        help="the agent model's context window (sets the summary's token cap)",
    )
    compact.add_argument(
        "--summary-max-tokens",
        type=int_between(64),
        default=2_000,
        metavar="N",
        help="the summary's token cap",
    )
    compact.add_argument(
        "--summary-model",
        metavar="SPEC",
        help='a chat model that writes the summary ("openai:gpt-4o-mini"; default: offline)',
    )
    compact.add_argument("--json", action="store_true", help="print the report as JSON")
    compact.set_defaults(run=_compact)
