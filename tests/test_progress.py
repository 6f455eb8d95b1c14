"""Run progress: plain lines and live bars, the time left measured in cost units, no silence."""

from __future__ import annotations

import io
import itertools
import random
import re
import time
from typing import Any

import pytest

from ctx_langgraph.datasets import synthetic_conversation
from ctx_langgraph.eval.cost import run_cost
from ctx_langgraph.eval.harness import plan_eval, run_conversation, run_eval, task_name
from ctx_langgraph.eval.progress import Progress, remaining_seconds
from ctx_langgraph.eval.replay import replay_turns
from ctx_langgraph.eval.strategies import STRATEGIES

STAMP = r"\[\d+:\d\d\]"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Timeline(io.StringIO):
    """A stream that remembers when each write happened."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.clock = clock
        self.times: list[float] = []

    def write(self, text: str) -> int:
        self.times.append(self.clock())
        return super().write(text)


class TerminalStream(io.StringIO):
    def isatty(self) -> bool:
        return True


# --------------------------------------------------------------------------- plain lines


def test_plain_lines_carry_the_elapsed_time_and_say_when_work_starts_and_ends():
    clock = FakeClock()
    out = io.StringIO()
    progress = Progress(stream=out, interval=None, clock=clock)
    with progress:
        assert not progress.live
        task = progress.task("26 · summary_tail", total=20.0)
        clock.now += 65
        progress.advance(task, 5.0, detail="turn 5/20")
        progress.log("turn 12: compacted 38 messages")
        progress.advance(task, 15.0, detail="turn 20/20")
        with progress.step("writing the report"):
            clock.now += 2
    assert out.getvalue().splitlines() == [
        "[0:00] 26 · summary_tail: started",
        "[1:05] turn 12: compacted 38 messages",
        "[1:05] 26 · summary_tail: done in 1m05s",
        "[1:05] writing the report...",
        "[1:07] writing the report: done in 2.0s",
    ]


def test_status_lines_come_every_interval_with_work_done_time_left_and_what_runs():
    clock = FakeClock()
    out = Timeline(clock)
    progress = Progress(stream=out, interval=4.0, clock=clock)  # no `with`: no ticker thread
    progress.plan({"a": 100.0, "b": 300.0})
    a = progress.task("a", total=100.0)
    for turn in range(1, 101):  # 1 unit a second, ticked four times a second
        for _ in range(4):
            clock.now += 0.25
            progress.tick()
        progress.advance(a, 1.0, detail=f"turn {turn}/100")
    lines = out.getvalue().splitlines()
    status = [line for line in lines if "of the work done" in line]
    assert len(status) == 25  # every 4 s of 100 s
    assert max(b - a for a, b in zip(out.times, out.times[1:], strict=False)) <= 4.0
    assert status[0] == "[0:04] 1% of the work done; a (turn 3/100), 4.0s in"
    assert status[-2] == "[1:36] 24% of the work done, about 5m08s left; a (turn 95/100), 1m36s in"
    assert lines[-1] == "[1:40] a: done in 1m40s"


def test_without_a_plan_the_status_line_gives_each_tasks_own_time_left():
    clock = FakeClock()
    out = io.StringIO()
    progress = Progress(stream=out, interval=4.0, clock=clock)
    task = progress.task("30 · full", total=10.0)
    clock.now += 4
    progress.advance(task, 2.0, detail="turn 2/10")
    progress.tick()
    assert out.getvalue().splitlines()[-1] == (
        "[0:04] 30 · full (turn 2/10), 4.0s in, 20%, about 16.0s left"
    )


def test_a_task_that_ends_early_counts_all_its_work_and_open_tasks_are_stopped():
    clock = FakeClock()
    out = io.StringIO()
    with Progress(stream=out, interval=None, clock=clock) as progress:
        progress.plan({"x": 10.0, "y": 10.0})
        x = progress.task("x", total=10.0)
        progress.advance(x, 4.0)
        progress.task_done(x)
        progress.advance(x, 3.0)  # ignored: the task is over
        assert progress.estimate()[1] == pytest.approx(0.5)
        progress.task("y", total=10.0)
    lines = out.getvalue().splitlines()
    assert lines[1] == "[0:00] x: done in 0.0s"
    assert lines[-1] == "[0:00] y: stopped after 0.0s"


def test_planning_the_same_work_twice_counts_it_once():
    progress = Progress(enabled=False, clock=FakeClock())
    progress.plan({"26 · full": 50.0, "report": 10.0})
    progress.plan({"26 · full": 50.0})
    task = progress.task("26 · full", total=50.0)
    progress.advance(task, 30.0)
    assert progress.estimate()[1] == pytest.approx(0.5)
    with progress.step("report", units=10.0):
        pass
    assert progress.estimate()[1] == pytest.approx(40 / 60)


def test_disabled_progress_writes_nothing_and_refusing_the_terminal_writes_plain_lines():
    out = io.StringIO()
    with Progress(enabled=False, stream=out, force_terminal=True) as progress:
        task = progress.task("x", total=4)
        progress.advance(task, 4)
        progress.log("hello")
        with progress.step("y"):
            pass
        assert not progress.live
    assert out.getvalue() == ""
    plain = TerminalStream()
    with Progress(stream=plain, force_terminal=False, interval=None) as progress:
        assert not progress.live
        progress.log("plain")
    assert re.fullmatch(rf"{STAMP} plain\n", plain.getvalue())


def test_live_bars_show_the_run_the_task_its_detail_and_the_time_left():
    pytest.importorskip("rich")
    out = io.StringIO()
    with Progress(stream=out, force_terminal=True) as progress:
        assert progress.live
        progress.plan({"26 · langmem": 5.0, "26 · summary_tail": 10.0})
        done = progress.task("26 · langmem", total=5.0)
        progress.advance(done, 5.0)
        task = progress.task("26 · summary_tail", total=10.0)
        progress.advance(task, 3.0, detail="turn 3/10")
        progress.log("turn 7: compacted [12] messages")
        progress.echo("an event of the run", out)
    text = out.getvalue()  # the last frame: the bar where the run stopped
    for shown in ("all", "26 · summary_tail", "turn 3/10", "30%", "53%", "left"):
        assert shown in text, shown
    assert "turn 7: compacted [12] messages" in text and "an event of the run" in text
    assert "26 · langmem: done in" in text and "26 · summary_tail: stopped after" in text


def test_echo_writes_the_runs_own_output_to_its_stream_when_bars_are_elsewhere():
    pytest.importorskip("rich")
    bars, output = io.StringIO(), io.StringIO()
    with Progress(stream=bars, force_terminal=True) as progress:
        progress.echo("turn 9: summary generation 1", output)
    assert output.getvalue() == "turn 9: summary generation 1\n"
    assert "summary generation" not in bars.getvalue()


def test_the_bars_share_a_terminal_with_the_runs_output_without_tearing():
    pytest.importorskip("rich")
    terminal = TerminalStream()
    with Progress(stream=terminal) as progress:
        assert progress.live
        progress.echo("turn 9: summary generation 1", terminal)
    assert "turn 9: summary generation 1" in terminal.getvalue()


# --------------------------------------------------------------------------- time left


def test_remaining_seconds_waits_for_enough_work_then_scales_elapsed_time():
    assert remaining_seconds(10.0, 25.0, 100.0) == 30.0
    assert remaining_seconds(0.5, 25.0, 100.0) is None  # too early
    assert remaining_seconds(10.0, 1.0, 100.0) is None  # too little done
    assert remaining_seconds(10.0, 100.0, 100.0) == 0.0


def _uneven_workload(seed: int) -> list[tuple[str, list[float], list[float]]]:
    """Seven runs of 150 turns: (name, what each turn really costs, its predicted units).

    Runs differ 10x in cost per turn, some grow with the history (quadratic in total), each
    turn is off its prediction by up to 30%, and each run's prediction by up to a third,
    the runs the model underrates first.
    """
    rng = random.Random(seed)
    shapes = [  # name, seconds per turn at the start, growth per turn, model's bias
        ("last_n", 0.02, 0.030, 0.75),
        ("full", 0.01, 0.030, 0.8),
        ("langmem", 0.01, 0.020, 0.9),
        ("summary_only", 0.02, 0.0, 1.0),
        ("summary_tail", 0.02, 0.001, 1.1),
        ("summary_tail_lookup", 0.03, 0.0, 1.25),
        ("langchain", 0.02, 0.0, 1.33),
    ]
    runs = []
    for name, base, growth, bias in shapes:
        model = [base * (1 + growth * turn) for turn in range(150)]
        real = [cost * rng.uniform(0.7, 1.3) for cost in model]
        runs.append((name, real, [cost * bias for cost in model]))
    return runs


def _worst_ratio(runs: list[tuple[str, list[float], list[float]]], *, by_turns: bool) -> float:
    """Drive a Progress through the runs on a fake clock; the worst ratio of its time left to
    the real time left, once 5% of the work is done and while 2% of the time is left."""
    clock = FakeClock()
    progress = Progress(enabled=False, clock=clock)
    units = {name: (len(real) if by_turns else sum(pred)) for name, real, pred in runs}
    progress.plan(units)
    total_time = sum(sum(real) for _, real, _ in runs)
    start, worst = clock.now, 1.0
    for name, real, predicted in runs:
        task = progress.task(name, total=units[name])
        for seconds, unit in zip(real, predicted, strict=True):
            clock.now += seconds
            progress.advance(task, 1.0 if by_turns else unit)
            _, share, left = progress.estimate()
            true_left = total_time - (clock.now - start)
            if share is None or share < 0.05 or true_left < 0.02 * total_time:
                continue
            assert left is not None
            worst = max(worst, left / true_left, true_left / left)
    return worst


@pytest.mark.parametrize("seed", range(5))
def test_the_time_left_is_within_twice_the_real_time_left_on_uneven_costs(seed):
    runs = _uneven_workload(seed)
    assert _worst_ratio(runs, by_turns=False) <= 2.0
    # the same runs counted in turns: the estimate is off by more than 2x
    assert _worst_ratio(runs, by_turns=True) > 2.0


# --------------------------------------------------------------------------- the harness


@pytest.fixture(scope="module")
def small_conversation():
    return synthetic_conversation(seed=2, sessions=2, turns_per_session=16)


def test_a_run_reports_its_predicted_cost_turn_by_turn_then_question_by_question(
    small_conversation,
):
    from ctx_langgraph.budget.counters import default_counter

    calls: list[tuple[float, str]] = []
    run_conversation(
        small_conversation,
        "full",
        window=2048,
        counter=default_counter("gpt-4o"),
        advance=lambda units, detail: calls.append((units, detail)),
    )
    turns = replay_turns(small_conversation)
    questions = len(small_conversation.questions)
    cost = run_cost("full", turns, questions)
    assert sum(units for units, _ in calls) == pytest.approx(cost.total)
    details = [detail for _, detail in calls]
    assert details[0] == f"turn 0/{len(turns)}"
    assert details[1 : len(turns) + 1] == [
        f"turn {n}/{len(turns)}" for n in range(1, len(turns) + 1)
    ]
    assert details[len(turns) + 1 : -1] == [
        f"question {n}/{questions}" for n in range(1, questions + 1)
    ]
    assert details[-1] == "measured"
    turn_units = [units for units, _ in calls[1 : len(turns) + 1]]
    assert turn_units[-1] > turn_units[0]  # the full history grows: later turns cost more


def test_run_eval_plans_every_run_then_fills_the_plan(small_conversation):
    clock_out = io.StringIO()
    strategies = ["full", "langchain"]
    with Progress(stream=clock_out, interval=None) as progress:
        run_eval([small_conversation], strategies, window=2048, progress=progress)
        assert progress.estimate()[1] == pytest.approx(1.0)
    planned = plan_eval([small_conversation], strategies)
    assert list(planned) == [task_name(small_conversation, name) for name in strategies]
    assert planned[task_name(small_conversation, "full")] > 0
    lines = clock_out.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines if "started" in line] == [
        f"{task_name(small_conversation, name)}: started" for name in strategies
    ]


def test_every_strategy_has_a_cost_model():
    turns = replay_turns(synthetic_conversation(seed=1, sessions=1, turns_per_session=10))
    for name in STRATEGIES:
        cost = run_cost(name, turns, questions=3)
        assert cost.total > 0 and len(cost.turns) == len(turns)


# --------------------------------------------------------------------------- no silence


def test_the_ticker_keeps_plain_output_alive_through_a_long_silent_step():
    out = Timeline()
    started = time.monotonic()
    with Progress(stream=out, interval=0.2) as progress:
        progress.plan({"work": 10.0})
        with progress.step("loading"):
            time.sleep(1.2)  # nothing to count meanwhile
    ended = time.monotonic()
    marks = [started, *out.times, ended]
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    assert max(gaps) < 0.6, gaps
    assert sum("loading" in line for line in out.getvalue().splitlines()) >= 4


def test_a_step_that_raises_is_stopped_not_done():
    out = io.StringIO()
    with (
        pytest.raises(ValueError),
        Progress(stream=out, interval=None, clock=FakeClock()) as progress,
        progress.step("loading"),
    ):
        raise ValueError("bad data")
    assert out.getvalue().splitlines()[-1] == "[0:00] loading: stopped after 0.0s"
