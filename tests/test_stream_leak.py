"""``stream_mode="messages"`` carries the model's replies and nothing of context management.

A chat UI renders what that stream yields. The summary ``ctx_compact`` writes into the state
(a ``HumanMessage``), the long-term memory message ``ctx_budget`` places, the marker that
rewrites the view and the summarizer's and memory extractor's own model calls must never reach
it, in every wiring (``create_context_agent``, ``add_context_management`` on a user's graph,
the ``create_agent`` middleware), sync and async, through compactions made by the budget, by a
provider's context-length error, and committed elsewhere and adopted, while the state and the
history store keep the summary and the memory.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore
from pydantic import PrivateAttr

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    LLMSummarizer,
    SQLiteHistoryStore,
    add_context_management,
    create_context_agent,
)
from ctx_langgraph.compaction import compact_thread
from ctx_langgraph.compaction.format import SummaryDocument
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.memory import ChatModelExtractor, LongTermMemory
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply
from ctx_langgraph.view.markers import is_memory_message, is_summary, is_synthetic

MARKER = "MARKER-7f3a"
"""In every summary the summarizer writes, and nowhere else."""
MEMO = "MEMO-5c19"
"""In every memory the extractor proposes, and nowhere else."""
CONFIG = ContextConfig(
    context_window=2_000, output_reserve=300, keep_recent_tokens=300, summary_max_tokens=300
)
FILLER = "Let us go over the migration plan again, step by step, with the rollback notes. " * 5
OVERFLOW = "context_length_exceeded: Your input exceeds the context window of this model."
THREAD: RunnableConfig = {"configurable": {"thread_id": "t", "user_id": "u-1"}}


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A conversation: its turns, and where a compaction comes from outside the budget."""

    turns: int
    overflow_turn: int | None = None
    """The provider rejects this turn's first request as too long (a compaction inside the
    model call: in the model node, or in the middleware's ``wrap_model_call``)."""
    adopt_turn: int | None = None
    """Before this turn a summary is committed outside the graph; ``ctx_budget`` (the
    middleware's ``before_model``) adopts it."""


LONG = Schedule(40, overflow_turn=17, adopt_turn=29)
"""Forty turns: the budget compacts several times, the provider and another writer once each."""
FIRSTS = {
    "overflow": Schedule(5, overflow_turn=3),
    "adopted": Schedule(5, adopt_turn=3),
}
"""The thread's first summary comes from a provider's error, or from outside the graph (the
message stream drops ids it has seen in a node's input: only a first summary can leak)."""


class StreamingModel(MeteringChatModel):
    """A metered fake that streams its reply word by word (usage on the last chunk), and
    rejects the first request that ends with the user's message ``overflow_at`` as too long."""

    overflow_at: str | None = None
    _rejected: bool = PrivateAttr(default=False)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if self.overflow_at and messages[-1].id == self.overflow_at and not self._rejected:
            self._rejected = True
            raise ValueError(OVERFLOW)
        return super()._generate(messages, *args, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._generate(messages, stop, **kwargs).generations[0].message
        assert isinstance(reply, AIMessage) and not reply.tool_calls
        pieces = re.findall(r"\S+\s*", reply.text)
        for number, piece in enumerate(pieces, 1):
            last = number == len(pieces)
            chunk = AIMessageChunk(
                content=piece,
                usage_metadata=reply.usage_metadata if last else None,
                response_metadata=reply.response_metadata if last else {},
            )
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)


def agent_reply(messages: list[BaseMessage]) -> AIMessage:
    said = next((m for m in reversed(messages) if m.type == "human" and not is_summary(m)), None)
    number = re.search(r"turn (\d+)", said.text if said is not None else "")
    return AIMessage(f"Reply {number.group(1) if number else '?'}: noted, moving on with the plan.")


def marked_summary(messages: list[BaseMessage]) -> AIMessage:
    """The scripted LLM summary, with the marker in its goal."""
    text = scripted_summary_reply(messages).text
    document = SummaryDocument.parse(text)
    goal = document.goal or "the migration plan"
    marked = goal if MARKER in goal else f"{MARKER} {goal}"
    return AIMessage(dataclasses.replace(document, goal=marked).render())


def memory_answer(messages: list[BaseMessage]) -> AIMessage:
    memo = {"key": "memo", "content": f"The user's memo code is {MEMO}.", "confidence": 0.9}
    return AIMessage(json.dumps([memo]))


def summarizer() -> LLMSummarizer:
    return LLMSummarizer(StreamingModel(replies=[marked_summary]))


def memory() -> LongTermMemory:
    extractor = ChatModelExtractor(StreamingModel(replies=[memory_answer]))
    return LongTermMemory(InMemoryStore(), extractor=extractor, max_tokens=100)


def chat_model(schedule: Schedule) -> StreamingModel:
    overflow_at = f"u{schedule.overflow_turn}" if schedule.overflow_turn else None
    return StreamingModel(replies=[agent_reply], overflow_at=overflow_at)


def context_agent(store: HistoryStore, schedule: Schedule) -> tuple[Any, str]:
    model = chat_model(schedule)
    builder = create_context_agent(
        model, store=store, config=CONFIG, summarizer=summarizer(), memory=memory()
    )
    return builder.compile(checkpointer=InMemorySaver()), "model"


def user_graph(store: HistoryStore, schedule: Schedule) -> tuple[Any, str]:
    model = chat_model(schedule)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", call_model)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_context_management(
        builder,
        model_node="agent",
        store=store,
        config=CONFIG,
        model=model,
        summarizer=summarizer(),
        memory=memory(),
    )
    return builder.compile(checkpointer=InMemorySaver()), "agent"


def middleware_agent(store: HistoryStore, schedule: Schedule) -> tuple[Any, str]:
    model = chat_model(schedule)
    middleware = ContextManagementMiddleware(
        store, config=CONFIG, model=model, summarizer=summarizer(), memory=memory()
    )
    agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    return agent, "model"


WIRINGS = {
    "create_context_agent": context_agent,
    "graph": user_graph,
    "middleware": middleware_agent,
}


def user_message(turn: int) -> HumanMessage:
    return HumanMessage(f"This is turn {turn}. {FILLER}", id=f"u{turn}")


def adopt_elsewhere(store: HistoryStore) -> None:
    """A summary committed outside the graph (as another worker or an app would)."""
    report = compact_thread(
        store, THREAD, context_config=CONFIG, summarizer=summarizer(), keep_recent_tokens=200
    )
    assert report["status"] == "committed", report


@dataclasses.dataclass
class Seen:
    """What the stream yielded: the ``messages`` parts, and the nodes that sent updates."""

    messages: list[tuple[BaseMessage, dict[str, Any]]] = dataclasses.field(default_factory=list)
    updated: set[str] = dataclasses.field(default_factory=set)

    def take(self, part: Any, modes: str | list[str]) -> None:
        mode, payload = part if isinstance(modes, list) else (modes, part)
        if mode == "messages":
            message, metadata = payload
            self.messages.append((message, metadata))
        elif mode == "updates":
            self.updated.update(payload)


async def stream_turns(
    graph: Any, store: HistoryStore, modes: str | list[str], schedule: Schedule, driver: str
) -> tuple[Seen, dict[str, Any]]:
    """Every turn streamed (``graph.stream`` or ``graph.astream``); the final state."""
    seen = Seen()
    for turn in range(1, schedule.turns + 1):
        if turn == schedule.adopt_turn:
            adopt_elsewhere(store)
        inputs = {"messages": [user_message(turn)]}
        if driver == "sync":
            for part in graph.stream(inputs, THREAD, stream_mode=modes):
                seen.take(part, modes)
        else:
            async for part in graph.astream(inputs, THREAD, stream_mode=modes):
                seen.take(part, modes)
    state = graph.get_state(THREAD) if driver == "sync" else await graph.aget_state(THREAD)
    return seen, state.values


def leaked(message: BaseMessage, metadata: dict[str, Any], model_node: str) -> bool:
    """Whether a streamed message is anything but a chunk of the model node's reply."""
    text = str(message.content)
    return (
        MARKER in text
        or MEMO in text
        or "[Summary of the earlier conversation" in text
        or message.id in ("ctx-summary", "ctx-memory", "__remove_all__")
        or is_synthetic(message)
        or metadata.get("langgraph_node") != model_node  # ctx_compact, ctx_budget, before_model
        or not isinstance(message, AIMessageChunk)
    )


def check_stream(seen: Seen, store: HistoryStore, model_node: str, schedule: Schedule) -> None:
    """Nothing of context management streamed; every reply streamed, word by word."""
    leaks = [
        (metadata["langgraph_node"], type(message).__name__, message.id, message.text[:60])
        for message, metadata in seen.messages
        if leaked(message, metadata, model_node)
    ]
    assert leaks == []
    streamed: dict[str, list[str]] = defaultdict(list)
    for message, _ in seen.messages:
        streamed[str(message.id)].append(str(message.content))
    assert all(len(pieces) > 1 for pieces in streamed.values())
    replies = [e.text for e in store.read_events("t") if e.role == "ai"]
    assert len(replies) == schedule.turns
    assert sorted("".join(pieces) for pieces in streamed.values()) == sorted(replies)


def check_state(state: dict[str, Any], store: HistoryStore) -> int:
    """The summary and the memory are in the state and the store; the summary's generation."""
    active = store.get_active("t")
    assert active is not None and MARKER in (active.summary_text or "")
    summaries = [m for m in state["messages"] if is_summary(m)]
    assert len(summaries) == 1 and MARKER in summaries[0].text
    assert summaries[0].additional_kwargs["ctx_summary"]["generation"] == active.generation
    memories = [m for m in state["messages"] if is_memory_message(m)]
    assert len(memories) == 1 and MEMO in memories[0].text
    return active.generation


MODES: dict[str, str | list[str]] = {
    "messages": "messages",
    "messages+updates": ["messages", "updates"],
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("wiring", list(WIRINGS))
async def test_forty_turns_stream_only_the_replies(wiring: str, mode: str, driver: str) -> None:
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        graph, model_node = WIRINGS[wiring](store, LONG)
        seen, state = await stream_turns(graph, store, MODES[mode], LONG, driver)
        check_stream(seen, store, model_node, LONG)
        assert check_state(state, store) >= 6  # the budget compacted several times
        assert state["context"]["report"]["overflow"]["retries"] == 1
        if mode != "messages" and wiring != "middleware":  # our nodes still report updates
            assert {"ctx_budget", "ctx_compact", "ctx_usage"} <= seen.updated


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("first", list(FIRSTS))
@pytest.mark.parametrize("wiring", list(WIRINGS))
async def test_a_first_summary_from_the_provider_or_elsewhere_is_not_streamed(
    wiring: str, first: str, driver: str
) -> None:
    schedule = FIRSTS[first]
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        graph, model_node = WIRINGS[wiring](store, schedule)
        seen, state = await stream_turns(graph, store, "messages", schedule, driver)
        check_stream(seen, store, model_node, schedule)
        assert check_state(state, store) == 1
