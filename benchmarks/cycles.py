"""Each system's compaction cycle around N, and the phases of it the benchmarks measure.

Every system compared here summarizes in cycles: right after a summary it holds a small view (the
summary and a recent tail), which grows with the thread until its trigger fires again. What a turn
costs follows the view held, so comparing systems at one history length compares them at
whatever point of their own cycles that length happens to fall on. The benchmarks measure each
system at :data:`PHASES` of its own cycle around N instead, and report the mean over them:

- **the cycle around N** runs from the system's last summary at or before N to its next one
  (found by simulating the thread past N). Phase 0 is the history length right after that summary,
  phase 1 the longest one whose timed turns still stay under the trigger (the tokens between it
  and the next summary are at least 1.25 times what the timed turns add, plus 500), and phase p
  the length at ``p`` of the way between them (:func:`place`), each snapped to a length after
  which the agent calls the model. Each phase's timed turns run inside one cycle.
- **A system that has not summarized by N has no cycle yet**: it holds all N messages, the one
  state measured.

The peers' summary points and states come from ``peer_views``. Ours' come from
:class:`OurCycle`: one pass over the thread with ``ctx_budget``'s trigger arithmetic (the exact
request, ``TiktokenCounter``, plus the safety margin, above the trigger), where every compaction
is ours' real one: its ``ctx_compact`` node (the offline ``ExtractiveSummarizer``, ours' default),
on a SQLite history store that records the thread as ``ctx_budget`` does. The store is copied
(SQLite's backup API) at each length measured, so each phase's store holds exactly the messages
before it and the summaries committed by then. :func:`check_our_cycle` proves the pass against
the real ``ctx_budget`` and ``ctx_compact`` nodes run call by call.
"""

from __future__ import annotations

import bisect
import itertools
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from peer_views import apply_update, is_call_point

from ctx_langgraph.compaction.cut import first_coverable
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.state import merge_facts, unpack

PHASES = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Where in its cycle each system is measured: right after its summary, ..., just before the next."""
HEADROOM_FACTOR, HEADROOM_TOKENS = 1.25, 500


class NeedsLongerThread(Exception):
    """A system's next summary lies past the simulated thread: simulate a longer one."""


@dataclass(frozen=True)
class Placement:
    """The history lengths at which one system is measured around N."""

    lengths: tuple[int, ...]
    """One per phase; a single one (all of N) when the system has not summarized by N."""
    cycle: tuple[int, int] | None
    """The length right after its last summary at or before N, and the index of the message
    before the model call at which its next summary fires; None: no summary by N."""
    summaries: int
    """Summaries made by the start of the cycle (by N when there is no cycle)."""

    def as_json(self) -> dict[str, Any] | None:
        if self.cycle is None:
            return None
        return {
            "start_length": self.cycle[0],
            "next_summary_at": self.cycle[1] + 1,
            "summaries_before": self.summaries,
            "lengths": list(self.lengths),
        }


def prefix_sums(counts: Sequence[int]) -> list[int]:
    return [0, *itertools.accumulate(counts)]


def measured_length(ends: Sequence[int], size: int) -> int:
    """The longest length a state may have, at most ``size``."""
    return ends[bisect.bisect_right(ends, size) - 1]


def place(
    points: Sequence[int],
    ends: Sequence[int],
    size: int,
    tokens: Sequence[int],
    room: int,
    phases: Sequence[float] = PHASES,
) -> Placement:
    """The lengths at which a system whose summaries fell at ``points`` (indices of the message
    before the model call) is measured around ``size``.

    Args:
        points: where it summarized, in order, over the whole simulated thread.
        ends: the lengths a state may have (ascending), e.g. the thread cut right before a model
            reply.
        size: N.
        tokens: prefix sums of the thread's exact message counts.
        room: the tokens the timed turns add to the state.
    """
    n = measured_length(ends, size)
    done = bisect.bisect_right(points, n - 1)  # summaries within the first n messages
    if done == 0:
        return Placement((n,), None, 0)
    if done == len(points):
        raise NeedsLongerThread(f"no summary after message {points[-1]}")
    first = ends[bisect.bisect_left(ends, points[done - 1] + 1)]
    following = points[done]
    inside = ends[bisect.bisect_left(ends, first) : bisect.bisect_right(ends, following)]
    headroom = int(HEADROOM_FACTOR * room) + HEADROOM_TOKENS
    fitting = [end for end in inside if tokens[following + 1] - tokens[end] >= headroom]
    last = fitting[-1] if fitting else first
    usable = [end for end in inside if end <= last]
    lengths = tuple(nearest(usable, first + p * (last - first)) for p in phases)
    return Placement(lengths, (first, following), done)


def nearest(values: Sequence[int], target: float) -> int:
    """The value closest to ``target`` (the lower one on a tie); ``values`` ascending."""
    index = bisect.bisect_left(values, target)
    near = values[max(0, index - 1) : index + 1]
    return min(near, key=lambda v: (abs(v - target), v))


class OurCycle:
    """Ours' compactions over a thread: ``ctx_budget``'s trigger arithmetic at every model call,
    ours' real ``ctx_compact`` wherever it fires.

    Call :meth:`advance` with growing sizes; after each, :meth:`state_at` and :meth:`snapshot` give
    ours' state and store at the lengths of that size's cycle (lengths only grow).
    """

    def __init__(
        self,
        history: Sequence[BaseMessage],
        *,
        counts: Sequence[int],
        overhead: int,
        config: ContextConfig,
        compact: Runnable[Any, Any],
        store: SQLiteHistoryStore,
        run_config: Any,
        counter: Any,
    ) -> None:
        self.history, self.overhead, self.config = history, overhead, config
        self.tokens = prefix_sums(counts)
        self.trigger = config.resolve().trigger
        self.compact, self.store, self.run_config, self.counter = (
            compact,
            store,
            run_config,
            counter,
        )
        self.index = {m.id: i for i, m in enumerate(history)}
        self.head: list[BaseMessage] = []  # the system prompt and summary before the tail
        self.head_tokens = 0
        self.tail = 0  # the first history message of the view
        self.context: dict[str, Any] = {"projection_epoch": 0}
        self.points: list[int] = []  # where it compacted
        self.pending: int | None = None  # where it will compact next (not done yet)
        self.scanned = 0
        self.recorded = 0

    def request(self, length: int) -> int:
        """Ours' exact request with the first ``length`` messages (a length of this cycle)."""
        tail = self.tokens[length] - self.tokens[self.tail]
        return self.overhead + self.head_tokens + tail

    def _over(self, index: int) -> bool:
        request = self.request(index + 1)
        return request + self.config.margin(request) > self.trigger

    def advance(self, length: int) -> list[int]:
        """Compact wherever ours would within the first ``length`` messages (a length from
        :func:`measured_length`), then find where it compacts next. Returns the compaction
        points, the next one last (when the thread goes that far)."""
        while True:
            if self.pending is None:
                self.pending = next(
                    (
                        index
                        for index in range(self.scanned, len(self.history))
                        if is_call_point(self.history, index) and self._over(index)
                    ),
                    None,
                )
                if self.pending is None:  # not before the thread's end
                    self.scanned = len(self.history)
                    return list(self.points)
                self.scanned = self.pending + 1
            if self.pending >= length:
                return [*self.points, self.pending]
            self._compact(self.pending)
            self.pending = None

    def _record(self, length: int) -> None:
        for start in range(self.recorded, length, 1000):
            self.store.append(self.run_config["configurable"]["thread_id"],
                              list(self.history[start : min(start + 1000, length)]))  # fmt: skip
        self.recorded = max(self.recorded, length)

    def _compact(self, index: int) -> None:
        self._record(index + 1)
        request = self.request(index + 1)
        state: dict[str, Any] = {
            "messages": [*self.head, *self.history[self.tail : index + 1]],
            "context": {**self.context, "budget": {"total": request + self.config.margin(request)}},
        }
        update = self.compact.invoke(state, self.run_config)
        status = unpack(update.get("context")).get("compaction", {}).get("status")
        if status != "committed":
            raise RuntimeError(f"ours' compaction at message {index} did not commit: {update}")
        view = apply_update(state["messages"], update)
        start = first_coverable(view)
        self.head = view[:start]
        self.head_tokens = sum(self.counter.count_message(m) for m in self.head)
        self.tail = self.index[view[start].id]
        if [m.id for m in view[start:]] != [m.id for m in self.history[self.tail : index + 1]]:
            raise RuntimeError("ours' compacted view is not its summary + a tail of the thread")
        self.context = merge_facts(self.context, update["context"])
        self.points.append(index)

    def state_at(self, length: int) -> dict[str, Any]:
        """Ours' state with the first ``length`` messages (of the current cycle): the view and
        the context channel (recorded through the view's last message)."""
        if length <= (self.points[-1] if self.points else -1):
            raise ValueError(f"length {length} is before ours' last compaction")
        messages = [*self.head, *self.history[self.tail : length]]
        context = {**self.context, "recorded_through_id": messages[-1].id}
        return {"messages": messages, "context": context}

    def snapshot(self, length: int, path: Path) -> Path:
        """A copy of the store holding exactly the first ``length`` messages (and the summaries
        committed before them)."""
        if length < self.recorded:
            raise ValueError(f"the store already holds {self.recorded} messages, not {length}")
        self._record(length)
        target = sqlite3.connect(str(path))
        try:
            self.store.db.conn.backup(target)
        finally:
            target.close()
        return path


def check_our_cycle(
    history: Sequence[BaseMessage],
    *,
    make: Callable[[SQLiteHistoryStore], tuple[Runnable[Any, Any], Runnable[Any, Any]]],
    cycle: Callable[[SQLiteHistoryStore, Runnable[Any, Any]], OurCycle],
    tmp: Path,
    run_config: Any,
) -> int:
    """Run ours' real ``ctx_budget`` (``make`` builds it and ``ctx_compact`` on a store) before
    every model call of ``history``, with ``ctx_compact`` wherever it decides to compact and
    ``ctx_budget`` again after it (as the graph routes them), applying the updates through the
    channels' reducers; compare where it compacted and its final view with :class:`OurCycle`'s
    (``cycle`` builds one on another store). ``AssertionError`` on a difference; returns the
    compactions made."""
    real = SQLiteHistoryStore.from_path(tmp / "real.sqlite")
    real.setup()
    budget, compact = make(real)
    messages: list[BaseMessage] = []
    context: dict[str, Any] = {}
    pending: list[BaseMessage] = []
    points: list[int] = []

    def apply(node: Runnable[Any, Any]) -> str:
        nonlocal messages, context
        update = node.invoke({"messages": messages, "context": context}, run_config) or {}
        messages = apply_update(messages, update)
        context = merge_facts(context, update.get("context"))
        return str((context.get("budget") or {}).get("decision"))

    for index, message in enumerate(history):
        pending.append(message)
        if not is_call_point(history, index):
            continue
        messages, pending = apply_update(messages, {"messages": pending}), []
        if apply(budget) == "compact":
            points.append(index)
            apply(compact)
            assert apply(budget) == "proceed", context["budget"]
    messages = apply_update(messages, {"messages": pending})
    real.close()

    store = SQLiteHistoryStore.from_path(tmp / "simulated.sqlite")
    store.setup()
    _, simulated_compact = make(store)
    ours = cycle(store, simulated_compact)
    simulated = ours.advance(len(history))
    assert simulated == points, f"compactions: real at {points}, simulated at {simulated}"
    view = ours.state_at(len(history))["messages"]
    store.close()

    def shape(view: Sequence[BaseMessage]) -> list[tuple[Any, ...]]:
        return [(m.type, m.id, m.text) for m in view]

    assert shape(messages) == shape(view), "the final view differs from the simulated one"
    return len(points)


@dataclass
class OursPlaced:
    """Where ours is measured at each size, and its state (and store copy) at each length."""

    placements: dict[int, Placement]
    states: dict[int, tuple[dict[str, Any], Path]]
    equal_view: int | None  # ours at the largest size, holding the smallest's view


def place_ours(
    cycle: OurCycle,
    sizes: list[int],
    ends: Sequence[int],
    tokens: Sequence[int],
    room: int,
    tmp: Path,
) -> OursPlaced:
    """Run ours' real cycle through every size: its phases, the states they start from, and
    (when the smallest size has no cycle) the point of the largest's cycle holding as many
    tokens as the smallest's whole view."""
    placed = OursPlaced({}, {}, None)
    smallest = 0
    for size in sizes:
        placement = place(cycle.advance(measured_length(ends, size)), ends, size, tokens, room)
        placed.placements[size] = placement
        lengths = set(placement.lengths)
        if size == sizes[0]:
            smallest = cycle.request(placement.lengths[0])
        elif size == sizes[-1] and equal_view_needed(placed.placements, sizes):
            first, last = placement.lengths[0], placement.lengths[-1]
            inside = [end for end in ends if first <= end <= last]
            placed.equal_view = min(inside, key=lambda end: abs(cycle.request(end) - smallest))
            lengths.add(placed.equal_view)
        for length in sorted(lengths - placed.states.keys()):
            path = cycle.snapshot(length, tmp / f"ours-{length}.sqlite")
            placed.states[length] = (cycle.state_at(length), path)
    return placed


def equal_view_needed(placements: dict[int, Placement], sizes: list[int]) -> bool:
    """Ours has a cycle at the largest size but none at the smallest: the growth compares the
    smallest's state (all of it) with the point of the largest's cycle holding as many tokens."""
    return (
        len(sizes) > 1
        and placements[sizes[0]].cycle is None
        and (placements[sizes[-1]].cycle is not None)
    )
