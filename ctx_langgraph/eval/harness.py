"""The replay loop: every conversation through every strategy, then the questions, then the
metrics (``metrics.json``) and the per-call series (``series.json``)."""

from __future__ import annotations

import importlib.metadata
import platform
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from ctx_langgraph.budget.counters import TokenCounter, default_counter
from ctx_langgraph.datasets import Conversation, QAItem
from ctx_langgraph.eval.aggregate import (
    RATES,
    ConversationRun,
    RunSeries,
    aggregate,
    question_rates,
)
from ctx_langgraph.eval.calls import CallChecks, call_tokens, check_calls
from ctx_langgraph.eval.cost import RunCost, run_cost
from ctx_langgraph.eval.drift import drift_metrics, evidence_ids, planted_facts
from ctx_langgraph.eval.embedding_stats import EmbeddingTotals
from ctx_langgraph.eval.latency import latency_metrics
from ctx_langgraph.eval.metrics import (
    answer_f1,
    answer_in_context,
    context_text,
    correction_respected,
    evidence_available,
)
from ctx_langgraph.eval.pricing import (
    eval_price,
    phase_costs,
    prefix_ratio,
    price_settings,
    replay_costs,
)
from ctx_langgraph.eval.replay import ModelCall, ReplayTurn, replay_tools, replay_turns
from ctx_langgraph.eval.seeds import by_seed
from ctx_langgraph.eval.strategies import (
    STRATEGIES,
    Strategy,
    build_strategy,
    describe_strategy,
    eval_config,
    unknown_strategies,
)
from ctx_langgraph.lookup import DEFAULT_MAX_TOKENS

__all__ = [
    "RATES",
    "ConversationRun",
    "aggregate",
    "plan_eval",
    "run_conversation",
    "run_eval",
    "task_name",
]

Log = Callable[[str], None]
Advance = Callable[[float, str], None]
"""Called with the predicted cost of the work just done and where the run is now."""


def _question_checks(
    item: QAItem, call: ModelCall, known: dict[str, BaseMessage], answer: str | None
) -> dict[str, Any]:
    context = context_text(call.messages)
    evidence = evidence_ids(item, known)
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
            replayed = _replay(strategy, name, turns, thread, cost, done)
            replayed.summaries = strategy.summarizer_stats.totals()
            replayed.embedded = _embedded(strategy)
            rows = _ask(strategy, conversation, thread, reader, cost, done)
            wall = time.perf_counter() - started
            run = ConversationRun(name, conversation.name, questions=rows, tools=strategy.tools)
            checks = check_calls(
                strategy,
                replayed.calls,
                replayed.history,
                replayed.history_at_call,
                planted_facts(conversation, turns),
            )
            run.metrics = {
                **question_rates(rows),
                **_measure(strategy, replayed, checks, counter, usable),
                "warnings": len(caught),
                "wall_seconds": round(wall, 3),
            }
            run.series = _series(replayed, checks)
            done(cost.setup / 2, "measured")
            if log:
                _log_run(log, run, wall)
            return run
        finally:
            strategy.close()


@dataclass
class _Replayed:
    """What the replay of one run left to measure."""

    calls: list[ModelCall]
    """The replay's model calls (the question phase's come after them in the script)."""
    history: list[str] = field(default_factory=list)
    """The ids of the conversation's messages in order."""
    history_at_call: list[int] = field(default_factory=list)
    """For each model call, how many of them came before it."""
    prep_ms: list[float] = field(default_factory=list)
    """Each turn's context preparation time: its invoke less the model's generate."""
    compaction_turns: list[int] = field(default_factory=list)
    """The turns (from 1) in which the summarizer was called."""
    summaries: tuple[int, int, int, int] = (0, 0, 0, 0)
    """The summarizer's calls, input, output and cache-read tokens at the end of the replay."""
    embedded: EmbeddingTotals | None = None
    """The index's embedding work at the end of the replay (strategies with an index)."""


def _embedded(strategy: Strategy) -> EmbeddingTotals | None:
    return None if strategy.embeddings is None else strategy.embeddings.totals()


def _embedding_metrics(strategy: Strategy, replayed: _Replayed) -> dict[str, Any]:
    """The vector index's embedding work in the replay and in the question phase (calls,
    tokens, seconds); None for a strategy without one. The local model costs nothing."""
    totals, replay = _embedded(strategy), replayed.embedded
    if totals is None or replay is None:
        return {}
    metrics: dict[str, Any] = {}
    for prefix, work in (("", replay), ("question_", totals - replay)):
        metrics[f"{prefix}embed_calls"] = work.calls
        metrics[f"{prefix}embed_tokens"] = work.tokens
        metrics[f"{prefix}embed_seconds"] = round(work.seconds, 3)
    return metrics


def _measure(
    strategy: Strategy, replayed: _Replayed, checks: CallChecks, counter: TokenCounter, usable: int
) -> dict[str, Any]:
    """Every figure of a run but the question rates: tokens and calls, the summarizer's work,
    what the model inputs held, drift, preparation time and cost."""
    question_calls = strategy.script.calls[len(replayed.calls) :]
    totals = strategy.summarizer_stats.totals()
    asked = tuple(total - replay for total, replay in zip(totals, replayed.summaries, strict=True))
    metrics: dict[str, Any] = {
        **_call_metrics(replayed.calls, question_calls, usable),
        **_summary_metrics(replayed.summaries, asked, checks),
        **drift_metrics(checks.generations),
        **latency_metrics(replayed.prep_ms, {turn - 1 for turn in replayed.compaction_turns}),
        **_embedding_metrics(strategy, replayed),
    }
    price = eval_price()
    replay_tokens = call_tokens(replayed.calls, counter)
    question_tokens = call_tokens(question_calls, counter)
    metrics["retrieval_tokens"] = sum(call.retrieval for call in replay_tokens)
    metrics["question_retrieval_tokens"] = sum(call.retrieval for call in question_tokens)
    summarized = replayed.summaries
    metrics.update(phase_costs(replay_tokens, (summarized[1], summarized[3], summarized[2]), price))
    metrics.update(phase_costs(question_tokens, (asked[1], asked[3], asked[2]), price, "question_"))
    metrics["cost_usd_uncached"] = replay_costs(metrics, price)["cost_usd_uncached"]
    metrics["cost_usd_with_questions"] = round(
        metrics["cost_usd"] + metrics["question_cost_usd"], 6
    )
    return metrics


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
        "question_cacheable_prefix_tokens": sum(call.cacheable_prefix for call in question_calls),
        "question_output_tokens_total": sum(call.output_tokens for call in question_calls),
        "question_model_calls": len(asked),
        "question_over_window_calls": sum(t > usable for t in asked),
    }


def _summary_metrics(
    replay: tuple[int, int, int, int], asked: tuple[int, ...], checks: CallChecks
) -> dict[str, int]:
    """The summarizer's work in the replay and in the question phase (calls, input, output and
    cache-read tokens), and what the replay's model inputs held."""
    return {
        "summarizer_calls": replay[0],
        "summarizer_input_tokens": replay[1],
        "summarizer_output_tokens": replay[2],
        "summarizer_cache_read_tokens": replay[3],
        "compactions": len(checks.compaction_calls),
        "coverage_gaps": checks.gaps,
        "coverage_overlaps": checks.overlaps,
        "orphan_tool_messages": checks.orphans,
        "max_summaries_in_prompt": checks.most_summaries,
        "question_summarizer_calls": asked[0],
        "question_summarizer_input_tokens": asked[1],
        "question_summarizer_output_tokens": asked[2],
        "question_summarizer_cache_read_tokens": asked[3],
    }


def _series(replayed: _Replayed, checks: CallChecks) -> RunSeries:
    """``series.json``'s entry of one run: input tokens, cacheable prefix and turn per call,
    the calls right after a compaction, each turn's preparation time, the turns that
    compacted, and each summary generation's drift check."""
    return RunSeries(
        input_tokens=[call.input_tokens for call in replayed.calls],
        cacheable_prefix=[call.cacheable_prefix for call in replayed.calls],
        turn=[call.turn for call in replayed.calls],
        compaction_calls=checks.compaction_calls,
        prep_ms=replayed.prep_ms,
        compaction_turns=replayed.compaction_turns,
        drift=checks.generations,
    )


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
) -> _Replayed:
    """Every turn through the strategy's graph, each timed: its invoke less the time inside
    the replayed model's generate is the turn's context preparation time."""
    script = strategy.script
    replayed = _Replayed(calls=script.calls)
    history = replayed.history
    for position, turn in enumerate(turns):
        script.play(turn.steps, turn.index)
        before, base = len(script.calls), len(history) + len(turn.inputs)
        summarized, in_model = strategy.summarizer_stats.calls, script.model_seconds
        started = time.perf_counter()
        strategy.graph.invoke({"messages": list(turn.inputs)}, thread)
        elapsed = time.perf_counter() - started - (script.model_seconds - in_model)
        replayed.prep_ms.append(round(max(0.0, elapsed) * 1000, 3))
        if strategy.summarizer_stats.calls > summarized:
            replayed.compaction_turns.append(position + 1)
        made = len(script.calls) - before
        if made != len(turn.steps):
            raise RuntimeError(
                f"{name}: turn {turn.index} made {made} model calls, {len(turn.steps)} recorded"
            )
        for step in turn.steps:
            replayed.history_at_call.append(base)
            base += 1 + len(step.tool_calls)
        history.extend(str(m.id) for m in turn.messages)
        done(cost.turns[position], f"turn {position + 1}/{len(turns)}")
    replayed.calls = list(script.calls)
    return replayed


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


def _log_run(log: Log, run: ConversationRun, wall: float) -> None:
    m = run.metrics
    log(
        f"{run.conversation} · {run.strategy}: evidence {m['evidence_available_lenient']}, "
        f"answer {m['answer_in_context']}, input tokens {m['input_tokens_total']:,}, "
        f"compactions {m['compactions']}, {wall:.1f} s"
    )


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
    seeds: Sequence[int] | None = None,
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

    ``seeds`` names the seed of each conversation (one per conversation; by default all are
    ``seed``'s). With several seeds each strategy's scalar figures are the means across seeds
    and ``spread`` says how far they range (:func:`~ctx_langgraph.eval.seeds.by_seed`).

    Examples:
        >>> from ctx_langgraph.datasets import synthetic_conversation
        >>> conv = synthetic_conversation(seed=1, sessions=2, turns_per_session=20)
        >>> metrics, series = run_eval([conv], ["last_n", "summary_tail_lookup"], window=2048)
        >>> sorted(metrics["strategies"])
        ['last_n', 'summary_tail_lookup']
        >>> metrics["strategies"]["summary_tail_lookup"]["coverage_gaps"]
        0
    """
    conversation_seeds = _checked(conversations, strategies, seed, seeds)
    counter = counter or default_counter("gpt-4o")
    runs: dict[str, list[ConversationRun]] = {name: [] for name in strategies}
    series: dict[str, Any] = {}
    replays = [replay_turns(conversation) for conversation in conversations]
    if progress is not None:
        progress.plan(plan_eval(conversations, strategies, replays))
    for conversation, turns, its_seed in zip(
        conversations, replays, conversation_seeds, strict=True
    ):
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
            run.seed = its_seed
            runs[name].append(run)
            series.setdefault(conversation.name, {})[name] = run.series
    settings = _settings(window, retrieval_tokens, counter, reader, summary_model)
    described: dict[str, dict[str, Any]] = {}
    metrics = {
        "dataset": dataset,
        "format": data_format,
        "window": window,
        "seed": conversation_seeds[0] if conversation_seeds else seed,
        "seeds": sorted(set(conversation_seeds)),
        "conversations": [c.name for c in conversations],
        "versions": _versions(),
        "settings": settings,
        "strategies": described,
    }
    metrics["per_seed"] = _describe(described, runs, str(settings["reader"]), retrieval_tokens)
    return metrics, series


def _checked(
    conversations: Sequence[Conversation],
    strategies: Sequence[str],
    seed: int,
    seeds: Sequence[int] | None,
) -> list[int]:
    """The seed of each conversation, once the strategies and seeds are checked."""
    unknown = unknown_strategies(strategies)
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    conversation_seeds = [seed] * len(conversations) if seeds is None else list(seeds)
    if len(conversation_seeds) != len(conversations):
        raise ValueError(
            f"seeds: {len(conversation_seeds)} given for {len(conversations)} conversations "
            "(one per conversation)"
        )
    return conversation_seeds


def _describe(
    described: dict[str, dict[str, Any]],
    runs: dict[str, list[ConversationRun]],
    reader: str,
    retrieval_tokens: int,
) -> dict[str, dict[str, Any]]:
    """Fill ``described`` with each strategy's description and figures over its runs (the
    means across seeds when there are several); return each seed's own figures."""
    per_seed: dict[str, dict[str, Any]] = {}
    for name, strategy_runs in runs.items():
        tools = list(dict.fromkeys(tool for run in strategy_runs for tool in run.tools))
        description = describe_strategy(
            name, tools=tools, reader=reader, retrieval_tokens=retrieval_tokens
        )
        figures, seed_figures = by_seed(strategy_runs)
        described[name] = {**description, **figures}
        for its_seed, values in seed_figures.items():
            per_seed.setdefault(str(its_seed), {})[name] = values
    return per_seed


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
