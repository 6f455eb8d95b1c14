"""What a replay is expected to cost: the work units progress is counted in.

Strategies differ wildly in what one turn costs. Ours and LangChain's middleware keep a bounded
state, so a model step costs about the same at turn 10 and at turn 300; ``full``, ``last_n``
and langmem keep every message in the graph state, so each step re-serializes (and ``last_n``
re-counts) the whole history and the cost of a turn grows with it. Counted in turns, the time
left early in such a run comes out several times too low. Counted in predicted milliseconds,
it stays honest: whatever the machine's speed, the ratio of elapsed time to
predicted work done carries over to the work left.

The rates are CPU milliseconds measured on a 2-core x86 machine (the replay of a 300-turn
generated tool session and a LoCoMo conversation, one process per strategy): per model step,
plus per model step and message already in the history for strategies whose state keeps it all.
Only their ratios matter.

Examples:
    >>> from ctx_langgraph.eval.replay import replay_turns
    >>> from ctx_langgraph.eval.synthetic import tool_session
    >>> turns = replay_turns(tool_session(0, turns=40))
    >>> full, ours = run_cost("full", turns, questions=10), run_cost("langchain", turns, 10)
    >>> full.turns[-1] > full.turns[0], round(ours.turns[-1] / ours.turns[0], 1) < 3
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctx_langgraph.eval.replay import ReplayTurn

__all__ = [
    "AGENT",
    "REPORT_STEP",
    "RunCost",
    "StepRates",
    "agent_cost",
    "report_cost",
    "run_cost",
]


@dataclass(frozen=True)
class StepRates:
    """Predicted cost of one model step of a strategy, in milliseconds."""

    step_ms: float
    """Every step: graph machinery, the replayed model, token counting of a bounded request."""
    history_ms: float
    """Per message already in the history (0 when the strategy's state stays bounded)."""
    question_steps: float
    """Steps one end-of-run question takes (more with the lookup tool: it looks up first)."""
    setup_ms: float = 150.0
    """Building the agent, and measuring the run once it is over."""


_RATES: dict[str, StepRates] = {
    "full": StepRates(4.0, 0.049, 1.5),
    "last_n": StepRates(6.5, 0.095, 1.3),
    "summary_only": StepRates(8.0, 0.0, 1.2),
    "summary_tail": StepRates(7.5, 0.005, 1.2),
    "summary_tail_lookup": StepRates(9.5, 0.0, 5.0),
    "summary_tail_lookup_hybrid": StepRates(30.0, 0.0, 8.0),
    "langmem": StepRates(6.0, 0.033, 2.0),
    "langchain": StepRates(7.0, 0.0, 1.0),
}
_UNKNOWN = StepRates(8.0, 0.05, 2.0)

AGENT = StepRates(12.0, 0.0, 0.0, setup_ms=400.0)
"""The demo's agent: our full wiring with the history and the checkpoints in SQLite files."""


@dataclass(frozen=True)
class RunCost:
    """The predicted cost of one strategy over one conversation, in milliseconds."""

    setup: float
    turns: tuple[float, ...]
    """One entry per replayed turn."""
    question: float
    """One end-of-run question (each is asked from the same final state)."""
    questions: int

    @property
    def total(self) -> float:
        return self.setup + sum(self.turns) + self.question * self.questions


def _cost(rates: StepRates, turns: Sequence[ReplayTurn], questions: int) -> RunCost:
    history = 0
    per_turn: list[float] = []
    for turn in turns:
        per_turn.append(len(turn.steps) * (rates.step_ms + rates.history_ms * history))
        history += len(turn.messages)
    question = rates.question_steps * (rates.step_ms + rates.history_ms * history)
    return RunCost(rates.setup_ms, tuple(per_turn), question, questions)


def run_cost(strategy: str, turns: Sequence[ReplayTurn], questions: int) -> RunCost:
    """The predicted cost of replaying ``turns`` through ``strategy`` and asking ``questions``."""
    return _cost(_RATES.get(strategy, _UNKNOWN), turns, questions)


def agent_cost(turns: Sequence[ReplayTurn]) -> RunCost:
    """The predicted cost of the demo's agent going through ``turns``."""
    return _cost(AGENT, turns, 0)


REPORT_STEP = "writing the report and plots"
"""The progress step :func:`report_cost` prices."""


def report_cost(conversations: int, strategies: int) -> float:
    """The predicted cost of writing the report: loading matplotlib, then a plot per
    conversation (one line per strategy) and the recall plot."""
    return 800.0 + conversations * (100.0 + 50.0 * strategies)
