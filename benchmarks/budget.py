"""Budget decision benchmark: the per-turn CPU cost of ``ctx_budget`` next to LangChain and langmem.

A live thread of N recorded messages (seeded agent dialogue: question, tool call, tool result
JSON, answer) gets two new messages per turn (an AI reply and the next human question), then the
budget decision for the next request is made. Ours is one ``ctx_budget`` node call (measured
baseline + the new messages; it also records them in a SQLite history store). LangChain's
``SummarizationMiddleware.before_model`` and langmem's ``summarize_messages`` make the same
decision on the same messages, below their trigger (nothing is summarized), by counting the whole
history. Ours must not grow with N.

    python benchmarks/budget.py [--json] [--sizes 1000,10000,50000] [--turns 50] [--peer-turns 50]

Figures only, never a failing exit: the targets are printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime
from langmem.short_term import summarize_messages  # type: ignore[import-untyped]

from ctx_langgraph._table import format_table
from ctx_langgraph.budget.counters import TiktokenCounter
from ctx_langgraph.budget.node import BudgetNode, make_budget_node
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history import SQLiteHistoryStore

GROWTH_TARGET = 1.3  # ours at the largest size / ours at the smallest, at most
SPEEDUP_TARGET = 100.0  # theirs / ours at 10k, at least
NEVER = 10**9  # token thresholds nobody reaches: the peers decide "no summary" every turn
LANGCHAIN_TRIGGER = 10**12
CONFIG: Any = {"configurable": {"thread_id": "bench"}}
WARMUP = 3
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


class Agent:
    """Seeded agent dialogue with unique ids ``m0``, ``m1``, ..."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0
        self.input_tokens = 0

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

    def human(self) -> HumanMessage:
        return HumanMessage(self._fill(ASKS), id=self._id())

    def ai(self, tool_call: bool = False) -> AIMessage:
        """An answer, or a tool call; with the usage and provider a live thread's replies carry."""
        self.input_tokens += 40
        usage = {"input_tokens": self.input_tokens, "output_tokens": 40}
        calls = []
        if tool_call:
            args = {"order_id": f"ORD-{self.rng.randint(10000, 99999)}", "include": ["events"]}
            calls = [{"name": "lookup_order", "args": args, "id": f"call_{self.count}"}]
        return AIMessage(
            "" if tool_call else self._fill(ANSWERS),
            id=self._id(),
            tool_calls=calls,
            usage_metadata={**usage, "total_tokens": self.input_tokens + 40},
            response_metadata={"model_provider": "openai", "model_name": "gpt-4o"},
        )

    def tool(self, call: AIMessage) -> ToolMessage:
        rng = self.rng
        events = [
            {"at": f"2025-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}", "city": rng.choice(CITIES)}
            for _ in range(rng.randint(2, 6))
        ]
        result = {**call.tool_calls[0]["args"], "status": "in_transit", "events": events}
        return ToolMessage(json.dumps(result), tool_call_id=call.tool_calls[0]["id"], id=self._id())

    def history(self, size: int) -> list[BaseMessage]:
        """``size`` messages ending with a human question (a system prompt when size is even)."""
        out: list[BaseMessage] = []
        if size % 2 == 0:  # exchanges are 2 or 4 messages long: the prompt makes the parity
            out.append(SystemMessage("You are a support agent. Be brief.", id=self._id()))
        while len(out) < size - 1:
            out.append(self.human())
            if len(out) + 3 < size and self.rng.random() < 1 / 3:
                call = self.ai(tool_call=True)
                out += [call, self.tool(call)]
            out.append(self.ai())
        return [*out, self.human()]


def timed(call: Callable[[int], Any], turns: int) -> tuple[list[float], list[float]]:
    """CPU and wall seconds of ``call(turn)`` per turn after WARMUP turns, gc paused (as timeit).

    A call may return the CPU seconds to count itself (to leave out work it does not measure).
    """
    cpu: list[float] = []
    wall: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for turn in range(WARMUP + turns):
            c0, w0 = time.process_time(), time.perf_counter()
            own = call(turn)
            c1, w1 = time.process_time(), time.perf_counter()
            if turn >= WARMUP:
                cpu.append(c1 - c0 if own is None else own)
                wall.append(w1 - w0 if own is None else own)
    finally:
        gc.enable()
    return cpu, wall


def ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 4)


def ours(
    history: list[BaseMessage],
    new: Sequence[BaseMessage],
    turns: int,
    *,
    decision_only: bool = False,
) -> tuple[float, float]:
    """Median CPU and wall ms of one ``ctx_budget`` call per turn, on a recorded history.

    With ``decision_only`` the node's recording of the 2 new messages in the history store (work
    the peers do not do at all) runs outside the timer: what is timed is the same decision the
    peers make (estimate, route).
    """
    counter = TiktokenCounter("gpt-4o")
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteHistoryStore.from_path(Path(tmp) / "history.sqlite")
        store.setup()
        for start in range(0, len(history), 1000):
            store.append("bench", history[start : start + 1000])
        config = ContextConfig(  # a huge window: never compaction, only the decision
            context_window=10_000_000, output_reserve=16_384, tool_output_cap_tokens=8_000
        )
        node = make_budget_node(store, config=config, counter=counter, compact_node=None)
        budget_node = BudgetNode(store, config, counter=counter, compact_node=None)

        def decide(state: dict[str, Any]) -> tuple[dict[str, Any], float]:
            """The node's flow with the store write outside the timer; returns (update, CPU s)."""
            began = time.process_time()
            flow = budget_node.flow(state, CONFIG)
            request = next(flow)
            spent = time.process_time() - began
            results = store.append(request.scope, request.messages)
            began = time.process_time()
            try:
                flow.send(results)
            except StopIteration as stop:
                return dict(stop.value), spent + time.process_time() - began
            raise RuntimeError("the budget flow asked for more than the history write")

        messages = list(history)
        through = counter.count_request(messages)  # what the provider measured for this request
        context: dict[str, Any] = {"recorded_through_id": messages[-1].id, "projection_epoch": 0}

        def turn(n: int) -> float | None:
            nonlocal context, through
            reply, question = new[2 * n], new[2 * n + 1]
            context["baseline"] = {  # as ctx_usage sets it after the reply to the last request
                "measured_input_tokens": through,
                "input_through_message_id": messages[-1].id,
                "projection_epoch": 0,
                "reply_message_id": reply.id,
            }
            messages.extend((reply, question))
            state = {"messages": messages, "context": context}
            spent = None
            if decision_only:
                full, spent = decide(state)
                update = full["context"]
            else:
                update = node.invoke(state, CONFIG)["context"]
            context = {**context, **update}  # the context channel's reducer
            through += counter.count_message(reply) + counter.count_message(question)
            budget = update["budget"]
            assert (budget["method"], budget["decision"]) == ("baseline", "proceed"), budget
            assert budget["input_tokens"] == through, (budget["input_tokens"], through)
            return spent

        first = node.invoke({"messages": messages, "context": context}, CONFIG)  # a recount
        context |= first["context"]  # its fingerprint, recorded_through_id
        cpu, wall = timed(turn, turns)
        store.close()
    return ms(cpu), ms(wall)


def peers(
    history: list[BaseMessage], new: Sequence[BaseMessage], turns: int
) -> tuple[float, float]:
    """Median CPU ms of LangChain's and langmem's decision (no summary: a fake model with no reply
    would fail if one were asked for), each on its own copy of the same growing history."""
    fake = GenericFakeChatModel(messages=iter(()))
    middleware: Any = SummarizationMiddleware(model=fake, trigger=("tokens", LANGCHAIN_TRIGGER))
    runtime: Any = Runtime()

    def langchain(messages: list[BaseMessage]) -> None:
        assert middleware.before_model({"messages": messages}, runtime) is None

    def langmem(messages: list[BaseMessage]) -> None:
        kept = summarize_messages(
            messages,
            running_summary=None,
            model=fake,
            max_tokens=NEVER,
            max_tokens_before_summary=NEVER,
        )
        assert kept.running_summary is None and len(kept.messages) == len(messages)

    def growing(decide: Callable[[list[BaseMessage]], None]) -> Callable[[int], None]:
        messages = list(history)

        def turn(n: int) -> None:
            messages.extend(new[2 * n : 2 * n + 2])
            decide(messages)

        return turn

    return ms(timed(growing(langchain), turns)[0]), ms(timed(growing(langmem), turns)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--turns", type=int, default=50, help="measured turns of ours per size")
    parser.add_argument("--peer-turns", type=int, default=50, help="measured turns per peer")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    began = time.perf_counter()
    ours_cpu, ours_wall, decision, lc, lm = {}, {}, {}, {}, {}
    for size in sizes:
        agent = Agent(args.seed)
        history = agent.history(size)
        count = WARMUP + max(args.turns, args.peer_turns)
        new = [m for _ in range(count) for m in (agent.ai(), agent.human())]
        ours_cpu[str(size)], ours_wall[str(size)] = ours(history, new, args.turns)
        decision[str(size)] = ours(history, new, args.turns, decision_only=True)[0]
        lc[str(size)], lm[str(size)] = peers(history, new, args.peer_turns)
        print(f"  {size:,} messages measured", file=sys.stderr)
    small, large = str(sizes[0]), str(sizes[-1])
    ref = str(min(sizes, key=lambda s: abs(s - 10_000)))  # 10000 unless --sizes leaves it out
    result = {
        "ours_ms_per_turn": ours_cpu,
        "growth_ratio_50k_1k": round(ours_cpu[large] / ours_cpu[small], 3),
        "langchain_ms_per_turn": lc,
        "langmem_ms_per_turn": lm,
        "speedup_vs_langchain_10k": round(lc[ref] / decision[ref], 1),
        "speedup_vs_langmem_10k": round(lm[ref] / decision[ref], 1),
        "ours_decision_ms_per_turn": decision,
        "speedup_vs_langchain_10k_whole_node": round(lc[ref] / ours_cpu[ref], 1),
        "speedup_vs_langmem_10k_whole_node": round(lm[ref] / ours_cpu[ref], 1),
        "statistic": "median CPU ms per turn (time.process_time)",
        "ours_wall_ms_per_turn": ours_wall,
        "growth_sizes": [int(small), int(large)],
        "speedup_size": int(ref),
        "turns": args.turns,
        "peer_turns": args.peer_turns,
        "wall_s": round(time.perf_counter() - began, 1),
    }
    if args.json:
        print(json.dumps(result))
        return

    rows = [
        [f"{int(s):,}", ours_cpu[s], decision[s], lc[s], lm[s],
         f"{lc[s] / decision[s]:,.0f}x", f"{lm[s] / decision[s]:,.0f}x",
         f"{lc[s] / ours_cpu[s]:,.0f}x", f"{lm[s] / ours_cpu[s]:,.0f}x"]
        for s in map(str, sizes)
    ]  # fmt: skip
    print(
        f"Budget decision per turn: median CPU ms over {args.turns} turns (ours) and "
        f"{args.peer_turns} turns (peers), after {WARMUP} warm-up turns; 2 new messages per turn"
    )
    headers = ["messages", "ours node", "ours decision", "langchain", "langmem",
               "lc/decision", "lm/decision", "lc/node", "lm/node"]  # fmt: skip
    print(format_table(headers, rows))
    mark = {True: "PASS", False: "FAIL"}
    growth = result["growth_ratio_50k_1k"]
    print(
        f"\ngrowth of ours {int(large):,}/{int(small):,}: {growth:.2f}x "
        f"(target <= {GROWTH_TARGET}x) {mark[growth <= GROWTH_TARGET]}"
    )
    for name, key in (
        ("LangChain", "speedup_vs_langchain_10k"),
        ("langmem", "speedup_vs_langmem_10k"),
    ):
        print(
            f"speedup vs {name} at {int(ref):,}: {result[key]:,.0f}x "
            f"(target >= {SPEEDUP_TARGET:.0f}x) {mark[result[key] >= SPEEDUP_TARGET]}"
        )
    print(
        "ours node = the whole ctx_budget call (records the 2 new messages in SQLite, then decides); "
        "ours decision = the same call with the history write outside the timer, the part the "
        "peers also do; speedups are on the decision."
    )
    print(
        "counters: ours TiktokenCounter('gpt-4o') on the 2 new messages (baseline measured); "
        "LangChain and langmem their default count_tokens_approximately (LangChain's with "
        f"usage-metadata scaling) over the whole history. Run: {result['wall_s']} s"
    )


if __name__ == "__main__":
    main()
