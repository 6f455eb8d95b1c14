"""Exact input-token counts of a whole request, asked of the provider through the model's own
client (:class:`AnthropicCountHook`, :class:`OpenAIResponsesCountHook`), for the budget check
near the limit. Any failure raises :class:`~ctx_langgraph.errors.ProviderCountError` and the
caller falls back to its local estimate."""

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
"""Seconds a count may take before it fails."""

# The body fields POST /v1/responses/input_tokens accepts (openai `InputTokenCountParams`).
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
    """Asks a provider for the exact input-token count of a request; raises
    :class:`~ctx_langgraph.errors.ProviderCountError` on any failure.

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
    """An SDK or conversion error as a :class:`ProviderCountError`."""
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
    return {} if timeout is None else {"timeout": timeout}


class AnthropicCountHook:
    """Anthropic's ``POST /v1/messages/count_tokens``, through
    ``ChatAnthropic.get_num_tokens_from_messages`` (formatted as a real request, on the model's
    own client); :meth:`acount_request` runs it in a worker thread.

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
    """OpenAI's ``POST /v1/responses/input_tokens``, through the ``openai`` client of
    ``ChatOpenAI``, with the Responses request ``langchain-openai`` would send (even for a model
    on Chat Completions) without its generation-only fields.

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
        """The JSON body posted to ``/v1/responses/input_tokens`` (built by
        ``ChatOpenAI._get_request_payload``, as a real request is)."""
        from langchain_core.utils.function_calling import convert_to_openai_tool

        kwargs: dict[str, Any] = {}
        if tools:
            kwargs["tools"] = [convert_to_openai_tool(tool) for tool in tools]
        payload: dict[str, Any] = self.model._get_request_payload(list(messages), **kwargs)
        if "input" not in payload:
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

    def _post(self, kind: str, messages: Sequence[BaseMessage], tools: Any) -> Any:
        """The count call's result (an awaitable for the ``async`` client)."""
        options = _call_options(self.timeout)
        try:
            body = self.request_body(messages, tools)
            client = getattr(self.model, "root_async_client" if kind == "async" else "root_client")
            if client is None:
                raise ProviderCountError(
                    self.provider, f"the ChatOpenAI model has no {kind} client (no API key for it)"
                )
            endpoint = getattr(client.responses, "input_tokens", None)
            if endpoint is not None:
                return endpoint.count(**body, **options)
            # an openai SDK from before the endpoint: the same POST, untyped
            return client.post(
                "/responses/input_tokens", body=body, cast_to=object, options=options
            )
        except ProviderCountError:
            raise
        except Exception as exc:
            raise _failure(self.provider, exc) from exc

    def count_request(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The request's input tokens as OpenAI counts them.

        Raises:
            ProviderCountError: HTTP error, timeout, unreachable server, or a reply without an
                ``input_tokens`` count.
        """
        return self._read(self._post("sync", messages, tools))

    async def acount_request(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> int:
        """Async :meth:`count_request`, through the model's ``root_async_client``."""
        pending = self._post("async", messages, tools)
        try:
            reply = await pending
        except Exception as exc:
            raise _failure(self.provider, exc) from exc
        return self._read(reply)
