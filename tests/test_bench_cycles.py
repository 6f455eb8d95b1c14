"""The phase-fair benchmarks: where each system's cycle around N lies, and the proof that ours'
simulated compactions are the ones its real nodes make."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

with warnings.catch_warnings():  # langmem imports a name LangGraph 1.0 deprecated
    warnings.simplefilter("ignore", DeprecationWarning)
    import budget
    import cycles
    from cycles import NeedsLongerThread, place

ENDS = list(range(2, 201, 2))  # a state may end after every second message
TOKENS = list(range(0, 2001, 10))  # 10 tokens a message


def test_no_summary_by_n_is_one_state_of_all_n() -> None:
    placement = place([150], ENDS, 101, TOKENS, room=10)
    assert placement.lengths == (100,) and placement.cycle is None
    assert placement.summaries == 0


def test_phases_span_the_cycle_around_n_and_stop_before_the_next_summary() -> None:
    # summaries before the calls after messages 40 and 160; N = 101 lies between them
    placement = place([39, 159], ENDS, 101, TOKENS, room=100)
    first, last = placement.lengths[0], placement.lengths[-1]
    assert placement.cycle == (40, 159) and placement.summaries == 1
    assert first == 40  # right after the summary
    headroom = int(cycles.HEADROOM_FACTOR * 100) + cycles.HEADROOM_TOKENS
    assert TOKENS[160] - TOKENS[last] >= headroom > TOKENS[160] - TOKENS[last + 2]
    assert list(placement.lengths) == sorted(placement.lengths)
    assert placement.lengths[2] == cycles.nearest(ENDS, (first + last) / 2)


def test_a_next_summary_past_the_thread_asks_for_a_longer_one() -> None:
    with pytest.raises(NeedsLongerThread):
        place([39], ENDS, 101, TOKENS, room=10)


def test_our_simulated_cycle_is_the_real_one() -> None:
    assert budget.check_our_simulation(size=300, window=4_000, seed=3) >= 5


def test_the_proof_catches_a_wrong_trigger(monkeypatch: pytest.MonkeyPatch) -> None:
    # without the safety margin the simulation compacts later than the real node
    monkeypatch.setattr(
        cycles.OurCycle, "_over", lambda self, i: self.request(i + 1) > self.trigger
    )
    with pytest.raises(AssertionError, match="compactions"):
        budget.check_our_simulation(size=300, window=4_000, seed=3)
