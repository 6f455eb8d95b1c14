"""Agent turn benchmark: wall time of a whole agent turn on a long thread, vs langmem and LangChain,
over each one's compaction cycle.

A thread already holds N messages of agent dialogue (questions, ``get_order_status`` tool calls
with JSON results, answers); each measured turn is one ``graph.invoke`` of a new user message
through the context management, the model and back, with a checkpointer (``InMemorySaver``, or
``SqliteSaver`` with ``--saver sqlite``). Five agents on the same fake chat model, one 128k-token
window, each configured as its docs configure it:

- **ours**: a LangGraph-docs-style ``StateGraph(MessagesState)`` agent + ``add_context_management``
  (``ContextConfig(context_window=128_000)``, its defaults otherwise);
- **ours (middleware)**: ``create_agent`` + ``ContextManagementMiddleware``, the same config;
- **langmem**: the docs-style agent with langmem's ``SummarizationNode`` before the model, as its
  docs wire it (``summarized_messages`` for the model, the whole thread kept in ``messages``);
- **langmem (replace)**: the same node with ``output_messages_key="messages"``: its summary
  replaces the summarized messages;
- **langchain**: ``create_agent`` + ``SummarizationMiddleware(trigger=("fraction", 0.8))``.

Each system summarizes in cycles, and a turn costs what the state it holds costs, so each is
measured at five phases of ITS OWN cycle around N (``cycles``: right after its last summary, a
quarter, half, three quarters of the way, just before its next one), and the headline is the mean
over the phases. A system that has not summarized by N holds all N messages (one state). Each
starts a phase from the state it really holds there: the peers' states are simulated
(``peer_views``; :func:`check_peer_simulation` proves the simulation against the real peers),
ours' compactions are its real ``ctx_compact`` at the points its trigger arithmetic finds
(:func:`check_our_simulation` proves them against the real nodes), with every message recorded
in its store.

    python benchmarks/agent_turn.py [--json] [--sizes 1000,10000,50000] [--turns 10] [--saver sqlite]

Figures only, never a failing exit: the targets are printed with a pass/fail mark.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.ai import InputTokenDetails, OutputTokenDetails, UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import PrivateAttr
from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))  # peer_views and cycles, next to this file

import cycles
import peer_views
from cycles import PHASES, NeedsLongerThread, OurCycle, Placement, place, place_ours
from peer_views import (
    WINDOW,
    LangChainView,
    LangmemView,
    RequestMeter,
    SummaryModel,
    Wiring,
    langchain_middleware,
    langchain_states,
    langmem_input,
    langmem_node,
    langmem_serde,
    langmem_states,
)
from turn_costs import (
    Profiles,
    Subject,
    compaction_turns,
    round_trips,
    serialized_bytes,
    step_breakdown,
)
from turn_steps import STEPS

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    PostgresHistoryStore,
    SQLiteHistoryStore,
    add_context_management,
    make_history_lookup_tool,
)
from ctx_langgraph.budget.counters import REPLY_PRIMING, TiktokenCounter
from ctx_langgraph.budget.node import make_budget_node
from ctx_langgraph.compaction.node import make_compact_node
from ctx_langgraph.core.table import format_table
from ctx_langgraph.state import unpack
from ctx_langgraph.testing import tool_agent_reply

GROWTH_TARGET = 1.15  # ours at the largest size / ours at the smallest (p50), equal view, at most
VS_LANGCHAIN_TARGET = (
    1.0  # ours' turn / LangChain's at the smallest size (the same messages), at most
)
MIDDLEWARE_TARGET = 1.05  # the middleware's turn / ours' at the smallest size, at most
LANGMEM_TARGET = 20.0  # langmem's turn / ours' at the largest size, at least
CONFIG = ContextConfig(context_window=WINDOW)  # ours' defaults for a 128k window
BUDGET = CONFIG.resolve()
THREAD: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": 50}
SYSTEMS = ("ours", "ours (middleware)", "langmem", "langmem (replace)", "langchain")
OURS = ("ours", "ours (middleware)")
EXTRA = 6_000  # messages simulated past the largest size, where the next summaries fall
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

    ctx_offline_model: ClassVar[bool] = True  # an offline fake: extractive summaries
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
            if reply.tool_calls:  # a seeded call id (the policy draws a random one)
                call = reply.tool_calls[0]
                call["id"] = f"call_{self.count}"
                reply = AIMessage(reply.content, tool_calls=[call])
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
        """The usage and provider a live thread's replies carry (a plausible figure; only
        LangChain reads it, and its copies carry the usage of its own requests instead)."""
        reply.usage_metadata = usage(18_000, 40)
        reply.response_metadata = {"model_provider": "openai", "model_name": "gpt-4o"}
        return reply


def tool_overhead(tools: Sequence[Any]) -> int:
    """What every request adds to its messages, as :class:`AnswerModel` counts it: the bound
    tools' schemas and the reply priming."""
    counter = TiktokenCounter("gpt-4o")
    return counter.count_tools([convert_to_openai_tool(t) for t in tools]) + REPLY_PRIMING


def check_peer_simulation(size: int = 600, window: int = 4_000, seed: int = 7) -> dict[str, int]:
    """Prove the peers' simulated states on this benchmark's dialogue: run the real LangChain
    middleware and langmem node (both wirings) turn by turn over ``size`` messages in a
    ``window``-token window and compare their final states with the simulated ones
    (``AssertionError`` on a difference). Returns the summaries each peer made."""
    history = Dialogue(seed).history(size)
    meter = RequestMeter(tool_overhead([get_order_status]))
    wirings: tuple[Wiring, ...] = ("docs", "replace")
    return peer_views.check_peer_views(history, meter=meter, window=window, wirings=wirings)


def check_our_simulation(size: int = 600, window: int = 4_000, seed: int = 7) -> int:
    """Prove ours' simulated cycle on this benchmark's dialogue: run ours' real ``ctx_budget``
    and ``ctx_compact`` (this agent's model and tools) before every model call of ``size``
    messages in a ``window``-token window and compare where it compacted and its final view with
    :class:`cycles.OurCycle`'s (``AssertionError`` on a difference). Returns the compactions."""
    history = Dialogue(seed).history(size)
    config = ContextConfig(context_window=window)
    counter = TiktokenCounter("gpt-4o")

    def make(store: SQLiteHistoryStore) -> tuple[Any, Any]:
        model, tools = AnswerModel(), [get_order_status, make_history_lookup_tool(store)]
        budget = make_budget_node(store, config=config, model=model, tools=tools)
        return budget, make_compact_node(store, config=config, model=model)

    def cycle(store: SQLiteHistoryStore, compact: Any) -> OurCycle:
        overhead = tool_overhead([get_order_status, make_history_lookup_tool(store)])
        counts = [counter.count_message(m) for m in history]
        return OurCycle(history, counts=counts, overhead=overhead, config=config, compact=compact,
                        store=store, run_config=THREAD, counter=counter)  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp:
        return cycles.check_our_cycle(
            history, make=make, cycle=cycle, tmp=Path(tmp), run_config=THREAD
        )


@dataclass
class System:
    """One agent on one thread: its compiled graph, checkpointer and timings."""

    name: str
    graph: Any
    saver: BaseCheckpointSaver[Any]
    summaries: Callable[[], int]
    """Summaries (compactions) the system has made so far."""
    closers: list[Callable[[], None]] = field(default_factory=list)
    model: Any = None
    """The chat model the system calls (ours' cost measures time its calls)."""
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


class Plan:
    """The thread, the user messages of the measured turns, and each system's states at the
    phases of its cycle around each size."""

    def __init__(self, sizes: list[int], seed: int, turns: int, extra: int, tmp: Path) -> None:
        dialogue = Dialogue(seed)
        self.history = history = dialogue.history(sizes[-1] + extra)
        self.questions = [dialogue.note() for _ in range(turns)]
        counter = TiktokenCounter("gpt-4o")
        self.room = sum(  # what a phase's turns add: each question and its answer
            counter.count_message(HumanMessage(q))
            + counter.count_message(tool_agent_reply([HumanMessage(q)]))
            for q in self.questions
        )
        self.meter = meter = RequestMeter(tool_overhead([get_order_status]), counter)  # LangChain's
        counts = [meter.message(m) for m in history]
        self.tokens = cycles.prefix_sums(counts)
        self.ends = [  # after a plain answer: where a user message comes next
            i + 1
            for i, m in enumerate(history)
            if isinstance(m, AIMessage)
            and not m.tool_calls
            and (i + 1 == len(history) or isinstance(history[i + 1], HumanMessage))
        ]
        self.placements: dict[str, dict[int, Placement]] = {name: {} for name in SYSTEMS}
        peers: dict[str, list[int]] = {
            "langchain": langchain_states(history, meter=meter)[len(history)].points,
            "langmem": langmem_states(history)[len(history)].points,
            "langmem (replace)": langmem_states(history, wiring="replace")[len(history)].points,
        }
        for name, points in peers.items():
            for size in sizes:
                self.placements[name][size] = place(points, self.ends, size, self.tokens, self.room)

        def wanted(name: str) -> set[int]:
            return {n for p in self.placements[name].values() for n in p.lengths}

        self.langchain = langchain_states(history, meter=meter, lengths=wanted("langchain"))
        self.langmem: dict[Wiring, dict[int, LangmemView]] = {
            "docs": langmem_states(history, lengths=wanted("langmem")),
            "replace": langmem_states(
                history, wiring="replace", lengths=wanted("langmem (replace)")
            ),
        }
        store = SQLiteHistoryStore.from_path(tmp / "ours-work.sqlite")
        store.setup()
        compact = make_compact_node(store, config=CONFIG, model=AnswerModel())
        overhead = tool_overhead([get_order_status, make_history_lookup_tool(store)])
        cycle = OurCycle(history, counts=counts, overhead=overhead, config=CONFIG,
                         compact=compact, store=store, run_config=THREAD, counter=counter)  # fmt: skip
        placed = place_ours(cycle, sizes, self.ends, self.tokens, self.room, tmp)
        for name in OURS:  # the same config, tools and model: the same cycle
            self.placements[name] = placed.placements
        self.ours = placed.states
        self.equal_view = placed.equal_view  # ours at the largest size, holding the smallest's view
        store.close()


def our_store(plan: Plan, length: int, tmp: Path) -> tuple[SQLiteHistoryStore, dict[str, Any]]:
    """A copy of ours' store at ``length`` (every message before it, the summaries committed by
    then) and ours' state there: each system writes to its own."""
    state, snapshot = plan.ours[length]
    path = tmp / f"ours-{uuid.uuid4().hex[:8]}.sqlite"
    shutil.copyfile(snapshot, path)
    store = SQLiteHistoryStore.from_path(path)
    store.setup()
    return store, state


def generation(graph: Any) -> Callable[[], int]:
    """Ours' compactions so far: the active summary's generation in its context channel."""
    return lambda: int(
        unpack(graph.get_state(THREAD).values["context"]).get("active_generation") or 0
    )


def ours_graph(store: Any, saver: Any, config: ContextConfig = CONFIG) -> tuple[Any, AnswerModel]:
    """The docs-style agent + ``add_context_management`` on ``store``."""
    model = AnswerModel()
    tools = [get_order_status, make_history_lookup_tool(store)]
    builder = docs_style(model, tools)
    add_context_management(builder, model_node="agent", store=store, config=config, model=model)
    return builder.compile(checkpointer=saver), model


def middleware_graph(store: Any, saver: Any) -> tuple[Any, AnswerModel]:
    """``create_agent`` + ``ContextManagementMiddleware`` on ``store``."""
    model = AnswerModel()
    middleware = ContextManagementMiddleware(
        store, config=CONFIG, model=model, tools=[get_order_status]
    )
    graph = create_agent(
        model, tools=[get_order_status], middleware=[middleware], checkpointer=saver
    )
    return graph, model


def ours(plan: Plan, length: int, saver: Any, tmp: Path) -> System:
    """The docs-style agent + ``add_context_management``, on ours' state at ``length``."""
    store, state = our_store(plan, length, tmp)
    graph, model = ours_graph(store, saver)
    graph.update_state(THREAD, state, as_node="ctx_usage")
    return System("ours", graph, saver, generation(graph), [store.close], model=model)


def ours_middleware(plan: Plan, length: int, saver: Any, tmp: Path) -> System:
    """``create_agent`` + ``ContextManagementMiddleware``, on ours' state at ``length``."""
    store, state = our_store(plan, length, tmp)
    graph, model = middleware_graph(store, saver)
    graph.update_state(THREAD, state, as_node="ContextManagementMiddleware.after_model")
    return System("ours (middleware)", graph, saver, generation(graph), [store.close], model=model)


class LangmemState(MessagesState):
    context: dict[str, Any]


class LLMInputState(TypedDict):
    summarized_messages: list[AnyMessage]
    context: dict[str, Any]


def langmem_agent(view: LangmemView, saver: Any, wiring: Wiring) -> System:
    """The docs-style agent with langmem's ``SummarizationNode`` before the model, on the state
    the node really holds at that point of the thread (the whole thread in ``messages`` and the
    running summary in ``context`` as its docs wire it; summary + the messages since when it
    replaces them)."""
    model = AnswerModel()
    tools = [get_order_status]
    bound = model.bind_tools(tools)

    def call_model(state: LLMInputState) -> dict[str, Any]:  # as langmem's docs write it
        return {"messages": [bound.invoke(state["summarized_messages"])]}

    def call_model_on_messages(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    node = langmem_node(WINDOW, wiring)
    summaries = node.model
    builder = StateGraph(LangmemState)
    builder.add_node("summarize", node)
    if wiring == "docs":
        builder.add_node("call_model", call_model)
    else:
        builder.add_node("call_model", call_model_on_messages)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "call_model")
    builder.add_conditional_edges("call_model", tools_condition)
    builder.add_edge("tools", "summarize")
    graph = builder.compile(checkpointer=saver)
    values: dict[str, Any] = {"messages": view.messages, "context": {}}
    if view.running_summary is not None:
        values["context"] = {"running_summary": view.running_summary}
    if view.summarized_messages is not None:
        values["summarized_messages"] = view.summarized_messages
    graph.update_state(THREAD, values, as_node="call_model")
    name = "langmem" if wiring == "docs" else "langmem (replace)"
    return System(name, graph, saver, lambda: summaries.calls)


def langmem(plan: Plan, length: int, saver: Any, tmp: Path) -> System:
    return langmem_agent(plan.langmem["docs"][length], saver, "docs")


def langmem_replace(plan: Plan, length: int, saver: Any, tmp: Path) -> System:
    return langmem_agent(plan.langmem["replace"][length], saver, "replace")


def langchain(plan: Plan, length: int, saver: Any, tmp: Path) -> System:
    """``create_agent`` + ``SummarizationMiddleware`` on the state it really holds at that point
    of the thread: its last summary + the messages since (its replies with the usage of its
    requests)."""
    model = AnswerModel()
    middleware = langchain_middleware(WINDOW)
    summaries = cast(SummaryModel, middleware.model)
    graph = create_agent(
        model, tools=[get_order_status], middleware=[middleware], checkpointer=saver
    )
    view: LangChainView = plan.langchain[length]
    graph.update_state(THREAD, {"messages": view.messages}, as_node="model")
    return System("langchain", graph, saver, lambda: summaries.calls)


def make_saver(kind: str, path: Path) -> tuple[BaseCheckpointSaver[Any], Callable[[], None]]:
    """A fresh checkpointer (langmem's ``RunningSummary`` allowed, as its users must allow it)."""
    serde = langmem_serde()
    if kind == "memory":
        return InMemorySaver(serde=serde), lambda: None
    conn = sqlite3.connect(str(path), check_same_thread=False)
    return SqliteSaver(conn, serde=serde), conn.close


def state_size(system: System) -> tuple[int, float, int]:
    """Messages in the checkpointed ``messages`` channel, KB of all channel values as the
    checkpointer serializes them, and the input tokens of the last model request (its usage)."""
    values = system.graph.get_state(THREAD).values
    size = sum(len(system.saver.serde.dumps_typed(value)[1]) for value in values.values())
    last = next(m for m in reversed(values["messages"]) if isinstance(m, AIMessage))
    sent = last.usage_metadata["input_tokens"] if last.usage_metadata else 0
    return len(values["messages"]), round(size / 1024, 1), sent


BUILDERS = dict(
    zip(SYSTEMS, (ours, ours_middleware, langmem, langmem_replace, langchain), strict=True)
)


def held(plan: Plan, name: str, length: int) -> tuple[int, int]:
    """The messages of the system's next model request at ``length`` and their exact tokens
    (without the tool schemas)."""
    if name in OURS:
        messages = plan.ours[length][0]["messages"]
    elif name == "langchain":
        messages = plan.langchain[length].messages
    else:
        messages = langmem_input(plan.langmem["docs" if name == "langmem" else "replace"][length])
    return len(messages), sum(map(plan.meter.message, messages))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_block(
    plan: Plan, block: dict[str, int], args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    """The systems of one phase at their states, their turns round-robin (so a load change on
    the machine hits all of them alike); the warm-up turns are not timed."""
    systems: list[System] = []
    for name, length in block.items():
        saver, close_saver = make_saver(args.saver, tmp / f"{uuid.uuid4().hex[:8]}.ckpt")
        system = BUILDERS[name](plan, length, saver, tmp)
        system.closers.append(close_saver)
        systems.append(system)
    before: dict[str, int] = {}
    gc.collect()
    try:
        for turn, question in enumerate(plan.questions[: args.warmup + args.turns]):
            for system in systems:
                if turn == args.warmup:
                    before[system.name] = system.summaries()
                gc.collect(1)  # (untimed) no turn pays for the young garbage of the one before
                began = time.perf_counter()
                invoke = functools.partial(
                    system.graph.invoke, {"messages": [HumanMessage(question)]}, THREAD
                )
                if turn >= args.warmup:
                    args.profiles.run(system.name, invoke)
                else:
                    invoke()
                if turn >= args.warmup:
                    system.wall.append(time.perf_counter() - began)
        out: dict[str, Any] = {}
        for system in systems:
            messages, kb, sent = state_size(system)
            count, tokens = held(plan, system.name, block[system.name])
            out[system.name] = {
                "length": block[system.name],
                "messages": count,
                "tokens": tokens,
                "p50": round(statistics.median(system.wall) * 1000, 2),
                "walls": system.wall,
                "state_messages": messages,
                "state_kb": kb,
                "request_tokens": sent,
                "summarized_turns": system.summaries() - before[system.name],
            }
        return out
    finally:
        for system in systems:
            system.close()


def measure(plan: Plan, size: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Every phase of one size (then ours at its equal view, at the largest size)."""
    placements = {name: plan.placements[name][size] for name in SYSTEMS}
    blocks = [
        {name: p.lengths[j] for name, p in placements.items() if j < len(p.lengths)}
        for j in range(max(len(p.lengths) for p in placements.values()))
    ]
    phases: dict[str, list[dict[str, Any]]] = {name: [] for name in SYSTEMS}
    for j, block in enumerate(blocks):
        for name, record in run_block(plan, block, args, tmp).items():
            phase = PHASES[j] if placements[name].cycle is not None else None
            phases[name].append({"phase": phase, **record})
    equal = None
    if size == max(plan.placements["ours"]) and plan.equal_view is not None:
        equal = run_block(plan, {name: plan.equal_view for name in OURS}, args, tmp)
        for record in equal.values():
            del record["walls"]
    return {
        "phases": phases,
        "equal_view": equal,
        "cycles": {name: placements[name].as_json() for name in SYSTEMS},
    }


def _subject(system: System) -> Subject:
    return Subject(system.name, system.graph, system.model, system.saver, THREAD, system.closers)


def _fresh(
    name: str, make: Callable[[Any, Any], tuple[Any, Any]], store: Any, messages: list[Any],
    as_node: str, tmp: Path,
) -> Subject:  # fmt: skip
    """``make``'s graph on a new thread of ``store`` whose state holds ``messages`` (its first
    turn records them all)."""
    saver, close_saver = make_saver("memory", tmp / f"{uuid.uuid4().hex[:8]}.ckpt")
    graph, model = make(store, saver)
    thread = {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex[:8]}"}, "recursion_limit": 50}
    graph.update_state(thread, {"messages": messages}, as_node=as_node)
    return Subject(name, graph, model, saver, thread, [close_saver])


def _plain(name: str, messages: list[Any], tmp: Path) -> Subject:
    """The agent with nothing of ours: the docs-style graph, or a bare ``create_agent``."""
    saver, close_saver = make_saver("memory", tmp / f"{uuid.uuid4().hex[:8]}.ckpt")
    model = AnswerModel()
    if name == "plain StateGraph":
        graph = docs_style(model, [get_order_status]).compile(checkpointer=saver)
        as_node = "agent"
    else:
        graph = create_agent(model, tools=[get_order_status], checkpointer=saver)
        as_node = "model"
    graph.update_state(THREAD, {"messages": messages}, as_node=as_node)
    return Subject(name, graph, model, saver, THREAD, [close_saver])


_AFTER = {"ours": "ctx_usage", "ours (middleware)": "ContextManagementMiddleware.after_model"}
_MAKE = {"ours": ours_graph, "ours (middleware)": middleware_graph}


def costs(plan: Plan, size: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Where ours' turn goes at ``size`` (ours' state there, every system at its own): the
    steps, the store's round trips per plain turn on each backend, the checkpointed bytes per
    turn against the plain agents, and what a compaction adds to its turn."""
    length = plan.placements["ours"][size].lengths[0]
    questions = [Dialogue(args.seed + 1).note() for _ in range(args.warmup + args.turns)]
    out: dict[str, Any] = {"length": length, "steps": {}, "round_trips": {}, "bytes": {}}
    subjects = [
        _subject(BUILDERS[name](plan, length, make_saver("memory", tmp / "s")[0], tmp))
        for name in OURS
    ]
    try:
        out["steps"] = step_breakdown(subjects, questions, args.warmup)
    finally:
        for subject in subjects:
            subject.close()
    backends: list[tuple[str, Callable[[], Any]]] = [
        ("sqlite", lambda: SQLiteHistoryStore.from_path(tmp / f"rt-{uuid.uuid4().hex[:8]}.sqlite"))
    ]
    if args.pg:
        backends.append(("postgres", lambda: PostgresHistoryStore.from_conn_string(args.pg)))
    messages = list(plan.history[:length])
    for backend, open_store in backends:
        for name in OURS:
            store = open_store()
            store.setup()
            subject = _fresh(name, _MAKE[name], store, messages, _AFTER[name], tmp)
            try:
                out["round_trips"][f"{name} / {backend}"] = round_trips(
                    subject, questions, args.warmup
                )
            finally:
                subject.close()
                store.close()
    for name in (*OURS, "plain StateGraph", "plain create_agent"):
        if name in OURS:
            saver = make_saver("memory", tmp / "b")[0]
            subject = _subject(BUILDERS[name](plan, length, saver, tmp))
        else:
            subject = _plain(name, messages, tmp)
        try:
            out["bytes"][name] = round(serialized_bytes(subject, questions, args.warmup))
        finally:
            subject.close()
    out["compaction"] = compaction_cost(plan, args, tmp)
    return out


COMPACTION_CONFIG = ContextConfig(context_window=16_000, keep_recent_tokens=4_000)


def compaction_cost(plan: Plan, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Ours in a 16k window (the same agent and dialogue), turn after turn until it compacted
    several times: what each compaction adds to its turn, by step."""
    store = SQLiteHistoryStore.from_path(tmp / f"cmp-{uuid.uuid4().hex[:8]}.sqlite")
    store.setup()
    subject = _fresh(
        "ours", lambda st, sv: ours_graph(st, sv, COMPACTION_CONFIG), store,
        list(plan.history[:160]), "ctx_usage", tmp,
    )  # fmt: skip
    dialogue = Dialogue(args.seed + 2)
    questions = [dialogue.note() for _ in range(args.compaction_turns)]

    def active() -> int:
        context = unpack(subject.graph.get_state(subject.thread).values.get("context"))
        return int(context.get("active_generation") or 0)

    try:
        subject.turn(questions[0])  # records the 160 messages
        return compaction_turns(subject, questions[1:], active)
    finally:
        subject.close()
        store.close()


def targets(
    p50: dict[str, dict[str, float]], growth: dict[str, float], small: str, large: str
) -> list[dict[str, Any]]:
    """The targets, each with its figure and whether it is met."""

    def ratio(a: str, b: str, size: str) -> float:
        return round(p50[a][size] / p50[b][size], 2)

    rows = [
        (f"ours / langchain @{int(small):,}", ratio("ours", "langchain", small), "<=",
         VS_LANGCHAIN_TARGET),
        (f"ours (middleware) / ours @{int(small):,}", ratio("ours (middleware)", "ours", small),
         "<=", MIDDLEWARE_TARGET),
        ("growth of ours at equal view", growth["ours"], "<=", GROWTH_TARGET),
        (f"langmem / ours @{int(large):,}", ratio("langmem", "ours", large), ">=", LANGMEM_TARGET),
    ]  # fmt: skip
    return [
        {"target": name, "value": value, "bound": f"{op} {bound}",
         "passed": value <= bound if op == "<=" else value >= bound}
        for name, value, op, bound in rows
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--turns", type=int, default=10, help="measured turns per phase")
    parser.add_argument("--warmup", type=int, default=2, help="untimed turns first, per phase")
    parser.add_argument("--saver", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--pg", default=None, help="PostgreSQL DSN: count the plain turn's round trips there too"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="cProfile every system's timed turns into DIR/<system>.prof (slows every turn)",
    )
    parser.add_argument(
        "--compaction-turns", type=int, default=240, help="turns of the compaction measure"
    )
    args = parser.parse_args()
    args.profiles = Profiles(args.profile)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    began = time.perf_counter()
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        extra = EXTRA
        while True:
            try:
                plan = Plan(sizes, args.seed, args.warmup + args.turns, extra, Path(tmp))
                break
            except NeedsLongerThread:
                extra *= 2
        print(f"  thread of {len(plan.history):,} messages and the cycles placed", file=sys.stderr)
        gc.collect()
        gc.freeze()  # the plan (every system's states) is the benchmark's, not a system's heap
        for size in sizes:
            figures[str(size)] = measure(plan, size, args, Path(tmp))
            print(f"  {size:,} messages measured", file=sys.stderr)
        turn_costs = costs(plan, sizes[0], args, Path(tmp))
        print("  ours' steps, round trips, bytes and compactions measured", file=sys.stderr)

    def over_phases(name: str, key: str, how: Callable[[list[float]], float]) -> dict[str, float]:
        return {s: round(how([p[key] for p in figures[s]["phases"][name]]), 2) for s in figures}

    p50 = {name: over_phases(name, "p50", statistics.fmean) for name in SYSTEMS}
    small, large = str(sizes[0]), str(sizes[-1])
    equal = figures[large]["equal_view"]
    if equal is not None:
        basis = "equal view"
        growth = {name: round(equal[name]["p50"] / p50[name][small], 2) for name in OURS}
    else:
        has_cycle = figures[small]["cycles"]["ours"] is not None
        basis = "equal phases" if has_cycle else "whole thread at both sizes"
        growth = {name: round(p50[name][large] / p50[name][small], 2) for name in OURS}
    result: dict[str, Any] = {
        "p50_ms": p50,
        "p50_min_ms": {name: over_phases(name, "p50", min) for name in SYSTEMS},
        "p50_max_ms": {name: over_phases(name, "p50", max) for name in SYSTEMS},
        "p95_ms": {
            name: {
                s: round(
                    percentile([w for p in figures[s]["phases"][name] for w in p["walls"]], 0.95)
                    * 1000,
                    2,
                )
                for s in figures
            }
            for name in SYSTEMS
        },
        "ratio_to_ours_p50": {
            name: {s: round(p50[name][s] / p50["ours"][s], 2) for s in figures} for name in SYSTEMS
        },
        "growth_p50": {name: round(p50[name][large] / p50[name][small], 2) for name in SYSTEMS},
        "growth": growth,
        "growth_basis": basis,
        "growth_sizes": [int(small), int(large)],
        "growth_target": GROWTH_TARGET,
        "equal_view": equal,
        "passed": {name: growth[name] <= GROWTH_TARGET for name in OURS},
        "targets": targets(p50, growth, small, large),
        "costs": turn_costs,
        "faster_than": {
            name: {s: p50["ours"][s] < p50[name][s] for s in figures}
            for name in SYSTEMS
            if name not in OURS
        },
        "view_messages": {
            name: over_phases(name, "messages", statistics.fmean) for name in SYSTEMS
        },
        "view_tokens": {name: over_phases(name, "tokens", statistics.fmean) for name in SYSTEMS},
        "state_messages": {
            name: over_phases(name, "state_messages", statistics.fmean) for name in SYSTEMS
        },
        "state_kb": {name: over_phases(name, "state_kb", statistics.fmean) for name in SYSTEMS},
        "request_tokens": {
            name: over_phases(name, "request_tokens", statistics.fmean) for name in SYSTEMS
        },
        "summarized_turns": {
            name: {
                s: sum(p["summarized_turns"] for p in figures[s]["phases"][name]) for s in figures
            }
            for name in SYSTEMS
        },
        "cycles": {name: {s: figures[s]["cycles"][name] for s in figures} for name in SYSTEMS},
        "phases": {
            s: {
                name: [
                    {k: v for k, v in p.items() if k != "walls"} for p in figures[s]["phases"][name]
                ]
                for name in SYSTEMS
            }
            for s in figures
        },
        "conditions": {
            "window": WINDOW,
            "phases": list(PHASES),
            "headroom": [cycles.HEADROOM_FACTOR, cycles.HEADROOM_TOKENS],
            "ours_trigger_tokens": BUDGET.trigger,
            "ours_keep_recent_tokens": BUDGET.keep_recent_tokens,
            "ours_summary_max_tokens": CONFIG.summary_max_tokens,
            "ours_summarizer": "ExtractiveSummarizer",
            "langchain_trigger": list(peer_views.LANGCHAIN_TRIGGER),
            "langchain_keep": ["messages", 20],
            "langmem_max_tokens": WINDOW,
            "langmem_max_tokens_before_summary": int(WINDOW * peer_views.LANGMEM_TRIGGER_FRACTION),
            "langmem_max_summary_tokens": 256,
        },
        "saver": args.saver,
        "turns": args.turns,
        "warmup": args.warmup,
        "seed": args.seed,
        "statistic": "wall ms per graph.invoke of one user message (time.perf_counter): p50 of a "
        "phase's turns, then the mean, min and max over the phases; p95 over all the timed turns",
        "thread_messages": len(plan.history),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    if args.json:
        print(json.dumps(result))
        return
    report(result, sizes, args)


def report(result: dict[str, Any], sizes: list[int], args: argparse.Namespace) -> None:
    keys = [str(s) for s in sizes]
    headers = ["system"]
    for size in sizes:
        headers += [f"p50 @{size:,}", f"p95 @{size:,}"]
    headers += ["growth"] + [f"x ours @{size:,}" for size in sizes]
    rows = []
    for name in SYSTEMS:
        row: list[object] = [name]
        for s in keys:
            row += [
                f"{result['p50_ms'][name][s]:,.1f} ({result['p50_min_ms'][name][s]:,.1f}-"
                f"{result['p50_max_ms'][name][s]:,.1f})",
                f"{result['p95_ms'][name][s]:,.1f}",
            ]
        row.append(f"{result['growth_p50'][name]:.2f}x")
        row += [f"{result['ratio_to_ours_p50'][name][s]:.2f}x" for s in keys]
        rows.append(row)
    print(
        "Agent turn over each system's own compaction cycle: wall ms per graph.invoke, p50 = the "
        f"mean over its phases of each phase's p50 (min-max), p95 over all the timed turns; "
        f"{args.turns} timed turns per phase after {args.warmup} untimed ones; checkpointer: "
        f"{args.saver}"
    )
    print(format_table(headers, rows))

    def where(name: str, s: str) -> str:
        c = result["cycles"][name][s]
        if c is None:
            return "none: all N"
        return f"{c['start_length']:,}-{c['next_summary_at']:,} ({c['summaries_before']})"

    state_headers = ["mean over the cycle"]
    for size in sizes:
        state_headers += [f"view @{size:,}", f"KB @{size:,}", f"cycle @{size:,}"]
    state_headers += ["summarized turns"]
    state_rows = []
    for name in SYSTEMS:
        row = [name]
        for s in keys:
            row += [
                f"{result['view_messages'][name][s]:,.0f} msgs / "
                f"{result['view_tokens'][name][s]:,.0f} tok",
                f"{result['state_kb'][name][s]:,.1f}",
                where(name, s),
            ]
        row.append(" / ".join(str(result["summarized_turns"][name][s]) for s in keys))
        state_rows.append(row)
    print()
    print(format_table(state_headers, state_rows))
    phase_headers = ["messages", "phase"] + [f"{name} at / p50" for name in SYSTEMS]
    phase_rows = []
    for s in keys:
        phases = result["phases"][s]
        for j in range(max(len(p) for p in phases.values())):
            row = [f"{int(s):,}", None]
            for name in SYSTEMS:
                if j < len(phases[name]):
                    p = phases[name][j]
                    row[1] = row[1] or ("all N" if p["phase"] is None else f"{p['phase']:.2f}")
                    row.append(f"{p['length']:,} / {p['p50']:,.1f}")
                else:
                    row.append("-")
            phase_rows.append(row)
    print()
    print(format_table(phase_headers, phase_rows))
    mark = {True: "PASS", False: "FAIL"}
    print()
    report_costs(result["costs"])
    print()
    for row in result["targets"]:
        print(f"target {row['target']}: {row['value']:.2f} ({row['bound']}) {mark[row['passed']]}")
    print(args.profiles.write(), end="")
    small, large = result["growth_sizes"]
    equal = result["equal_view"]
    if equal is not None:
        e = equal["ours"]
        print(
            f"equal view: ours at {large:,} at message {e['length']:,} of its cycle holds "
            f"{e['messages']:,} messages, {e['tokens']:,} tokens (at {small:,} it holds all of "
            f"them, {result['view_tokens']['ours'][str(small)]:,.0f} tokens): p50 ours "
            f"{e['p50']:,.1f} ms, ours (middleware) {equal['ours (middleware)']['p50']:,.1f} ms"
        )
    for name in OURS:
        print(
            f"growth of {name} p50 {large:,}/{small:,} ({result['growth_basis']}): "
            f"{result['growth'][name]:.2f}x (target <= {GROWTH_TARGET}x) "
            f"{mark[result['passed'][name]]}"
        )
    for name, by_size in result["faster_than"].items():
        marks = ", ".join(
            f"{int(s):,}: {result['p50_ms']['ours'][s]:,.1f} vs {result['p50_ms'][name][s]:,.1f} ms "
            f"{mark[ok]}"
            for s, ok in by_size.items()
        )
        print(f"ours faster than {name} on the cycle mean: {marks}")
    print(
        f"Window {WINDOW:,} tokens for all. ours: ContextConfig(context_window={WINDOW:,}) "
        f"(trigger {BUDGET.trigger:,}, keep_recent_tokens {BUDGET.keep_recent_tokens:,}), every "
        "message recorded in its store, its compactions its real ctx_compact (ExtractiveSummarizer) "
        "where its trigger arithmetic fires. LangChain: trigger ('fraction', 0.8), keep "
        f"('messages', 20). langmem: max_tokens {WINDOW:,}, max_tokens_before_summary "
        f"{int(WINDOW * 0.8):,}, max_summary_tokens 256. Phases "
        f"{', '.join(f'{p:g}' for p in PHASES)} of each system's own cycle around N (at = the "
        "history length of its state); growth = p50 at the largest size / at the smallest; x ours "
        "= the system's p50 / ours' (above 1x: slower); view = the next model request (exact "
        "tokens, without tool schemas) when a phase starts; KB = the checkpointed state after a "
        f"phase's turns; summarized turns = timed turns that summarized, per size. Thread "
        f"{result['thread_messages']:,} messages. Run: {result['wall_s']} s"
    )


def report_costs(costs: dict[str, Any]) -> None:
    """The steps, round trips, checkpointed bytes and compaction tables."""
    steps = costs["steps"]
    names = list(steps)
    rows: list[list[object]] = [
        [step, *(f"{steps[n]['steps_ms'][step]:.2f}" for n in names)] for step in STEPS
    ]
    rows.append(["other (LangGraph's loop, channels, checkpoint reads)",
                 *(f"{steps[n]['other_ms']:.2f}" for n in names)])  # fmt: skip
    rows.append(["whole turn (mean)", *(f"{steps[n]['wall_ms']:.2f}" for n in names)])
    print(f"Where ours' turn goes at {costs['length']:,} messages (mean ms per turn):")
    print(format_table(["step", *names], rows))
    print()
    trips = costs["round_trips"]
    print("History store round trips per plain turn (a new thread holding the same messages):")
    print(format_table(
        ["system / backend", "transactions", "statements", "round trips", "operations"],
        [[key, f"{t['transactions']:g}", f"{t['statements']:g}", f"{t['round_trips']:g}",
          ", ".join(f"{op} {n:g}" for op, n in t["operations"].items())]
         for key, t in trips.items()],
    ))  # fmt: skip
    print()
    sizes = costs["bytes"]
    base = {"ours": "plain StateGraph", "ours (middleware)": "plain create_agent"}
    print("Checkpointed bytes per turn (what the checkpointer serialized):")
    print(format_table(
        ["system", "bytes per turn", "added over"],
        [[name, f"{b:,}", f"{b - sizes[base[name]]:+,} ({base[name]})" if name in base else "-"]
         for name, b in sizes.items()],
    ))  # fmt: skip
    compaction = costs["compaction"]
    print()
    if "added_p50_ms" not in compaction:
        print(f"compaction: {compaction['compactions']} in {compaction['turns']} turns")
        return
    print(
        f"What a compaction adds to its turn (ours, {COMPACTION_CONFIG.context_window:,}-token "
        f"window, {compaction['compactions']} compactions in {compaction['turns']} turns, the "
        f"summarizer's own time left out): p50 {compaction['added_p50_ms']:.1f} ms, max "
        f"{compaction['added_max_ms']:.1f} ms, over a plain turn of "
        f"{compaction['plain_turn_p50_ms']:.1f} ms; by step (mean ms):"
    )
    print(
        format_table(["step", "ms"], [[k, f"{v:.2f}"] for k, v in compaction["steps_ms"].items()])
    )


if __name__ == "__main__":
    main()
