"""Budget decision benchmark: the per-turn CPU cost of ``ctx_budget`` next to LangChain and langmem,
over each one's compaction cycle.

A live thread (seeded agent dialogue: question, tool call, tool result JSON, answer) gets two new
messages per turn (an AI reply and the next question), then each system makes its decision for
the next model call. One 128k-token window for all, each system configured as its docs configure
it:

- **ours**: one ``ctx_budget`` call (``make_budget_node(...).invoke``, ``ContextConfig`` defaults
  for a 128k-token window): it records the two new messages in its SQLite history store (every
  message of the thread recorded), then estimates (measured baseline + the new messages) and
  decides. **ours decision** is the same call minus the CPU time spent inside the history store's
  public methods (a store that times itself), i.e. the part the peers also do.
- **langchain**: ``SummarizationMiddleware.before_model`` (trigger ``("fraction", 0.8)`` of a
  128k-token window, ``keep`` at its default): its last summary + the messages since.
- **langmem**: ``SummarizationNode`` wired as its docs wire it (``summarized_messages`` output,
  running summary in ``context``; ``max_tokens`` 128k, ``max_tokens_before_summary`` 0.8 of it):
  all of the thread in ``messages``, its running summary.

Each system summarizes in cycles, and a turn costs what the view it holds costs, so each is
measured at five phases of ITS OWN cycle around N (``cycles``: right after its last summary, a
quarter, half, three quarters of the way, just before its next one), and the headline is the mean
over the phases. A system that has not summarized by N holds all N messages (one state). The
peers' states are simulated (``peer_views``) and :func:`check_peer_simulation` proves the
simulation against the real peers; ours' compactions are its real ``ctx_compact`` at the points
its trigger arithmetic finds, and :func:`check_our_simulation` proves those points against the
real nodes run call by call.

    python benchmarks/budget.py [--json] [--sizes 1000,10000,50000] [--turns 30] [--peer-turns 30]

Figures only, never a failing exit: the targets are printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import functools
import gc
import inspect
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parent))  # peer_views and cycles, next to this file

import cycles
import peer_views
from cycles import PHASES, NeedsLongerThread, OurCycle, Placement, place, place_ours
from peer_views import (
    WINDOW,
    LangChainView,
    LangmemView,
    RequestMeter,
    apply_update,
    is_call_point,
    langchain_middleware,
    langchain_states,
    langmem_input,
    langmem_node,
    langmem_states,
    stamped,
)

from ctx_langgraph.budget.counters import REPLY_PRIMING
from ctx_langgraph.budget.node import make_budget_node
from ctx_langgraph.compaction.node import make_compact_node
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.table import format_table
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.state import merge_facts, unpack

GROWTH_TARGET = 1.3  # ours at the largest size / ours at the smallest, at equal phase, at most
OURS_CONFIG = ContextConfig(context_window=WINDOW)  # its defaults for the same 128k window
OURS_BUDGET = OURS_CONFIG.resolve()
CONFIG: Any = {"configurable": {"thread_id": "bench"}}
WARMUP = 3  # untimed turns at the start of each phase
EXTRA = 6_000  # messages simulated past the largest size, where the next summaries fall
SYSTEMS = ("ours", "langchain", "langmem")

# fmt: off
ASKS = ["Where is my order {o}?", "Can you change the delivery address of {o} to {c}?",
        "Why was I charged twice for {o}?", "Which plan includes {f}?", "Cancel {o}, please.",
        "Does the warranty cover {f} if I ship it from {c}?", "Summarize what we decided so far."]
ANSWERS = ["Order {o} left the {c} warehouse yesterday and should arrive within {n} days.",
           "Done: {o} now ships to {c}. You will get a confirmation email in a few minutes.",
           "The second charge for {o} is a pending authorization; it drops off in {n} days.",
           "{f} is part of the Pro plan; on your current plan it costs {n} dollars a month."]
CITIES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Leeds", "Porto Alegre", "Hamburg"]
FEATURES = ["priority support", "extended warranty", "bulk export", "SSO", "audit logs"]
# fmt: on


M = TypeVar("M", bound=BaseMessage)


class Agent:
    """Seeded agent dialogue with unique ids ``m0``, ``m1``, ...

    Each AI message carries the usage of the request that produced it when every earlier message
    is sent (ours' state here); the peers re-stamp their own copies with their own requests.
    """

    def __init__(self, seed: int, meter: RequestMeter) -> None:
        self.rng = random.Random(seed)
        self.meter = meter
        self.count = 0
        self.sent = meter.overhead  # the request so far: every message, plus the overhead

    def _fill(self, templates: list[str]) -> str:
        rng = self.rng
        return rng.choice(templates).format(
            o=f"ORD-{rng.randint(10000, 99999)}",
            c=rng.choice(CITIES),
            f=rng.choice(FEATURES),
            n=rng.randint(2, 9),
        )

    def _id(self) -> str:
        self.count += 1
        return f"m{self.count - 1}"

    def _said(self, message: M) -> M:
        self.sent += self.meter.message(message)
        return message

    def human(self) -> HumanMessage:
        return self._said(HumanMessage(self._fill(ASKS), id=self._id()))

    def ai(self, tool_call: bool = False) -> AIMessage:
        """An answer, or a tool call; with the usage and provider a live thread's replies carry."""
        calls = []
        if tool_call:
            args = {"order_id": f"ORD-{self.rng.randint(10000, 99999)}", "include": ["events"]}
            calls = [{"name": "lookup_order", "args": args, "id": f"call_{self.count}"}]
        reply = AIMessage(
            "" if tool_call else self._fill(ANSWERS),
            id=self._id(),
            tool_calls=calls,
            usage_metadata={"input_tokens": 0, "output_tokens": 40, "total_tokens": 40},
            response_metadata={"model_provider": "openai", "model_name": "gpt-4o"},
        )
        return self._said(stamped(reply, self.sent))

    def tool(self, call: AIMessage) -> ToolMessage:
        rng = self.rng
        events = [
            {"at": f"2025-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}", "city": rng.choice(CITIES)}
            for _ in range(rng.randint(2, 6))
        ]
        result = {**call.tool_calls[0]["args"], "status": "in_transit", "events": events}
        return self._said(
            ToolMessage(json.dumps(result), tool_call_id=call.tool_calls[0]["id"], id=self._id())
        )

    def history(self, size: int) -> list[BaseMessage]:
        """``size`` messages ending with a human question (a system prompt when size is even)."""
        out: list[BaseMessage] = []
        if size % 2 == 0:  # exchanges are 2 or 4 messages long: the prompt makes the parity
            prompt = SystemMessage("You are a support agent. Be brief.", id=self._id())
            out.append(self._said(prompt))
        while len(out) < size - 1:
            out.append(self.human())
            if len(out) + 3 < size and self.rng.random() < 1 / 3:
                call = self.ai(tool_call=True)
                out += [call, self.tool(call)]
            out.append(self.ai())
        return [*out, self.human()]


def check_peer_simulation(size: int = 600, window: int = 4_000, seed: int = 7) -> dict[str, int]:
    """Prove the peers' simulated states on this benchmark's dialogue: run the real LangChain
    middleware and langmem node turn by turn over ``size`` messages in a ``window``-token window
    and compare their final states with the simulated ones (``AssertionError`` on a difference).
    Returns the summaries each peer made (several each at the defaults)."""
    meter = RequestMeter(REPLY_PRIMING)
    history = Agent(seed, meter).history(size)
    return peer_views.check_peer_views(history, meter=meter, window=window)


def check_our_simulation(size: int = 600, window: int = 4_000, seed: int = 7) -> int:
    """Prove ours' simulated cycle on this benchmark's dialogue: run ours' real ``ctx_budget``
    and ``ctx_compact`` before every model call of ``size`` messages in a ``window``-token window
    (``ContextConfig`` defaults otherwise) and compare where it compacted and its final view with
    :class:`cycles.OurCycle`'s (``AssertionError`` on a difference). Returns the compactions."""
    meter = RequestMeter(REPLY_PRIMING)
    history = Agent(seed, meter).history(size)
    config = ContextConfig(context_window=window)

    def make(store: SQLiteHistoryStore) -> tuple[Any, Any]:
        budget = make_budget_node(store, config=config, counter=meter.counter)
        return budget, make_compact_node(store, config=config, counter=meter.counter)

    def cycle(store: SQLiteHistoryStore, compact: Any) -> OurCycle:
        counts = [meter.message(m) for m in history]
        return OurCycle(history, counts=counts, overhead=meter.overhead, config=config,
                        compact=compact, store=store, run_config=CONFIG, counter=meter.counter)  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp:
        return cycles.check_our_cycle(
            history, make=make, cycle=cycle, tmp=Path(tmp), run_config=CONFIG
        )


class TimedStore(SQLiteHistoryStore):
    """A SQLite history store that adds up the CPU seconds spent inside its public (sync) methods
    in ``spent`` (a call made from inside another one is counted once, by the outer call)."""

    spent = 0.0
    _depth = 0


def _timed(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: TimedStore, *args: Any, **kwargs: Any) -> Any:
        if self._depth:
            return method(self, *args, **kwargs)
        self._depth += 1
        began = time.process_time()
        try:
            return method(self, *args, **kwargs)
        finally:
            self.spent += time.process_time() - began
            self._depth -= 1

    return wrapper


for _name, _member in inspect.getmembers(SQLiteHistoryStore):
    _static = inspect.getattr_static(SQLiteHistoryStore, _name)
    if (
        not _name.startswith("_")
        and inspect.isfunction(_static)
        and not inspect.iscoroutinefunction(_static)
    ):
        setattr(TimedStore, _name, _timed(_static))


def cpu(call: Callable[[], Any]) -> tuple[Any, float]:
    began = time.process_time()
    result = call()
    return result, time.process_time() - began


def ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 4)


class Ours:
    """``ctx_budget`` on ours' state at one phase: its view and context channel, its store holding
    every message before it and the summaries committed by then. Each :meth:`turn` returns the
    CPU seconds of the whole call and of the call minus the history store's methods."""

    def __init__(
        self, state: dict[str, Any], path: Path, new: Sequence[BaseMessage], meter: RequestMeter
    ) -> None:
        self.new, self.meter = new, meter
        self.store = store = cast(TimedStore, TimedStore.from_path(path))
        store.setup()
        self.node = make_budget_node(
            store, config=OURS_CONFIG, counter=meter.counter, compact_node=None
        )
        self.messages: list[BaseMessage] = state["messages"]
        self.through = meter.request(self.messages)  # what the provider measured for it
        first = self.node.invoke({"messages": self.messages, "context": state["context"]}, CONFIG)
        budget = unpack(first["context"])[
            "budget"
        ]  # a recount: nothing to record, reconcile or rewrite
        assert "messages" not in first and budget["epoch_bumped_for"] == [], budget
        assert budget["input_tokens"] == self.through, (budget["input_tokens"], self.through)
        self.context = merge_facts(state["context"], first["context"])

    def turn(self, turn: int) -> tuple[float, float]:
        reply, question = self.new[2 * turn], self.new[2 * turn + 1]
        context = self.context
        context["baseline"] = {  # as ctx_usage sets it after the reply to the last request
            "measured_input_tokens": self.through,
            "input_through_message_id": self.messages[-1].id,
            "projection_epoch": context["projection_epoch"],
            "reply_message_id": reply.id,
        }
        self.messages = [*self.messages, reply, question]
        state = {"messages": self.messages, "context": context}
        self.store.spent = 0.0
        update, spent = cpu(functools.partial(self.node.invoke, state, CONFIG))
        self.context = merge_facts(context, update["context"])
        self.through += self.meter.message(reply) + self.meter.message(question)
        budget = unpack(update["context"])["budget"]
        assert (budget["method"], budget["decision"]) == ("baseline", "proceed"), budget
        assert budget["input_tokens"] == self.through, (budget["input_tokens"], self.through)
        assert budget["epoch_bumped_for"] == [] and "messages" not in update, budget
        return spent, spent - self.store.spent

    def close(self) -> None:
        self.store.close()


class LangChain:
    """``SummarizationMiddleware.before_model`` on LangChain's state at one phase. Each reply
    first gets the usage of the request LangChain's state sends (untimed). Each :meth:`turn`
    returns its CPU seconds and whether it summarized."""

    def __init__(self, view: LangChainView, new: Sequence[BaseMessage], meter: RequestMeter):
        self.new, self.meter = new, meter
        self.middleware = langchain_middleware(WINDOW)
        self.runtime: Any = Runtime()
        self.messages = list(view.messages)

    def turn(self, turn: int) -> tuple[float, bool]:
        reply = stamped(self.new[2 * turn], self.meter.request(self.messages))  # type: ignore[arg-type]
        self.messages = [*self.messages, reply, self.new[2 * turn + 1]]
        state = {"messages": self.messages}
        call = functools.partial(self.middleware.before_model, state, self.runtime)  # type: ignore[arg-type]
        update, spent = cpu(call)
        self.messages = apply_update(self.messages, update)
        return spent, update is not None


class Langmem:
    """``SummarizationNode.invoke`` (docs wiring) on langmem's state at one phase. Each
    :meth:`turn` returns its CPU seconds and whether it summarized."""

    def __init__(self, view: LangmemView, new: Sequence[BaseMessage]) -> None:
        self.new = new
        self.node = langmem_node(WINDOW, "docs")
        self.messages = list(view.messages)
        self.context: dict[str, Any] = {}
        if view.running_summary is not None:
            self.context["running_summary"] = view.running_summary

    def turn(self, turn: int) -> tuple[float, bool]:
        self.messages.extend(self.new[2 * turn : 2 * turn + 2])
        state = {"messages": self.messages, "context": self.context}
        update, spent = cpu(functools.partial(self.node.invoke, state))
        before = self.context.get("running_summary")
        self.context = update.get("context", self.context)
        return spent, self.context.get("running_summary") is not before


class Plan:
    """The thread, and each system's states at the phases of its cycle around each size."""

    def __init__(self, sizes: list[int], seed: int, turns: int, extra: int, tmp: Path) -> None:
        self.meter = meter = RequestMeter(REPLY_PRIMING)
        agent = Agent(seed, meter)
        self.history = history = agent.history(sizes[-1] + extra)
        self.new = [m for _ in range(turns) for m in (agent.ai(), agent.human())]
        self.room = sum(map(meter.message, self.new))  # what a phase's turns add
        self.ends = [i + 1 for i in range(len(history)) if is_call_point(history, i)]
        counts = [meter.message(m) for m in history]
        self.tokens = cycles.prefix_sums(counts)
        self.placements: dict[str, dict[int, Placement]] = {name: {} for name in SYSTEMS}
        for name, points in (
            ("langchain", langchain_states(history, meter=meter)[len(history)].points),
            ("langmem", langmem_states(history)[len(history)].points),
        ):
            for size in sizes:
                self.placements[name][size] = place(points, self.ends, size, self.tokens, self.room)
        wanted = {n for name in ("langchain", "langmem") for p in self.placements[name].values()
                  for n in p.lengths}  # fmt: skip
        self.langchain = langchain_states(history, meter=meter, lengths=wanted)
        self.langmem = langmem_states(history, lengths=wanted)
        store = SQLiteHistoryStore.from_path(tmp / "ours-work.sqlite")
        store.setup()
        compact = make_compact_node(store, config=OURS_CONFIG, counter=meter.counter)
        cycle = OurCycle(history, counts=counts, overhead=meter.overhead, config=OURS_CONFIG,
                         compact=compact, store=store, run_config=CONFIG, counter=meter.counter)  # fmt: skip
        placed = place_ours(cycle, sizes, self.ends, self.tokens, self.room, tmp)
        self.placements["ours"] = placed.placements
        self.ours = placed.states
        self.equal_view = placed.equal_view  # ours at the largest size, holding the smallest's view
        store.close()


def run_phase(systems: dict[str, Any], args: Any) -> tuple[dict[str, list[float]], dict[str, int]]:
    """One phase: the systems' turns round-robin (a change of load on the machine hits all of
    them alike), the garbage collector paused during the turns (as ``timeit`` does)."""
    times: dict[str, list[float]] = {"node": [], "decision": [], "langchain": [], "langmem": []}
    summarized = {"langchain": 0, "langmem": 0}
    gc.collect()
    gc.disable()
    try:
        for turn in range(WARMUP + max(args.turns, args.peer_turns)):
            timed = turn >= WARMUP
            ours = systems.get("ours")
            if ours is not None and turn < WARMUP + args.turns:
                node, decision = ours.turn(turn)
                if timed:
                    times["node"].append(node)
                    times["decision"].append(decision)
            for name in ("langchain", "langmem"):
                peer = systems.get(name)
                if peer is not None and turn < WARMUP + args.peer_turns:
                    spent, summary = peer.turn(turn)
                    if timed:
                        times[name].append(spent)
                        summarized[name] += summary
    finally:
        gc.enable()
    return times, summarized


def view_of(plan: Plan, name: str, length: int) -> dict[str, Any]:
    """What a system holds at ``length`` (when its phase's turns start): the messages of its
    next model request and their exact tokens; langmem's ``messages`` channel holds all of them."""
    if name == "ours":
        messages = plan.ours[length][0]["messages"]
        return {"messages": len(messages), "tokens": plan.meter.request(messages)}
    if name == "langchain":
        view = plan.langchain[length]
        return {
            "messages": len(view.messages),
            "tokens": plan.meter.request(view.messages),
            "summaries": view.summaries,
        }
    state = plan.langmem[length]
    sent = langmem_input(state)
    return {
        "messages": len(sent),
        "tokens": plan.meter.request(sent),
        "unsummarized_messages": state.unsummarized,
        "channel_messages": len(state.messages),
        "summaries": state.summaries,
    }


def measure(plan: Plan, size: int, args: Any) -> dict[str, Any]:
    """Every phase of one size: the systems at their states of that phase, their turns timed."""
    placements = {name: plan.placements[name][size] for name in SYSTEMS}
    phases: dict[str, list[dict[str, Any]]] = {name: [] for name in SYSTEMS}
    summarized = {"langchain": 0, "langmem": 0}
    blocks = [
        {name: p.lengths[j] for name, p in placements.items() if j < len(p.lengths)}
        for j in range(max(len(p.lengths) for p in placements.values()))
    ]
    if size == max(plan.placements["ours"]) and plan.equal_view is not None:
        blocks.append({"equal view": plan.equal_view})
    out: dict[str, Any] = {"phases": phases, "equal_view": None}
    for j, block in enumerate(blocks):
        systems: dict[str, Any] = {}
        for name, length in block.items():
            if name in ("ours", "equal view"):
                state, path = plan.ours[length]
                systems["ours"] = Ours(state, path, plan.new, plan.meter)
            elif name == "langchain":
                systems[name] = LangChain(plan.langchain[length], plan.new, plan.meter)
            else:
                systems[name] = Langmem(plan.langmem[length], plan.new)
        try:
            times, counts = run_phase(systems, args)
        finally:
            if "ours" in systems:
                systems["ours"].close()
        for name, length in block.items():
            key = "ours" if name == "equal view" else name
            record = {"length": length, **view_of(plan, key, length)}
            if key == "ours":
                record.update(node_ms=ms(times["node"]), decision_ms=ms(times["decision"]))
            else:
                record.update(ms=ms(times[key]), summarized_turns=counts[key])
                summarized[key] += counts[key]
            if name == "equal view":
                out["equal_view"] = record
            else:
                cycle = placements[name].cycle is not None
                phases[name].append({"phase": PHASES[j] if cycle else None, **record})
    out["summarized_turns"] = summarized
    out["cycles"] = {name: placements[name].as_json() for name in SYSTEMS}
    return out


def spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": round(statistics.fmean(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--turns", type=int, default=30, help="measured turns of ours per phase")
    parser.add_argument(
        "--peer-turns", type=int, default=30, help="measured turns per phase, per peer"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    began = time.perf_counter()
    turns = WARMUP + max(args.turns, args.peer_turns)
    with tempfile.TemporaryDirectory() as tmp:
        extra = EXTRA
        while True:
            try:
                plan = Plan(sizes, args.seed, turns, extra, Path(tmp))
                break
            except NeedsLongerThread:
                extra *= 2
        print(f"  thread of {len(plan.history):,} messages and the cycles placed", file=sys.stderr)
        figures: dict[str, dict[str, Any]] = {}
        for size in sizes:
            figures[str(size)] = measure(plan, size, args)
            print(f"  {size:,} messages measured", file=sys.stderr)

    def per_phase(name: str, key: str) -> dict[str, dict[str, float]]:
        system = "ours" if name.startswith("ours") else name
        return {s: spread([p[key] for p in figures[s]["phases"][system]]) for s in figures}

    stats = {
        "ours_node": per_phase("ours", "node_ms"),
        "ours_decision": per_phase("ours", "decision_ms"),
        "langchain": per_phase("langchain", "ms"),
        "langmem": per_phase("langmem", "ms"),
    }
    mean = {name: {s: v["mean"] for s, v in by_size.items()} for name, by_size in stats.items()}
    node, decision, lc, lm = (
        mean[k] for k in ("ours_node", "ours_decision", "langchain", "langmem")
    )
    small, large = str(sizes[0]), str(sizes[-1])
    ratios = {
        name: {s: round(peer[s] / base[s], 2) for s in figures}
        for name, peer, base in (
            ("langchain_over_node", lc, node),
            ("langmem_over_node", lm, node),
            ("langchain_over_decision", lc, decision),
            ("langmem_over_decision", lm, decision),
        )
    }
    equal = figures[large]["equal_view"]
    if equal is not None:
        basis = "equal view"
        growth = {
            "node": round(equal["node_ms"] / node[small], 3),
            "decision": round(equal["decision_ms"] / decision[small], 3),
        }
    else:
        has_cycle = figures[small]["cycles"]["ours"] is not None
        basis = "equal phases" if has_cycle else "whole thread at both sizes"
        growth = {
            "node": round(node[large] / node[small], 3),
            "decision": round(decision[large] / decision[small], 3),
        }
    cycled = [s for s in figures if figures[s]["cycles"]["ours"] is not None]
    growth_cycle = None
    if len(cycled) > 1:
        growth_cycle = {
            "node": round(node[cycled[-1]] / node[cycled[0]], 3),
            "decision": round(decision[cycled[-1]] / decision[cycled[0]], 3),
            "sizes": [int(cycled[0]), int(cycled[-1])],
        }
    passed = {
        "growth_node": growth["node"] <= GROWTH_TARGET,
        "growth_decision": growth["decision"] <= GROWTH_TARGET,
        "faster_than_langchain": {s: node[s] < lc[s] for s in figures},
        "faster_than_langmem": {s: node[s] < lm[s] for s in figures},
    }

    def mean_view(name: str, key: str) -> dict[str, float]:
        return {
            s: round(statistics.fmean(p[key] for p in figures[s]["phases"][name]), 1)
            for s in figures
        }

    views = {name: {"messages": mean_view(name, "messages"), "tokens": mean_view(name, "tokens")}
             for name in SYSTEMS}  # fmt: skip
    views["langmem"]["channel_messages"] = mean_view("langmem", "channel_messages")
    result = {
        "ours_node_ms": node,
        "ours_decision_ms": decision,
        "langchain_ms": lc,
        "langmem_ms": lm,
        "min_ms": {
            name: {s: v["min"] for s, v in by_size.items()} for name, by_size in stats.items()
        },
        "max_ms": {
            name: {s: v["max"] for s, v in by_size.items()} for name, by_size in stats.items()
        },
        "ratios": ratios,
        "growth": growth,
        "growth_basis": basis,
        "growth_sizes": [int(small), int(large)],
        "growth_target": GROWTH_TARGET,
        "growth_cycle": growth_cycle,
        "equal_view": equal,
        "passed": passed,
        "views": views,
        "cycles": {name: {s: figures[s]["cycles"][name] for s in figures} for name in SYSTEMS},
        "phases": {s: figures[s]["phases"] for s in figures},
        "summarized_turns": {
            name: {s: figures[s]["summarized_turns"][name] for s in figures}
            for name in ("langchain", "langmem")
        },
        "conditions": {
            "window": WINDOW,
            "phases": list(PHASES),
            "headroom": [cycles.HEADROOM_FACTOR, cycles.HEADROOM_TOKENS],
            "langchain_trigger": list(peer_views.LANGCHAIN_TRIGGER),
            "langchain_trigger_tokens": int(WINDOW * peer_views.LANGCHAIN_TRIGGER[1]),
            "langchain_keep": ["messages", 20],
            "langmem_wiring": "docs",
            "langmem_max_tokens": WINDOW,
            "langmem_max_tokens_before_summary": int(WINDOW * peer_views.LANGMEM_TRIGGER_FRACTION),
            "langmem_max_summary_tokens": 256,
            "ours_context_window": WINDOW,
            "ours_trigger_tokens": OURS_BUDGET.trigger,
            "ours_keep_recent_tokens": OURS_BUDGET.keep_recent_tokens,
            "ours_summary_max_tokens": OURS_CONFIG.summary_max_tokens,
            "ours_summarizer": "ExtractiveSummarizer",
        },
        "statistic": "CPU ms per turn (time.process_time): median of a phase's turns, then the "
        "mean, min and max over the phases",
        "turns": args.turns,
        "peer_turns": args.peer_turns,
        "warmup": WARMUP,
        "seed": args.seed,
        "thread_messages": len(plan.history),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    if args.json:
        print(json.dumps(result))
        return
    report(result, sizes, args)


def cell(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def report(result: dict[str, Any], sizes: list[int], args: Any) -> None:
    keys = ("ours_node", "ours_decision", "langchain", "langmem")
    means = [result[f"{k}_ms"] for k in keys]
    rows = [
        [f"{s:,}",
         *(f"{cell(m[str(s)])} ({cell(result['min_ms'][k][str(s)])}-"
           f"{cell(result['max_ms'][k][str(s)])})" for k, m in zip(keys, means, strict=True)),
         *(f"{result['ratios'][r][str(s)]:,.2f}x" for r in result["ratios"])]
        for s in sizes
    ]  # fmt: skip
    print(
        "Budget decision per turn over each system's own compaction cycle: CPU ms, mean over "
        f"its phases (min-max); a phase = the median of {args.turns} turns (ours) or "
        f"{args.peer_turns} (peers) after {WARMUP} warm-up turns; 2 new messages per turn"
    )
    headers = ["messages", "ours node", "ours decision", "langchain", "langmem",
               "lc/node", "lm/node", "lc/decision", "lm/decision"]  # fmt: skip
    print(format_table(headers, rows))
    print()

    def where(name: str, s: int) -> str:
        c = result["cycles"][name][str(s)]
        if c is None:
            return "none: all N"
        return f"{c['start_length']:,}-{c['next_summary_at']:,} ({c['summaries_before']})"

    views = result["views"]
    view_rows = [
        [f"{s:,}",
         *(x for name in SYSTEMS for x in (f"{views[name]['messages'][str(s)]:,.0f}",
                                           f"{views[name]['tokens'][str(s)]:,.0f}")),
         *(where(name, s) for name in SYSTEMS)]
        for s in sizes
    ]  # fmt: skip
    view_headers = ["view (mean)", "ours msgs", "ours tokens", "lc msgs", "lc tokens",
                    "lm msgs", "lm tokens", "ours cycle", "lc cycle", "lm cycle"]  # fmt: skip
    print(format_table(view_headers, view_rows))
    print()
    phase_rows = []
    for s in sizes:
        phases = result["phases"][str(s)]
        for j in range(max(len(p) for p in phases.values())):
            row: list[object] = [f"{s:,}", None]
            for name in SYSTEMS:
                if j < len(phases[name]):
                    p = phases[name][j]
                    row[1] = row[1] or ("all N" if p["phase"] is None else f"{p['phase']:.2f}")
                    row += [f"{p['length']:,}", f"{p['messages']:,}", f"{p['tokens']:,}"]
                    row += (
                        [cell(p["node_ms"]), cell(p["decision_ms"])]
                        if name == "ours"
                        else [cell(p["ms"]), p["summarized_turns"]]
                    )
                else:
                    row += ["-"] * 5
            phase_rows.append(row)
    phase_headers = ["messages", "phase", "ours at", "msgs", "tokens", "node", "decision",
                     "lc at", "msgs", "tokens", "ms", "sum.", "lm at", "msgs", "tokens", "ms",
                     "sum."]  # fmt: skip
    print(format_table(phase_headers, phase_rows))
    mark = {True: "PASS", False: "FAIL"}
    print()
    small, large = result["growth_sizes"]
    equal = result["equal_view"]
    if equal is not None:
        print(
            f"equal view: ours at {large:,} at message {equal['length']:,} of its cycle holds "
            f"{equal['messages']:,} messages, {equal['tokens']:,} tokens (at {small:,} it holds "
            f"all {small:,}, {result['views']['ours']['tokens'][str(small)]:,.0f} tokens): node "
            f"{cell(equal['node_ms'])} ms, decision {cell(equal['decision_ms'])} ms"
        )
    for what in ("node", "decision"):
        print(
            f"growth of ours {what} {large:,}/{small:,} ({result['growth_basis']}): "
            f"{result['growth'][what]:.2f}x (target <= {GROWTH_TARGET}x) "
            f"{mark[result['passed']['growth_' + what]]}"
        )
    if result["growth_cycle"] is not None:
        g = result["growth_cycle"]
        print(
            f"growth of ours' cycle mean {g['sizes'][1]:,}/{g['sizes'][0]:,} (equal phases): "
            f"node {g['node']:.2f}x, decision {g['decision']:.2f}x"
        )
    for name, key in (("LangChain", "langchain"), ("langmem", "langmem")):
        for s in sizes:
            ours, peer = result["ours_node_ms"][str(s)], result[f"{key}_ms"][str(s)]
            print(
                f"ours node faster than {name} on the cycle mean at {s:,}: {cell(ours)} ms vs "
                f"{cell(peer)} ms {mark[result['passed'][f'faster_than_{key}'][str(s)]]}"
            )
    print(
        f"Window {WINDOW:,} tokens for all. ours: ContextConfig(context_window={WINDOW:,}) "
        f"(trigger {OURS_BUDGET.trigger:,}, keep_recent_tokens {OURS_BUDGET.keep_recent_tokens:,}, "
        f"summary_max_tokens {OURS_CONFIG.summary_max_tokens:,}), every message recorded in "
        "SQLite; its compactions are its real ctx_compact (ExtractiveSummarizer) where its "
        "trigger arithmetic fires. LangChain: trigger ('fraction', 0.8) = "
        f"{int(WINDOW * 0.8):,} tokens, keep ('messages', 20); its summary replaces the old "
        f"messages. langmem: docs wiring, max_tokens {WINDOW:,}, max_tokens_before_summary "
        f"{int(WINDOW * 0.8):,}, max_summary_tokens 256; `messages` keeps the whole thread. "
        f"Phases {', '.join(f'{p:g}' for p in PHASES)} of each system's own cycle around N "
        "(at = the history length of its state); msgs/tokens = the next model request "
        "(exact tokens); sum. = timed turns that summarized. "
        f"Thread {result['thread_messages']:,} messages. Run: {result['wall_s']} s"
    )


if __name__ == "__main__":
    main()
