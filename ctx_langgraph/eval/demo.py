"""The main demo: a context-managed agent through a generated tool-heavy session, offline.

Part 1 runs the agent (``create_context_agent`` with the history lookup tool, the history and
the checkpoints on SQLite, the replaying metering model) and shows each turn's budget decision,
compactions and capped tool outputs as they happen; the thread is stored under the session's
name, which the demo prints with the ``ctx-langgraph export`` command that reads it back.
Part 2 replays the same session through the strategies under comparison and prints the table;
the report (``metrics.json``, ``report.md``, plots) goes to a directory.

By default Part 2 compares ours (summary + tail + lookup) with the two peers (langmem,
LangChain's ``SummarizationMiddleware``) and with sending the full history (:data:`PEERS`):
the strategies that keep the whole history in their state cost time quadratic in the session's
length, so all eight (:data:`~ctx_langgraph.eval.strategies.STRATEGIES`, ``compare="all"``)
take a few times longer. Progress (elapsed time, work done, time left) goes to stderr.
"""

from __future__ import annotations

import contextlib
import shlex
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from langgraph.checkpoint.sqlite import SqliteSaver

from ctx_langgraph.budget.counters import default_counter
from ctx_langgraph.datasets import Conversation
from ctx_langgraph.eval.cost import REPORT_STEP, agent_cost, report_cost
from ctx_langgraph.eval.progress import INTERVAL, Progress, TaskId
from ctx_langgraph.eval.replay import ReplayModel, ReplayTurn, Script, replay_tools, replay_turns
from ctx_langgraph.eval.strategies import STRATEGIES, eval_config
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.integration import create_context_agent
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.state import unpack
from ctx_langgraph.storage.sqlite import use_wal

__all__ = [
    "COMPARE_CHOICES",
    "DEFAULT_TURNS",
    "PEERS",
    "compared_strategies",
    "run_demo",
]

DEFAULT_TURNS = 150
"""Turns of the default session: about 40 compactions, and the comparison in well under a
minute on two cores."""

PEERS = ("full", "summary_tail_lookup", "langmem", "langchain")
"""What the demo compares by default: ours with the lookup tool, the two peers, and the price
of sending everything."""

COMPARE_CHOICES = {"peers": PEERS, "all": STRATEGIES, "none": ()}
"""Named sets for ``compare`` (besides a comma-separated list of strategy names)."""


def compared_strategies(compare: str | Sequence[str] | bool) -> tuple[str, ...]:
    """The strategies ``compare`` names: ``peers``, ``all``, ``none``, a comma-separated list
    or a sequence of names (``True``/``False``: ``peers``/``none``).

    Raises:
        ValueError: a name that is no strategy.

    Examples:
        >>> compared_strategies("peers")
        ('full', 'summary_tail_lookup', 'langmem', 'langchain')
        >>> compared_strategies("langchain, summary_tail")
        ('langchain', 'summary_tail')
    """
    if isinstance(compare, bool):
        return PEERS if compare else ()
    if isinstance(compare, str):
        if compare.strip() in COMPARE_CHOICES:
            return tuple(COMPARE_CHOICES[compare.strip()])
        compare = [name.strip() for name in compare.split(",") if name.strip()]
    names = tuple(dict.fromkeys(compare))
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown:
        raise ValueError(
            f"unknown strategies {unknown}; compare peers, all, none, or a comma-separated "
            f"list of {', '.join(STRATEGIES)}"
        )
    return names


def _decision_line(budget: dict[str, Any], turn: int, precompact: int | None) -> str:
    """A compaction decision with the comparison that made it: the estimate plus its safety
    margin (``total``, what the budget compares) against the trigger, or against the
    pre-compaction threshold; a compaction under the trigger (asked for, or a rebuild after an
    edit) says so instead of claiming the trigger was passed."""
    total, trigger = int(budget["total"]), int(budget["trigger"])
    request = (
        f"turn {turn:>3}: next request ~{total:,} tokens (estimate "
        f"{budget['input_tokens']:,} + safety margin {budget['margin']:,})"
    )
    if budget["decision"] == "precompact":
        threshold = f"{precompact:,}" if precompact is not None else "?"
        sign = ">" if precompact is None or total > precompact else "<="
        return (
            f"{request} {sign} the pre-compaction threshold {threshold} (trigger {trigger:,}) "
            "-> precompact in the background"
        )
    if total > trigger:
        return f"{request} > trigger {trigger:,} -> compact"
    return f"{request} <= trigger {trigger:,} -> compact (asked for, or a rebuild after an edit)"


def _events(update: dict[str, Any], turn: int, *, precompact: int | None = None) -> list[str]:
    """Lines worth showing from one graph step's update (``precompact``: the budget's
    pre-compaction threshold in tokens, None when it has none)."""
    lines: list[str] = []
    for node, values in update.items():
        if not isinstance(values, dict):
            continue
        context: dict[str, Any] = dict(unpack(values.get("context")))
        budget = context.get("budget") or {}
        if node == "ctx_budget" and budget.get("decision") in ("compact", "precompact"):
            lines.append(_decision_line(budget, turn, precompact))
        compaction = context.get("compaction") or {}
        if node == "ctx_compact" and compaction:
            if compaction.get("status") in ("committed", "adopted"):
                lines.append(
                    f"turn {turn:>3}: summary generation {compaction['generation']} covers seq "
                    f"1-{compaction['covered_through_seq']} ({compaction.get('summary_tokens')} "
                    f"tokens); {compaction.get('removed_messages', 0)} messages left the view"
                )
            else:
                lines.append(f"turn {turn:>3}: compaction {compaction.get('status')}")
        capped = budget.get("capped") or []
        if node == "ctx_budget" and capped:
            lines.append(f"turn {turn:>3}: {len(capped)} big tool output(s) capped to a preview")
    return lines


@contextlib.contextmanager
def _checkpointer(path: Path) -> Iterator[SqliteSaver]:
    """A SqliteSaver in WAL mode with ``synchronous=NORMAL``, as the history store runs: one
    fsync per checkpoint (the default) would be most of the demo's time on a busy disk."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        use_wal(conn)
        yield SqliteSaver(conn)
    finally:
        conn.close()


def run_agent(
    conversation: Conversation,
    replay: Sequence[ReplayTurn],
    db: Path,
    *,
    window: int,
    quiet: bool,
    out: TextIO,
    progress: Progress,
    task: TaskId,
) -> dict[str, Any]:
    """Part 1: the agent through the session on SQLite, the thread named after the session;
    what happened, in figures."""
    from ctx_langgraph.eval.synthetic import tool_specs

    thread_id = conversation.name
    costs = agent_cost(replay)
    script = Script()
    model = ReplayModel(script)
    counter = default_counter("gpt-4o")
    store = SQLiteHistoryStore.from_path(db)
    store.setup()
    figures: dict[str, Any] = {"thread": thread_id, "turns": len(replay)}
    config = eval_config(window)
    precompact = config.resolve().precompact
    started = time.perf_counter()
    events = 0
    progress.advance(task, costs.setup, detail=f"turn 0/{len(replay)}")
    try:
        with _checkpointer(db.with_suffix(".checkpoints.sqlite")) as saver:
            graph = create_context_agent(
                model,
                replay_tools(replay, tool_specs()),
                store=store,
                config=config,
                lookup_tool=make_history_lookup_tool(store, counter=counter),
                counter=counter,
            ).compile(checkpointer=saver)
            thread: Any = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
            for position, turn in enumerate(replay):
                script.play(turn.steps, turn.index)
                for update in graph.stream(
                    {"messages": list(turn.inputs)}, thread, stream_mode="updates"
                ):
                    for line in _events(update, turn.index, precompact=precompact):
                        events += 1
                        if not quiet:
                            progress.echo(line, out)
                if not quiet and turn.index % 50 == 0:
                    tokens = script.calls[-1].input_tokens
                    progress.echo(
                        f"turn {turn.index:>3}: {len(script.calls)} model calls so far, last "
                        f"request {tokens:,} tokens",
                        out,
                    )
                progress.advance(
                    task, costs.turns[position], detail=f"turn {position + 1}/{len(replay)}"
                )
            state = graph.get_state(thread).values
    finally:
        head = store.branch_info(thread_id)
        active = store.get_active(thread_id)
        recorded = len(store.read_events(thread_id))
        store.close()
    sizes = [call.input_tokens for call in script.calls]
    figures.update(
        messages=len(conversation.messages),
        recorded_events=recorded,
        head_seq=head.head_seq if head else 0,
        summary_generation=active.generation if active else 0,
        covered_through_seq=active.covered_through_seq if active else 0,
        model_calls=len(sizes),
        input_tokens_max=max(sizes, default=0),
        input_tokens_total=sum(sizes),
        messages_in_state=len(state["messages"]),
        events_shown=events,
        seconds=round(time.perf_counter() - started, 1),
    )
    return figures


def _export_hint(db: Path, thread_id: str, kept: bool) -> str:
    if kept:
        path = shlex.quote(str(db))
        return (
            f"the thread's history is in {db}; read it back with:\n"
            f"  ctx-langgraph export --sqlite {path} --thread {shlex.quote(thread_id)} "
            f"--out {shlex.quote(thread_id + '.json')}"
        )
    return (
        "the history went to a temporary file; to keep it, run the demo with --db FILE, "
        f"then: ctx-langgraph export --sqlite FILE --thread {shlex.quote(thread_id)}"
    )


def _inspect_hint(db: Path, thread_id: str, kept: bool) -> str:
    """The demo's last lines: how to look at the thread in the browser."""
    if not kept:
        return (
            "to look inside the thread in the browser, run the demo with --db FILE, then: "
            f"ctx-langgraph inspect --sqlite FILE --thread {shlex.quote(thread_id)}"
        )
    path, thread = shlex.quote(str(db)), shlex.quote(thread_id)
    return (
        "look inside the thread (history, summaries, each call's make-up) in the browser:\n"
        f"  ctx-langgraph inspect --sqlite {path} --thread {thread}\n"
        "or as one file for a bug report:\n"
        f"  ctx-langgraph inspect --sqlite {path} --thread {thread} "
        f"--html {shlex.quote(thread_id + '.html')}"
    )


def run_demo(
    *,
    db: Path | None = None,
    out_dir: Path,
    turns: int = DEFAULT_TURNS,
    seed: int = 0,
    window: int = 4096,
    quiet: bool = False,
    compare: str | Sequence[str] | bool = "peers",
    out: TextIO | None = None,
    progress_stream: TextIO | None = None,
    interval: float | None = INTERVAL,
) -> int:
    """Both parts; returns the exit status (1: a request went over the usable window).

    Args:
        db: The SQLite history file to keep (its checkpoints go beside it, ``.checkpoints``
            before the suffix); ``None``: a temporary file, removed at the end.
        out_dir: Where the comparison's report goes.
        compare: The strategies of Part 2 (see :func:`compared_strategies`).
        quiet: No per-turn events and no progress.
        out: The demo's output (``sys.stdout``); progress goes to ``progress_stream``
            (``sys.stderr``).
        interval: Seconds between plain progress status lines (see
            :class:`~ctx_langgraph.eval.progress.Progress`).
    """
    strategies = compared_strategies(compare)
    with contextlib.ExitStack() as stack:
        kept = db is not None
        if db is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctx-demo-"))
            db = Path(tmp) / "history.sqlite"
        return _run_demo(
            db,
            kept,
            out_dir=out_dir,
            turns=turns,
            seed=seed,
            window=window,
            quiet=quiet,
            strategies=strategies,
            out=out or sys.stdout,
            progress_stream=progress_stream or sys.stderr,
            interval=interval,
        )


def _run_demo(
    db: Path,
    kept: bool,
    *,
    out_dir: Path,
    turns: int,
    seed: int,
    window: int,
    quiet: bool,
    strategies: tuple[str, ...],
    out: TextIO,
    progress_stream: TextIO,
    interval: float | None,
) -> int:
    from ctx_langgraph.core.table import format_table
    from ctx_langgraph.eval.harness import plan_eval
    from ctx_langgraph.eval.report import summary_table
    from ctx_langgraph.eval.synthetic import tool_session

    budget = eval_config(window).resolve()
    compared = (
        f"then {', '.join(strategies)} on the same session"
        if strategies
        else "no strategy comparison"
    )
    # a temporary file is gone when the demo returns: its path would send the reader nowhere
    where = f"at {db}" if kept else "in a temporary file (removed at the end; --db FILE keeps it)"
    print(
        f"ctx-langgraph demo (offline): a {turns}-turn tool-heavy session, {window:,}-token "
        f"window (compaction above {budget.trigger:,}, down to {budget.target:,}); history on "
        f"SQLite {where}; {compared}\n",
        file=out,
    )
    started = time.perf_counter()
    with Progress(enabled=not quiet, stream=progress_stream, interval=interval) as progress:
        with progress.step("generating the session"):
            conversation = tool_session(seed, turns=turns)
            replay = replay_turns(conversation)
        agent = f"{conversation.name} · agent on SQLite"
        agent_total = agent_cost(replay).total
        report_units = report_cost(1, len(strategies))
        work = {agent: agent_total}
        if strategies:
            work |= plan_eval([conversation], strategies, [replay])
            work[REPORT_STEP] = report_units
        progress.plan(work)
        task = progress.task(agent, total=agent_total)
        figures = run_agent(
            conversation,
            replay,
            db,
            window=window,
            quiet=quiet,
            out=out,
            progress=progress,
            task=task,
        )
        progress.task_done(task)
        table = format_table(["what", "value"], [[k, v] for k, v in figures.items()])
        progress.echo("\n" + table, out)
        progress.echo("\n" + _export_hint(db, figures["thread"], kept), out)
        if figures["input_tokens_max"] > budget.usable:
            progress.echo(f"error: a request went over the usable window {budget.usable:,}", out)
            return 1
        if not strategies:
            progress.echo("\n" + _inspect_hint(db, figures["thread"], kept), out)
            return 0
        metrics, written = _compare(
            conversation, strategies, window, seed, turns, out_dir, report_units, progress, out
        )
        progress.log(f"demo done in {time.perf_counter() - started:.1f}s")
    print(summary_table(metrics), file=out)
    print(f"\nreport: {', '.join(str(p) for p in written)}", file=out)
    print("\n" + _inspect_hint(db, figures["thread"], kept), file=out)
    return 0


def _compare(
    conversation: Conversation,
    strategies: tuple[str, ...],
    window: int,
    seed: int,
    turns: int,
    out_dir: Path,
    report_units: float,
    progress: Progress,
    out: TextIO,
) -> tuple[dict[str, Any], list[Path]]:
    """Part 2: the same session through the compared strategies; the metrics and the report."""
    from ctx_langgraph.eval.harness import run_eval
    from ctx_langgraph.eval.report import write_outputs
    from ctx_langgraph.eval.synthetic import tool_specs

    others = [name for name in STRATEGIES if name not in strategies]
    progress.echo(
        f"\nthe same session through {', '.join(strategies)}"
        + (f" (the other {len(others)}: --compare all)" if others else "")
        + ":",
        out,
    )
    metrics, series = run_eval(
        [conversation],
        strategies,
        window=window,
        dataset=f"synthetic tool session (seed {seed}, {turns} turns)",
        data_format="synthetic",
        seed=seed,
        tool_specs=tool_specs(),
        progress=progress,
    )
    with progress.step(REPORT_STEP, units=report_units):
        written = write_outputs(metrics, series, out_dir)
    return metrics, written
