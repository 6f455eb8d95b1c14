"""What a turn costs beyond its wall time, for ``agent_turn.py``: ours' steps, the history
store's round trips per plain turn (SQLite and PostgreSQL), the checkpointed bytes per turn
against the plain agent, what a compaction adds to the turn that runs it, and profiles.

Each measure takes a :class:`Subject` (a compiled graph on its thread, its chat model and its
checkpointer) and the user messages of the turns it times, runs a few untimed turns first and
returns plain figures (per turn, averaged over the timed ones).
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from turn_steps import STEPS, RoundTrips, SerializedBytes, StepTimers


@dataclass
class Subject:
    """One agent on one thread, as a measure drives it."""

    name: str
    graph: Any
    model: Any
    saver: Any
    thread: dict[str, Any]
    closers: list[Callable[[], None]] = field(default_factory=list)

    def turn(self, question: str) -> None:
        self.graph.invoke({"messages": [HumanMessage(question)]}, self.thread)

    def close(self) -> None:
        for close in self.closers:
            close()


def _warm(subject: Subject, questions: Sequence[str], warmup: int) -> Sequence[str]:
    for question in questions[:warmup]:
        subject.turn(question)
    return questions[warmup:]


def step_breakdown(
    subjects: Sequence[Subject], questions: Sequence[str], warmup: int = 2
) -> dict[str, dict[str, Any]]:
    """Mean ms per turn in each of ours' steps, the model call and the checkpointer's writes,
    per subject, their turns taken in turn (a change of load hits them alike); ``other`` is the
    rest of the turn's wall (LangGraph's loop, channels, reading the checkpoint, the model
    node's own code). The steps are wall time: a store call waiting for the interpreter lock
    while the checkpointer serializes in its thread counts in its step."""
    for subject in subjects:
        _warm(subject, questions, warmup)
    timed = questions[warmup:]
    timers = {subject.name: StepTimers() for subject in subjects}
    walls: dict[str, list[float]] = {subject.name: [] for subject in subjects}
    gc.collect()
    for question in timed:
        for subject in subjects:
            gc.collect(1)  # (untimed) as agent_turn's blocks do
            with timers[subject.name].installed(subject.model, subject.saver):
                began = time.perf_counter()
                subject.turn(question)
                walls[subject.name].append(time.perf_counter() - began)
    out: dict[str, dict[str, Any]] = {}
    for subject in subjects:
        seconds, turns = timers[subject.name].seconds, len(timed)
        steps = {step: round(seconds.get(step, 0.0) * 1000 / turns, 3) for step in STEPS}
        wall = statistics.fmean(walls[subject.name]) * 1000
        out[subject.name] = {
            "wall_ms": round(wall, 2),
            "wall_p50_ms": round(statistics.median(walls[subject.name]) * 1000, 2),
            "steps_ms": steps,
            "other_ms": round(wall - sum(steps.values()), 2),
            "turns": turns,
        }
    return out


def round_trips(subject: Subject, questions: Sequence[str], warmup: int = 2) -> dict[str, Any]:
    """Transactions, statements and round trips (statements + BEGIN and COMMIT) per plain
    turn on the subject's history store, and the operations they ran."""
    timed = _warm(subject, questions, warmup)
    trips = RoundTrips()
    with trips.installed():
        for question in timed:
            subject.turn(question)
    turns = len(timed)
    return {
        "transactions": trips.transactions / turns,
        "statements": trips.statements / turns,
        "round_trips": trips.round_trips / turns,
        "operations": {name: n / turns for name, n in sorted(trips.operations.items())},
        "turns": turns,
    }


def serialized_bytes(subject: Subject, questions: Sequence[str], warmup: int = 2) -> float:
    """Bytes the checkpointer serialized per turn (channel values and pending writes)."""
    timed = _warm(subject, questions, warmup)
    counted = SerializedBytes()
    with counted.installed(subject.saver):
        for question in timed:
            subject.turn(question)
    return counted.bytes / len(timed)


def compaction_turns(
    subject: Subject, questions: Sequence[str], generation: Callable[[], int]
) -> dict[str, Any]:
    """What a compaction adds to the turn that runs it: each turn is timed by step (the
    compaction's steps included); a turn whose summary generation moved is a compaction turn.
    The added time is its wall, less the summarizer's own time, less the median plain turn."""
    timers = StepTimers()
    plain: list[float] = []
    compacting: list[tuple[float, dict[str, float]]] = []
    with timers.installed(subject.model, subject.saver, compaction=True):
        for question in questions:
            before, seconds = generation(), dict(timers.seconds)
            began = time.perf_counter()
            subject.turn(question)
            wall = time.perf_counter() - began
            if generation() == before:
                plain.append(wall)
                continue
            spent = {k: v - seconds.get(k, 0.0) for k, v in timers.seconds.items()}
            compacting.append((wall, spent))
    if not compacting or not plain:
        return {"compactions": len(compacting), "turns": len(questions)}
    base = statistics.median(plain)
    summarizer = "compact: summarize (the summarizer)"
    added = [wall - spent.get(summarizer, 0.0) - base for wall, spent in compacting]
    names = sorted({k for _, spent in compacting for k in spent if k.startswith("compact:")})
    return {
        "compactions": len(compacting),
        "turns": len(questions),
        "plain_turn_p50_ms": round(base * 1000, 2),
        "added_p50_ms": round(statistics.median(added) * 1000, 2),
        "added_max_ms": round(max(added) * 1000, 2),
        "steps_ms": {
            name: round(statistics.fmean(s.get(name, 0.0) for _, s in compacting) * 1000, 2)
            for name in names
        },
    }


class Profiles:
    """cProfile of each system's timed turns, one ``.prof`` file per system."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.profiles: dict[str, cProfile.Profile] = {}

    def run(self, name: str, call: Callable[[], Any]) -> Any:
        if self.directory is None:
            return call()
        profile = self.profiles.setdefault(name, cProfile.Profile())
        return profile.runcall(call)

    def write(self, top: int = 12) -> str:
        """Writes the files; returns each system's functions with the most own time."""
        if self.directory is None:
            return ""
        self.directory.mkdir(parents=True, exist_ok=True)
        out = io.StringIO()
        for name, profile in self.profiles.items():
            path = self.directory / f"{name.replace(' ', '_').strip('()')}.prof"
            profile.dump_stats(path)
            out.write(f"\n== {name}: {path}\n")
            stats = pstats.Stats(profile, stream=out)
            stats.strip_dirs().sort_stats("tottime").print_stats(top)
        return out.getvalue()
