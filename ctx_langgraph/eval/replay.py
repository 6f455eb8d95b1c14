"""The replay: a recorded conversation played back through any agent graph, turn by turn.

The recorded assistant and tool messages are replayed by :class:`ReplayModel` and
:func:`replay_tools`, so every strategy sees the same conversation and only its context handling
differs. The model records every request it gets (:class:`ModelCall`): that is what the metrics
look at. :class:`ExtractiveChatModel` is the offline extractive summarizer as a chat model, so
summarizing peers (langmem, LangChain) get the same summarizing ability as ours.
"""

from __future__ import annotations

import datetime as dt
import html
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    message_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.budget.prefix import cacheable_prefix, request_shape
from ctx_langgraph.compaction.extractive import ExtractiveSummarizer
from ctx_langgraph.compaction.format import SummaryDocument
from ctx_langgraph.compaction.protocol import Summarizer, SummaryRequest
from ctx_langgraph.datasets import Conversation, stamped
from ctx_langgraph.errors import DatasetError, SummaryFormatError
from ctx_langgraph.history.rows import message_to_row
from ctx_langgraph.history.types import HistoryEvent
from ctx_langgraph.testing import MeteringChatModel

__all__ = [
    "CountingChatModel",
    "CountingSummarizer",
    "ExtractiveChatModel",
    "ModelCall",
    "ReplayModel",
    "ReplayTurn",
    "Script",
    "replay_tools",
    "replay_turns",
]

LOOKUP_TOOL = "history_lookup"
_NO_REPLY = "(no reply)"
_RESUMED = "(the conversation resumes)"
"""The user message a new session opened by the assistant answers."""


@dataclass(frozen=True)
class ReplayTurn:
    """One user turn: the user's message(s), then the assistant's recorded steps.

    ``steps`` are the assistant messages in order: each but the last makes tool calls, whose
    recorded results are in ``tool_results`` (by tool call id); the last answers in text.
    """

    index: int
    inputs: tuple[BaseMessage, ...]
    steps: tuple[AIMessage, ...]
    tool_results: dict[str, ToolMessage]

    @property
    def messages(self) -> list[BaseMessage]:
        """Every message of the turn in conversation order."""
        out: list[BaseMessage] = list(self.inputs)
        for step in self.steps:
            out.append(step)
            out.extend(self.tool_results[call["id"]] for call in step.tool_calls if call["id"])
        return out


def _merge(first: AIMessage, second: AIMessage) -> AIMessage:
    """Two assistant texts in a row become one message (keeping the first id): a model step
    gives one message, and both texts stay verbatim."""
    return first.model_copy(update={"content": f"{first.text}\n\n{second.text}"})


def _would_merge(steps: Sequence[AIMessage], message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(steps) and not steps[-1].tool_calls


def _resumed(conversation: Conversation, position: int) -> BaseMessage:
    """The user message a session opened by the assistant at ``position`` answers."""
    opener = conversation.messages[position]
    resumed = HumanMessage(_RESUMED, id=f"{opener.id}-resumed")
    return stamped(resumed, conversation.created_at[position])


def replay_turns(conversation: Conversation) -> list[ReplayTurn]:
    """The conversation as user turns to replay.

    A turn starts at a user message (consecutive user messages go in together); assistant
    texts in a row are merged into one step; tool results are matched to their calls. A turn
    without an assistant answer gets a short placeholder answer, so every turn ends in text.
    An assistant text that opens a new session (:attr:`Conversation.sessions`) right after an
    assistant text is not merged into it (each keeps its own time): it answers a placeholder
    user message saying the conversation resumes.

    Raises:
        DatasetError: a tool result answers no earlier call, or a message has no id.

    Examples:
        >>> from ctx_langgraph.datasets import synthetic_conversation
        >>> turns = replay_turns(synthetic_conversation(seed=1, sessions=1, turns_per_session=6))
        >>> [(len(t.inputs), len(t.steps)) for t in turns]
        [(1, 1), (1, 1), (1, 1)]
    """
    turns: list[ReplayTurn] = []
    inputs: list[BaseMessage] = []
    steps: list[AIMessage] = []
    results: dict[str, ToolMessage] = {}
    pending: set[str] = set()

    def close() -> None:
        if not inputs and not steps:
            return
        if not inputs:  # the conversation opens with the assistant
            inputs.append(HumanMessage("(the conversation starts)", id=f"opening-{len(turns)}"))
        if not steps or steps[-1].tool_calls:
            anchor = str((steps or inputs)[-1].id)
            steps.append(AIMessage(_NO_REPLY, id=f"{anchor}-reply"))
        turns.append(ReplayTurn(len(turns) + 1, tuple(inputs), tuple(steps), dict(results)))
        inputs.clear()
        steps.clear()
        results.clear()
        pending.clear()

    openers = {start for start, _ in conversation.sessions[1:]}
    for position, message in enumerate(conversation.messages):
        if position in openers and _would_merge(steps, message):
            close()
            inputs.append(_resumed(conversation, position))
        if not message.id:
            raise DatasetError(f"{conversation.name}: a {message.type} message has no id")
        if isinstance(message, HumanMessage | SystemMessage):
            if steps:
                close()
            inputs.append(message)
        elif isinstance(message, AIMessage):
            if _would_merge(steps, message) and not message.tool_calls:
                steps[-1] = _merge(steps[-1], message)
            else:
                steps.append(message)
                pending.update(call["id"] for call in message.tool_calls if call["id"])
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                raise DatasetError(
                    f"{conversation.name}: tool message {message.id} answers "
                    f"{message.tool_call_id!r}, which no earlier assistant message calls"
                )
            results[message.tool_call_id] = message
        else:
            raise DatasetError(f"{conversation.name}: cannot replay a {message.type} message")
    close()
    for turn in turns:
        for step in turn.steps:
            missing = [c["id"] for c in step.tool_calls if c["id"] not in turn.tool_results]
            if missing:
                raise DatasetError(
                    f"{conversation.name}: turn {turn.index} has tool calls without results: "
                    f"{missing}"
                )
    return turns


# --------------------------------------------------------------------------- the replaying model


@dataclass
class ModelCall:
    """One request the agent's model got: what it saw, and its size."""

    turn: int
    messages: list[BaseMessage]
    input_tokens: int
    question: int | None = None
    """The question's index when the call answered a question at the end of the replay."""
    claimed: frozenset[str] | None = None
    """Ids of the messages the strategy's summary claims to cover (when it says so)."""
    cacheable_prefix: int = 0
    """Leading input tokens identical to the previous call's request
    (:func:`~ctx_langgraph.budget.prefix.cacheable_prefix`): what a prompt cache would read."""
    output_tokens: int = 0


@dataclass
class Script:
    """What the model says next. ``steps`` of the current turn are returned in order; in
    question mode the model looks the question up once (when it has the lookup tool) and then
    answers (with ``reader`` when given, else a fixed placeholder)."""

    steps: list[AIMessage] = field(default_factory=list)
    turn: int = 0
    question: tuple[int, str] | None = None
    lookup: bool = False
    reader: BaseChatModel | None = None
    answers: dict[int, str] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)
    claimed: frozenset[str] | None = None
    """Set by a strategy's model node just before the call (the summary's claimed coverage)."""
    model_seconds: float = 0.0
    """Wall time spent inside the replayed model's generate so far (what a turn's context
    preparation time leaves out)."""

    def play(self, steps: Sequence[AIMessage], turn: int) -> None:
        self.steps, self.turn, self.question = list(steps), turn, None

    def ask(self, index: int, question: str) -> None:
        self.steps, self.question = [], (index, question)

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        if self.question is None:
            if not self.steps:
                raise RuntimeError(
                    f"turn {self.turn}: the model was called more times than recorded"
                )
            return self.steps.pop(0)
        index, question = self.question
        looked_up = any(
            isinstance(m, ToolMessage) and m.name == LOOKUP_TOOL for m in _after_last_user(messages)
        )
        if self.lookup and not looked_up:
            call = ToolCall(
                name=LOOKUP_TOOL, args={"query": question}, id=f"lookup-q{index}", type="tool_call"
            )
            return AIMessage("", tool_calls=[call], id=f"q{index}-lookup")
        answer = "(offline reader: no answer)"
        if self.reader is not None:
            answer = self.reader.invoke(messages).text
        self.answers[index] = answer
        return AIMessage(answer, id=f"q{index}-answer")


def _after_last_user(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return messages[index + 1 :]
    return messages


class ReplayModel(MeteringChatModel):
    """Replays the recorded assistant steps (:class:`Script`) and records every request.

    Usage is metered exactly like :class:`~ctx_langgraph.testing.MeteringChatModel` (tiktoken of
    the request with its tool schemas), so every strategy is measured with one tokenizer.
    """

    _script: Script = PrivateAttr(default_factory=Script)

    def __init__(self, script: Script, **kwargs: Any) -> None:
        super().__init__(replies=[script.reply], **kwargs)
        self._script = script

    @property
    def script(self) -> Script:
        return self._script

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        started = time.perf_counter()
        result = super()._generate(messages, stop, run_manager, **kwargs)
        reply = result.generations[0].message
        usage = getattr(reply, "usage_metadata", None) or {}
        script = self._script
        script.calls.append(
            ModelCall(
                script.turn,
                list(messages),
                int(usage.get("input_tokens", 0)),
                None if script.question is None else script.question[0],
                script.claimed,
                int((usage.get("input_token_details") or {}).get("cache_read") or 0),
                int(usage.get("output_tokens", 0)),
            )
        )
        script.claimed = None
        script.model_seconds += time.perf_counter() - started
        return result


class _ReplayTool(BaseTool):
    """A tool that returns the recorded result of each call (by tool call id)."""

    results: dict[str, ToolMessage]
    call_schema: dict[str, Any]

    def _run(self, *args: Any, **kwargs: Any) -> str:  # pragma: no cover - invoke() answers
        raise NotImplementedError("a replayed tool answers tool calls only")

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if not (isinstance(input, dict) and input.get("type") == "tool_call"):
            raise ValueError(f"{self.name} replays recorded tool calls only")
        recorded = self.results.get(str(input["id"]))
        if recorded is None:
            raise ValueError(f"{self.name}: no recorded result for tool call {input['id']!r}")
        return recorded.model_copy()  # every strategy gets its own copy

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.invoke(input, config, **kwargs)

    @property
    def tool_call_schema(self) -> Any:
        return self.call_schema


def replay_tools(
    turns: Sequence[ReplayTurn], specs: Sequence[dict[str, Any]] = ()
) -> list[BaseTool]:
    """One replaying tool per tool name used in ``turns``.

    ``specs`` (``{"name", "description", "parameters"}``) give the schema the model is shown;
    a tool without one gets an open object schema.
    """
    results: dict[str, dict[str, ToolMessage]] = {}
    for turn in turns:
        for step in turn.steps:
            for call in step.tool_calls:
                name = call["name"]
                results.setdefault(name, {})[str(call["id"])] = turn.tool_results[str(call["id"])]
    described = {spec["name"]: spec for spec in specs}
    tools: list[BaseTool] = []
    for name in sorted(results):
        spec = described.get(name, {})
        schema = {
            "title": name,
            "description": spec.get("description", f"The {name} tool."),
            "type": "object",
            "properties": spec.get("parameters", {}).get("properties", {}),
        }
        tools.append(
            _ReplayTool(
                name=name,
                description=str(schema["description"]),
                results=results[name],
                call_schema=schema,
            )
        )
    return tools


# --------------------------------------------------------------------------- summarizers


def _events(messages: Sequence[BaseMessage]) -> list[HistoryEvent]:
    now = dt.datetime.now(dt.timezone.utc)
    events = []
    for seq, message in enumerate(messages, 1):
        if not message.id:
            message = message.model_copy(update={"id": f"m{seq}"})
        row = message_to_row(message)
        events.append(
            HistoryEvent(
                seq=seq,
                event_id=str(message.id),
                branch="main",
                role=message.type,
                name=message.name,
                content=message_to_dict(message),
                text=row.text,
                tool_call_ids=tuple(row.tool_call_ids),
                tool_names=tuple(row.tool_names),
                revision=1,
                visible=True,
                created_at=now,
            )
        )
    return events


@dataclass
class SummarizerStats:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    """Input tokens a prompt cache would read: leading tokens shared with the request before."""
    previous: tuple[str, ...] | None = None
    """The part digests of the last request booked (:mod:`ctx_langgraph.budget.prefix`)."""

    def book(self, input_tokens: int, output_tokens: int, cache_read: int = 0) -> None:
        """One summarizer call of this size."""
        self.calls += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cache_read += cache_read

    def totals(self) -> tuple[int, int, int, int]:
        """Calls, input tokens, output tokens and cache reads so far."""
        return self.calls, self.input_tokens, self.output_tokens, self.cache_read

    def book_request(
        self, messages: Sequence[BaseMessage], counter: TokenCounter, output_tokens: int
    ) -> None:
        """One summarizer call of ``messages``, its cache reads measured against the request
        before (a summarizing chat model's own previous request)."""
        shape = request_shape(messages, counter)
        self.book(shape.input_tokens, output_tokens, cacheable_prefix(self.previous, shape))
        self.previous = shape.digests


class CountingSummarizer:
    """Wraps a :class:`~ctx_langgraph.compaction.Summarizer` and counts its calls and tokens."""

    def __init__(self, inner: Summarizer, counter: TokenCounter) -> None:
        self.inner = inner
        self.counter = counter
        self.stats = SummarizerStats()

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def window_tokens(self) -> int | None:
        return self.inner.window_tokens

    def _book(self, request: SummaryRequest, summary: str) -> str:
        previous = request.previous.render() if request.previous else ""
        read = self.counter.count_text(previous) + sum(
            self.counter.count_text(event.text) for event in request.events
        )
        self.stats.book(read, self.counter.count_text(summary))
        return summary

    def summarize(self, request: SummaryRequest) -> str:
        return self._book(request, self.inner.summarize(request))

    async def asummarize(self, request: SummaryRequest) -> str:
        return self._book(request, await self.inner.asummarize(request))


_LC_SUMMARY = "Here is a summary of the conversation to date:"
_LANGMEM_EXISTING = re.compile(
    r"^This is summary of the conversation so far: (?P<summary>.*)\n\nExtend this summary by "
    r"taking into account the new messages above:$",
    re.S,
)
_LANGMEM_NEW = "Create a summary of the conversation above:"
_XML_MESSAGE = re.compile(r'<message type="(?P<type>\w+)"[^>]*>(?P<body>.*?)</message>', re.S)
_XML_CONTENT = re.compile(r"<content>(?P<text>.*?)</content>", re.S)
_XML_CALL = re.compile(
    r'<tool_call [^>]*name="(?P<name>[^"]*)"[^>]*>(?P<args>.*?)</tool_call>', re.S
)
_ROLE_CLASS: dict[str, Callable[[str], BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
}


def _from_xml(prompt: str) -> list[BaseMessage]:
    """Messages back from LangChain's XML buffer string (``get_buffer_string(format="xml")``)."""
    out: list[BaseMessage] = []
    for match in _XML_MESSAGE.finditer(prompt):
        body = match["body"]
        content = _XML_CONTENT.search(body)
        text = html.unescape(content["text"] if content else body).strip()
        calls = [f"{c['name']}({html.unescape(c['args'])})" for c in _XML_CALL.finditer(body)]
        if calls:
            text = f"{text}\n[calls {', '.join(calls)}]".strip()
        make = _ROLE_CLASS.get(match["type"], HumanMessage)
        out.append(make(text))
    return out


def _split_prompt(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], str | None]:
    """The messages a peer asks to summarize, and the previous summary it passes."""
    last = messages[-1].text if messages else ""
    if len(messages) == 1 and "<messages>" in last:  # LangChain's SummarizationMiddleware
        found = _from_xml(last)
        previous = None
        if found and found[0].text.startswith(_LC_SUMMARY):
            previous = found.pop(0).text[len(_LC_SUMMARY) :].strip()
        return found, previous
    existing = _LANGMEM_EXISTING.match(last.strip())
    if existing:  # langmem, extending its running summary
        return list(messages[:-1]), existing["summary"].strip()
    if last.strip() == _LANGMEM_NEW:
        return list(messages[:-1]), None
    return list(messages), None


class ExtractiveChatModel(BaseChatModel):
    """The offline :class:`~ctx_langgraph.compaction.ExtractiveSummarizer` as a chat model.

    Reads what a peer's summarization prompt asks for (langmem's ``SummarizationNode`` passes the
    messages and its instruction; LangChain's ``SummarizationMiddleware`` one XML-formatted
    prompt) and answers with the same summary our compaction would write, capped at
    ``cap_tokens``. A previous summary in our format is merged as ours merges it; any other
    previous text is summarized as one more message, so nothing is dropped.
    """

    counter: Any
    cap_tokens: int = 600
    _stats: SummarizerStats = PrivateAttr(default_factory=SummarizerStats)
    _summarizer: ExtractiveSummarizer = PrivateAttr(default_factory=ExtractiveSummarizer)

    @property
    def _llm_type(self) -> str:
        return "extractive-summarizer"

    @property
    def stats(self) -> SummarizerStats:
        return self._stats

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        counter: TokenCounter = self.counter
        sources, previous_text = _split_prompt(messages)
        previous = None
        if previous_text:
            try:
                previous = SummaryDocument.parse(previous_text)
            except (SummaryFormatError, ValueError):
                sources.insert(0, HumanMessage(previous_text))
        events = _events([m for m in sources if m.text.strip() or getattr(m, "tool_calls", None)])
        request = SummaryRequest(previous, events, len(events), self.cap_tokens, counter)
        summary = self._summarizer.summarize(request)
        input_tokens = sum(counter.count_message(m) for m in messages)
        output_tokens = counter.count_text(summary)
        self._stats.book_request(messages, counter, output_tokens)
        reply = AIMessage(
            summary,
            id=f"summary-{uuid.uuid4().hex[:12]}",
            usage_metadata={
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


class CountingChatModel(BaseChatModel):
    """A real summarizing chat model for the peers, with its calls and tokens counted (by the
    harness's counter, as every other figure)."""

    inner: Any
    counter: Any
    _stats: SummarizerStats = PrivateAttr(default_factory=SummarizerStats)

    @property
    def _llm_type(self) -> str:
        return "counting-chat-model"

    @property
    def stats(self) -> SummarizerStats:
        return self._stats

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self.inner.invoke(messages, stop=stop, **kwargs)
        counter: TokenCounter = self.counter
        self._stats.book_request(messages, counter, counter.count_text(reply.text))
        return ChatResult(generations=[ChatGeneration(message=reply)])
