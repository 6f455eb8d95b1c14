"""Does the context plan work? Replay long sessions through every strategy and measure.

The harness replays a recorded conversation (LoCoMo, a JSONL trace of LangChain messages, or a
generated tool-heavy agent session) through real LangGraph agents that differ only in how they
manage context (:data:`~ctx_langgraph.eval.strategies.STRATEGIES`): the recorded assistant and
tool messages are played back by a metering fake model, so every strategy sees the same
conversation and is measured with one tokenizer. At the end each question is asked from the
final state (each from the same checkpoint); an offline reader looks it up once when it has the
history lookup tool. Then, deterministically:

- ``evidence_available_strict`` / ``_lenient``: every / at least one evidence message is
  verbatim in the model input at question time;
- ``answer_in_context``: every content word of the answer is in that input (LoCoMo's
  adversarial category 5 is left out: its answer is a trap);
- ``correction_respected``: the corrected value is there and the superseded one never reads as
  current;
- ``input_tokens_total`` / ``_max`` / ``over_window_calls`` over every model call of the replay;
  ``summarizer_calls`` and tokens and ``compactions`` during the replay (the question phase's
  are counted apart: ``question_input_tokens_total``, ``question_model_calls``,
  ``question_over_window_calls``, ``question_summarizer_calls``);
- ``cacheable_prefix_ratio``: the replay's cacheable prefix tokens over its input tokens (each
  call's leading tokens identical to the previous call's request,
  :mod:`ctx_langgraph.budget.prefix`), and ``cost_usd`` / ``cost_usd_uncached``: the replay's
  model and summarizer calls at gpt-4o list prices with and without a prompt cache
  (:mod:`~ctx_langgraph.eval.pricing`; the prices are in ``settings["prices"]``);
- ``method``, ``tools``, ``question_phase``: what each strategy is, its agent's tools and what
  the reader does at question time
  (:func:`~ctx_langgraph.eval.strategies.describe_strategy`);
- ``coverage_gaps`` / ``coverage_overlaps``: model calls where an earlier message is neither in
  the input nor covered by its summary / is both (or two summaries are in it);
- ``orphan_tool_messages``: tool results without their call, and calls without their result, in
  model inputs; ``max_summaries_in_prompt``; ``warnings`` (Python warnings the strategy's code
  raised during the run, e.g. a peer that gave up trimming); ``wall_seconds``;
- ``answer_f1`` when a real model answers (``reader``), as LoCoMo scores it;
- long-term drift (:mod:`~ctx_langgraph.eval.drift`): each time the summary in the model input
  changes, the conversation's facts whose evidence it covers are looked for in its text;
  ``drift_final`` is the share kept by the last generation, ``drift_mean`` the mean over
  generations (``None``: no summary);
- context preparation time (:mod:`~ctx_langgraph.eval.latency`): each turn's ``invoke`` less
  the time inside the replayed model's generate, ``prep_ms_p50`` / ``_p95``, and what a
  compaction adds (``compaction_extra_ms``: mean over compaction turns minus the others);
- cost per phase (:func:`~ctx_langgraph.eval.pricing.phase_costs`): answer calls, the lookup's
  results in them (retrieval) and summarizer calls, for the replay and the question phase;
- with several seeds (``seeds``), every scalar figure is the mean across seeds and ``spread``
  holds its mean, min, max and standard deviation (:mod:`~ctx_langgraph.eval.seeds`).

Summaries come from the offline extractive summarizer for everyone (the peers through
:class:`~ctx_langgraph.eval.replay.ExtractiveChatModel`), or from one real chat model for
everyone (``summary_model``).

``metrics.json``::

    {"dataset": str, "format": "locomo" | "trace" | "synthetic", "window": int, "seed": int,
     "seeds": [int, ...], "conversations": [str, ...],
     "versions": {"ctx_langgraph": str, "langgraph": str, ...},
     "settings": {"retrieval_tokens": int, "usable": int, "trigger": int, "target": int,
                  "keep_recent_tokens": int, "summary_max_tokens": int, "counter": str,
                  "reader": str, "summarizer": str,
                  "prices": {"model": str, "input": float, "cached_input": float,
                             "output": float}},
     "strategies": {"<name>": {
         "method": str, "tools": [str, ...], "question_phase": str,
         "questions": int, "evidence_available_strict": float, "evidence_available_lenient":
         float, "answer_in_context": float, "correction_respected": float | null,
         "answer_f1": float | null,
         "by_category": {"<category>": {"questions": int, "evidence_available_strict": ...}},
         "input_tokens_total": int, "input_tokens_max": int, "model_calls": int,
         "cacheable_prefix_tokens": int, "cacheable_prefix_ratio": float | null,
         "output_tokens_total": int, "summarizer_cache_read_tokens": int,
         "cost_usd": float, "cost_usd_uncached": float,
         "over_window_calls": int, "summarizer_calls": int, "summarizer_input_tokens": int,
         "summarizer_output_tokens": int, "compactions": int, "coverage_gaps": int,
         "coverage_overlaps": int, "orphan_tool_messages": int, "max_summaries_in_prompt": int,
         "question_input_tokens_total": int, "question_model_calls": int,
         "question_over_window_calls": int, "question_summarizer_calls": int,
         "question_cacheable_prefix_tokens": int, "question_output_tokens_total": int,
         "question_summarizer_input_tokens": int, "question_summarizer_output_tokens": int,
         "question_summarizer_cache_read_tokens": int, "input_tokens_with_questions": int,
         "retrieval_tokens": int, "question_retrieval_tokens": int,
         "cost_answer_usd": float, "cost_retrieval_usd": float, "cost_summary_usd": float,
         "question_cost_answer_usd": float, "question_cost_retrieval_usd": float,
         "question_cost_summary_usd": float, "question_cost_usd": float,
         "cost_usd_with_questions": float,
         "drift_generations": int, "drift_facts_final": int, "drift_kept_final": int,
         "drift_final": float | null, "drift_mean": float | null,
         "prep_turns": int, "prep_ms_p50": float | null, "prep_ms_p95": float | null,
         "prep_ms_mean": float | null, "compaction_turns": int,
         "prep_ms_compaction_mean": float | null, "prep_ms_other_mean": float | null,
         "compaction_extra_ms": float | null,
         "warnings": int, "wall_seconds": float,
         "spread": {"<figure>": {"mean": float | null, "min": float | null,
                                 "max": float | null, "std": float | null, "n": int}},
         "samples": {"seeds": int, "conversations": int, "questions": int},
         "conversations": {"<name>": {the same figures for that conversation}}}},
     "per_seed": {"<seed>": {"<strategy>": {each scalar figure over that seed's runs}}}}

``series.json``: ``{"<conversation>": {"<strategy>": {"input_tokens": [per call],
"cacheable_prefix": [per call], "turn": [per call], "compaction_calls": [indexes of calls right
after a compaction], "prep_ms": [per turn], "compaction_turns": [turns that summarized],
"drift": [{"generation", "call", "turn", "facts", "kept", "share"} per summary
generation]}}}`` (:class:`~ctx_langgraph.eval.aggregate.RunSeries`).

Command line: ``ctx-langgraph eval --dataset PATH [--format locomo|trace|synthetic]
[--strategies a,b,...|all] [--window TOKENS] [--out DIR] [--seed N | --seeds 0,1,2]``.
"""

from ctx_langgraph.eval.harness import ConversationRun, run_conversation, run_eval
from ctx_langgraph.eval.replay import ExtractiveChatModel, ReplayModel, replay_turns
from ctx_langgraph.eval.strategies import STRATEGIES, build_strategy, eval_config

__all__ = [
    "STRATEGIES",
    "ConversationRun",
    "ExtractiveChatModel",
    "ReplayModel",
    "build_strategy",
    "eval_config",
    "replay_turns",
    "run_conversation",
    "run_eval",
]
