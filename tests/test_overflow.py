"""A provider's context-length error: recognized as the real clients raise it, and answered
with one compaction and one retry, through ``create_context_agent``, ``add_context_management``
on a user's graph and the ``create_agent`` middleware (the real ``ChatOpenAI`` and
``ChatAnthropic`` against a loopback server replaying the providers' error replies)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Annotated, Any

import anthropic
import fake_providers as fp
import langchain_core.exceptions
import openai
import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.types import Command
from pydantic import BaseModel

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    ExtractiveSummarizer,
    SQLiteHistoryStore,
    add_context_management,
    create_context_agent,
)
from ctx_langgraph._overflow import merge_recovery
from ctx_langgraph.errors import ContextBudgetExceeded
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.providers import context_overflow_message, is_context_overflow
from ctx_langgraph.state import unpack
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.view.summary import SUMMARY_MESSAGE_ID

PATHS = {
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
}
IDS = itertools.count(1)

# ----------------------------------------------------------------------------- the error table


def openai_client(server: fp.ProviderReplay) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)


def raised_by_sdk(server: fp.ProviderReplay, api: str) -> None:
    """One request through the provider's own SDK."""
    if api == "openai-chat":
        openai_client(server).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hello"}]
        )
    elif api == "openai-responses":
        openai_client(server).responses.create(model="gpt-4.1", input="hello")
    else:
        anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0).messages.create(
            model="claude-sonnet-4-5",
            max_tokens=100,
            messages=[{"role": "user", "content": "hello"}],
        )


def chat_model(server: fp.ProviderReplay, api: str, *, streaming: bool = False) -> Any:
    if api == "anthropic":
        return ChatAnthropic(
            model="claude-sonnet-4-5",
            base_url=server.url,
            api_key="test-key",
            max_retries=0,
            streaming=streaming,
        )
    return ChatOpenAI(
        model="gpt-4.1" if api == "openai-responses" else "gpt-4o",
        base_url=server.url + "/v1",
        api_key="test-key",
        max_retries=0,
        use_responses_api=api == "openai-responses",
        streaming=streaming,
        **({"stream_usage": True} if streaming and api == "openai-chat" else {}),
    )


def raised_by_langchain(server: fp.ProviderReplay, api: str) -> None:
    chat_model(server, api).invoke("hello")


def captured(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the client did not raise")


# (api, HTTP status, body, the provider's words when it is an overflow, else None)
ERRORS: dict[str, tuple[str, int, Any, str | None]] = {
    "openai-chat-context-length": (
        "openai-chat",
        400,
        fp.openai_context_length_error(),
        "maximum context length is 128000 tokens",
    ),
    "openai-chat-messages-plus-completion": (
        "openai-chat",
        400,
        fp.openai_error(
            "This model's maximum context length is 4097 tokens. However, you requested 5444 "
            "tokens (444 in the messages, 5000 in the completion). Please reduce the length of "
            "the messages or completion.",
            code="context_length_exceeded",
            param="messages",
        ),
        "maximum context length is 4097 tokens",
    ),
    "openai-compatible-without-the-code": (
        "openai-chat",
        400,
        fp.openai_error(
            "This model's maximum context length is 131072 tokens. However, you requested "
            "131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the "
            "length of the messages or completion.",
            code="invalid_request_error",
        ),
        "maximum context length is 131072 tokens",
    ),
    "openai-responses-context-window": (
        "openai-responses",
        400,
        fp.responses_context_length_error(),
        "exceeds the context window of this model",
    ),
    "anthropic-prompt-too-long": (
        "anthropic",
        400,
        fp.anthropic_prompt_too_long(),
        "prompt is too long: 215000 tokens > 200000 maximum",
    ),
    "anthropic-input-and-max-tokens": (
        "anthropic",
        400,
        fp.anthropic_error(
            "input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, "
            "decrease input length or `max_tokens` and try again"
        ),
        "exceed context limit: 189136 + 20000 > 204648",
    ),
    "anthropic-request-too-large": (
        "anthropic",
        413,
        fp.anthropic_error(
            "Request exceeds the maximum allowed number of bytes.", "request_too_large"
        ),
        "Request exceeds the maximum allowed number of bytes.",
    ),
    "openai-invalid-tool-schema": (
        "openai-chat",
        400,
        fp.openai_error(
            "Invalid schema for function 'search': In context=(), 'required' is required to be "
            "supplied and to be an array including every key in properties. Missing 'query'.",
            code="invalid_function_parameters",
            param="tools[0].function.parameters",
        ),
        None,
    ),
    "openai-max-tokens-above-output-limit": (
        "openai-chat",
        400,
        fp.openai_error(
            "max_tokens is too large: 200000. This model supports at most 16384 completion "
            "tokens, whereas you provided 200000.",
            code="invalid_value",
            param="max_tokens",
        ),
        None,
    ),
    "openai-tokens-per-minute": (
        "openai-chat",
        429,
        fp.openai_error(
            "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): "
            "Limit 30000, Requested 52034. The input or output tokens must be reduced in order "
            "to run successfully.",
            code="rate_limit_exceeded",
            kind="tokens",
        ),
        None,
    ),
    "openai-quota": (
        "openai-chat",
        429,
        fp.openai_error(
            "You exceeded your current quota, please check your plan and billing details.",
            code="insufficient_quota",
            kind="insufficient_quota",
        ),
        None,
    ),
    "openai-responses-unsupported-parameter": (
        "openai-responses",
        400,
        fp.openai_error(
            "Unsupported parameter: 'temperature' is not supported with this model.",
            code="unsupported_parameter",
            param="temperature",
        ),
        None,
    ),
    "anthropic-max-tokens-above-output-limit": (
        "anthropic",
        400,
        fp.anthropic_error(
            "max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens "
            "for claude-3-5-sonnet-20240620"
        ),
        None,
    ),
    "anthropic-empty-text-block": (
        "anthropic",
        400,
        fp.anthropic_error("messages: text content blocks must be non-empty"),
        None,
    ),
    "anthropic-input-tokens-per-minute": (
        "anthropic",
        429,
        fp.anthropic_error(
            "This request would exceed the rate limit for your organization of 40,000 input "
            "tokens per minute. Please reduce the prompt length or the maximum tokens requested.",
            "rate_limit_error",
        ),
        None,
    ),
    "anthropic-overloaded": (
        "anthropic",
        529,
        fp.anthropic_error("Overloaded", "overloaded_error"),
        None,
    ),
}


@pytest.fixture(scope="module")
def replay() -> Iterator[fp.ProviderReplay]:
    with fp.serve() as server:
        yield server


@pytest.mark.parametrize("via", ["sdk", "langchain"])
@pytest.mark.parametrize("case", list(ERRORS))
def test_provider_errors_as_the_real_clients_raise_them(
    server: fp.ProviderReplay, case: str, via: str
):
    api, status, body, words = ERRORS[case]
    server.json(PATHS[api], body, status)
    raise_it = raised_by_sdk if via == "sdk" else raised_by_langchain
    error = captured(lambda: raise_it(server, api))
    assert is_context_overflow(error) is (words is not None)
    message = context_overflow_message(error)
    if words is None:
        assert message is None
    else:  # the provider's own words, not the client's "Error code: 400 - {...}"
        assert message is not None and words in message and not message.startswith("Error code")


@pytest.mark.parametrize("shape", ["flat", "nested", "failed"])
def test_a_responses_stream_failing_on_the_context_window(server: fp.ProviderReplay, shape: str):
    server.sse(PATHS["openai-responses"], fp.responses_error_events(shape))
    model = chat_model(server, "openai-responses", streaming=True)
    error = captured(lambda: model.invoke("hello"))
    assert is_context_overflow(error)
    assert "exceeds the context window" in (context_overflow_message(error) or "")


class GenAIClientError(Exception):
    """The shape of ``google.genai.errors.ClientError``: the HTTP ``code``, the ``status``,
    the ``message`` and the reply's JSON as ``details``; ``str()`` as the client renders it."""

    def __init__(self, code: int, details: dict[str, Any]) -> None:
        error = details["error"]
        self.code = code
        self.status = error.get("status")
        self.message = error.get("message")
        self.details = details
        super().__init__(f"{code} {self.status}. {details}")


class ChatGoogleGenerativeAIError(Exception):
    """langchain-google-genai's error, raised from the client's (``raise ... from e``)."""


class InvalidArgument(Exception):
    """The shape of ``google.api_core.exceptions.InvalidArgument`` (older Gemini clients)."""

    code = HTTPStatus.BAD_REQUEST

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"400 {message}")


GEMINI_OVERFLOW = (
    "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."
)


def gemini(code: int, status: str, message: str) -> GenAIClientError:
    return GenAIClientError(code, {"error": {"code": code, "message": message, "status": status}})


def raised_from(outer: Callable[[], BaseException], inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as cause:
            raise outer() from cause
    except BaseException as wrapped:
        return wrapped


def raised_while_handling(
    outer: Callable[[], BaseException], inner: BaseException
) -> BaseException:
    try:
        try:
            raise inner
        except BaseException:
            raise outer()  # noqa: B904 - the implicit context is what is tested
    except BaseException as wrapped:
        return wrapped


def suppressed(outer: Callable[[], BaseException], inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException:
            raise outer() from None
    except BaseException as wrapped:
        return wrapped


def cycle() -> BaseException:
    first, second = RuntimeError("first"), RuntimeError("second")
    first.__cause__, second.__cause__ = second, first
    return first


def over_budget() -> ContextBudgetExceeded:
    return ContextBudgetExceeded(
        estimate=1, usable=1, window=2, reserve=1, largest=1, advice="rejected as too long"
    )


def wrapper() -> BaseException:
    return ChatGoogleGenerativeAIError("Error calling model (400): INVALID_ARGUMENT")


OVERFLOW = ValueError("prompt is too long: 215000 tokens > 200000 maximum")
OTHER_CASES: dict[str, tuple[Callable[[], BaseException], bool]] = {
    "gemini-400-input-token-count": (
        lambda: gemini(400, "INVALID_ARGUMENT", GEMINI_OVERFLOW),
        True,
    ),
    "gemini-wrapped-by-langchain": (
        lambda: raised_from(wrapper, gemini(400, "INVALID_ARGUMENT", GEMINI_OVERFLOW)),
        True,
    ),
    "gemini-api-core-invalid-argument": (lambda: InvalidArgument(GEMINI_OVERFLOW), True),
    "gemini-invalid-argument": (
        lambda: gemini(400, "INVALID_ARGUMENT", "Request contains an invalid argument."),
        False,
    ),
    "gemini-wrapped-invalid-argument": (
        lambda: raised_from(
            wrapper, gemini(400, "INVALID_ARGUMENT", "Request contains an invalid argument.")
        ),
        False,
    ),
    "gemini-quota": (
        lambda: gemini(
            429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
        ),
        False,
    ),
    "langchain-context-overflow-error": (
        lambda: langchain_core.exceptions.ContextOverflowError("the input is over the window"),
        True,
    ),
    "raised-from-an-overflow": (
        lambda: raised_from(lambda: RuntimeError("node failed"), OVERFLOW),
        True,
    ),
    "raised-while-handling-an-overflow": (
        lambda: raised_while_handling(lambda: RuntimeError("node failed"), OVERFLOW),
        True,
    ),
    "context-suppressed": (
        lambda: suppressed(lambda: RuntimeError("node failed"), OVERFLOW),
        False,
    ),
    "our-budget-error-from-an-overflow": (lambda: raised_from(over_budget, OVERFLOW), False),
    "a-cause-cycle": (cycle, False),
    "an-ordinary-error": (lambda: ValueError("invalid tool schema"), False),
}


@pytest.mark.parametrize("case", list(OTHER_CASES))
def test_gemini_wrapped_and_chained_errors(case: str):
    make, expected = OTHER_CASES[case]
    assert is_context_overflow(make()) is expected


def test_merge_recovery_folds_into_dicts_and_commands_only():
    update = {"messages": ["rewrite"], "context": {"overflow": {"retries": 1}}}
    reply = AIMessage("hi", id="r")
    merged = merge_recovery(Command(update={"messages": [reply]}, goto="next"), update)
    assert merged.goto == "next" and merged.update["messages"] == ["rewrite", reply]
    assert merged.update["context"] == {"overflow": {"retries": 1}}
    assert merge_recovery({"other": 1}, update) == {"other": 1, **update}
    assert merge_recovery(None, update) is None
    assert merge_recovery(Command(update=[("messages", reply)]), update).update == [
        ("messages", reply)
    ]
    assert merge_recovery({"messages": reply}, None) == {"messages": reply}


# ----------------------------------------------------------------------------- recovery


FILLER = "We went over the migration plan again, step by step, with the rollback notes. " * 4
HISTORY: list[BaseMessage] = [
    message
    for turn in range(1, 5)
    for message in (
        HumanMessage(f"Turn {turn}: {FILLER}", id=f"h{turn}"),
        AIMessage(f"Noted turn {turn}. {FILLER}", id=f"a{turn}"),
    )
]
QUESTION = HumanMessage("What did we decide about the rollback?", id="q")
CONFIG = ContextConfig(
    context_window=60_000, output_reserve=2_000, keep_recent_tokens=200, summary_max_tokens=400
)
OFFLINE = ExtractiveSummarizer()
"""The summarizer of these agents: the server replays the provider's answers, not summaries (the
default, an ``LLMSummarizer`` on the agent's model, is tested in test_default_summarizer.py)."""
ANSWER = "Recovered answer."
OVERFLOW_WORDS = {
    "openai-chat": "maximum context length is 128000 tokens",
    "openai-responses": "exceeds the context window of this model",
    "anthropic": "prompt is too long: 215000 tokens > 200000 maximum",
}


def queue_overflow(server: fp.ProviderReplay, api: str) -> None:
    body = {
        "openai-chat": fp.openai_context_length_error(),
        "openai-responses": fp.responses_context_length_error(),
        "anthropic": fp.anthropic_prompt_too_long(),
    }[api]
    server.json(PATHS[api], body, 400)


def queue_answer(
    server: fp.ProviderReplay, api: str, *, streaming: bool, text: str = ANSWER
) -> str:
    """A normal reply; returns its provider id."""
    n = next(IDS)
    path = PATHS[api]
    if api == "openai-chat":
        usage = {"prompt_tokens": 900, "completion_tokens": 5, "total_tokens": 905}
        reply_id = f"chatcmpl-{n}"
        if streaming:
            server.sse(path, fp.chat_completion_stream(reply_id, usage, text))
        else:
            server.json(path, fp.chat_completion(reply_id, usage, text))
    elif api == "openai-responses":
        usage = {
            "input_tokens": 900,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 905,
        }
        reply_id = f"resp_{n:04d}"
        if streaming:
            server.sse(path, fp.responses_stream(reply_id, usage, text))
        else:
            server.json(path, fp.responses_body(reply_id, usage, text))
    else:
        reply_id = f"msg_{n:04d}"
        if streaming:
            deltas = [{"input_tokens": 900, "output_tokens": 5}]
            server.sse(
                path,
                fp.anthropic_stream(
                    reply_id, {"input_tokens": 900, "output_tokens": 1}, deltas, text
                ),
            )
        else:
            server.json(
                path,
                fp.anthropic_message(reply_id, {"input_tokens": 900, "output_tokens": 5}, text),
            )
    return reply_id


def sent(server: fp.ProviderReplay, api: str) -> list[dict[str, Any]]:
    return [body for path, body in server.requests if path == PATHS[api]]


def request_messages(body: dict[str, Any]) -> list[Any]:
    return list(body.get("messages") or body.get("input") or [])


def summary_sent(body: dict[str, Any]) -> bool:
    return "[Summary of the earlier conversation" in str(request_messages(body))


def stored_ids(store: HistoryStore, thread: str) -> set[str]:
    return {event.event_id for event in store.read_events(thread)}


def run(thread: str, *messages: BaseMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"messages": list(messages)}, {"configurable": {"thread_id": thread}}


@pytest.fixture
def server(replay: fp.ProviderReplay) -> fp.ProviderReplay:
    """The module's loopback server, with no reply queued and no request seen."""
    replay.replies.clear()
    replay.requests.clear()
    return replay


@pytest.fixture
def memory_store() -> Iterator[HistoryStore]:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


def check_recovered(
    server: fp.ProviderReplay,
    api: str,
    store: HistoryStore,
    thread: str,
    out: dict[str, Any],
    context: dict[str, Any] | None = None,
) -> None:
    """The retried reply came back, on a compacted view; the summary is committed; the state
    (``context``: the graph's, when its output has none) shows the retry; the store still
    holds every message."""
    assert out["messages"][-1].text == ANSWER
    first, retried = sent(server, api)
    assert not summary_sent(first) and summary_sent(retried)
    assert len(request_messages(retried)) < len(request_messages(first))
    active = store.get_active(thread)
    assert active is not None and active.covered_through_seq >= 2
    overflow = unpack(out["context"] if context is None else context)["overflow"]
    assert overflow["retries"] == 1 and OVERFLOW_WORDS[api] in overflow["error"]
    assert overflow["compaction"] == "committed" and overflow["at_message_id"] == QUESTION.id
    assert {m.id for m in HISTORY} | {QUESTION.id} <= stored_ids(store, thread)


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("api", list(PATHS))
def test_create_context_agent_compacts_and_retries_once(
    server: fp.ProviderReplay, memory_store: HistoryStore, api: str, streaming: bool
):
    model = chat_model(server, api, streaming=streaming)
    graph = create_context_agent(
        model, store=memory_store, config=CONFIG, summarizer=OFFLINE, lookup_tool=False
    )
    queue_overflow(server, api)
    queue_answer(server, api, streaming=streaming)
    out = graph.compile(checkpointer=InMemorySaver()).invoke(*run("t", *HISTORY, QUESTION))
    check_recovered(server, api, memory_store, "t", out)
    # the view is the summary and the tail, then the reply
    assert out["messages"][0].id == SUMMARY_MESSAGE_ID
    assert [m.id for m in out["messages"][1:-1]] == [QUESTION.id]
    # the rejected call breaks nothing in ctx_usage: the retried reply is booked, as a request
    # of the compacted view (not stale: the baseline moves to it)
    usage = out["context"]["report"]["last_usage"]
    assert out["context"]["recorded"]["booked_id"] == out["messages"][-1].id
    assert (usage["output"], usage["stale"]) == (5, False)
    assert out["context"]["baseline"]["input_through_message_id"] == QUESTION.id
    assert out["context"]["report"]["budget"]["decision"] == "proceed"


async def test_create_context_agent_recovers_on_ainvoke(
    server: fp.ProviderReplay, store: HistoryStore
):
    model = chat_model(server, "anthropic", streaming=True)
    graph = create_context_agent(
        model, store=store, config=CONFIG, summarizer=OFFLINE, lookup_tool=False
    )
    queue_overflow(server, "anthropic")
    queue_answer(server, "anthropic", streaming=True)
    out = await graph.compile(checkpointer=InMemorySaver()).ainvoke(*run("t", *HISTORY, QUESTION))
    check_recovered(server, "anthropic", store, "t", out)
    (totals,) = await UsageLedger(store).atotals("t")
    assert totals.counts["output"] == 5  # the retried reply; the rejected call had no usage


def test_the_retry_count_runs_for_the_thread(server: fp.ProviderReplay, store: HistoryStore):
    graph = create_context_agent(
        chat_model(server, "openai-chat"),
        store=store,
        config=CONFIG,
        summarizer=OFFLINE,
        lookup_tool=False,
    ).compile(checkpointer=InMemorySaver())
    queue_overflow(server, "openai-chat")
    queue_answer(server, "openai-chat", streaming=False)
    first = graph.invoke(*run("t", *HISTORY, QUESTION))
    queue_answer(server, "openai-chat", streaming=False)
    second = graph.invoke(*run("t", HumanMessage("And the backfill?", id="q2")))
    queue_overflow(server, "openai-chat")
    queue_answer(server, "openai-chat", streaming=False)
    third = graph.invoke(*run("t", HumanMessage("And the read path?", id="q3")))
    assert first["context"]["report"]["overflow"]["retries"] == 1
    assert second["context"]["report"]["overflow"] == first["context"]["report"]["overflow"]
    assert third["context"]["report"]["overflow"]["retries"] == 2
    assert third["context"]["report"]["overflow"]["at_message_id"] == "q3"
    assert store.get_active("t").generation == 2
    assert {m.id for m in HISTORY} | {"q", "q2", "q3"} <= stored_ids(store, "t")


def test_a_user_graph_keeps_its_node_and_state_and_recovers(
    server: fp.ProviderReplay, store: HistoryStore
):
    model = chat_model(server, "openai-responses", streaming=True)
    seen: list[set[str]] = []

    def agent(state: MessagesState) -> Command[Any]:
        seen.append(set(state))
        return Command(update={"messages": [model.invoke(state["messages"])]})

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    add_context_management(
        builder, model_node="agent", store=store, config=CONFIG, model=model, summarizer=OFFLINE
    )
    queue_overflow(server, "openai-responses")
    queue_answer(server, "openai-responses", streaming=True)
    graph = builder.compile(checkpointer=InMemorySaver())
    inputs, config = run("u", *HISTORY, QUESTION)
    out = graph.invoke(inputs, config)
    context = graph.get_state(config).values["context"]
    check_recovered(server, "openai-responses", store, "u", out, context)
    assert seen == [{"messages"}, {"messages"}]  # the node never sees our context channel


class PydanticState(BaseModel):
    messages: Annotated[list[AnyMessage], add_messages]


async def test_a_pydantic_state_graph_recovers_async(
    server: fp.ProviderReplay, memory_store: HistoryStore
):
    model = chat_model(server, "openai-chat")
    received: list[type] = []

    async def agent(state: PydanticState) -> dict[str, Any]:
        received.append(type(state))
        return {"messages": [await model.ainvoke(state.messages)]}

    builder = StateGraph(PydanticState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    add_context_management(
        builder,
        model_node="agent",
        store=memory_store,
        config=CONFIG,
        model=model,
        summarizer=OFFLINE,
    )
    queue_overflow(server, "openai-chat")
    queue_answer(server, "openai-chat", streaming=False)
    graph = builder.compile(checkpointer=InMemorySaver())
    inputs, config = run("p", *HISTORY, QUESTION)
    out = await graph.ainvoke(inputs, config)
    context = (await graph.aget_state(config)).values["context"]
    check_recovered(server, "openai-chat", memory_store, "p", out, context)
    assert received == [PydanticState, PydanticState]


def middleware_agent(server: fp.ProviderReplay, store: HistoryStore, api: str) -> Any:
    model = chat_model(server, api)
    middleware = ContextManagementMiddleware(
        store, model=model, config=CONFIG, summarizer=OFFLINE, lookup_tool=False
    )
    return create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_the_middleware_retries_on_the_compacted_request(
    server: fp.ProviderReplay, store: HistoryStore, mode: str
):
    agent = middleware_agent(server, store, "openai-chat")
    queue_overflow(server, "openai-chat")
    queue_answer(server, "openai-chat", streaming=False)
    inputs, config = run("m", *HISTORY, QUESTION)
    out = agent.invoke(inputs, config) if mode == "invoke" else await agent.ainvoke(inputs, config)
    check_recovered(server, "openai-chat", store, "m", out)
    # the state keeps its messages until the next turn applies the committed summary
    assert [m.id for m in out["messages"][:-1]] == [m.id for m in [*HISTORY, QUESTION]]
    queue_answer(server, "openai-chat", streaming=False, text="Next.")
    inputs, config = run("m", HumanMessage("And the backfill?", id="q2"))
    after = (
        agent.invoke(inputs, config) if mode == "invoke" else await agent.ainvoke(inputs, config)
    )
    assert after["messages"][0].id == SUMMARY_MESSAGE_ID and after["messages"][-1].text == "Next."
    assert summary_sent(sent(server, "openai-chat")[-1])
    assert after["context"]["report"]["overflow"]["retries"] == 1


class DownSummarizer:
    """A summarizer whose model is down."""

    id = "down"
    window_tokens = None

    def summarize(self, request: Any) -> str:
        raise ConnectionError("summarizer connection reset by peer")

    async def asummarize(self, request: Any) -> str:
        return self.summarize(request)


def test_a_rejected_request_is_compacted_by_the_offline_summarizer_when_the_model_is_down(
    server: fp.ProviderReplay, memory_store: HistoryStore
):
    """The provider's rejection counts as a request over the window: when the configured
    summarizer fails, the offline one covers the span instead of leaving it all in place."""
    graph = create_context_agent(
        chat_model(server, "openai-chat"),
        store=memory_store,
        config=CONFIG,
        summarizer=DownSummarizer(),
        lookup_tool=False,
    ).compile(checkpointer=InMemorySaver())
    queue_overflow(server, "openai-chat")
    queue_answer(server, "openai-chat", streaming=False)
    out = graph.invoke(*run("t", *HISTORY, QUESTION))
    check_recovered(server, "openai-chat", memory_store, "t", out)
    assert memory_store.get_active("t").summarizer_id == ExtractiveSummarizer().id
    assert "ConnectionError" in " ".join(out["context"]["report"]["compaction"]["problems"])


@pytest.mark.parametrize("api", list(PATHS))
def test_a_second_rejection_raises_the_budget_error_from_the_provider_error(
    server: fp.ProviderReplay, memory_store: HistoryStore, api: str
):
    graph = create_context_agent(
        chat_model(server, api),
        store=memory_store,
        config=CONFIG,
        summarizer=OFFLINE,
        lookup_tool=False,
    ).compile(checkpointer=InMemorySaver())
    queue_overflow(server, api)
    queue_overflow(server, api)
    with pytest.raises(ContextBudgetExceeded) as raised:
        graph.invoke(*run("t", *HISTORY, QUESTION))
    assert "rejected the request as too long even after compaction" in str(raised.value)
    assert OVERFLOW_WORDS[api] in str(raised.value)
    assert is_context_overflow(raised.value.__cause__)
    assert not is_context_overflow(raised.value)  # handled: an outer layer does not retry it
    assert len(sent(server, api)) == 2 and summary_sent(sent(server, api)[1])
    assert {m.id for m in HISTORY} | {QUESTION.id} <= stored_ids(memory_store, "t")


async def test_the_middleware_raises_after_a_second_rejection(
    server: fp.ProviderReplay, memory_store: HistoryStore
):
    agent = middleware_agent(server, memory_store, "anthropic")
    queue_overflow(server, "anthropic")
    queue_overflow(server, "anthropic")
    with pytest.raises(ContextBudgetExceeded, match="prompt is too long"):
        await agent.ainvoke(*run("m", *HISTORY, QUESTION))
    assert len(sent(server, "anthropic")) == 2


@pytest.mark.parametrize("rejected_again", [True, False])
@pytest.mark.parametrize("wiring", ["graph", "middleware"])
def test_nothing_to_compact_sends_the_request_once_more(
    server: fp.ProviderReplay, memory_store: HistoryStore, wiring: str, rejected_again: bool
):
    if wiring == "graph":
        agent = create_context_agent(
            chat_model(server, "openai-chat"),
            store=memory_store,
            config=CONFIG,
            summarizer=OFFLINE,
            lookup_tool=False,
        ).compile(checkpointer=InMemorySaver())
    else:
        agent = middleware_agent(server, memory_store, "openai-chat")
    queue_overflow(server, "openai-chat")
    if rejected_again:  # the provider means it: no cut can make this request fit
        queue_overflow(server, "openai-chat")
        with pytest.raises(ContextBudgetExceeded, match="nothing could be compacted") as raised:
            agent.invoke(*run("t", QUESTION))
        assert is_context_overflow(raised.value.__cause__)
    else:  # a rejection that does not repeat: the same request goes through
        queue_answer(server, "openai-chat", streaming=False)
        out = agent.invoke(*run("t", QUESTION))
        assert out["messages"][-1].type == "ai"
    requests = sent(server, "openai-chat")
    assert len(requests) == 2 and requests[0] == requests[1]  # sent unchanged, once more
    assert memory_store.get_active("t") is None
    assert QUESTION.id in stored_ids(memory_store, "t")


ORDINARY = fp.openai_error(
    "Invalid schema for function 'search': 'required' is required to be supplied.",
    code="invalid_function_parameters",
    param="tools[0].function.parameters",
)


@pytest.mark.parametrize("wiring", ["graph", "middleware"])
def test_an_ordinary_bad_request_is_not_retried(
    server: fp.ProviderReplay, memory_store: HistoryStore, wiring: str
):
    if wiring == "graph":
        agent = create_context_agent(
            chat_model(server, "openai-chat"),
            store=memory_store,
            config=CONFIG,
            summarizer=OFFLINE,
            lookup_tool=False,
        ).compile(checkpointer=InMemorySaver())
    else:
        agent = middleware_agent(server, memory_store, "openai-chat")
    server.json(PATHS["openai-chat"], ORDINARY, 400)
    queue_answer(server, "openai-chat", streaming=False)  # never asked for
    with pytest.raises(openai.BadRequestError, match="Invalid schema for function"):
        agent.invoke(*run("t", *HISTORY, QUESTION))
    assert len(sent(server, "openai-chat")) == 1
    assert memory_store.get_active("t") is None


def test_a_recovered_node_update_rewrites_the_view_and_appends_the_reply():
    view = [HumanMessage("summary", id=SUMMARY_MESSAGE_ID), QUESTION]
    update = {
        "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *view],
        "context": {"overflow": {"retries": 1}},
    }
    merged = merge_recovery({"messages": AIMessage(ANSWER, id="r")}, update)
    state = add_messages([*HISTORY, QUESTION], merged["messages"])
    assert [m.id for m in state] == [SUMMARY_MESSAGE_ID, QUESTION.id, "r"]
