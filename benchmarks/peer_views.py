"""The peers' state after N messages, for the benchmarks that compare ``ctx_budget`` with them.

LangChain's ``SummarizationMiddleware`` and langmem's ``SummarizationNode`` are set up as their
docs set them up for a 128k-token model:

- **LangChain**: ``SummarizationMiddleware(model=<the model>, trigger=("fraction", 0.8))`` (the
  trigger its docstring shows for managing a model's window; the model's profile gives
  ``max_input_tokens``), ``keep`` left at its default ``("messages", 20)``. A summary REPLACES the
  old messages: its state is its last summary message + the messages since.
- **langmem**: ``SummarizationNode(model=..., max_tokens=<window>, max_tokens_before_summary=<0.8
  of it>)``, ``max_summary_tokens`` left at its default (256). As its docs wire it
  (``output_messages_key="summarized_messages"``) the ``messages`` channel keeps all N messages
  and the running summary (``RunningSummary``: text, summarized ids, last id) is in ``context``;
  with ``output_messages_key="messages"`` (the "replace" wiring, which its docstring allows) the
  node rewrites ``messages`` to summary + the messages since, on every call once it has a summary.

Running either peer over a 50k-message history takes minutes (each call recounts its view), so
its state after N messages is simulated here in one O(N) pass with its own token counter
(``count_tokens_approximately``) and its own trigger arithmetic. :func:`check_peer_views` proves
the simulation right: it runs the REAL peers (the middleware's ``before_model``, the node's
``invoke``) turn by turn over a small history in a small window, applies their updates as the
graph's channels do (LangGraph's ``add_messages`` reducer for ``messages``), with a fake model that
answers a fixed summary, and compares their final states with the simulated ones.

Every AI message LangChain holds carries the usage of the request that produced it in LangChain
(its own view, counted exactly with ``TiktokenCounter`` by a :class:`RequestMeter`, as a provider
reports it): LangChain reads that usage (its count is scaled by it, and a reported total over the
threshold triggers a summary when the message's provider is the model's). langmem never reads it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.summarization import ContextFraction
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langmem.short_term import RunningSummary, SummarizationNode  # type: ignore[import-untyped]

from ctx_langgraph.budget.counters import TiktokenCounter
from ctx_langgraph.view.markers import is_summary

WINDOW = 128_000  # the model's input window (gpt-4o)
LANGCHAIN_TRIGGER: ContextFraction = ("fraction", 0.8)  # its docstring's example for a window
LANGMEM_TRIGGER_FRACTION = 0.8  # langmem's max_tokens_before_summary, as a share of max_tokens
SUMMARY = (  # what the fake summarizer answers, every time
    "The user asked about several orders (shipping status, address changes, refunds) and "
    "shared notes on a migration plan; the agent looked the orders up and answered each."
)
LANGCHAIN_PREFIX = "Here is a summary of the conversation to date:\n\n"  # _build_new_messages
LANGMEM_PREFIX = "Summary of the conversation so far: "  # DEFAULT_FINAL_SUMMARY_PROMPT
LANGMEM_SUMMARY_TYPE = ("langmem.short_term.summarization", "RunningSummary")
Wiring = Literal["docs", "replace"]


class SummaryModel(GenericFakeChatModel):
    """The summarizer: answers :data:`SUMMARY` to every call. Its profile gives the window and it
    reports ``openai`` as its provider, as ``ChatOpenAI`` does (LangChain compares that provider
    with the messages' ``model_provider`` before trusting their reported usage)."""

    calls: int = 0
    """Summaries written so far."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return super()._generate(*args, **kwargs)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "openai"
        return params


def summary_model(window: int = WINDOW) -> SummaryModel:
    return SummaryModel(
        messages=itertools.cycle([AIMessage(SUMMARY)]), profile={"max_input_tokens": window}
    )


def langchain_middleware(window: int = WINDOW) -> SummarizationMiddleware[Any, Any]:
    """LangChain's middleware for a ``window``-token model: fraction trigger, default ``keep``."""
    return SummarizationMiddleware(model=summary_model(window), trigger=LANGCHAIN_TRIGGER)


def langmem_node(window: int = WINDOW, wiring: Wiring = "docs") -> Any:
    """langmem's node for a ``window``-token model, wired as its docs wire it or replacing."""
    output = "summarized_messages" if wiring == "docs" else "messages"
    return SummarizationNode(
        model=summary_model(window),
        max_tokens=window,
        max_tokens_before_summary=int(window * LANGMEM_TRIGGER_FRACTION),
        output_messages_key=output,
    )


def langmem_serde() -> JsonPlusSerializer:
    """A checkpoint serializer that may load langmem's ``RunningSummary`` (as its users allow it)."""
    return JsonPlusSerializer(allowed_msgpack_modules=[LANGMEM_SUMMARY_TYPE])


class RequestMeter:
    """Input tokens of a request as the provider measures them: the exact count of every message
    (``TiktokenCounter``, cached by message id, except ours' summary message, whose id stays the
    same from one summary to the next) plus a fixed ``overhead`` (the reply priming, and
    the tool schemas when tools are bound)."""

    def __init__(self, overhead: int, counter: TiktokenCounter | None = None) -> None:
        self.overhead = overhead
        self.counter = counter or TiktokenCounter("gpt-4o")
        self._counts: dict[str, int] = {}

    def message(self, message: BaseMessage) -> int:
        if message.id is None or is_summary(message):  # ours' summary keeps its id, not its text
            return self.counter.count_message(message)
        count = self._counts.get(message.id)
        if count is None:
            count = self._counts[message.id] = self.counter.count_message(message)
        return count

    def request(self, messages: Iterable[BaseMessage]) -> int:
        return self.overhead + sum(map(self.message, messages))


def stamped(message: AIMessage, input_tokens: int) -> AIMessage:
    """A copy of ``message`` with the usage of a request of ``input_tokens`` (same output)."""
    usage: Any = dict(message.usage_metadata or {})
    output = int(usage.get("output_tokens", 0))
    usage.update(
        input_tokens=input_tokens, output_tokens=output, total_tokens=input_tokens + output
    )
    return message.model_copy(update={"usage_metadata": usage})


def is_call_point(history: Sequence[BaseMessage], index: int) -> bool:
    """The agent calls the model after ``history[index]``: a user message or the last tool result
    of a step, followed by the model's reply (or by nothing yet)."""
    if not isinstance(history[index], HumanMessage | ToolMessage):
        return False
    return index + 1 == len(history) or isinstance(history[index + 1], AIMessage)


def _prefix(values: Iterable[int]) -> list[int]:
    return [0, *itertools.accumulate(values)]


def _approximate(history: Sequence[BaseMessage]) -> list[int]:
    """Prefix sums of ``count_tokens_approximately`` per message (it adds up per message)."""
    return _prefix(count_tokens_approximately([m]) for m in history)


@dataclass
class LangChainView:
    """LangChain's checkpointed ``messages`` after the history, and how it got there."""

    messages: list[BaseMessage]
    summaries: int
    points: list[int] = field(default_factory=list)
    """The index of the message before each model call at which it summarized, in order."""


def simulate_langchain(
    history: Sequence[BaseMessage], *, meter: RequestMeter, window: int = WINDOW
) -> LangChainView:
    """The state ``SummarizationMiddleware.before_model`` leaves after running before every model
    call of ``history`` (see :func:`langchain_states`)."""
    return langchain_states(history, meter=meter, window=window)[len(history)]


def langchain_states(
    history: Sequence[BaseMessage],
    *,
    meter: RequestMeter,
    window: int = WINDOW,
    lengths: Iterable[int] = (),
) -> dict[int, LangChainView]:
    """The states ``SummarizationMiddleware.before_model`` leaves after running before every model
    call of ``history[:length]``, for each of ``lengths`` and the whole history, in one pass: its
    count (``count_tokens_approximately`` with usage scaling: the sum times last reported total /
    count up to that AI message, clamped to 1-1.25) and its reported-usage check against
    ``int(window * 0.8)``; at a summary, its own cutoff (``keep=("messages", 20)``, never
    splitting a tool call from its results) on the view. A length must end at a model call (or
    at the history's end): the state is the one the middleware leaves before that call."""
    middleware = langchain_middleware(window)
    threshold = max(1, int(window * LANGCHAIN_TRIGGER[1]))
    matches = middleware.model._get_ls_params().get("ls_provider") == "openai"
    providers = {m.response_metadata.get("model_provider") for m in history if m.type == "ai"}
    if providers - {"openai"}:
        raise ValueError(f"the simulation expects OpenAI replies only, got {providers}")
    wanted = {*lengths, len(history)}
    states: dict[int, LangChainView] = {}
    approx = _approximate(history)
    exact = _prefix(map(meter.message, history))
    start, summaries, points = 0, 0, []
    summary: HumanMessage | None = None
    summary_approx = summary_exact = 0
    copies: dict[int, AIMessage] = {}  # LangChain's replies, with the usage of its own requests
    last_ai, reported = -1, 0
    if 0 in wanted:
        states[0] = LangChainView([], 0, [])
    for index, message in enumerate(history):
        if isinstance(message, AIMessage):
            sent = meter.overhead + summary_exact + exact[index] - exact[start]
            copies[index] = stamped(message, sent)
            last_ai, reported = index, sent + copies[index].usage_metadata["output_tokens"]  # type: ignore[index]
        if is_call_point(history, index):
            total = float(summary_approx + approx[index + 1] - approx[start])
            in_view = last_ai >= start
            if in_view and (summary is not None) + index + 1 - start > 1:
                at_ai = float(summary_approx + approx[last_ai + 1] - approx[start])
                total *= min(1.25, max(1.0, reported / at_ai))
            over = math.ceil(total) >= threshold or (in_view and matches and reported >= threshold)
            head = [summary] if summary is not None else []
            cutoff = 0
            if over:
                view: list[Any] = [
                    *head,
                    *(copies.get(i, history[i]) for i in range(start, index + 1)),
                ]
                cutoff = middleware._determine_cutoff_index(view)
            if cutoff > 0:
                summaries += 1
                points.append(index)
                start += cutoff - len(head)
                summary = HumanMessage(
                    LANGCHAIN_PREFIX + SUMMARY.strip(),
                    additional_kwargs={"lc_source": "summarization"},
                    id=f"lc-summary-{summaries}",
                )
                summary_approx = count_tokens_approximately([summary])
                summary_exact = meter.message(summary)
        if index + 1 in wanted:
            head = [summary] if summary is not None else []
            held = [copies.get(i, history[i]) for i in range(start, index + 1)]
            states[index + 1] = LangChainView(head + held, summaries, list(points))
    return states


@dataclass
class LangmemView:
    """langmem's checkpointed state after the history, and how it got there."""

    messages: list[BaseMessage]
    """The ``messages`` channel: all N (docs wiring), or summary + the messages since (replace)."""
    summarized_messages: list[BaseMessage] | None
    """The model input of the last call (docs wiring; None in the replace wiring)."""
    running_summary: RunningSummary | None
    summaries: int
    unsummarized: int
    """Messages after the last summarized one: what each call counts."""
    points: list[int] = field(default_factory=list)
    """The index of the message before each model call at which it summarized, in order."""


def simulate_langmem(
    history: Sequence[BaseMessage], *, window: int = WINDOW, wiring: Wiring = "docs"
) -> LangmemView:
    """The state ``SummarizationNode`` leaves after running before every model call of
    ``history`` (see :func:`langmem_states`)."""
    return langmem_states(history, window=window, wiring=wiring)[len(history)]


def langmem_states(
    history: Sequence[BaseMessage],
    *,
    window: int = WINDOW,
    wiring: Wiring = "docs",
    lengths: Iterable[int] = (),
) -> dict[int, LangmemView]:
    """The states ``SummarizationNode`` leaves after running before every model call of
    ``history[:length]``, for each of ``lengths`` and the whole history, in one pass: at each
    call it counts the messages after the last summarized one and, once they reach
    ``max_tokens_before_summary``, summarizes from there up to the first message where that
    count is reached and the rest fits ``max_tokens - max_summary_tokens`` (minus the system
    message), with the tool results of a trailing tool call. A length must end at a model call
    (or at the history's end)."""
    node = langmem_node(window, wiring)
    system = history[0] if history and isinstance(history[0], SystemMessage) else None
    if system is not None and wiring == "replace":
        raise ValueError("the replace wiring is simulated for a history without a system message")
    wanted = {*lengths, len(history)}
    states: dict[int, LangmemView] = {}
    approx = _approximate(history)
    before, summary_budget = node.max_tokens_before_summary, node.max_summary_tokens
    begin = 1 if system is not None else 0  # the first message not summarized yet
    running: RunningSummary | None = None
    summaries, last_input, points = 0, None, []
    tool_results: dict[str, int] = {}
    summary_approx = 0  # replace wiring: the summary system message heads `messages`
    if 0 in wanted:
        states[0] = LangmemView([], None, None, 0, 0, [])
    for index, message in enumerate(history):
        if isinstance(message, ToolMessage):
            tool_results[message.tool_call_id] = index
        if is_call_point(history, index):
            remaining = (
                node.max_tokens - summary_budget - (approx[1] if system else 0) - summary_approx
            )
            unsummarized = approx[index + 1] - approx[begin]
            previous = running
            if unsummarized >= before and remaining >= 0:
                need = max(before, unsummarized - remaining)
                last = bisect.bisect_left(approx, approx[begin] + need, lo=begin + 1) - 1
                covered = list(range(begin, last + 1))
                reply = history[last]
                if isinstance(reply, AIMessage):
                    for call in reply.tool_calls:
                        found = tool_results.get(str(call["id"]))
                        if found is not None and begin <= found <= index:
                            covered.append(found)
                summaries += 1
                points.append(index)
                ids = set(running.summarized_message_ids) if running else set()
                ids |= {str(history[i].id) for i in covered}
                running = RunningSummary(SUMMARY, ids, history[covered[-1]].id)
                begin += len(covered)
            if running is not None:
                if wiring == "replace":
                    summary_approx = count_tokens_approximately([_langmem_summary(running)])
                include = system is not None and not (previous and previous.summary in system.text)
                head: list[BaseMessage] = [system] if include and system is not None else []
                last_input = [*head, _langmem_summary(running), *history[begin : index + 1]]
            else:
                last_input = list(history[: index + 1])
        if index + 1 in wanted:
            if wiring == "docs":
                messages = list(history[: index + 1])
                summarized = last_input
            else:
                head = [_langmem_summary(running)] if running is not None else []
                messages = [*head, *history[begin if running is not None else 0 : index + 1]]
                summarized = None
            states[index + 1] = LangmemView(
                messages, summarized, running, summaries, index + 1 - begin, list(points)
            )
    return states


def langmem_input(view: LangmemView) -> list[BaseMessage]:
    """What langmem's next model call sends from this state, before the new messages: the
    system message, its summary and the unsummarized messages (all of them before a summary)."""
    if view.running_summary is None:
        return list(view.messages)
    tail = view.messages[len(view.messages) - view.unsummarized :] if view.unsummarized else []
    first = view.messages[0]
    system = [first] if isinstance(first, SystemMessage) and not _is_summary(first) else []
    return [*system, _langmem_summary(view.running_summary), *tail]


def _langmem_summary(running: RunningSummary) -> SystemMessage:
    return SystemMessage(LANGMEM_PREFIX + running.summary)


# ---- the proof: the real peers, turn by turn, on a small history ----------------------------


def _is_summary(message: BaseMessage) -> bool:
    return message.additional_kwargs.get("lc_source") == "summarization" or (
        isinstance(message, SystemMessage) and message.text.startswith(LANGMEM_PREFIX)
    )


def shape(messages: Sequence[BaseMessage] | None) -> list[tuple[Any, ...]] | None:
    """What must match: type, id (none for summaries, whose ids the reducer draws), text, and
    the reported usage of AI messages."""
    if messages is None:
        return None
    out = []
    for m in messages:
        usage = m.usage_metadata if isinstance(m, AIMessage) else None
        tokens = (usage["input_tokens"], usage["total_tokens"]) if usage else None
        out.append((m.type, None if _is_summary(m) else m.id, m.text, tokens))
    return out


def _replay(
    peer: Callable[[dict[str, Any]], dict[str, Any] | None],
    history: Sequence[BaseMessage],
    meter: RequestMeter | None,
) -> dict[str, Any]:
    """Feed ``history`` to ``peer`` one model call at a time, as the agent runs it before the
    model, applying its updates as the graph's channels do (``messages`` through LangGraph's
    ``add_messages`` reducer, any other key replaced). With a ``meter``, each AI message first gets
    the usage of the request the peer's own state would have sent. Returns the final state."""
    state: dict[str, Any] = {"messages": []}
    pending: list[BaseMessage] = []
    for index, message in enumerate(history):
        if meter is not None and isinstance(message, AIMessage):
            message = stamped(message, meter.request([*state["messages"], *pending]))
        pending.append(message)
        if is_call_point(history, index):
            state["messages"] = apply_update(state["messages"], {"messages": pending})
            pending = []
            update = peer(state) or {}
            state |= {key: value for key, value in update.items() if key != "messages"}
            state["messages"] = apply_update(state["messages"], update)
    state["messages"] = apply_update(state["messages"], {"messages": pending})
    return state


def _langchain_peer(window: int) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    middleware = langchain_middleware(window)
    runtime: Any = Runtime()
    return lambda state: middleware.before_model(state, runtime)  # type: ignore[arg-type]


def _langmem_peer(window: int, wiring: Wiring) -> Callable[[dict[str, Any]], dict[str, Any]]:
    node = langmem_node(window, wiring)
    return lambda state: node.invoke(state)


def _same(what: str, real: Any, simulated: Any) -> None:
    if real != simulated:
        first = next(
            (
                i
                for i, (a, b) in enumerate(zip(real or [], simulated or [], strict=False))
                if a != b
            ),
            None,
        )
        raise AssertionError(
            f"{what}: the simulation differs from the real peer "
            f"(real {len(real or [])} items, simulated {len(simulated or [])}; first difference "
            f"at {first}: real {None if first is None else real[first]!r}, simulated "
            f"{None if first is None else simulated[first]!r})"
        )


def check_peer_views(
    history: Sequence[BaseMessage],
    *,
    meter: RequestMeter,
    window: int,
    wirings: Sequence[Wiring] = ("docs",),
) -> dict[str, int]:
    """Run the real peers turn by turn over ``history`` and assert that their final states equal
    the simulated ones (raises ``AssertionError`` naming the first difference). Returns the
    number of summaries each peer made, so a caller can check that the history was long enough
    for the window to exercise them (several summaries each)."""
    counts: dict[str, int] = {}
    real = _replay(_langchain_peer(window), history, meter)
    simulated = simulate_langchain(history, meter=meter, window=window)
    _same("langchain messages", shape(real["messages"]), shape(simulated.messages))
    counts["langchain"] = simulated.summaries
    for wiring in wirings:
        name = "langmem" if wiring == "docs" else "langmem (replace)"
        state = _replay(_langmem_peer(window, wiring), history, None)
        view = simulate_langmem(history, window=window, wiring=wiring)
        _same(f"{name} messages", shape(state["messages"]), shape(view.messages))
        _same(
            f"{name} summarized_messages",
            shape(state.get("summarized_messages")),
            shape(view.summarized_messages),
        )
        running = state.get("context", {}).get("running_summary")
        expected = view.running_summary
        _same(
            f"{name} running summary",
            running
            and (
                running.summary,
                running.summarized_message_ids,
                running.last_summarized_message_id,
            ),
            expected
            and (
                expected.summary,
                expected.summarized_message_ids,
                expected.last_summarized_message_id,
            ),
        )
        counts[name] = view.summaries
    return counts


def apply_update(messages: list[BaseMessage], update: dict[str, Any] | None) -> list[BaseMessage]:
    """The ``messages`` channel after a node's update (LangGraph's ``add_messages`` reducer)."""
    if not update or "messages" not in update:
        return messages
    return list(add_messages(messages, update["messages"]))  # type: ignore[arg-type]
