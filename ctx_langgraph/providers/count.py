"""Exact input-token counts of a whole request, asked of the provider, for the budget check.

The budget node counts every turn with a local :class:`~ctx_langgraph.budget.counters.TokenCounter`.
Near the context limit a local estimate is not good enough to decide, so it may ask the provider
through a :class:`ProviderCountHook`:

* :class:`AnthropicCountHook` posts to Anthropic's ``/v1/messages/count_tokens`` through
  ``ChatAnthropic.get_num_tokens_from_messages`` (LangChain formats the system prompt, messages
  and tools exactly as it does for a real request).
* :class:`OpenAIResponsesCountHook` posts to OpenAI's ``/v1/responses/input_tokens`` through the
  ``openai`` client of the ``ChatOpenAI`` model, with the Responses request body that
  ``langchain-openai`` itself would send.

Both use the model's own client, so its ``base_url``, API key, headers and retry settings apply.
A count is the provider's number for the request as sent (system prompt, messages, tool
schemas); unlike :meth:`TiktokenCounter.count_request
<ctx_langgraph.budget.counters.TiktokenCounter.count_request>` nothing is added to it. Any failure
raises :class:`~ctx_langgraph.errors.ProviderCountError`, and the caller falls back to its local
estimate.

``langchain-anthropic`` and ``langchain-openai`` are imported only when a hook is used, so this
module loads without them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from ctx_langgraph.errors import ProviderCountError

if TYPE_CHECKING:
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

__all__ = [
    "DEFAULT_COUNT_TIMEOUT",
    "AnthropicCountHook",
    "OpenAIResponsesCountHook",
    "ProviderCountHook",
]

DEFAULT_COUNT_TIMEOUT = 10.0
"""Seconds a count may take before it fails (a count is an optimization, never worth a long wait)."""

# The body fields POST /v1/responses/input_tokens accepts (openai `InputTokenCountParams`); the
# generation-only fields of a Responses request (stream, store, temperature, max_output_tokens,
# include, ...) are dropped.
_RESPONSES_COUNT_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "previous_response_id",
        "conversation",
        "reasoning",
        "text",
        "truncation",
        "personality",
    }
)


@runtime_checkable
class ProviderCountHook(Protocol):
    """Asks a provider for the exact input-token count of a request.

    Implementations raise :class:`~ctx_langgraph.errors.ProviderCountError` on any failure, so a
    caller needs one ``except`` to fall back to its local estimate.

    Examples:
        ```python
        from ctx_langgraph.errors import ProviderCountError

        def exact_or_estimate(hook, counter, messages, tools):
            try:
                return hook.count_request(messages, tools)
            except ProviderCountError:
                return counter.count_request(messages, tools)
        ```
    """

    @property
    def id(self) -> str:
        """Identifies the provider, endpoint and model whose counts the hook returns."""
        ...

    def count_request(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The provider's input-token count of ``messages`` sent with ``tools``."""
        ...

    async def acount_request(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> int:
        """Async :meth:`count_request`."""
        ...


def _token_count(provider: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProviderCountError(
            provider, f"the reply has no usable 'input_tokens' count (got {value!r})"
        )
    return value


def _failure(provider: str, exc: Exception) -> ProviderCountError:
    """Wraps an SDK or conversion error; ``status_code`` is set by both SDKs' ``APIStatusError``."""
    status = getattr(exc, "status_code", None)
    detail = " ".join(str(exc).split())
    if len(detail) > 300:
        detail = detail[:297] + "..."
    return ProviderCountError(
        provider,
        f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__,
        status_code=status if isinstance(status, int) and not isinstance(status, bool) else None,
    )


def _call_options(timeout: float | None) -> dict[str, Any]:
    """The per-call options of a count: its timeout, or none to keep the client's."""
    return {} if timeout is None else {"timeout": timeout}


class AnthropicCountHook:
    """Anthropic's ``POST /v1/messages/count_tokens``, through ``ChatAnthropic``.

    Calls :meth:`ChatAnthropic.get_num_tokens_from_messages`, which formats the messages (system
    prompt apart, tool results as ``tool_result`` blocks) and the tools as for a real request and
    uses the model's own ``anthropic`` client (its ``base_url``, key, ``betas`` and
    ``max_retries``). LangChain has no async variant, so :meth:`acount_request` runs the sync
    call in a worker thread.

    Args:
        model: The chat model whose requests are counted.
        timeout: Seconds per count call; ``None`` keeps the model's own timeout.

    Examples:
        ```python
        from langchain_anthropic import ChatAnthropic
        from langchain_core.messages import HumanMessage, SystemMessage

        hook = AnthropicCountHook(ChatAnthropic(model="claude-sonnet-4-5"))
        tokens = hook.count_request(
            [SystemMessage("You are terse."), HumanMessage("What is the weather in Paris?")],
            tools=[get_weather],
        )
        ```
    """

    provider = "anthropic"

    def __init__(
        self, model: ChatAnthropic, *, timeout: float | None = DEFAULT_COUNT_TIMEOUT
    ) -> None:
        self.model = model
        self.timeout = timeout

    @property
    def id(self) -> str:
        return f"anthropic:messages/count_tokens:{self.model.model}"

    def count_request(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The request's input tokens as Anthropic counts them.

        Raises:
            ProviderCountError: HTTP error, timeout, unreachable server, or a reply without an
                ``input_tokens`` count.
        """
        options = _call_options(self.timeout)
        try:
            value = self.model.get_num_tokens_from_messages(
                list(messages), tools=list(tools) if tools else None, **options
            )
        except Exception as exc:
            raise _failure(self.provider, exc) from exc
        return _token_count(self.provider, value)

    async def acount_request(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> int:
        """Async :meth:`count_request` (the sync call, in a worker thread)."""
        return await asyncio.to_thread(self.count_request, messages, tools)


class OpenAIResponsesCountHook:
    """OpenAI's ``POST /v1/responses/input_tokens``, through the ``openai`` client of ``ChatOpenAI``.

    The body is the Responses request ``langchain-openai`` would send for these messages and
    tools (``input`` items, Responses-format ``tools``, and ``model``, ``reasoning``, ``text``,
    ``truncation``... from the model's settings), without the generation-only fields. It is
    built this way even when the model itself talks to Chat Completions: the count endpoint
    exists only for the Responses API. The call goes through the model's ``root_client`` /
    ``root_async_client``, so its ``base_url``, key and ``max_retries`` apply.

    Args:
        model: The chat model whose requests are counted.
        timeout: Seconds per count call; ``None`` keeps the client's timeout.

    Examples:
        ```python
        from langchain_core.messages import HumanMessage
        from langchain_openai import ChatOpenAI

        hook = OpenAIResponsesCountHook(ChatOpenAI(model="gpt-4.1", use_responses_api=True))
        tokens = await hook.acount_request([HumanMessage("Hello")], tools=[get_weather])
        ```
    """

    provider = "openai"

    def __init__(self, model: ChatOpenAI, *, timeout: float | None = DEFAULT_COUNT_TIMEOUT) -> None:
        self.model = model
        self.timeout = timeout

    @property
    def id(self) -> str:
        return f"openai:responses/input_tokens:{self.model.model_name}"

    def request_body(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> dict[str, Any]:
        """The JSON body posted to ``/v1/responses/input_tokens``.

        Relies on ``ChatOpenAI._get_request_payload`` (and, for a model set to Chat Completions,
        ``langchain_openai.chat_models.base._construct_responses_api_payload``): the same
        conversion a real request goes through, so the count matches what would be sent.
        """
        from langchain_core.utils.function_calling import convert_to_openai_tool

        kwargs: dict[str, Any] = {}
        if tools:
            kwargs["tools"] = [convert_to_openai_tool(tool) for tool in tools]
        payload: dict[str, Any] = self.model._get_request_payload(list(messages), **kwargs)
        if "input" not in payload:
            # The model is set to Chat Completions: build the Responses request it would send.
            from langchain_openai.chat_models.base import _construct_responses_api_payload

            rest = {key: value for key, value in payload.items() if key != "messages"}
            payload = _construct_responses_api_payload(list(messages), rest)
        return {
            key: value
            for key, value in payload.items()
            if key in _RESPONSES_COUNT_FIELDS and value is not None
        }

    def _read(self, reply: object) -> int:
        if isinstance(reply, dict):
            kind, value = reply.get("object"), reply.get("input_tokens")
        else:
            kind, value = getattr(reply, "object", None), getattr(reply, "input_tokens", None)
        if kind is not None and kind != "response.input_tokens":
            raise ProviderCountError(
                self.provider, f"the reply is a {kind!r} object, not 'response.input_tokens'"
            )
        return _token_count(self.provider, value)

    def _client(self, client: Any, kind: str) -> Any:
        if client is None:
            raise ProviderCountError(
                self.provider, f"the ChatOpenAI model has no {kind} client (no API key for it)"
            )
        return client

    def count_request(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The request's input tokens as OpenAI counts them.

        Raises:
            ProviderCountError: HTTP error, timeout, unreachable server, or a reply without an
                ``input_tokens`` count.
        """
        options = _call_options(self.timeout)
        try:
            body = self.request_body(messages, tools)
            client = self._client(self.model.root_client, "sync")
            endpoint = getattr(client.responses, "input_tokens", None)
            if endpoint is not None:
                reply: object = endpoint.count(**body, **options)
            else:  # an openai SDK from before the endpoint: the same POST, untyped
                reply = client.post(
                    "/responses/input_tokens", body=body, cast_to=object, options=options
                )
        except ProviderCountError:
            raise
        except Exception as exc:
            raise _failure(self.provider, exc) from exc
        return self._read(reply)

    async def acount_request(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> int:
        """Async :meth:`count_request`, through the model's ``root_async_client``."""
        options = _call_options(self.timeout)
        try:
            body = self.request_body(messages, tools)
            client = self._client(self.model.root_async_client, "async")
            endpoint = getattr(client.responses, "input_tokens", None)
            if endpoint is not None:
                reply: object = await endpoint.count(**body, **options)
            else:
                reply = await client.post(
                    "/responses/input_tokens", body=body, cast_to=object, options=options
                )
        except ProviderCountError:
            raise
        except Exception as exc:
            raise _failure(self.provider, exc) from exc
        return self._read(reply)
