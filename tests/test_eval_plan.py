"""What the evaluation reports of a whole context plan: long-term drift read from each
strategy's summaries, context preparation time, cost per phase that adds up, the spread across
seeds, and strategy variants registered with their own options."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from ctx_langgraph.budget.counters import default_counter
from ctx_langgraph.cli import main
from ctx_langgraph.datasets import Conversation, load_locomo
from ctx_langgraph.eval import strategies as strategies_module
from ctx_langgraph.eval.drift import PlantedFact, check_generation
from ctx_langgraph.eval.harness import run_conversation, run_eval
from ctx_langgraph.eval.pricing import eval_price, replay_costs
from ctx_langgraph.eval.seeds import session_seeds
from ctx_langgraph.eval.strategies import STRATEGIES, STRATEGY_SPECS, StrategySpec
from ctx_langgraph.eval.synthetic import tool_session, tool_specs
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply
from tests.test_eval import locomo_file

CODE = "4471-QX"
SUMMARIZING = ("summary_only", "summary_tail", "summary_tail_lookup", "langmem", "langchain")


# ------------------------------------------------------------------------------ drift, by hand


def test_a_covered_fact_counts_as_kept_only_when_the_summary_states_it():
    fact = PlantedFact(CODE, ("m1",))
    found = check_generation(1, 4, 2, f"Ana's locker code is {CODE}.", frozenset({"m1"}), [fact])
    missing = check_generation(2, 9, 5, "Ana has a locker code.", frozenset({"m1"}), [fact])
    assert (found["facts"], found["kept"], found["share"]) == (1, 1, 1.0)
    assert (missing["facts"], missing["kept"], missing["share"]) == (1, 0, 0.0)
    # a fact the summary does not cover yet is not asked of it
    early = check_generation(1, 1, 1, "nothing yet", frozenset({"m0"}), [fact])
    assert (early["facts"], early["share"]) == (0, None)


def test_a_correction_is_kept_only_while_the_old_value_does_not_read_as_current():
    fact = PlantedFact("ORD-94793", ("t44-h",), superseded="ORD-26239")
    covered = frozenset({"t44-h"})
    right = check_generation(1, 1, 1, "refund on ORD-94793, not ORD-26239", covered, [fact])
    stale = check_generation(2, 2, 2, "ORD-94793 ... the refund is on ORD-26239", covered, [fact])
    assert right["share"] == 1.0 and stale["share"] == 0.0


# ------------------------------------------------------------------------------ drift, replayed


def _summaries(keep: bool) -> MeteringChatModel:
    """One summarizing model for everyone: ours get the extractive summary of their prompt,
    the peers a one-line summary; with ``keep=False`` the planted code is scrubbed out."""

    def reply(messages: list[BaseMessage]) -> AIMessage:
        answer = scripted_summary_reply(messages)
        if answer.text.startswith("I can only summarize"):  # a peer's own prompt
            answer = AIMessage(f"Ana's locker code at the climbing gym is {CODE}; small talk.")
        if keep:
            return answer
        return answer.model_copy(update={"content": answer.text.replace(CODE, "(a code)")})

    return MeteringChatModel(replies=[reply])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Conversation:
    path = tmp_path_factory.mktemp("plan") / "tiny.json"
    return load_locomo(locomo_file(path, sessions=4, turns=12))


@pytest.mark.parametrize("keep", [True, False], ids=["planted", "scrubbed"])
def test_drift_is_read_from_each_strategys_summary(tiny: Conversation, keep: bool):
    metrics, series = run_eval([tiny], STRATEGIES, window=2048, summary_model=_summaries(keep))
    entries = metrics["strategies"]
    for name in ("full", "last_n"):  # no summary: nothing to drift
        assert entries[name]["drift_generations"] == 0, name
        assert entries[name]["drift_final"] is None and entries[name]["drift_mean"] is None
        assert series["tiny"][name]["drift"] == []
    for name in SUMMARIZING:
        entry, generations = entries[name], series["tiny"][name]["drift"]
        assert entry["drift_generations"] == len(generations) >= 1, name
        assert len(generations) == entry["compactions"]
        assert [g["generation"] for g in generations] == list(range(1, len(generations) + 1))
        assert entry["drift_facts_final"] == 1, name  # the code (the trap question is left out)
        assert entry["drift_final"] == (1.0 if keep else 0.0), name
        covering = [g for g in generations if g["facts"]]
        assert all(g["kept"] == (1 if keep else 0) for g in covering), name


# ------------------------------------------------------------------------------ one synthetic run


@pytest.fixture(scope="module")
def synthetic() -> dict[str, Any]:
    session = tool_session(3, turns=50)
    names = ["full", "last_n", "summary_tail_lookup", "langchain"]
    metrics, series = run_eval([session], names, window=2048, tool_specs=tool_specs())
    return {"metrics": metrics, "series": series[session.name], "turns": 50}


def test_preparation_time_is_measured_for_every_turn_and_never_negative(synthetic):
    for name, entry in synthetic["metrics"]["strategies"].items():
        prep_ms = synthetic["series"][name]["prep_ms"]
        assert entry["prep_turns"] == len(prep_ms) == synthetic["turns"], name
        assert all(ms >= 0 for ms in prep_ms), name
        for key in ("prep_ms_p50", "prep_ms_p95", "prep_ms_mean", "prep_ms_other_mean"):
            assert entry[key] >= 0, (name, key)
        assert entry["prep_ms_p50"] <= entry["prep_ms_p95"]
        turns = synthetic["series"][name]["compaction_turns"]
        assert entry["compaction_turns"] == len(turns) <= entry["summarizer_calls"]
        assert all(1 <= turn <= synthetic["turns"] for turn in turns)
        if turns:  # what a compaction adds is a difference of means: either sign
            assert entry["prep_ms_compaction_mean"] >= 0
            assert entry["compaction_extra_ms"] is not None
        else:
            assert entry["compaction_extra_ms"] is None
    assert synthetic["metrics"]["strategies"]["summary_tail_lookup"]["compaction_turns"] > 0


def test_cost_fields_add_up_per_phase_and_show_the_lookup(synthetic):
    for name, entry in synthetic["metrics"]["strategies"].items():
        for phase in ("", "question_"):
            parts = sum(
                entry[f"{phase}{key}"]
                for key in ("cost_answer_usd", "cost_retrieval_usd", "cost_summary_usd")
            )
            assert parts == pytest.approx(entry[f"{phase}cost_usd"], abs=5e-6), (name, phase)
            assert min(entry[f"{phase}cost_answer_usd"], entry[f"{phase}cost_usd"]) > 0
        both = entry["cost_usd"] + entry["question_cost_usd"]
        assert entry["cost_usd_with_questions"] == pytest.approx(both, abs=2e-6)
        assert entry["cost_usd"] == pytest.approx(replay_costs(entry, eval_price())["cost_usd"])
        assert entry["retrieval_tokens"] == 0  # the recorded conversation never looks up
    lookup = synthetic["metrics"]["strategies"]["summary_tail_lookup"]
    assert 0 < lookup["question_retrieval_tokens"] < lookup["question_input_tokens_total"]
    assert lookup["question_cost_retrieval_usd"] > 0
    for name in ("full", "last_n", "langchain"):
        entry = synthetic["metrics"]["strategies"][name]
        assert entry["question_retrieval_tokens"] == entry["question_cost_retrieval_usd"] == 0
    summarizing = synthetic["metrics"]["strategies"]["langchain"]
    assert summarizing["cost_summary_usd"] > 0 and summarizing["summarizer_calls"] > 0
    assert synthetic["metrics"]["strategies"]["full"]["cost_summary_usd"] == 0


def test_the_report_shows_drift_time_and_cost_with_how_each_is_measured(synthetic, tmp_path):
    from ctx_langgraph.eval.plan_tables import TABLE_NOTES
    from ctx_langgraph.eval.report import plan_summary, write_report

    metrics = synthetic["metrics"]
    names = {path.name for path in write_report(metrics, {"s": synthetic["series"]}, tmp_path)}
    assert "drift.png" in names
    report = (tmp_path / "report.md").read_text()
    for title in ("Long-term drift", "Context preparation time", "Cost", "Across seeds"):
        assert f"\n## {title}\n" in report, title
    for note in TABLE_NOTES.values():
        assert note in report
    drift = report.split("## Long-term drift", 1)[1].split("\n## ", 1)[0]
    assert "| full | n/a | n/a | n/a | n/a | n/a |" in drift
    assert "(drift.png)" in drift
    cost = report.split("\n## Cost\n", 1)[1].split("\n## ", 1)[0]
    for name in metrics["strategies"]:
        for phase in ("replay", "questions", "total"):
            assert f"| {name} | {phase} |" in cost
    printed = plan_summary(metrics)
    assert "Spread across seeds: n=1" in printed and "compaction adds ms" in printed


# ------------------------------------------------------------------------------ seeds


def test_seeds_give_disjoint_datasets_and_one_seed_keeps_what_seed_gave():
    assert session_seeds([7], 3) == {7: [7, 8, 9]}
    plan = session_seeds([0, 1, 2], 3)
    sessions = [seed for group in plan.values() for seed in group]
    assert len(set(sessions)) == len(sessions) == 9


def test_seeds_report_mean_spread_and_samples(tmp_path, capsys):
    out = tmp_path / "seeds"
    common = ["--format", "synthetic", "--sessions", "1", "--turns", "40", "--window", "2048"]
    picked = ["--strategies", "last_n,summary_tail", "--reader", "offline", "--quiet"]
    assert main(["eval", *common, *picked, "--seeds", "0,1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["seeds"] == [0, 1] and sorted(metrics["per_seed"]) == ["0", "1"]
    assert len(metrics["conversations"]) == 2
    for name, entry in metrics["strategies"].items():
        assert entry["samples"]["seeds"] == 2 and entry["samples"]["conversations"] == 2
        assert entry["samples"]["questions"] == pytest.approx(2 * entry["questions"])
        tokens = entry["spread"]["input_tokens_total"]
        per_seed = [metrics["per_seed"][s][name]["input_tokens_total"] for s in ("0", "1")]
        assert tokens["n"] == 2 and tokens["std"] is not None
        assert (tokens["min"], tokens["max"]) == (min(per_seed), max(per_seed))
        assert entry["input_tokens_total"] == pytest.approx(sum(per_seed) / 2)
    assert metrics["strategies"]["last_n"]["spread"]["drift_final"]["n"] == 0  # n/a
    assert "Across seeds" in printed and " ± " in printed and "n = 2 seeds (0, 1)" in printed
    report = (out / "report.md").read_text()
    assert "## Across seeds" in report and "seeds 0, 1 (one dataset per seed)" in report


def test_one_seed_shows_n_1_and_several_seeds_on_fixed_data_are_refused(tmp_path, capsys):
    common = ["--format", "synthetic", "--sessions", "1", "--turns", "20", "--window", "2048"]
    picked = ["--strategies", "last_n", "--reader", "offline", "--quiet"]
    assert main(["eval", *common, *picked, "--out", str(tmp_path / "one")]) == 0
    printed = capsys.readouterr().out
    assert "Spread across seeds: n=1" in printed
    assert "Spread across seeds: n=1" in (tmp_path / "one" / "report.md").read_text()
    dataset = locomo_file(tmp_path / "tiny.json", sessions=2, turns=4)
    assert main(["eval", "--dataset", str(dataset), "--seeds", "0,1", "--quiet"]) == 2
    assert "several seeds need generated sessions" in capsys.readouterr().err


# ------------------------------------------------------------------------------ variants


def test_a_variant_is_one_entry_whose_options_reach_the_lookup_and_the_agent(
    tiny: Conversation, monkeypatch: pytest.MonkeyPatch
):
    seen: dict[str, Any] = {}
    make_tool, make_agent = (
        strategies_module.make_history_lookup_tool,
        strategies_module.create_context_agent,
    )

    def lookup_tool(store: Any, **kwargs: Any) -> Any:
        seen["lookup"] = kwargs
        return make_tool(store, **kwargs)

    def agent(model: Any, tools: Any, **kwargs: Any) -> Any:
        seen["agent"] = kwargs
        return make_agent(model, tools, **kwargs)

    def index_options(store: Any) -> dict[str, Any]:
        seen["store"] = store  # an index would be built from the run's store here
        return {"description": "Look up old messages (dummy index)."}

    monkeypatch.setattr(strategies_module, "make_history_lookup_tool", lookup_tool)
    monkeypatch.setattr(strategies_module, "create_context_agent", agent)
    monkeypatch.setitem(
        STRATEGY_SPECS,
        "dummy_lookup_variant",
        StrategySpec(
            "ours",
            "ours: the summary, the tail and a lookup over a dummy index",
            lookup=True,
            lookup_options=index_options,
            agent_options={"prompt": "Variant prompt."},
        ),
    )
    run = run_conversation(
        tiny, "dummy_lookup_variant", window=2048, counter=default_counter("gpt-4o")
    )
    assert seen["lookup"]["description"] == "Look up old messages (dummy index)."
    assert seen["lookup"]["max_tokens"] > 0  # the harness's own arguments are still there
    assert seen["store"] is seen["agent"]["store"]
    assert seen["agent"]["prompt"] == "Variant prompt."
    assert run.tools == ("history_lookup",)
    assert run.metrics["coverage_gaps"] == 0 and run.metrics["answer_in_context"] == 1.0
    assert run.metrics["question_model_calls"] == 2 * len(tiny.questions)  # it looks up
    assert "dummy_lookup_variant" not in STRATEGIES  # "all" is the registered list


def test_every_registered_strategy_is_described_by_its_entry():
    assert tuple(STRATEGY_SPECS) == STRATEGIES
    for name, spec in STRATEGY_SPECS.items():
        assert spec.method and spec.family in ("plain", "ours", "langmem", "langchain"), name
    assert {name for name, spec in STRATEGY_SPECS.items() if spec.lookup} == {
        "summary_tail_lookup",
        "summary_tail_lookup_segments",
        "summary_tail_lookup_hybrid",
    }
    assert {name for name, spec in STRATEGY_SPECS.items() if spec.index} == {
        "summary_tail_lookup_hybrid"
    }
    segments = STRATEGY_SPECS["summary_tail_lookup_segments"]
    assert segments.lookup_options == {"segments": True}
    assert segments.config_options == {"segment_events": 40}


def test_the_hybrid_variant_embeds_and_reports_what_it_cost():
    """``summary_tail_lookup_hybrid``: the lookup searches by meaning too (the local model);
    its embedding calls are counted per phase and shown in the cost table."""
    from ctx_langgraph.datasets import synthetic_conversation
    from ctx_langgraph.eval import run_eval
    from ctx_langgraph.eval.plan_tables import cost_table

    conv = synthetic_conversation(seed=3, sessions=2, turns_per_session=15)
    metrics, _ = run_eval([conv], ["summary_tail_lookup_hybrid"], window=2048)
    hybrid = metrics["strategies"]["summary_tail_lookup_hybrid"]
    assert hybrid["embed_tokens"] > 0 and hybrid["question_embed_tokens"] > 0
    assert hybrid["embed_seconds"] > 0 and hybrid["embed_calls"] > 0
    headers, rows = cost_table(metrics)
    column = headers.index("embed tokens")
    assert [row[column] for row in rows] == [
        f"{hybrid['embed_tokens']:,}",
        f"{hybrid['question_embed_tokens']:,}",
        f"{hybrid['embed_tokens'] + hybrid['question_embed_tokens']:,}",
    ]


def test_the_segment_variant_builds_its_index_and_its_lookup_searches_it():
    """``summary_tail_lookup_segments``: the same agent as ``summary_tail_lookup`` plus the
    segment index (built in the replay, never in a prompt) and a lookup that searches it."""
    from ctx_langgraph.datasets import synthetic_conversation
    from ctx_langgraph.eval import run_eval

    conv = synthetic_conversation(seed=2, sessions=2, turns_per_session=40)
    metrics, _ = run_eval(
        [conv], ["summary_tail_lookup", "summary_tail_lookup_segments"], window=2048
    )
    plain = metrics["strategies"]["summary_tail_lookup"]
    indexed = metrics["strategies"]["summary_tail_lookup_segments"]
    assert indexed["coverage_gaps"] == indexed["coverage_overlaps"] == 0
    assert indexed["orphan_tool_messages"] == 0
    # the index costs summarizer calls, never prompt tokens in the replay
    assert indexed["summarizer_calls"] > plain["summarizer_calls"]
    assert indexed["input_tokens_total"] == plain["input_tokens_total"]
