"""The replay loop: every conversation through every strategy, then the questions, then the
metrics (``metrics.json``) and the per-call series (``series.json``)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from ctx_langgraph.budget.counters import TokenCounter, default_counter
from ctx_langgraph.datasets import Conversation, QAItem
from ctx_langgraph.eval.cost import RunCost, run_cost
from ctx_langgraph.eval.metrics import (
    answer_f1,
    answer_in_context,
    context_text,
    correction_respected,
    coverage,
    evidence_available,
    orphan_tool_messages,
)
from ctx_langgraph.eval.pricing import eval_price, prefix_ratio, price_settings, replay_costs
from ctx_langgraph.eval.replay import ModelCall, ReplayTurn, replay_tools, replay_turns
from ctx_langgraph.eval.strategies import (
    OURS,
    STRATEGIES,
    Strategy,
    build_strategy,
    claimed_by_prefix,
    describe_strategy,
    eval_config,
    summary_messages,
)
from ctx_langgraph.lookup import DEFAULT_MAX_TOKENS
from ctx_langgraph.view.markers import SUMMARY_FLAG

__all__ = [
    "RATES",
    "ConversationRun",
    "aggregate",
    "plan_eval",
    "run_conversation",
    "run_eval",
    "task_name",
]

RATES = (
    "evidence_available_strict",
    "evidence_available_lenient",
    "answer_in_context",
    "correction_respected",
    "answer_f1",
)
_SUMS = (
    "input_tokens_total",
    "cacheable_prefix_tokens",
    "output_tokens_total",
    "model_calls",
    "over_window_calls",
    "summarizer_calls",
    "summarizer_input_tokens",
    "summarizer_output_tokens",
    "summarizer_cache_read_tokens",
    "cost_usd",
    "cost_usd_uncached",
    "compactions",
    "coverage_gaps",
    "coverage_overlaps",
    "orphan_tool_messages",
    "question_input_tokens_total",
    "question_model_calls",
    "question_over_window_calls",
    "question_summarizer_calls",
    "warnings",
    "wall_seconds",
)
_MAXES = ("input_tokens_max", "max_summaries_in_prompt")
_EVIDENCE_ID = re.compile(r"D(\d+):0*(\d+)")

Log = Callable[[str], None]
Advance = Callable[[float, str], None]
"""Called with the predicted cost of the work just done and where the run is now."""


@dataclass
class ConversationRun:
    """One strategy over one conversation: scalar metrics, per-question checks, per-call series."""

    strategy: str
    conversation: str
    metrics: dict[str, Any] = field(default_factory=dict)
    questions: list[dict[str, Any]] = field(default_factory=list)
    series: dict[str, list[int]] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    """The names of the tools the strategy's agent had."""


def _evidence_ids(item: QAItem, known: dict[str, BaseMessage]) -> list[str]:
    """The question's evidence ids that name messages (LoCoMo writes some as ``D8:06`` or
    several in one string)."""
    out: list[str] = []
    for raw in item.evidence:
        if raw in known:
            out.append(raw)
            continue
        out.extend(key for s, t in _EVIDENCE_ID.findall(raw) if (key := f"D{s}:{t}") in known)
    return list(dict.fromkeys(out))


def _summary_key(message: BaseMessage) -> str:
    flag = message.additional_kwargs.get(SUMMARY_FLAG)
    if isinstance(flag, dict) and flag.get("checkpoint_id"):
        return str(flag["checkpoint_id"])
    return hashlib.sha1(message.text.encode()).hexdigest()


def _claimed(
    strategy: Strategy, call: ModelCall, history: Sequence[str], ids_by_seq: list[str]
) -> frozenset[str]:
    summaries = summary_messages(call.messages)
    if not summaries:
        return frozenset()
    if strategy.name in OURS:
        flag = summaries[0].additional_kwargs.get(SUMMARY_FLAG) or {}
        through = int(flag.get("covered_through_seq", 0))
        return frozenset(ids_by_seq[:through])
    if call.claimed is not None:  # langmem records the ids it summarized
        return call.claimed
    return claimed_by_prefix(call.messages, history)


def _question_checks(
    item: QAItem, call: ModelCall, known: dict[str, BaseMessage], answer: str | None
) -> dict[str, Any]:
    context = context_text(call.messages)
    evidence = _evidence_ids(item, known)
    strict = lenient = None
    if evidence:
        strict, lenient = evidence_available(context, [known[e].text for e in evidence])
    in_context = answer_in_context(context, item.answer) if item.answerable else None
    correction = None
    if item.superseded:
        correction = correction_respected(context, item.answer, item.superseded)
    return {
        "question": item.question,
        "category": "uncategorized" if item.category is None else str(item.category),
        "evidence_available_strict": strict,
        "evidence_available_lenient": lenient,
        "answer_in_context": in_context,
        "correction_respected": correction,
        "answer_f1": answer_f1(answer, item.answer)
        if answer is not None and item.answerable
        else None,
        "input_tokens": call.input_tokens,
    }


def _rate(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows if row.get(key) is not None]
    return round(sum(float(v) for v in values) / len(values), 4) if values else None


def question_rates(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rates over questions, overall and by category."""
    out: dict[str, Any] = {"questions": len(rows)}
    out.update({key: _rate(rows, key) for key in RATES})
    by_category: dict[str, Any] = {}
    for category in sorted({row["category"] for row in rows}, key=lambda c: (len(c), c)):
        group = [row for row in rows if row["category"] == category]
        by_category[category] = {"questions": len(group)} | {k: _rate(group, k) for k in RATES}
    out["by_category"] = by_category
    return out


def run_conversation(
    conversation: Conversation,
    name: str,
    *,
    window: int,
    counter: TokenCounter,
    retrieval_tokens: int = DEFAULT_MAX_TOKENS,
    reader: BaseChatModel | None = None,
    summary_model: BaseChatModel | None = None,
    tool_specs: Sequence[dict[str, Any]] = (),
    turns: Sequence[ReplayTurn] | None = None,
    log: Log | None = None,
    advance: Advance | None = None,
) -> ConversationRun:
    """Replay ``conversation`` through strategy ``name``, ask its questions from the final state
    (each from the same checkpoint), and measure.

    ``advance(units, detail)`` is called as the work goes: after each turn and each question
    with its predicted cost (:func:`~ctx_langgraph.eval.cost.run_cost`; the calls add up to
    its ``total``) and where the run is (``turn 12/300``)."""
    turns = list(turns) if turns is not None else replay_turns(conversation)
    cost = run_cost(name, turns, len(conversation.questions))

    def done(units: float, detail: str) -> None:
        if advance is not None:
            advance(units, detail)

    usable = eval_config(window).resolve().usable
    strategy = build_strategy(
        name,
        tools=replay_tools(turns, tool_specs),
        window=window,
        counter=counter,
        retrieval_tokens=retrieval_tokens,
        reader=reader,
        summary_model=summary_model,
    )
    started = time.perf_counter()
    done(cost.setup / 2, f"turn 0/{len(turns)}")
    with warnings.catch_warnings(record=True) as caught:  # a peer's warnings are measured
        warnings.simplefilter("always")
        try:
            thread = _thread()
            history, history_at_call = _replay(strategy, name, turns, thread, cost, done)
            replay_calls = list(strategy.script.calls)
            stats = strategy.summarizer_stats
            replay_summaries = stats.totals()
            rows = _ask(strategy, conversation, thread, reader, cost, done)
            question_calls = strategy.script.calls[len(replay_calls) :]
            wall = time.perf_counter() - started
            checks = _check_calls(strategy, replay_calls, history, history_at_call)
            run = ConversationRun(name, conversation.name, questions=rows, tools=strategy.tools)
            run.metrics = {
                **question_rates(rows),
                **_call_metrics(replay_calls, question_calls, usable),
                **_summary_metrics(replay_summaries, stats.calls, checks),
                "warnings": len(caught),
                "wall_seconds": round(wall, 3),
            }
            run.metrics.update(replay_costs(run.metrics, eval_price()))
            run.series = _series(replay_calls, checks)
            done(cost.setup / 2, "measured")
            if log:
                _log_run(log, run, wall)
            return run
        finally:
            strategy.close()


def _call_metrics(
    replay_calls: Sequence[ModelCall], question_calls: Sequence[ModelCall], usable: int
) -> dict[str, int | float | None]:
    """Input tokens (their cacheable prefix, and output tokens) and calls of the replay and of
    the question phase, and the calls whose input is larger than the usable window."""
    tokens = [call.input_tokens for call in replay_calls]
    asked = [call.input_tokens for call in question_calls]
    prefix = sum(call.cacheable_prefix for call in replay_calls)
    return {
        "input_tokens_total": sum(tokens),
        "cacheable_prefix_tokens": prefix,
        "cacheable_prefix_ratio": prefix_ratio(prefix, sum(tokens)),
        "output_tokens_total": sum(call.output_tokens for call in replay_calls),
        "input_tokens_max": max(tokens, default=0),
        "model_calls": len(tokens),
        "over_window_calls": sum(t > usable for t in tokens),
        "question_input_tokens_total": sum(asked),
        "question_model_calls": len(asked),
        "question_over_window_calls": sum(t > usable for t in asked),
    }


def _summary_metrics(
    replay_summaries: tuple[int, int, int, int], summarizer_calls: int, checks: _CallChecks
) -> dict[str, int]:
    """The summarizer's work in the replay (and its calls in the question phase), and what
    the replay's model inputs held."""
    return {
        "summarizer_calls": replay_summaries[0],
        "summarizer_input_tokens": replay_summaries[1],
        "summarizer_output_tokens": replay_summaries[2],
        "summarizer_cache_read_tokens": replay_summaries[3],
        "compactions": len(checks.compaction_calls),
        "coverage_gaps": checks.gaps,
        "coverage_overlaps": checks.overlaps,
        "orphan_tool_messages": checks.orphans,
        "max_summaries_in_prompt": checks.most_summaries,
        "question_summarizer_calls": summarizer_calls - replay_summaries[0],
    }


def _thread() -> Any:
    """The one thread every strategy replays into (a fresh config per run)."""
    return {"configurable": {"thread_id": "eval"}, "recursion_limit": 500}


def _replay(
    strategy: Strategy,
    name: str,
    turns: Sequence[ReplayTurn],
    thread: Any,
    cost: RunCost,
    done: Advance,
) -> tuple[list[str], list[int]]:
    """Every turn through the strategy's graph; the ids of the conversation's messages in
    order, and for each model call how many of them came before it."""
    script = strategy.script
    history: list[str] = []
    history_at_call: list[int] = []
    for position, turn in enumerate(turns):
        script.play(turn.steps, turn.index)
        before, base = len(script.calls), len(history) + len(turn.inputs)
        strategy.graph.invoke({"messages": list(turn.inputs)}, thread)
        made = len(script.calls) - before
        if made != len(turn.steps):
            raise RuntimeError(
                f"{name}: turn {turn.index} made {made} model calls, {len(turn.steps)} recorded"
            )
        for step in turn.steps:
            history_at_call.append(base)
            base += 1 + len(step.tool_calls)
        history.extend(str(m.id) for m in turn.messages)
        done(cost.turns[position], f"turn {position + 1}/{len(turns)}")
    return history, history_at_call


def _ask(
    strategy: Strategy,
    conversation: Conversation,
    thread: Any,
    reader: BaseChatModel | None,
    cost: RunCost,
    done: Advance,
) -> list[dict[str, Any]]:
    """Each question from the final state (the same checkpoint for all); their checks."""
    script = strategy.script
    final = strategy.graph.get_state(thread).config
    known = {str(m.id): m for m in conversation.messages}
    rows: list[dict[str, Any]] = []
    for index, item in enumerate(conversation.questions):
        script.ask(index, item.question)
        strategy.graph.invoke(
            {"messages": [HumanMessage(item.question, id=f"question-{index}")]},
            {**final, "recursion_limit": 50},
        )
        answer = script.answers.get(index) if reader is not None else None
        rows.append(_question_checks(item, script.calls[-1], known, answer))
        done(cost.question, f"question {index + 1}/{len(conversation.questions)}")
    return rows


@dataclass
class _CallChecks:
    """What the replay's model inputs held: coverage faults, orphans, summaries."""

    gaps: int = 0
    overlaps: int = 0
    orphans: int = 0
    most_summaries: int = 0
    compaction_calls: list[int] = field(default_factory=list)
    """Indexes of the calls right after a compaction (the first with a new summary)."""


def _check_calls(
    strategy: Strategy,
    replay_calls: Sequence[ModelCall],
    history: list[str],
    history_at_call: Sequence[int],
) -> _CallChecks:
    ids_by_seq: list[str] = []
    if strategy.store is not None:
        ids_by_seq = [e.event_id for e in strategy.store.read_events("eval")]
    checks = _CallChecks()
    last_key: str | None = None
    for index, call in enumerate(replay_calls):
        seen = history[: history_at_call[index]]
        summaries = summary_messages(call.messages)
        present = {str(m.id) for m in call.messages if m.id and m not in summaries}
        claimed = _claimed(strategy, call, seen, ids_by_seq)
        gap, overlap = coverage(present, claimed, seen, len(summaries))
        checks.gaps += gap
        checks.overlaps += overlap
        checks.orphans += orphan_tool_messages(call.messages)
        checks.most_summaries = max(checks.most_summaries, len(summaries))
        key = _summary_key(summaries[0]) if summaries else None
        if key is not None and key != last_key:
            checks.compaction_calls.append(index)
        last_key = key
    return checks


def _series(replay_calls: Sequence[ModelCall], checks: _CallChecks) -> dict[str, list[int]]:
    """``series.json``'s entry of one run: input tokens, cacheable prefix and turn per call,
    and the calls right after a compaction."""
    return {
        "input_tokens": [call.input_tokens for call in replay_calls],
        "cacheable_prefix": [call.cacheable_prefix for call in replay_calls],
        "turn": [call.turn for call in replay_calls],
        "compaction_calls": checks.compaction_calls,
    }


def _log_run(log: Log, run: ConversationRun, wall: float) -> None:
    m = run.metrics
    log(
        f"{run.conversation} · {run.strategy}: evidence {m['evidence_available_lenient']}, "
        f"answer {m['answer_in_context']}, input tokens {m['input_tokens_total']:,}, "
        f"compactions {m['compactions']}, {wall:.1f} s"
    )


def aggregate(runs: Sequence[ConversationRun]) -> dict[str, Any]:
    """One strategy's metrics over conversations: rates over all questions, sums, maxima, and
    each conversation's own figures."""
    rows = [row for run in runs for row in run.questions]
    out = question_rates(rows)
    for key in _SUMS:  # (USD to the micro-dollar, as each run has it)
        out[key] = round(sum(run.metrics[key] for run in runs), 6 if key.startswith("cost_") else 3)
    for key in _MAXES:
        out[key] = max((run.metrics[key] for run in runs), default=0)
    out["cacheable_prefix_ratio"] = prefix_ratio(
        out["cacheable_prefix_tokens"], out["input_tokens_total"]
    )
    out["conversations"] = {
        run.conversation: {k: v for k, v in run.metrics.items() if k != "by_category"}
        for run in runs
    }
    return out


def _model_name(model: BaseChatModel) -> str:
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return f"{type(model).__name__}:{name}" if name else type(model).__name__


def _versions() -> dict[str, str]:
    names = {
        "ctx_langgraph": "ctx-langgraph",
        "langgraph": "langgraph",
        "langchain": "langchain",
        "langchain_core": "langchain-core",
        "langmem": "langmem",
    }
    out = {}
    for key, dist in names.items():
        try:
            out[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[key] = "not installed"
    out["python"] = platform.python_version()
    return out


def task_name(conversation: Conversation, strategy: str) -> str:
    """How progress names one strategy's run over one conversation."""
    return f"{conversation.name} · {strategy}"


def plan_eval(
    conversations: Sequence[Conversation],
    strategies: Sequence[str],
    replays: Sequence[Sequence[ReplayTurn]] | None = None,
) -> dict[str, float]:
    """The predicted cost of every run of :func:`run_eval`, by :func:`task_name` (what
    :meth:`~ctx_langgraph.eval.progress.Progress.plan` takes)."""
    if replays is None:
        replays = [replay_turns(conversation) for conversation in conversations]
    return {
        task_name(conversation, name): run_cost(name, turns, len(conversation.questions)).total
        for conversation, turns in zip(conversations, replays, strict=True)
        for name in strategies
    }


def run_eval(
    conversations: Sequence[Conversation],
    strategies: Sequence[str] = STRATEGIES,
    *,
    window: int = 4096,
    dataset: str = "",
    data_format: str = "",
    seed: int = 0,
    retrieval_tokens: int = DEFAULT_MAX_TOKENS,
    reader: BaseChatModel | None = None,
    summary_model: BaseChatModel | None = None,
    tool_specs: Sequence[dict[str, Any]] = (),
    counter: TokenCounter | None = None,
    log: Log | None = None,
    progress: Any = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every conversation through every strategy: ``(metrics, series)`` as documented in
    :mod:`ctx_langgraph.eval`.

    Example:
        >>> from ctx_langgraph.datasets import synthetic_conversation
        >>> conv = synthetic_conversation(seed=1, sessions=2, turns_per_session=20)
        >>> metrics, series = run_eval([conv], ["last_n", "summary_tail_lookup"], window=2048)
        >>> sorted(metrics["strategies"])
        ['last_n', 'summary_tail_lookup']
        >>> metrics["strategies"]["summary_tail_lookup"]["coverage_gaps"]
        0
    """
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    counter = counter or default_counter("gpt-4o")
    runs: dict[str, list[ConversationRun]] = {name: [] for name in strategies}
    series: dict[str, Any] = {}
    replays = [replay_turns(conversation) for conversation in conversations]
    if progress is not None:
        progress.plan(plan_eval(conversations, strategies, replays))
    for conversation, turns in zip(conversations, replays, strict=True):
        for name in strategies:
            task, advance = _progress_task(progress, conversation, name, turns)
            run = run_conversation(
                conversation,
                name,
                window=window,
                counter=counter,
                retrieval_tokens=retrieval_tokens,
                reader=reader,
                summary_model=summary_model,
                tool_specs=tool_specs,
                turns=turns,
                log=log,
                advance=advance,
            )
            if progress is not None:
                progress.task_done(task)
            runs[name].append(run)
            series.setdefault(conversation.name, {})[name] = run.series
    settings = _settings(window, retrieval_tokens, counter, reader, summary_model)
    described: dict[str, dict[str, Any]] = {}
    metrics = {
        "dataset": dataset,
        "format": data_format,
        "window": window,
        "seed": seed,
        "conversations": [c.name for c in conversations],
        "versions": _versions(),
        "settings": settings,
        "strategies": described,
    }
    reader_name = str(settings["reader"])
    for name in strategies:
        tools = list(dict.fromkeys(tool for run in runs[name] for tool in run.tools))
        description = describe_strategy(
            name, tools=tools, reader=reader_name, retrieval_tokens=retrieval_tokens
        )
        described[name] = {**description, **aggregate(runs[name])}
    return metrics, series


def _progress_task(
    progress: Any, conversation: Conversation, name: str, turns: Sequence[ReplayTurn]
) -> tuple[Any, Advance]:
    """The progress task of one run (``None`` without progress) and how the run advances it."""
    task = (
        progress.task(
            task_name(conversation, name),
            total=run_cost(name, turns, len(conversation.questions)).total,
        )
        if progress is not None
        else None
    )

    def advance(units: float, detail: str) -> None:
        if progress is not None:
            progress.advance(task, units, detail=detail)

    return task, advance


def _settings(
    window: int,
    retrieval_tokens: int,
    counter: TokenCounter,
    reader: BaseChatModel | None,
    summary_model: BaseChatModel | None,
) -> dict[str, Any]:
    """``metrics["settings"]``: the budget the window resolves to and who reads and summarizes."""
    config = eval_config(window)
    budget = config.resolve()
    return {
        "retrieval_tokens": retrieval_tokens,
        "usable": budget.usable,
        "trigger": budget.trigger,
        "target": budget.target,
        "keep_recent_tokens": budget.keep_recent_tokens,
        "summary_max_tokens": config.summary_max_tokens,
        "counter": counter.id,
        "reader": "scripted" if reader is None else _model_name(reader),
        "summarizer": "extractive" if summary_model is None else _model_name(summary_model),
        "prices": price_settings(),
    }
