"""The main demo: what it compares, the thread it stores under the name it prints, its progress."""

from __future__ import annotations

import io
import itertools
import json
import re
import shlex
import time

import pytest

from ctx_langgraph.cli import main
from ctx_langgraph.eval.demo import PEERS, compared_strategies, run_demo
from ctx_langgraph.eval.strategies import STRATEGIES


class Timeline(io.StringIO):
    """A stream that remembers when each write happened."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def write(self, text: str) -> int:
        self.times.append(time.monotonic())
        return super().write(text)


@pytest.fixture(scope="module")
def kept_demo(tmp_path_factory):
    """A short demo with the default comparison, its history kept in a file."""
    tmp = tmp_path_factory.mktemp("demo")
    out, progress = io.StringIO(), Timeline()
    started = time.monotonic()
    status = run_demo(
        db=tmp / "history.sqlite",
        out_dir=tmp / "report",
        turns=14,
        out=out,
        progress_stream=progress,
        interval=0.25,
    )
    ended = time.monotonic()
    return {
        "status": status,
        "printed": out.getvalue(),
        "progress": progress,
        "started": started,
        "ended": ended,
        "tmp": tmp,
    }


def test_the_export_command_the_demo_prints_reads_the_thread_back(kept_demo, capsys):
    assert kept_demo["status"] == 0
    printed = kept_demo["printed"]
    thread = re.search(r"^thread\s+\|\s+(\S+)", printed, flags=re.M)
    recorded = re.search(r"^recorded_events\s+\|\s+([\d,]+)", printed, flags=re.M)
    assert thread and recorded
    [command] = [line for line in printed.splitlines() if "ctx-langgraph export" in line]
    argv = shlex.split(command.strip())
    assert argv[:2] == ["ctx-langgraph", "export"]
    assert argv[argv.index("--thread") + 1] == thread.group(1)
    assert argv[argv.index("--sqlite") + 1] == str(kept_demo["tmp"] / "history.sqlite")
    exported = kept_demo["tmp"] / "thread.json"
    argv[argv.index("--out") + 1] = str(exported)
    capsys.readouterr()
    assert main(argv[1:]) == 0
    document = json.loads(exported.read_text())
    assert len(document["events"]) == int(recorded.group(1).replace(",", "")) > 0
    assert document["summaries"]  # the compactions it showed are there too


def test_by_default_the_demo_compares_ours_with_the_peers_and_full_history(kept_demo):
    metrics = json.loads((kept_demo["tmp"] / "report" / "metrics.json").read_text())
    assert list(metrics["strategies"]) == list(PEERS)
    assert "--compare all" in kept_demo["printed"]
    ours = metrics["strategies"]["summary_tail_lookup"]
    assert ours["coverage_gaps"] == ours["coverage_overlaps"] == ours["orphan_tool_messages"] == 0


def test_the_demos_progress_is_never_silent(kept_demo):
    progress = kept_demo["progress"]
    marks = [kept_demo["started"], *progress.times, kept_demo["ended"]]
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    assert max(gaps) < 1.5, gaps
    lines = progress.getvalue().splitlines()
    assert all(re.match(r"\[\d+:\d\d\] ", line) for line in lines)  # elapsed time on every line
    for name in ("agent on SQLite", *PEERS, "writing the report and plots"):
        assert any(f"{name}: done in" in line for line in lines), name
    assert any("% of the work done" in line for line in lines)  # the status lines


def test_without_a_db_the_demo_says_how_to_keep_the_history(tmp_path):
    out = io.StringIO()
    status = run_demo(
        out_dir=tmp_path / "report",
        turns=6,
        compare="none",
        quiet=True,
        out=out,
        progress_stream=io.StringIO(),
    )
    assert status == 0
    printed = out.getvalue()
    assert "run the demo with --db FILE" in printed
    assert "ctx-langgraph export --sqlite FILE --thread tool-session-0" in printed
    assert not (tmp_path / "report").exists()  # nothing compared, no report


def test_quiet_shows_neither_events_nor_progress(tmp_path):
    out, progress = io.StringIO(), io.StringIO()
    run_demo(
        db=tmp_path / "h.sqlite",
        out_dir=tmp_path / "report",
        turns=12,
        compare="none",
        quiet=True,
        out=out,
        progress_stream=progress,
    )
    assert progress.getvalue() == ""
    assert "summary generation" not in out.getvalue()


def test_compare_names_a_set_or_lists_strategies():
    assert compared_strategies("peers") == PEERS
    assert compared_strategies(True) == PEERS
    assert compared_strategies("all") == STRATEGIES
    assert compared_strategies("none") == compared_strategies(False) == ()
    assert compared_strategies(" langchain,summary_tail ,langchain") == (
        "langchain",
        "summary_tail",
    )
    assert compared_strategies(["last_n"]) == ("last_n",)
    with pytest.raises(ValueError, match=r"unknown strategies \['magic'\]"):
        compared_strategies("summary_tail,magic")


_COMPARISON = re.compile(
    r"~([\d,]+) tokens.*?(>|<=) (trigger|the pre-compaction threshold) ([\d,]+)"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _check_comparisons(printed: str) -> None:
    lines = [line for line in printed.splitlines() if "-> " in line]
    assert any("-> compact" in line for line in lines)  # the session compacts
    for line in lines:
        found = _COMPARISON.search(line)
        assert found, line
        shown, sign, _, threshold = found.groups()
        assert (_number(shown) > _number(threshold)) == (sign == ">"), line
    for line in lines:
        margin = re.search(r"estimate ([\d,]+) \+ safety margin ([\d,]+)\)", line)
        assert margin, line  # both parts of the sum are named
        found = _COMPARISON.search(line)
        assert found
        assert _number(margin.group(1)) + _number(margin.group(2)) == _number(found[1]), line


def test_every_comparison_the_demo_prints_agrees_with_its_decision(kept_demo):
    """What the demo says it compared (the estimate with its safety margin) is what decided:
    each printed "A > trigger T -> compact" has A > T, in every line of the run."""
    _check_comparisons(kept_demo["printed"])


def test_every_comparison_agrees_with_its_decision_over_a_longer_session(tmp_path):
    out = io.StringIO()
    status = run_demo(
        out_dir=tmp_path / "report",
        turns=40,
        compare="none",
        out=out,
        progress_stream=io.StringIO(),
    )
    assert status == 0
    _check_comparisons(out.getvalue())


def _update(decision: str, input_tokens: int, margin: int, trigger: int = 2867) -> dict:
    budget = {
        "decision": decision,
        "input_tokens": input_tokens,
        "margin": margin,
        "total": input_tokens + margin,
        "trigger": trigger,
        "target": 1792,
        "usable": 3584,
    }
    return {"ctx_budget": {"context": {"budget": budget}}}


def test_a_compaction_line_shows_the_sum_the_trigger_was_compared_with():
    from ctx_langgraph.eval.demo import _events

    # the estimate alone is under the trigger; with the margin it is over: the line says so
    [line] = _events(_update("compact", 2844, 142), 10)
    assert "~2,986 tokens (estimate 2,844 + safety margin 142) > trigger 2,867 -> compact" in line


def test_a_compaction_not_for_size_does_not_claim_the_trigger_was_passed():
    from ctx_langgraph.eval.demo import _events

    [line] = _events(_update("compact", 1000, 50), 3)
    assert "~1,050 tokens (estimate 1,000 + safety margin 50) <= trigger 2,867" in line
    assert "-> compact" in line and "> trigger" not in line


def test_a_precompaction_line_names_its_own_threshold():
    from ctx_langgraph.eval.demo import _events

    [line] = _events(_update("precompact", 2500, 125), 7, precompact=2400)
    assert (
        "~2,625 tokens (estimate 2,500 + safety margin 125) > the pre-compaction threshold " in line
    )
    assert "2,400 (trigger 2,867) -> precompact" in line


def test_the_demo_does_not_print_a_temporary_path_it_deletes(tmp_path):
    out = io.StringIO()
    run_demo(
        out_dir=tmp_path / "report",
        turns=4,
        compare="none",
        quiet=True,
        out=out,
        progress_stream=io.StringIO(),
    )
    printed = out.getvalue()
    paths = re.findall(r"(/\S+\.sqlite)", printed)
    assert paths == [], paths  # the file is gone once the demo returns
    assert "a temporary file" in printed.splitlines()[0]  # and the first line says so
