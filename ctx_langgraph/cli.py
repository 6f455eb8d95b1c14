"""The ``ctx-langgraph`` command line."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ctx_langgraph._table import format_table
from ctx_langgraph.datasets import (
    Conversation,
    QAItem,
    batches,
    load_locomo,
    synthetic_conversation,
)
from ctx_langgraph.eval.cli import add_demo_parser, add_eval_parser
from ctx_langgraph.history import HistoryStore, Scope, SQLiteHistoryStore
from ctx_langgraph.history._sql import query_terms
from ctx_langgraph.lookup import STOPWORDS

__all__ = ["main"]


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

    if conversation.questions and found_terms[0]:
        target, terms = conversation.questions[0], found_terms[0]
        before = len(store.search(scope, terms, limit=50).hits)
        store.hide_events(scope, list(target.evidence))
        after = len(store.search(scope, terms, limit=50).hits)
        write(
            f"\nhiding the evidence of {target.question!r}: search {terms!r} hits {before} -> {after}"
        )


def _demo(args: argparse.Namespace) -> int:
    conversation = (
        load_locomo(args.locomo)
        if args.locomo
        else synthetic_conversation(args.seed, sessions=args.sessions, turns_per_session=args.turns)
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.db) if args.db else Path(tmp) / "demo.sqlite"
        print(f"ctx-langgraph demo: history store on SQLite at {path} (offline)")
        with SQLiteHistoryStore.from_path(path) as store:
            store.setup()
            run_demo(store, conversation, questions=args.questions)
    return 0


def _retention(args: argparse.Namespace) -> int:
    from ctx_langgraph.errors import RetentionError
    from ctx_langgraph.retention import CheckpointRetention, RetentionPolicy, parse_age

    try:
        policy = RetentionPolicy(
            keep_last=args.keep_last,
            keep_within=parse_age(args.keep_within) if args.keep_within else None,
        )
    except ValueError as exc:
        print(f"ctx-langgraph retention: {exc}", file=sys.stderr)
        return 2
    saver_context: Any
    if args.sqlite:
        from langgraph.checkpoint.sqlite import SqliteSaver

        if not Path(args.sqlite).exists():
            print(f"ctx-langgraph retention: no such file: {args.sqlite}", file=sys.stderr)
            return 2
        saver_context = SqliteSaver.from_conn_string(args.sqlite)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        saver_context = PostgresSaver.from_conn_string(args.postgres)
    try:
        with saver_context as saver:
            report = CheckpointRetention(saver, policy).prune(args.thread, dry_run=args.dry_run)
    except (RetentionError, OSError) as exc:
        print(f"ctx-langgraph retention: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a database error: say which, without a traceback
        print(f"ctx-langgraph retention: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report.to_json()) if args.json else report.table())
    return 0


def _export(args: argparse.Namespace) -> int:
    """Everything remembered of one thread as JSON: its history, summaries, ledger, memories."""
    import contextlib

    from ctx_langgraph.errors import ContextManagementError
    from ctx_langgraph.history import PostgresHistoryStore
    from ctx_langgraph.memory import LongTermMemory

    for path in (args.sqlite, args.memory_sqlite):
        if path and not Path(path).exists():
            print(f"ctx-langgraph export: no such file: {path}", file=sys.stderr)
            return 2
    try:
        with contextlib.ExitStack() as stack:
            store: HistoryStore = stack.enter_context(
                SQLiteHistoryStore.from_path(args.sqlite)
                if args.sqlite
                else PostgresHistoryStore.from_conn_string(args.postgres)
            )
            memory = None
            if args.memory_sqlite or args.memory_postgres:
                if args.memory_sqlite:
                    from langgraph.store.sqlite import SqliteStore

                    lts: Any = stack.enter_context(SqliteStore.from_conn_string(args.memory_sqlite))
                else:
                    from langgraph.store.postgres import PostgresStore

                    lts = stack.enter_context(PostgresStore.from_conn_string(args.memory_postgres))
                memory = LongTermMemory(lts, extractor=None)
            scope = Scope(args.thread, tenant=args.tenant)
            document = store.export_thread(scope, ledger=not args.no_ledger, memory=memory)
    except ContextManagementError as exc:
        print(f"ctx-langgraph export: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a database error: say which, without a traceback
        print(f"ctx-langgraph export: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        print(
            f"ctx-langgraph export: {len(document['events'])} events, "
            f"{len(document['summaries'])} summary versions, "
            f"{len(document.get('memories') or [])} memories -> {args.out}"
        )
    else:
        print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctx-langgraph", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    add_demo_parser(commands)
    add_eval_parser(commands)
    demo = commands.add_parser(
        "history-demo", help="replay a long conversation into the embedded SQLite history store"
    )
    demo.add_argument("--db", help="SQLite file to write (default: a temporary file)")
    demo.add_argument(
        "--locomo", help="a LoCoMo conversation JSON file to replay instead of the synthetic one"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic conversation")
    demo.add_argument("--sessions", type=int, default=19)
    demo.add_argument("--turns", type=int, default=32, help="turns per session")
    demo.add_argument("--questions", type=int, default=8, help="questions to look up")
    demo.set_defaults(run=_demo)

    retention = commands.add_parser(
        "retention",
        help="prune old LangGraph checkpoints by policy (the history store is never touched)",
    )
    where = retention.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", metavar="PATH", help="a SqliteSaver database file")
    where.add_argument("--postgres", metavar="DSN", help="a PostgresSaver connection string")
    retention.add_argument("--thread", help="prune this thread only (default: every thread)")
    retention.add_argument(
        "--keep-last", type=int, required=True, metavar="K", help="newest checkpoints to keep"
    )
    retention.add_argument(
        "--keep-within", metavar="AGE", help="also keep checkpoints younger than this: 7d, 12h"
    )
    retention.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    retention.add_argument("--json", action="store_true", help="print the report as JSON")
    retention.set_defaults(run=_retention)

    export = commands.add_parser(
        "export",
        help="one thread's raw history, summary versions, usage ledger and memories, as JSON",
    )
    history = export.add_mutually_exclusive_group(required=True)
    history.add_argument("--sqlite", metavar="PATH", help="the SQLite history store file")
    history.add_argument("--postgres", metavar="DSN", help="the PostgreSQL history store")
    export.add_argument("--thread", required=True, help="the thread id")
    export.add_argument("--tenant", default="default", help="the thread's tenant")
    memories = export.add_mutually_exclusive_group()
    memories.add_argument("--memory-sqlite", metavar="PATH", help="a SqliteStore of memories")
    memories.add_argument("--memory-postgres", metavar="DSN", help="a PostgresStore of memories")
    export.add_argument("--no-ledger", action="store_true", help="leave the usage ledger out")
    export.add_argument("--out", metavar="FILE", help="write the JSON here (default: stdout)")
    export.set_defaults(run=_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
