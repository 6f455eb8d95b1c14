"""Provider count hooks against a loopback server: the real ``ChatAnthropic`` / ``ChatOpenAI``
clients post to ``/v1/messages/count_tokens`` and ``/v1/responses/input_tokens``, and every
failure becomes a ``ProviderCountError``."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import fake_providers as fp
import openai.resources.responses as openai_responses
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from ctx_langgraph import errors
from ctx_langgraph.errors import ContextManagementError, ProviderCountError
from ctx_langgraph.providers.count import (
    AnthropicCountHook,
    OpenAIResponsesCountHook,
    ProviderCountHook,
)

ANTHROPIC_PATH = "/v1/messages/count_tokens"
OPENAI_PATH = "/v1/responses/input_tokens"


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return "sunny"


WEATHER_PARAMETERS = {
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "type": "object",
}

SIMPLE = [SystemMessage("You are terse."), HumanMessage("Weather in Paris?")]
TOOL_ROUND = [
    SystemMessage("You are terse."),
    HumanMessage("Weather in Paris?"),
    AIMessage(
        "Let me check.",
        tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_01"}],
    ),
    ToolMessage("sunny, 21C", tool_call_id="call_01"),
    AIMessage("Sunny, 21C."),
    HumanMessage("Thanks"),
]


def anthropic_hook(url: str, **kwargs: Any) -> AnthropicCountHook:
    model = ChatAnthropic(
        model="claude-sonnet-4-5", base_url=url, api_key="test-key", max_retries=0
    )
    return AnthropicCountHook(model, **kwargs)


def openai_hook(url: str, *, responses: bool = True, **kwargs: Any) -> OpenAIResponsesCountHook:
    model = ChatOpenAI(
        model="gpt-4.1",
        base_url=url + "/v1",
        api_key="test-key",
        max_retries=0,
        use_responses_api=responses,
    )
    return OpenAIResponsesCountHook(model, **kwargs)


def openai_reply(tokens: int) -> dict[str, Any]:
    return {"object": "response.input_tokens", "input_tokens": tokens}


async def count(hook: ProviderCountHook, mode: str, messages: Any, tools: Any = ()) -> int:
    if mode == "sync":
        return hook.count_request(messages, tools)
    return await hook.acount_request(messages, tools)


@contextmanager
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers (for timeouts)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture(scope="module")
def shared_server() -> Iterator[fp.ProviderReplay]:
    with fp.serve() as server:
        yield server


@pytest.fixture
def server(shared_server: fp.ProviderReplay) -> fp.ProviderReplay:
    """One loopback server for the module (shutting one down takes half a second), reset per test."""
    shared_server.replies.clear()
    shared_server.requests.clear()
    return shared_server


def closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ----------------------------------------------------------------------------- the protocol


def test_hooks_satisfy_the_protocol_and_name_their_counts():
    anthropic = anthropic_hook("http://127.0.0.1:9")
    openai = openai_hook("http://127.0.0.1:9")
    assert isinstance(anthropic, ProviderCountHook)
    assert isinstance(openai, ProviderCountHook)
    assert anthropic.id == "anthropic:messages/count_tokens:claude-sonnet-4-5"
    assert openai.id == "openai:responses/input_tokens:gpt-4.1"


def test_provider_count_error_is_exported_and_says_what_to_do():
    assert "ProviderCountError" in errors.__all__
    assert issubclass(ProviderCountError, ContextManagementError)
    error = ProviderCountError("openai", "RateLimitError: slow down", status_code=429)
    assert (error.provider, error.status_code, error.reason) == (
        "openai",
        429,
        "RateLimitError: slow down",
    )
    assert str(error) == (
        "openai token count failed (HTTP 429): RateLimitError: slow down; "
        "fall back to the local token estimate for this request"
    )
    assert "HTTP" not in str(ProviderCountError("anthropic", "timed out"))


# ----------------------------------------------------------------------------- Anthropic


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_anthropic_posts_system_messages_and_tools_and_returns_input_tokens(server, mode):
    server.json(ANTHROPIC_PATH, {"input_tokens": 1234})
    hook = anthropic_hook(server.url)
    assert await count(hook, mode, SIMPLE, [get_weather]) == 1234
    [(path, body)] = server.requests
    assert path == ANTHROPIC_PATH
    assert body == {
        "model": "claude-sonnet-4-5",
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Get the current weather in a city.",
                "input_schema": WEATHER_PARAMETERS,
            }
        ],
    }


async def test_anthropic_without_tools_sends_no_tools_key(server):
    server.json(ANTHROPIC_PATH, {"input_tokens": 12})
    assert await anthropic_hook(server.url).acount_request([HumanMessage("Hi")]) == 12
    [(_, body)] = server.requests
    assert body == {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Hi"}]}


def test_anthropic_tool_round_becomes_tool_use_and_tool_result_blocks(server):
    server.json(ANTHROPIC_PATH, {"input_tokens": 456})
    assert anthropic_hook(server.url).count_request(TOOL_ROUND, [get_weather]) == 456
    [(_, body)] = server.requests
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                    "id": "call_01",
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "content": "sunny, 21C",
                    "tool_use_id": "call_01",
                    "is_error": False,
                }
            ],
        },
        {"role": "assistant", "content": "Sunny, 21C."},
        {"role": "user", "content": "Thanks"},
    ]


# ----------------------------------------------------------------------------- OpenAI


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_openai_posts_input_items_and_tools_and_returns_input_tokens(server, mode):
    server.json(OPENAI_PATH, openai_reply(321))
    hook = openai_hook(server.url)
    assert await count(hook, mode, SIMPLE, [get_weather]) == 321
    [(path, body)] = server.requests
    assert path == OPENAI_PATH
    # the Responses request langchain-openai would send, minus generation-only fields (stream)
    assert body == {
        "model": "gpt-4.1",
        "input": [
            {"type": "message", "role": "system", "content": "You are terse."},
            {"type": "message", "role": "user", "content": "Weather in Paris?"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Get the current weather in a city.",
                "parameters": WEATHER_PARAMETERS,
            }
        ],
    }


def test_openai_tool_round_becomes_function_call_items(server):
    server.json(OPENAI_PATH, openai_reply(654))
    assert openai_hook(server.url).count_request(TOOL_ROUND, [get_weather]) == 654
    [(_, body)] = server.requests
    assert body["input"] == [
        {"type": "message", "role": "system", "content": "You are terse."},
        {"type": "message", "role": "user", "content": "Weather in Paris?"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
        },
        {
            "type": "function_call",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "call_id": "call_01",
        },
        {"type": "function_call_output", "output": "sunny, 21C", "call_id": "call_01"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Sunny, 21C.", "annotations": []}],
        },
        {"type": "message", "role": "user", "content": "Thanks"},
    ]
    assert [t["name"] for t in body["tools"]] == ["get_weather"]


async def test_openai_chat_completions_model_is_counted_as_a_responses_request(server):
    server.json(OPENAI_PATH, openai_reply(77))
    hook = openai_hook(server.url, responses=False)
    assert hook.request_body(SIMPLE) == {
        "model": "gpt-4.1",
        "input": [
            {"type": "message", "role": "system", "content": "You are terse."},
            {"type": "message", "role": "user", "content": "Weather in Paris?"},
        ],
    }
    assert await hook.acount_request(TOOL_ROUND, [get_weather]) == 77
    [(path, body)] = server.requests
    assert path == OPENAI_PATH
    assert "messages" not in body
    assert [item["type"] for item in body["input"]][3:5] == [
        "function_call",
        "function_call_output",
    ]


def test_openai_body_keeps_count_relevant_model_settings_only():
    model = ChatOpenAI(
        model="o4-mini",
        base_url="http://127.0.0.1:9/v1",
        api_key="test-key",
        reasoning={"effort": "low"},
        max_tokens=500,
        temperature=0.2,
        store=False,
        use_responses_api=True,
    )
    body = OpenAIResponsesCountHook(model).request_body([HumanMessage("Hi")])
    assert body == {
        "model": "o4-mini",
        "input": [{"type": "message", "role": "user", "content": "Hi"}],
        "reasoning": {"effort": "low"},
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_openai_sdk_without_the_endpoint_posts_the_same_body(server, mode, monkeypatch):
    monkeypatch.delattr(openai_responses.Responses, "input_tokens")
    monkeypatch.delattr(openai_responses.AsyncResponses, "input_tokens")
    server.json(OPENAI_PATH, openai_reply(88))
    hook = openai_hook(server.url)
    assert await count(hook, mode, SIMPLE, [get_weather]) == 88
    [(path, body)] = server.requests
    assert path == OPENAI_PATH
    assert body == hook.request_body(SIMPLE, [get_weather])


# ----------------------------------------------------------------------------- failures

HOOKS = {"anthropic": (anthropic_hook, ANTHROPIC_PATH), "openai": (openai_hook, OPENAI_PATH)}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize(
    ("status", "reply"),
    [
        (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
        (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
    ],
)
async def test_http_errors_raise_provider_count_error_at_once(
    server, provider, mode, status, reply
):
    make, path = HOOKS[provider]
    server.json(path, reply, status=status)
    started = time.monotonic()
    with pytest.raises(ProviderCountError) as caught:
        await count(make(server.url), mode, SIMPLE)
    assert time.monotonic() - started < 2  # max_retries=0: no backoff
    assert len(server.requests) == 1
    error = caught.value
    assert (error.provider, error.status_code) == (provider, status)
    assert str(error).startswith(f"{provider} token count failed (HTTP {status}): ")
    assert "fall back to the local token estimate" in str(error)
    assert getattr(error.__cause__, "status_code", None) == status


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize(
    "reply",
    [
        {"tokens": 12},
        {"input_tokens": "many"},
        {"input_tokens": -1},
        {"input_tokens": True},
        {"input_tokens": None},
        "not an object",
        [],
    ],
)
async def test_malformed_replies_raise_provider_count_error(server, provider, mode, reply):
    make, path = HOOKS[provider]
    server.json(path, reply)
    with pytest.raises(ProviderCountError, match="input_tokens") as caught:
        await count(make(server.url), mode, SIMPLE)
    assert caught.value.provider == provider
    assert caught.value.status_code is None


async def test_openai_reply_of_another_object_kind_is_malformed(server):
    server.json(OPENAI_PATH, {"object": "response", "input_tokens": 5})
    with pytest.raises(ProviderCountError, match="'response' object"):
        await openai_hook(server.url).acount_request(SIMPLE)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_timeouts_raise_provider_count_error(provider, mode):
    make, _ = HOOKS[provider]
    with silent_server() as url:
        started = time.monotonic()
        with pytest.raises(ProviderCountError, match="Timeout") as caught:
            await count(make(url, timeout=0.3), mode, SIMPLE)
        assert time.monotonic() - started < 3
    assert caught.value.status_code is None
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_unreachable_server_raises_provider_count_error(provider, mode):
    make, _ = HOOKS[provider]
    with pytest.raises(ProviderCountError, match="Connection") as caught:
        await count(make(closed_port_url(), timeout=2), mode, SIMPLE)
    assert caught.value.status_code is None
