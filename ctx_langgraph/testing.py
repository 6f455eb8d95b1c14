"""Deterministic chat models and summarizers for tests, demos and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import random
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.messages.ai import InputTokenDetails, OutputTokenDetails, UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from ctx_langgraph.budget.counters import CountCache, TiktokenCounter
from ctx_langgraph.budget.prefix import cacheable_prefix, request_shape
from ctx_langgraph.compaction.protocol import Summarizer, SummaryRequest

__all__ = [
    "FAILURE_KINDS",
    "FlakySummarizer",
    "MeteringChatModel",
    "Reply",
    "scripted_summary_reply",
    "tool_agent_reply",
]

Reply = AIMessage | str | Callable[[list[BaseMessage]], AIMessage]
"""A scripted reply: a message, its text, or a function of the request."""


class MeteringChatModel(BaseChatModel):
    """Scripted replies (cycling) with exact, offline usage metering: the request's tiktoken
    count as its input tokens, and its cacheable prefix against the previous request as
    ``cache_read``.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> model = MeteringChatModel(replies=["Hello!"])
        >>> reply = model.invoke([HumanMessage("hi")])
        >>> reply.content, reply.usage_metadata["input_tokens"]
        ('Hello!', 8)
    """

    ctx_offline_model: ClassVar[bool] = True
    """An offline fake: the wiring keeps the extractive summarizer for it."""

    replies: list[Any]
    counter_model: str = "gpt-4o"
    model_name: str = "gpt-4o"
    """Reported as the model (picks counters and prices)."""
    simulate_cache: bool = True

    _calls: int = PrivateAttr(default=0)
    _instance: str = PrivateAttr(default_factory=lambda: uuid.uuid4().hex[:12])
    _previous: list[str] = PrivateAttr(default_factory=list)
    _counter: TiktokenCounter | None = PrivateAttr(default=None)
    _cache: CountCache = PrivateAttr(default_factory=CountCache)

    @property
    def _llm_type(self) -> str:
        return "metering-fake"

    @property
    def counter(self) -> TiktokenCounter:
        if self._counter is None:
            self._counter = TiktokenCounter(self.counter_model)
        return self._counter

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _next_reply(self, messages: list[BaseMessage]) -> AIMessage:
        if not self.replies:
            raise ValueError("MeteringChatModel has no scripted replies")
        scripted = self.replies[self._calls % len(self.replies)]
        reply = scripted(messages) if callable(scripted) else scripted
        return AIMessage(reply) if isinstance(reply, str) else reply.model_copy()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools: list[Any] = kwargs.get("tools") or []
        counter = self.counter
        shape = request_shape(messages, counter, tools=tools, cache=self._cache)
        input_tokens = shape.input_tokens + 3
        cache_read = cacheable_prefix(self._previous, shape) if self.simulate_cache else 0
        self._previous = list(shape.digests)
        reply = self._next_reply(messages)
        self._calls += 1
        output = counter.count_message(reply) - 3
        reply.usage_metadata = UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=output,
            total_tokens=input_tokens + output,
            input_token_details=InputTokenDetails(cache_read=cache_read),
            output_token_details=OutputTokenDetails(),
        )
        reply.response_metadata = {
            **reply.response_metadata,
            "model_name": self.model_name,
            "model_provider": "openai",
            "id": f"metered-{self._instance}-{self._calls}",
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])


_LOOKUP = re.compile(r"\b(?:look up|recall|find in the history)\b[:\s]+(?P<query>.+?)[?.!]*$", re.I)
_ORDER_ID = re.compile(r"\b[A-Z]{2,5}-\d{3,}\b(?!-)")


def tool_agent_reply(messages: list[BaseMessage]) -> AIMessage:
    """A deterministic tool-using policy (``MeteringChatModel(replies=[tool_agent_reply])``):
    quotes a tool result, calls ``history_lookup`` for "recall ..."/"look up ...",
    ``get_order_status`` for an order id, else acknowledges the message.

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> tool_agent_reply([HumanMessage("Where is ORD-1042?")]).tool_calls[0]["args"]
        {'order_id': 'ORD-1042'}
        >>> tool_agent_reply([HumanMessage("My locker code is LK-88213-Q.")]).content
        'Understood: My locker code is LK-88213-Q.'
        >>> tool_agent_reply([HumanMessage("Recall my locker code.")]).tool_calls[0]["args"]
        {'query': 'my locker code'}
        >>> tool_agent_reply([HumanMessage("Thanks")]).content
        'Understood: Thanks'
    """
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        result = str(last.text)
        if last.name == "history_lookup":
            with contextlib.suppress(ValueError, TypeError, KeyError):
                result = " | ".join(str(r["text"]) for r in json.loads(result)["records"])
        return AIMessage(f"The {last.name or 'tool'} result says: {result[:200]}")
    text = str(last.text).strip() if last is not None and last.type == "human" else ""
    call_id = f"call_{uuid.uuid4().hex[:16]}"
    if match := _LOOKUP.search(text):
        args = {"query": match.group("query")}
        return AIMessage("", tool_calls=[{"name": "history_lookup", "args": args, "id": call_id}])
    if match := _ORDER_ID.search(text):
        args = {"order_id": match.group(0)}
        return AIMessage("", tool_calls=[{"name": "get_order_status", "args": args, "id": call_id}])
    return AIMessage(f"Understood: {text[:160]}")


_EVENT_LINE = re.compile(
    r"^\[seq (\d+)(?:, ([^\]]+))?\] (human|ai|tool|system)(?: \(([^)]*)\))?[^:]*: (.*)$", re.M
)
_PREVIOUS = re.compile(r"<previous_summary>\n(.*?)\n</previous_summary>", re.S)
_THROUGH = re.compile(r"covering everything through seq (\d+), in at most (\d+) tokens")


def _day(label: str) -> datetime.datetime | None:
    """The day an event line's header shows (``Mon 8 May 2023``), at midnight UTC."""
    try:
        day = datetime.datetime.strptime(label.strip(), "%a %d %B %Y")
    except ValueError:
        return None
    return day.replace(tzinfo=datetime.timezone.utc)


def scripted_summary_reply(messages: list[BaseMessage]) -> AIMessage:
    """An offline stand-in for an LLM summarizer: answers :class:`~ctx_langgraph.LLMSummarizer`'s
    prompt with the extractive summary of the events it lists (metered, valid summaries).

    Examples:
        >>> from ctx_langgraph import LLMSummarizer, SQLiteHistoryStore
        >>> from ctx_langgraph.budget import TiktokenCounter
        >>> from ctx_langgraph.compaction import SummaryRequest
        >>> from langchain_core.messages import HumanMessage
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> _ = store.append("t", [HumanMessage("Ship order ORD-1042 to Lisbon by Friday.", id="h1")])
        >>> summarizer = LLMSummarizer(MeteringChatModel(replies=[scripted_summary_reply]))
        >>> request = SummaryRequest(None, store.read_events("t"), 1, cap_tokens=300,
        ...                          counter=TiktokenCounter("gpt-4o"))
        >>> 'user: "Ship order ORD-1042 to Lisbon by Friday." [seq 1,' in summarizer.summarize(request)
        True
    """
    from ctx_langgraph.compaction.extractive import ExtractiveSummarizer
    from ctx_langgraph.compaction.format import SummaryDocument
    from ctx_langgraph.history.types import HistoryEvent

    prompt = str(messages[-1].text)
    previous_match = _PREVIOUS.search(prompt)
    previous_text = previous_match.group(1) if previous_match else ""
    previous = SummaryDocument.parse(previous_text) if previous_text.startswith("#") else None
    through = _THROUGH.search(prompt)
    if through is None:
        return AIMessage("I can only summarize the summarizer's prompt.")
    now = datetime.datetime.now(datetime.timezone.utc)
    events = []
    for seq, day, role, name, text in _EVENT_LINE.findall(prompt):
        message: BaseMessage = (
            ToolMessage(text, tool_call_id=f"call-{seq}", name=name or None)
            if role == "tool"
            else AIMessage(text)
            if role == "ai"
            else HumanMessage(text)
        )
        events.append(
            HistoryEvent(
                int(seq), f"e{seq}", "main", role, name or None, message_to_dict(message), text,
                (), (), 1, True, _day(day) or now,
            )
        )  # fmt: skip
    request = SummaryRequest(
        previous,
        events,
        int(through.group(1)),
        cap_tokens=int(through.group(2)),
        counter=TiktokenCounter("gpt-4o"),
    )
    return AIMessage(ExtractiveSummarizer().summarize(request))


FAILURE_KINDS = ("raise", "empty", "garbage", "slow")
"""How :class:`FlakySummarizer` fails a call."""


class FlakySummarizer:
    """A summarizer that fails ``rate`` of its calls (seeded): it raises, returns nothing or
    garbage, or answers after ``slow_s`` seconds. The other calls go to ``inner``.

    Examples:
        >>> from ctx_langgraph.compaction import ExtractiveSummarizer
        >>> flaky = FlakySummarizer(ExtractiveSummarizer(), rate=1.0, kinds=("empty",))
        >>> flaky.summarize(None), dict(flaky.injected)  # every call fails, by returning ""
        ('', {'empty': 1})
    """

    def __init__(
        self,
        inner: Summarizer,
        rate: float,
        *,
        seed: int | str = 0,
        slow_s: float = 3.0,
        kinds: Sequence[str] = FAILURE_KINDS,
    ) -> None:
        if not 0 <= rate <= 1 or not kinds or set(kinds) - set(FAILURE_KINDS):
            raise ValueError(f"rate must be in [0, 1] and kinds among {FAILURE_KINDS}")
        self.inner, self.rate, self.slow_s, self.kinds = inner, rate, slow_s, tuple(kinds)
        self.rng = random.Random(f"{seed}:summarizer")
        self.lock = threading.Lock()
        self.calls = 0
        self.injected: Counter[str] = Counter()
        self.slowest = 0.0
        """The longest call of ``inner``, in seconds."""

    @property
    def id(self) -> str:
        return f"flaky:{self.inner.id}"

    @property
    def window_tokens(self) -> int | None:
        return self.inner.window_tokens

    def _draw(self) -> str | None:
        with self.lock:
            self.calls += 1
            if self.rng.random() >= self.rate:
                return None
            kind = self.rng.choice(self.kinds)
            self.injected[kind] += 1
            return kind

    def garbage(self) -> str:
        """Text that is not a summary of anything."""
        with self.lock:
            pick = self.rng.randrange(3)
        return [
            "I'm sorry, I can't help with summarizing this conversation.",
            "# Context summary (format v1)\n\n## Goal\n- ",
            json.dumps({"summary": None, "facts": []}),
        ][pick]

    def _failed(self, kind: str) -> str:
        if kind == "raise":
            raise ConnectionError("summarizer connection reset by peer (injected)")
        return "" if kind == "empty" else self.garbage()

    def summarize(self, request: SummaryRequest) -> str:
        kind = self._draw()
        if kind == "slow":
            time.sleep(self.slow_s)
        elif kind is not None:
            return self._failed(kind)
        began = time.perf_counter()
        try:
            return self.inner.summarize(request)
        finally:
            self.slowest = max(self.slowest, time.perf_counter() - began)

    async def asummarize(self, request: SummaryRequest) -> str:
        kind = self._draw()
        if kind == "slow":
            await asyncio.sleep(self.slow_s)
        elif kind is not None:
            return self._failed(kind)
        began = time.perf_counter()
        try:
            return await self.inner.asummarize(request)
        finally:
            self.slowest = max(self.slowest, time.perf_counter() - began)
