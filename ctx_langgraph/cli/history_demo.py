"""``ctx-langgraph history-demo``: a long conversation replayed into the embedded SQLite history
store, and what the store does with it."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from ctx_langgraph.cli.args import (
    UsageError,
    existing_file,
    new_sqlite_file,
    non_negative_int,
    positive_int,
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
from ctx_langgraph.errors import HistoryStoreError
from ctx_langgraph.history import HistoryStore, Scope, SQLiteHistoryStore
from ctx_langgraph.lookup import STOPWORDS

__all__ = ["MAX_DEMO_MESSAGES", "add_history_demo_parser", "run_demo"]

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
    head_seq = _append_twice(store, scope, conversation, write)
    found_terms = _search_evidence(store, scope, conversation, questions, write)
    _summary_and_branch(store, conversation, head_seq // 2, write)
    if found_terms and found_terms[0]:
        _hide_evidence(store, scope, conversation.questions[0], found_terms[0], write)


def _append_twice(store: HistoryStore, scope: Scope, conversation: Conversation, write: Any) -> int:
    """Append a session at a time, then all of it again (idempotent); the branch head seq."""
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
    return head.head_seq


def _search_evidence(
    store: HistoryStore, scope: Scope, conversation: Conversation, questions: int, write: Any
) -> list[str]:
    """Look up each question's evidence by keyword; the search terms that found something."""
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
    return found_terms


def _summary_and_branch(
    store: HistoryStore, conversation: Conversation, middle: int, write: Any
) -> None:
    """Commit a summary of the first half, fork a branch at the middle, show what it reads."""
    scope = Scope(conversation.name)
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


def _hide_evidence(
    store: HistoryStore, scope: Scope, target: QAItem, terms: str, write: Any
) -> None:
    """Hide a question's evidence and search again: the hits drop."""
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
            # a temporary file is gone when the demo returns: its path would send the reader nowhere
            where = (
                f"at {path}"
                if args.db
                else "in a temporary file (removed at the end; --db FILE keeps it)"
            )
            print(f"ctx-langgraph history-demo: history store on SQLite {where} (offline)")
            run_demo(store, conversation, questions=args.questions)
    return 0


_HISTORY_DEMO_DESCRIPTION = """\
Replay a long two-person conversation (a generated one with planted facts, or one LoCoMo
file with --locomo) into the embedded SQLite history store, offline, and show what the
store does with it: appending a session at a time (and again, idempotently), finding each
question's evidence by keyword search, a compaction checkpoint's coverage cursor, a branch
that forks at the middle and shares what came before, and hiding messages from search.

Prints tables only; the history goes to --db (a new file), else to a temporary file
deleted at the end."""


def add_history_demo_parser(commands: Any) -> None:
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
