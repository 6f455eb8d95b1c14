"""Agent turn benchmark: wall time of a whole agent turn on a long thread, vs langmem and LangChain.

A thread already holds N messages of agent dialogue (questions, ``get_order_status`` tool calls
with JSON results, answers); each measured turn is one ``graph.invoke`` of a new user message
through the context management, the model and back, with a checkpointer (``InMemorySaver``, or
``SqliteSaver`` with ``--saver sqlite``). Four agents on the same fake chat model:

- **ours**: a LangGraph-docs-style ``StateGraph(MessagesState)`` agent + ``add_context_management``;
- **ours (middleware)**: ``create_agent`` + ``ContextManagementMiddleware``;
- **langmem**: the docs-style agent with langmem's ``SummarizationNode`` before the model;
- **langchain**: ``create_agent`` + ``SummarizationMiddleware``.

All four use a 32k window with comparable thresholds, so each holds the thread the way it keeps
it after N messages: ours and LangChain a bounded view, langmem the whole list.

    python benchmarks/agent_turn.py [--json] [--sizes 1000,20000] [--turns 30] [--saver sqlite]

Figures only, never a failing exit: the target is printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.ai import InputTokenDetails, OutputTokenDetails, UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langmem.short_term import RunningSummary, SummarizationNode  # type: ignore[import-untyped]
from pydantic import PrivateAttr
from typing_extensions import TypedDict

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    SQLiteHistoryStore,
    add_context_management,
    make_history_lookup_tool,
)
from ctx_langgraph._table import format_table
from ctx_langgraph.budget.counters import TiktokenCounter
from ctx_langgraph.testing import tool_agent_reply

GROWTH_TARGET = 1.5  # ours at the largest size / ours at the smallest (p50), at most
CONFIG = ContextConfig(  # a 32k window: usable 28,000, compaction above 22,400, down to 14,000
    context_window=32_000,
    output_reserve=4_000,
    keep_recent_tokens=8_000,
    summary_max_tokens=2_000,
    tool_output_cap_tokens=2_000,
)
BUDGET = CONFIG.resolve()
SEED_TAIL_TOKENS = 24_000  # the seeded view: over every system's trigger, so turn 1 summarizes
SUMMARY = (  # what the peers' fake summarizer answers
    "The user asked about several orders (shipping status, address changes, refunds) and "
    "shared notes on a migration plan; the agent looked the orders up and answered each."
)
LANGMEM_SUMMARY = ("langmem.short_term.summarization", "RunningSummary")
THREAD: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": 50}
SYSTEMS = ("ours", "ours (middleware)", "langmem", "langchain")
# fmt: off
ASKS = ["Where is my order {o}? It should have arrived in {c} by now.",
        "Can you check {o} and tell me when it reaches {c}?",
        "Was {o} shipped with the extended warranty I paid for?"]
NOTES = ["Note {i}: for the migration plan, step {n} covers the schema, the backfill, the read "
         "path and the rollback checklist; the owner in {c} signs off on {f}.",
         "Quick update {i}: the {c} team moved the {f} review to day {n}; please keep that in "
         "mind for the rollout order and the customer emails.",
         "Question {i}: if we enable {f} for the {c} office first, what should the support "
         "desk tell customers during the {n} days of the switch?"]
CITIES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Leeds", "Porto Alegre", "Hamburg"]
FEATURES = ["priority support", "extended warranty", "bulk export", "SSO", "audit logs"]
# fmt: on


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of an order by its id."""
    number = sum(map(ord, order_id))
    events = [
        {"day": (number * i) % 28 + 1, "depot": f"D-{(number + i) % 97}", "city": CITIES[i % 7]}
        for i in range(number % 5 + 2)
    ]
    status = {"order_id": order_id, "status": "in_transit", "carrier": "Nordpost"}
    return json.dumps({**status, "events": events})


def usage(input_tokens: int, output_tokens: int) -> UsageMetadata:
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        input_token_details=InputTokenDetails(),
        output_token_details=OutputTokenDetails(),
    )


class AnswerModel(BaseChatModel):
    """The answer model of every agent: ``tool_agent_reply``'s deterministic policy, and as usage
    the exact ``TiktokenCounter("gpt-4o")`` count of the request (what ``MeteringChatModel``
    reports), with per-message counts cached by id and text so the fake costs little per call."""

    model_name: str = "gpt-4o"
    _counter: TiktokenCounter = PrivateAttr(default_factory=lambda: TiktokenCounter("gpt-4o"))
    _counts: dict[tuple[Any, ...], int] = PrivateAttr(default_factory=dict)
    _tool_tokens: dict[tuple[str, ...], int] = PrivateAttr(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "bench-answer"

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _count(self, message: BaseMessage) -> int:
        calls = len(message.tool_calls) if isinstance(message, AIMessage) else 0
        key = (message.id, message.type, hash(message.text), calls)
        if key not in self._counts:
            self._counts[key] = self._counter.count_message(message)
        return self._counts[key]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = kwargs.get("tools") or []
        names = tuple(t["function"]["name"] for t in tools)
        if names not in self._tool_tokens:
            self._tool_tokens[names] = self._counter.count_tools(tools) if tools else 0
        input_tokens = sum(map(self._count, messages)) + self._tool_tokens[names] + 3
        reply = tool_agent_reply(messages)
        output = self._counter.count_message(reply) - 3
        reply.usage_metadata = usage(input_tokens, output)
        reply.response_metadata = {
            "model_name": self.model_name,
            "model_provider": "openai",
            "id": f"resp-{uuid.uuid4().hex[:16]}",
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])


class Dialogue:
    """Seeded agent dialogue, shaped as the agents' own turns would leave it."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0

    def _fill(self, template: str) -> str:
        rng = self.rng
        return template.format(
            o=f"ORD-{rng.randint(10000, 99999)}",
            c=rng.choice(CITIES),
            f=rng.choice(FEATURES),
            n=rng.randint(2, 9),
            i=self.count,
        )

    def _id(self, message: BaseMessage) -> BaseMessage:
        self.count += 1
        message.id = f"m{self.count}"
        return message

    def note(self) -> str:
        """A user message the answer model answers without a tool call."""
        return self._fill(self.rng.choice(NOTES))

    def history(self, size: int) -> list[BaseMessage]:
        """At least ``size`` messages of whole exchanges, the last one a plain answer."""
        out: list[BaseMessage] = []
        while len(out) < size:
            asks = self.rng.random() < 1 / 3 and len(out) + 4 <= size
            human = HumanMessage(self._fill(self.rng.choice(ASKS if asks else NOTES)))
            out.append(self._id(human))
            reply = tool_agent_reply([human])
            if reply.tool_calls:
                call = reply.tool_calls[0]
                result = ToolMessage(
                    get_order_status.invoke(call["args"]),
                    name=call["name"],
                    tool_call_id=call["id"],
                )
                out += [self._id(self._metered(reply)), self._id(result)]
                reply = tool_agent_reply([result])
            out.append(self._id(self._metered(reply)))
        return out

    @staticmethod
    def _metered(reply: AIMessage) -> AIMessage:
        """The usage and provider a live thread's replies carry (the figures are plausible)."""
        reply.usage_metadata = usage(18_000, 40)
        reply.response_metadata = {"model_provider": "openai", "model_name": "gpt-4o"}
        return reply


def tail(history: Sequence[BaseMessage], tokens: int) -> list[BaseMessage]:
    """The newest messages, from a user message on, holding at least ``tokens`` by our counter
    (tiktoken) and by the peers' (``count_tokens_approximately``) both."""
    counter = TiktokenCounter("gpt-4o")
    exact = approximate = 0
    for index in range(len(history) - 1, -1, -1):
        exact += counter.count_message(history[index])
        approximate += count_tokens_approximately([history[index]])
        if min(exact, approximate) >= tokens and history[index].type == "human":
            return list(history[index:])
    return list(history)


@dataclass
class System:
    """One agent on one thread: its compiled graph, checkpointer and timings."""

    name: str
    graph: Any
    saver: BaseCheckpointSaver[Any]
    closers: list[Callable[[], None]] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            close()


def docs_style(model: AnswerModel, tools: list[Any]) -> StateGraph[Any, Any, Any, Any]:
    """A tool-calling agent as the LangGraph docs write it (nothing of ours or langmem's inside)."""
    bound = model.bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", call_model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


def seeded_store(path: Path, history: Sequence[BaseMessage]) -> SQLiteHistoryStore:
    """A history store holding the whole thread, as ``ctx_budget`` recorded it turn by turn."""
    store = SQLiteHistoryStore.from_path(path)
    store.setup()
    for start in range(0, len(history), 1000):
        store.append("bench", history[start : start + 1000])
    return store


def our_view(history: Sequence[BaseMessage]) -> dict[str, Any]:
    """Our state before turn 1: the newest ~24k tokens, every message recorded already (turn 1
    compacts the rest of the store into a summary, as a live thread's compactions would have)."""
    context = {"recorded_through_id": history[-1].id}
    return {"messages": tail(history, SEED_TAIL_TOKENS), "context": context}


def ours(history: list[BaseMessage], saver: Any, tmp: Path) -> System:
    """The docs-style agent + ``add_context_management``: all N messages in the history store,
    the newest ~24k tokens in the state (turn 1 compacts them to summary + tail)."""
    store = seeded_store(tmp / f"ours-{len(history)}.sqlite", history)
    model = AnswerModel()
    builder = docs_style(model, [get_order_status, make_history_lookup_tool(store)])
    add_context_management(builder, model_node="agent", store=store, config=CONFIG, model=model)
    graph = builder.compile(checkpointer=saver)
    graph.update_state(THREAD, our_view(history), as_node="ctx_usage")
    return System("ours", graph, saver, [store.close])


def ours_middleware(history: list[BaseMessage], saver: Any, tmp: Path) -> System:
    """``create_agent`` + ``ContextManagementMiddleware``, seeded as :func:`ours`."""
    store = seeded_store(tmp / f"ours-mw-{len(history)}.sqlite", history)
    model = AnswerModel()
    middleware = ContextManagementMiddleware(
        store, config=CONFIG, model=model, tools=[get_order_status]
    )
    graph = create_agent(
        model, tools=[get_order_status], middleware=[middleware], checkpointer=saver
    )
    after_model = "ContextManagementMiddleware.after_model"
    graph.update_state(THREAD, our_view(history), as_node=after_model)
    return System("ours (middleware)", graph, saver, [store.close])


class LangmemState(MessagesState):
    context: dict[str, Any]


class LLMInputState(TypedDict):
    summarized_messages: list[AnyMessage]
    context: dict[str, Any]


def langmem(history: list[BaseMessage], saver: Any, tmp: Path) -> System:
    """The docs-style agent with langmem's ``SummarizationNode`` as its docs wire it: the whole
    list in ``messages``, the running summary (with the ids of every summarized message) in
    ``context``; all but the newest ~24k tokens summarized already (turn 1 summarizes those)."""
    model = AnswerModel()
    tools = [get_order_status]
    bound = model.bind_tools(tools)

    def call_model(state: LLMInputState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["summarized_messages"])]}

    summarizer = GenericFakeChatModel(messages=itertools.cycle([AIMessage(SUMMARY)]))
    builder = StateGraph(LangmemState)
    builder.add_node(
        "summarize",
        SummarizationNode(
            model=summarizer,
            max_tokens=BUDGET.usable,
            max_tokens_before_summary=BUDGET.trigger,
            max_summary_tokens=CONFIG.summary_max_tokens,
        ),
    )
    builder.add_node("call_model", call_model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "call_model")
    builder.add_conditional_edges("call_model", tools_condition)
    builder.add_edge("tools", "summarize")
    graph = builder.compile(checkpointer=saver)
    kept = len(tail(history, SEED_TAIL_TOKENS))
    covered = history[:-kept]
    running = RunningSummary(SUMMARY, {str(m.id) for m in covered}, covered[-1].id)
    graph.update_state(
        THREAD, {"messages": history, "context": {"running_summary": running}}, as_node="call_model"
    )
    return System("langmem", graph, saver)


def langchain(history: list[BaseMessage], saver: Any, tmp: Path) -> System:
    """``create_agent`` + ``SummarizationMiddleware`` (trigger at our trigger, keep our
    ``keep_recent_tokens``): it rewrites the state to summary + tail, so after N messages it
    holds its last summary and the ~24k newest tokens (turn 1 summarizes them)."""
    model = AnswerModel()
    summarizer = GenericFakeChatModel(messages=itertools.cycle([AIMessage(SUMMARY)]))
    middleware = SummarizationMiddleware(
        model=summarizer,
        trigger=("tokens", BUDGET.trigger),
        keep=("tokens", CONFIG.keep_recent_tokens),
    )
    graph = create_agent(
        model, tools=[get_order_status], middleware=[middleware], checkpointer=saver
    )
    seeded = tail(history, SEED_TAIL_TOKENS)
    summary = HumanMessage(
        f"Here is a summary of the conversation to date:\n\n{SUMMARY}",
        additional_kwargs={"lc_source": "summarization"},
        id="lc-summary",
    )
    graph.update_state(THREAD, {"messages": [summary, *seeded]}, as_node="model")
    return System("langchain", graph, saver)


def make_saver(kind: str, path: Path) -> tuple[BaseCheckpointSaver[Any], Callable[[], None]]:
    """A fresh checkpointer (langmem's ``RunningSummary`` allowed, as its users must allow it)."""
    serde = JsonPlusSerializer(allowed_msgpack_modules=[LANGMEM_SUMMARY])
    if kind == "memory":
        return InMemorySaver(serde=serde), lambda: None
    conn = sqlite3.connect(str(path), check_same_thread=False)
    return SqliteSaver(conn, serde=serde), conn.close


def state_size(system: System) -> tuple[int, float]:
    """Messages in the checkpointed ``messages`` channel, and KB of all channel values as the
    checkpointer serializes them."""
    values = system.graph.get_state(THREAD).values
    size = sum(len(system.saver.serde.dumps_typed(value)[1]) for value in values.values())
    return len(values["messages"]), round(size / 1024, 1)


def seed(size: int, args: argparse.Namespace, tmp: Path, dialogue: Dialogue) -> list[System]:
    """The four agents, each holding the same thread of ``size`` messages its own way."""
    history = dialogue.history(size)
    if len(tail(history, SEED_TAIL_TOKENS)) >= len(history):
        raise SystemExit(
            f"--sizes: {size:,} messages hold fewer than the {SEED_TAIL_TOKENS:,} tokens of the "
            "seeded view, so there is no older history to summarize; use sizes of 1000 or more"
        )
    systems: list[System] = []
    for build in (ours, ours_middleware, langmem, langchain):
        saver, close_saver = make_saver(args.saver, tmp / f"{build.__name__}-{size}.ckpt")
        system = build(history, saver, tmp)
        system.closers.append(close_saver)
        systems.append(system)
    return systems  # the history itself is dropped: only what each system keeps stays alive


def measure(size: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Seed the four agents at ``size`` messages, then run the turns round-robin (so a load change
    on the machine hits all four alike); warm-up turns (the first one summarizes) are not timed."""
    dialogue = Dialogue(args.seed)
    systems = seed(size, args, tmp, dialogue)
    questions = [dialogue.note() for _ in range(args.warmup + args.turns)]
    gc.collect()
    for turn, question in enumerate(questions):
        for system in systems:
            began = time.perf_counter()
            system.graph.invoke({"messages": [HumanMessage(question)]}, THREAD)
            if turn >= args.warmup:
                system.wall.append(time.perf_counter() - began)
    out: dict[str, Any] = {}
    for system in systems:
        walls = sorted(system.wall)
        messages, kb = state_size(system)
        out[system.name] = {
            "p50": round(statistics.median(walls) * 1000, 2),
            "p95": round(walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))] * 1000, 2),
            "state_messages": messages,
            "state_kb": kb,
        }
        system.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sizes", default="1000,20000")
    parser.add_argument("--turns", type=int, default=30, help="measured turns per size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed turns first (>= 1)")
    parser.add_argument("--saver", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.warmup = max(1, args.warmup)  # turn 1 runs the summarization the seed calls for
    sizes = sorted(int(s) for s in args.sizes.split(","))
    began = time.perf_counter()
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            figures[str(size)] = measure(size, args, Path(tmp))
            print(f"  {size:,} messages measured", file=sys.stderr)

    def per_size(key: str, name: str) -> dict[str, Any]:
        return {s: figures[s][name][key] for s in figures}

    small, large = str(sizes[0]), str(sizes[-1])
    result: dict[str, Any] = {
        "p50_ms": {name: per_size("p50", name) for name in SYSTEMS},
        "p95_ms": {name: per_size("p95", name) for name in SYSTEMS},
        "growth_p50": {
            name: round(figures[large][name]["p50"] / figures[small][name]["p50"], 2)
            for name in SYSTEMS
        },
        "ratio_to_ours_p50": {
            name: {
                s: round(figures[s][name]["p50"] / figures[s]["ours"]["p50"], 2) for s in figures
            }
            for name in SYSTEMS
        },
        "state_messages": {name: per_size("state_messages", name) for name in SYSTEMS},
        "state_kb": {name: per_size("state_kb", name) for name in SYSTEMS},
        "growth_sizes": [int(small), int(large)],
        "saver": args.saver,
        "turns": args.turns,
        "warmup": args.warmup,
        "statistic": "wall ms per graph.invoke of one user message (time.perf_counter)",
        "wall_s": round(time.perf_counter() - began, 1),
    }
    if args.json:
        print(json.dumps(result))
        return

    headers = ["system"]
    for size in sizes:
        headers += [f"p50 @{size:,}", f"p95 @{size:,}"]
    headers += ["growth"] + [f"x ours @{size:,}" for size in sizes]
    rows = []
    for name in SYSTEMS:
        row: list[object] = [name]
        for s in figures:
            row += [figures[s][name]["p50"], figures[s][name]["p95"]]
        row.append(f"{result['growth_p50'][name]:.2f}x")
        row += [f"{result['ratio_to_ours_p50'][name][s]:.2f}x" for s in figures]
        rows.append(row)
    print(
        f"Agent turn: wall ms per graph.invoke (p50, p95) over {args.turns} turns per size, after "
        f"{args.warmup} untimed warm-up turns; checkpointer: {args.saver}"
    )
    print(format_table(headers, rows))
    state_headers = ["state after the turns"]
    for size in sizes:
        state_headers += [f"messages @{size:,}", f"KB @{size:,}"]
    state_rows = [
        [name, *(v for s in figures for v in (figures[s][name]["state_messages"],
                                              figures[s][name]["state_kb"]))]
        for name in SYSTEMS
    ]  # fmt: skip
    print()
    print(format_table(state_headers, state_rows))
    mark = {True: "PASS", False: "FAIL"}
    print()
    for name in ("ours", "ours (middleware)"):
        growth = result["growth_p50"][name]
        print(
            f"growth of {name} p50 {int(large):,}/{int(small):,}: {growth:.2f}x "
            f"(target <= {GROWTH_TARGET}x) {mark[growth <= GROWTH_TARGET]}"
        )
    print(
        f"growth = p50 at the largest size / p50 at the smallest; x ours = the system's p50 / "
        f"ours' p50 at that size (above 1x: slower than ours). Run: {result['wall_s']} s"
    )


if __name__ == "__main__":
    main()
