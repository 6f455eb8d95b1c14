"""The ``ctx-langgraph`` command line: the offline demos, the strategy comparison, checkpoint
retention and thread export.

Exit status: 0 done; 1 the command ran but could not do what was asked (``export``: the
thread has no history; ``retention``: a thread was refused or the database failed midway;
``demo``: a request went over the window); 2 a bad argument, file, dataset or database,
reported in one line on stderr, ``ctx-langgraph <command>: error: <message>``, before any
work starts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ctx_langgraph._cli_args import (
    ArgumentParser,
    UsageError,
    age,
    check_postgres,
    existing_file,
    new_sqlite_file,
    non_empty,
    non_negative_int,
    one_line,
    output_file,
    positive_int,
    sqlite_tables,
)
from ctx_langgraph.core.table import format_table
from ctx_langgraph.core.text import query_terms
from ctx_langgraph.datasets import (
    Conversation,
    QAItem,
    batches,
    load_locomo,
    synthetic_conversation,
)
from ctx_langgraph.errors import (
    ContextBudgetExceeded,
    DatasetError,
    DocumentError,
    HistoryStoreError,
    MemoryStoreError,
    ScopeError,
)
from ctx_langgraph.eval.cli import add_demo_parser, add_eval_parser
from ctx_langgraph.history import HistoryStore, Scope, SQLiteHistoryStore
from ctx_langgraph.lookup import STOPWORDS

__all__ = ["build_parser", "main"]

PROG = "ctx-langgraph"
MAX_DEMO_MESSAGES = 100_000
"""The most messages ``history-demo`` generates (``--sessions`` x ``--turns``)."""


def _search_terms(item: QAItem, names: frozenset[str]) -> list[str]:
    if item.query:
        return query_terms(item.query)
    # speaker names are in nearly every turn, so they select nothing
    return [term for term in query_terms(item.question) if term not in STOPWORDS | names][:4]


def _find_evidence(
    store: HistoryStore, scope: Scope, item: QAItem, names: frozenset[str]
) -> tuple[str, int, int | None, float]:
    """Search with the question's keywords, dropping the last one until something matches."""
    terms = _search_terms(item, names)
    started = time.perf_counter()
    while terms:
        page = store.search(scope, " ".join(terms), limit=50)
        if page.hits:
            break
        terms = terms[:-1]
    else:
        return "", 0, None, (time.perf_counter() - started) * 1000
    elapsed = (time.perf_counter() - started) * 1000
    ranks = [rank for rank, hit in enumerate(page.hits, 1) if hit.event_id in item.evidence]
    return " ".join(terms), len(page.hits), (ranks[0] if ranks else None), elapsed


def run_demo(
    store: HistoryStore,
    conversation: Conversation,
    *,
    questions: int = 8,
    out: TextIO | None = None,
) -> None:
    """Replay a conversation into the store and show what the store can do with it."""

    def write(text: str) -> None:
        print(text, file=out or sys.stdout)

    scope = Scope(conversation.name)
    write(
        f"conversation {conversation.name}: {len(conversation.messages):,} messages in "
        f"{len(conversation.sessions)} sessions, {conversation.chars:,} characters\n"
    )

    started = time.perf_counter()
    for messages, created in batches(conversation):
        store.append(scope, messages, created_at=created)
    elapsed = time.perf_counter() - started
    replay = [
        r
        for messages, created in batches(conversation)
        for r in store.append(scope, messages, created_at=created)
    ]
    head = store.branch_info(scope)
    assert head is not None
    write(
        format_table(
            ["step", "events", "seconds", "events/s"],
            [
                [
                    "append, one batch per session",
                    len(conversation.messages),
                    round(elapsed, 3),
                    round(len(conversation.messages) / elapsed),
                ],
                [
                    "append the same again (idempotent)",
                    sum(r.status == "duplicate" for r in replay),
                    "-",
                    "-",
                ],
                ["branch head seq", head.head_seq, "-", "-"],
            ],
        )
    )

    names = frozenset(str(m.name).lower() for m in conversation.messages if m.name)
    rows = []
    found_terms: list[str] = []
    for item in conversation.questions[:questions]:
        terms, hits, rank, ms = _find_evidence(store, scope, item, names)
        found_terms.append(terms)
        seqs = [
            event.seq for event in (store.get_event(scope, eid) for eid in item.evidence) if event
        ]
        rows.append(
            [
                item.question[:48],
                terms or "(no match)",
                hits,
                ",".join(map(str, seqs)),
                rank if rank is not None else "-",
                round(ms, 2),
            ]
        )
    write("\nexact evidence by keyword search (rank of the evidence message among the hits):")
    write(format_table(["question", "search", "hits", "evidence seq", "rank", "ms"], rows))

    middle = head.head_seq // 2
    snap = store.snapshot(scope, middle)
    candidate = store.create_candidate(
        snap,
        summary_text=f"{len(snap.events)} messages from {snap.events[0].created_at:%d %b %Y} "
        f"to {snap.events[-1].created_at:%d %b %Y} (bookkeeping only: summarizers arrive with ctx_compact)",
        first_kept_event_id=conversation.messages[middle].id,
    )
    active = store.commit_candidate(candidate)
    branch = Scope(conversation.name, branch="what-if")
    store.create_branch(branch, "main", middle)
    own = store.append(
        branch,
        [
            conversation.messages[0].model_copy(
                update={"id": "what-if-1", "content": "a different turn"}
            )
        ],
    )
    branch_events = store.read_events(branch)
    inherited = store.get_active(branch)
    write("\ncoverage cursor and branches:")
    write(
        format_table(
            ["what", "value"],
            [
                ["active summary generation", active.generation],
                ["covered seqs", f"{active.first_seq}..{active.covered_through_seq}"],
                ["first kept message", active.first_kept_event_id or "-"],
                [f"branch 'what-if' forked at seq {middle}: events it reads", len(branch_events)],
                [
                    "  of them inherited (shared, not copied)",
                    sum(e.branch == "main" for e in branch_events),
                ],
                ["  its own new event's seq", own[0].seq],
                [
                    "  its active summary (inherited)",
                    f"generation {inherited.generation if inherited else '-'}",
                ],
            ],
        )
    )

    if found_terms and found_terms[0]:
        target, terms = conversation.questions[0], found_terms[0]
        before = len(store.search(scope, terms, limit=50).hits)
        store.hide_events(scope, list(target.evidence))
        after = len(store.search(scope, terms, limit=50).hits)
        write(
            f"\nhiding the evidence of {target.question!r}: search {terms!r} hits {before} -> {after}"
        )


def _history_demo(args: argparse.Namespace) -> int:
    if args.locomo:
        conversation = load_locomo(args.locomo)
        if len(conversation.messages) < 2:
            raise UsageError(
                f"--locomo {str(args.locomo)!r} has {len(conversation.messages)} turn; the demo "
                "forks and summarizes at the middle of the conversation, so it needs at least 2"
            )
    elif args.sessions * args.turns > MAX_DEMO_MESSAGES:
        raise UsageError(
            f"--sessions {args.sessions} --turns {args.turns}: "
            f"{args.sessions * args.turns:,} messages; the demo takes at most "
            f"{MAX_DEMO_MESSAGES:,} (it keeps the whole conversation in memory)"
        )
    else:
        try:
            conversation = synthetic_conversation(
                args.seed, sessions=args.sessions, turns_per_session=args.turns
            )
        except ValueError as exc:
            raise UsageError(f"--sessions {args.sessions} --turns {args.turns}: {exc}") from None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.db) if args.db else Path(tmp) / "demo.sqlite"
        try:
            store = SQLiteHistoryStore.from_path(path)
        except HistoryStoreError as exc:
            raise UsageError(f"--db {str(path)!r}: {exc}") from None
        with store:
            try:
                store.setup()
            except HistoryStoreError as exc:
                raise UsageError(f"--db {str(path)!r}: {exc}") from None
            print(f"ctx-langgraph history-demo: history store on SQLite at {path} (offline)")
            run_demo(store, conversation, questions=args.questions)
    return 0


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


def _export(args: argparse.Namespace) -> int:
    """Everything remembered of one thread as JSON: its history, summaries, ledger, memories."""
    import contextlib

    from ctx_langgraph.history import PostgresHistoryStore
    from ctx_langgraph.memory import LongTermMemory

    try:
        scope = Scope(args.thread, tenant=args.tenant)
    except ScopeError as exc:
        raise UsageError(f"--thread {args.thread!r} --tenant {args.tenant!r}: {exc}") from None
    if args.sqlite:
        sqlite_tables(args.sqlite, "--sqlite")
        where = f"--sqlite {args.sqlite!r}"
    else:
        check_postgres(args.postgres, "--postgres")
        where = "--postgres"
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
    with contextlib.ExitStack() as stack:
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
        memory = None
        if args.memory_sqlite or args.memory_postgres:
            if args.memory_sqlite:
                from langgraph.store.sqlite import SqliteStore

                lts: Any = stack.enter_context(SqliteStore.from_conn_string(args.memory_sqlite))
            else:
                from langgraph.store.postgres import PostgresStore

                lts = stack.enter_context(PostgresStore.from_conn_string(args.memory_postgres))
            memory = LongTermMemory(lts, extractor=None)
        try:
            document = store.export_thread(scope, ledger=not args.no_ledger, memory=memory)
        except ScopeError as exc:  # the thread has no history: nothing to export
            print(f"ctx-langgraph export: error: {one_line(exc)}", file=sys.stderr)
            return 1
        except (HistoryStoreError, MemoryStoreError) as exc:
            print(f"ctx-langgraph export: error: {one_line(exc)}", file=sys.stderr)
            return 1
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if args.out:
        try:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--out {str(args.out)!r}: cannot write ({exc.strerror})") from None
        print(
            f"ctx-langgraph export: {len(document['events'])} events, "
            f"{len(document['summaries'])} summary versions, "
            f"{len(document.get('memories') or [])} memories -> {args.out}"
        )
    else:
        print(text)
    return 0


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

exit status: 0 done; 1 ran but could not do it (export: no such thread; retention: a
thread refused; demo: a request over the window); 2 bad arguments, files or databases
(one line on stderr)."""

_HISTORY_DEMO_DESCRIPTION = """\
Replay a long two-person conversation (a generated one with planted facts, or one LoCoMo
file with --locomo) into the embedded SQLite history store, offline, and show what the
store does with it: appending a session at a time (and again, idempotently), finding each
question's evidence by keyword search, a compaction checkpoint's coverage cursor, a branch
that forks at the middle and shares what came before, and hiding messages from search.

Prints tables only; the history goes to --db (a new file), else to a temporary file
deleted at the end."""

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
    _add_history_demo_parser(commands)
    _add_retention_parser(commands)
    _add_export_parser(commands)
    return parser


def _add_history_demo_parser(commands: Any) -> None:
    demo = commands.add_parser(
        "history-demo",
        help="replay a long conversation into the embedded SQLite history store: append, "
        "search, summaries, branches, hiding (offline)",
        description=_HISTORY_DEMO_DESCRIPTION,
    )
    demo.add_argument(
        "--db",
        type=new_sqlite_file,
        metavar="PATH",
        help="a new SQLite file to keep the history in (default: a temporary file)",
    )
    demo.add_argument(
        "--locomo",
        type=existing_file,
        metavar="FILE",
        help="a LoCoMo conversation JSON file to replay (default: a generated conversation)",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the generated conversation")
    demo.add_argument(
        "--sessions", type=positive_int, default=19, help="sessions of the generated conversation"
    )
    demo.add_argument("--turns", type=positive_int, default=32, help="turns per generated session")
    demo.add_argument("--questions", type=non_negative_int, default=8, help="questions to look up")
    demo.set_defaults(run=_history_demo)


def _add_retention_parser(commands: Any) -> None:
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


def _add_export_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="one thread's raw history, summary versions, usage ledger and memories as JSON "
        "(read only)",
        description=_EXPORT_DESCRIPTION,
        epilog=_EXPORT_EXAMPLES,
    )
    history = export.add_mutually_exclusive_group(required=True)
    history.add_argument("--sqlite", metavar="PATH", help="the SQLite history store file")
    history.add_argument("--postgres", metavar="DSN", help="the PostgreSQL history store")
    export.add_argument("--thread", required=True, help="the thread id")
    export.add_argument("--tenant", default="default", help="the thread's tenant")
    memories = export.add_mutually_exclusive_group()
    memories.add_argument(
        "--memory-sqlite",
        metavar="PATH",
        help="a SqliteStore of long-term memories to export too (default: no memories)",
    )
    memories.add_argument(
        "--memory-postgres",
        metavar="DSN",
        help="a PostgresStore of long-term memories to export too (default: no memories)",
    )
    export.add_argument("--no-ledger", action="store_true", help="leave the usage ledger out")
    export.add_argument(
        "--out",
        type=output_file,
        metavar="FILE",
        help="write the JSON here (default: stdout)",
    )
    export.set_defaults(run=_export)


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
