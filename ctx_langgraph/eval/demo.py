"""The main demo: a context-managed agent through a generated 300-turn tool-heavy session, offline.

Part 1 runs the agent (``create_context_agent`` with the history lookup tool, the history on
SQLite, the replaying metering model) and shows each turn's budget decision, compactions and
capped tool outputs as they happen. Part 2 replays the same session through every strategy and
prints the comparison; the report (``metrics.json``, ``report.md``, plots) goes to a directory.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

from langgraph.checkpoint.sqlite import SqliteSaver

from ctx_langgraph.budget.counters import default_counter
from ctx_langgraph.eval.replay import ReplayModel, Script, replay_tools, replay_turns
from ctx_langgraph.eval.strategies import STRATEGIES, eval_config
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.integration import create_context_agent
from ctx_langgraph.lookup import make_history_lookup_tool

__all__ = ["run_demo"]


def _events(update: dict[str, Any], turn: int) -> list[str]:
    """Lines worth showing from one graph step's update."""
    lines: list[str] = []
    for node, values in update.items():
        if not isinstance(values, dict):
            continue
        context = values.get("context") or {}
        budget = context.get("budget") or {}
        if node == "ctx_budget" and budget.get("decision") in ("compact", "precompact"):
            lines.append(
                f"turn {turn:>3}: next request ~{budget['input_tokens']:,} tokens > trigger "
                f"{budget['trigger']:,} -> compact"
            )
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


def run_agent(
    db: Path, *, turns: int, seed: int, window: int, quiet: bool, out: TextIO
) -> dict[str, Any]:
    """Part 1: the agent through the session on SQLite; what happened, in figures."""
    from ctx_langgraph.eval.synthetic import tool_session, tool_specs

    conversation = tool_session(seed, turns=turns)
    replay = replay_turns(conversation)
    script = Script()
    model = ReplayModel(script)
    counter = default_counter("gpt-4o")
    store = SQLiteHistoryStore.from_path(db)
    store.setup()
    figures: dict[str, Any] = {"session": conversation.name, "turns": len(replay)}
    started = time.perf_counter()
    events = 0
    try:
        with SqliteSaver.from_conn_string(str(db.with_suffix(".checkpoints.sqlite"))) as saver:
            graph = create_context_agent(
                model,
                replay_tools(replay, tool_specs()),
                store=store,
                config=eval_config(window),
                lookup_tool=make_history_lookup_tool(store, counter=counter),
                counter=counter,
            ).compile(checkpointer=saver)
            thread: Any = {"configurable": {"thread_id": "demo"}, "recursion_limit": 200}
            for turn in replay:
                script.play(turn.steps, turn.index)
                for update in graph.stream(
                    {"messages": list(turn.inputs)}, thread, stream_mode="updates"
                ):
                    for line in _events(update, turn.index):
                        events += 1
                        if not quiet:
                            print(line, file=out)
                if not quiet and turn.index % 50 == 0:
                    tokens = script.calls[-1].input_tokens
                    print(
                        f"turn {turn.index:>3}: {len(script.calls)} model calls so far, last "
                        f"request {tokens:,} tokens",
                        file=out,
                    )
            state = graph.get_state(thread).values
    finally:
        head = store.branch_info("demo")
        active = store.get_active("demo")
        recorded = len(store.read_events("demo"))
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


def run_demo(
    *,
    db: Path,
    out_dir: Path,
    turns: int = 300,
    seed: int = 0,
    window: int = 4096,
    quiet: bool = False,
    compare: bool = True,
    out: TextIO | None = None,
) -> int:
    """Both parts; returns the exit status."""
    out = out or sys.stdout
    from ctx_langgraph._table import format_table
    from ctx_langgraph.eval.cli import write_outputs
    from ctx_langgraph.eval.harness import run_eval
    from ctx_langgraph.eval.progress import Progress
    from ctx_langgraph.eval.report import summary_table
    from ctx_langgraph.eval.synthetic import tool_session, tool_specs

    budget = eval_config(window).resolve()
    print(
        f"ctx-langgraph demo (offline): a {turns}-turn tool-heavy session, {window:,}-token "
        f"window (compaction above {budget.trigger:,}, down to {budget.target:,}); history on "
        f"SQLite at {db}\n",
        file=out,
    )
    figures = run_agent(db, turns=turns, seed=seed, window=window, quiet=quiet, out=out)
    print("\n" + format_table(["what", "value"], [[k, v] for k, v in figures.items()]), file=out)
    if figures["input_tokens_max"] > budget.usable:
        print(f"error: a request went over the usable window {budget.usable:,}", file=out)
        return 1
    if not compare:
        return 0
    print(f"\nevery strategy on the same session ({len(STRATEGIES)} runs):", file=out)
    conversation = tool_session(seed, turns=turns)
    with Progress(enabled=not quiet, stream=sys.stderr) as progress:
        metrics, series = run_eval(
            [conversation],
            STRATEGIES,
            window=window,
            dataset=f"synthetic tool session (seed {seed}, {turns} turns)",
            data_format="synthetic",
            seed=seed,
            tool_specs=tool_specs(),
            progress=progress,
        )
    written = write_outputs(metrics, series, out_dir)
    print(summary_table(metrics), file=out)
    print(f"\nreport: {', '.join(str(p) for p in written)}", file=out)
    return 0
