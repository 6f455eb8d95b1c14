"""``normalize_usage``: provider usage payloads (OpenAI Responses and Chat Completions,
Anthropic Messages, Google Gemini, LangChain ``UsageMetadata``) to :class:`NormalizedUsage`."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage

from ctx_langgraph.errors import ContextManagementError, UsageParseError
from ctx_langgraph.usage.types import NormalizedUsage, Provider, UsageCounts

__all__ = ["detect_format", "normalize_usage", "reply_usage"]

log = logging.getLogger(__name__)

_OPENAI: Provider = "openai"
_GOOGLE: Provider = "google"
_PROVIDER_NAMES: dict[str, Provider] = {
    **dict.fromkeys(("openai", "azure", "azure_openai"), _OPENAI),
    "anthropic": "anthropic",
    **dict.fromkeys(("google", "google_genai", "google_vertexai", "gemini", "vertexai"), _GOOGLE),
    "langchain": "langchain",
}
_TIER_PREFIXES = ("", "priority_", "flex_")
MAX_TOKEN_COUNT = 10**12
"""No single call reports more (and a larger value would overflow a 64-bit total)."""


def _provider(name: object, field: str = "provider") -> Provider | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise UsageParseError(
            field, f"expected a provider name string, got {type(name).__name__} {_short(name)}"
        )
    try:
        return _PROVIDER_NAMES[name.lower()]
    except KeyError:
        raise UsageParseError(
            field, f"unknown provider {name!r}; expected one of {sorted(set(_PROVIDER_NAMES))}"
        ) from None


def _short(value: object, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # a foreign object's __repr__ is not ours to trust
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _name(value: object) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def _finished(status: object) -> bool:
    return status is None or (
        isinstance(status, str) and status in ("completed", "incomplete", "failed", "cancelled")
    )


def _read_mapping(value: object, field: str) -> dict[Any, Any]:
    """A plain ``dict`` copy of a caller's mapping (its own type may fail on any access)."""
    if not isinstance(value, Mapping):
        raise UsageParseError(field, f"expected an object, got {type(value).__name__}")
    try:
        return dict(value.items())
    except Exception as exc:
        raise UsageParseError(
            field, f"cannot read the {type(value).__name__}: {type(exc).__name__}"
        ) from exc


def _count(data: Mapping[str, Any], key: str, path: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageParseError(
            f"{path}{key}", f"expected a token count, got {type(value).__name__} {_short(value)}"
        )
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise UsageParseError(f"{path}{key}", f"expected a whole token count, got {value!r}")
    if value < 0:
        raise UsageParseError(f"{path}{key}", f"token counts cannot be negative, got {value!r}")
    if value > MAX_TOKEN_COUNT:
        raise UsageParseError(
            f"{path}{key}", f"implausible token count {value!r} (over {MAX_TOKEN_COUNT:,})"
        )
    return int(value)


def _details(data: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    return _read_mapping(value, f"{path}{key}")


def _sum_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _uncached(total: int | None, *parts: int | None, field: str) -> int | None:
    if total is None:
        return None
    rest = total - sum(p for p in parts if p is not None)
    if rest < 0:
        raise UsageParseError(
            field, f"cached tokens ({total - rest}) exceed the input total ({total})"
        )
    return rest


def _as_mapping(source: Any) -> Any:
    """SDK objects (the providers' pydantic models) to dicts."""
    if isinstance(source, (Mapping, BaseMessage)):
        return source
    for method in ("model_dump", "to_dict", "dict"):
        try:
            dump = getattr(source, method, None)
            dumped = dump() if callable(dump) else None
        except Exception:
            continue
        if isinstance(dumped, Mapping):
            return dumped
    raise UsageParseError("usage", f"cannot read usage from a {type(source).__name__}")


def detect_format(usage: Mapping[str, Any]) -> str | None:
    """Which wire format a bare usage object is in, or None when its keys fit several.

    Examples:
        >>> detect_format({"prompt_tokens": 10, "completion_tokens": 2})
        'openai_chat'
        >>> detect_format({"input_tokens": 10, "output_tokens": 2}) is None
        True
    """
    keys = set(usage)
    if keys & {"prompt_tokens", "completion_tokens", "prompt_tokens_details"}:
        return "openai_chat"
    if keys & {
        "prompt_token_count",
        "promptTokenCount",
        "candidates_token_count",
        "candidatesTokenCount",
    }:
        return "gemini"
    if keys & {
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "cache_creation",
        "server_tool_use",
    }:
        return "anthropic"
    if keys & {"input_tokens_details", "output_tokens_details"}:
        return "openai_responses"
    if keys & {"input_token_details", "output_token_details"}:
        return "langchain"
    if {"input_tokens", "output_tokens", "total_tokens"} <= keys:
        return "langchain"  # Responses or LangChain: the numbers mean the same
    return None


def _format_for_provider(provider: Provider, usage: Mapping[str, Any]) -> str:
    if provider == "anthropic":
        return "anthropic"
    if provider == "google":
        return "gemini"
    if provider == "openai":
        return "openai_chat" if "prompt_tokens" in usage else "openai_responses"
    return "langchain"


def _max_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _by_ttl(details: Mapping[str, Any], path: str) -> int | None:
    """A cache write's 5-minute and 1-hour parts, summed."""
    return _sum_known(
        _count(details, "ephemeral_5m_input_tokens", path),
        _count(details, "ephemeral_1h_input_tokens", path),
    )


def _nested(usage: Mapping[str, Any], details: str, key: str, path: str) -> int | None:
    return _count(_details(usage, details, path), key, f"{path}{details}.")


def _anthropic(usage: Mapping[str, Any], path: str) -> UsageCounts:
    uncached = _count(usage, "input_tokens", path)
    cache_read = _count(usage, "cache_read_input_tokens", path)
    cache_write = _count(usage, "cache_creation_input_tokens", path)
    breakdown = _details(usage, "cache_creation", path)
    cache_write = _max_known(cache_write, _by_ttl(breakdown, f"{path}cache_creation."))
    if uncached == 0 and not cache_read and not cache_write:
        uncached = None  # a request always has input: 0 here is a gateway's "not reported"
    thinking = _nested(usage, "output_tokens_details", "thinking_tokens", path)
    input_total = None if uncached is None else uncached + (cache_read or 0) + (cache_write or 0)
    return {
        "input_total": input_total,
        "input_uncached": uncached,
        "cache_read": cache_read,
        "cache_write": cache_write,
        "output": _count(usage, "output_tokens", path),
        "reasoning": thinking,
    }


def _openai(usage: Mapping[str, Any], path: str, *, chat: bool) -> UsageCounts:
    total_key, out_key = (
        ("prompt_tokens", "completion_tokens") if chat else ("input_tokens", "output_tokens")
    )
    in_details_key = "prompt_tokens_details" if chat else "input_tokens_details"
    out_details_key = "completion_tokens_details" if chat else "output_tokens_details"
    total = _count(usage, total_key, path)
    in_details = _details(usage, in_details_key, path)
    cache_read = _count(in_details, "cached_tokens", f"{path}{in_details_key}.")
    cache_write = _count(in_details, "cache_write_tokens", f"{path}{in_details_key}.")
    reasoning = _nested(usage, out_details_key, "reasoning_tokens", path)
    return {
        "input_total": total,
        "input_uncached": _uncached(
            total, cache_read, cache_write, field=f"{path}{in_details_key}.cached_tokens"
        ),
        "cache_read": cache_read,
        "cache_write": cache_write,
        "output": _count(usage, out_key, path),
        "reasoning": reasoning,
    }


def _gemini(usage: Mapping[str, Any], path: str) -> UsageCounts:
    def count(snake: str) -> int | None:
        camel = "".join(part.title() if i else part for i, part in enumerate(snake.split("_")))
        key = snake if snake in usage else camel
        return _count(usage, key, path)

    prompt = count("prompt_token_count")
    tool_prompt = count("tool_use_prompt_token_count")
    total = None if prompt is None else prompt + (tool_prompt or 0)
    cached = count("cached_content_token_count")
    thoughts = count("thoughts_token_count")
    candidates = count("candidates_token_count")
    return {
        "input_total": total,
        "input_uncached": _uncached(total, cached, field=f"{path}cached_content_token_count"),
        "cache_read": cached,
        "cache_write": None,
        "output": _sum_known(candidates, thoughts),
        "reasoning": thoughts,
    }


def _langchain(usage: Mapping[str, Any], path: str, *, zero_input_unknown: bool) -> UsageCounts:
    total = _count(usage, "input_tokens", path)
    details = _details(usage, "input_token_details", path)
    out_details = _details(usage, "output_token_details", path)
    dpath, opath = f"{path}input_token_details.", f"{path}output_token_details."

    def tiers(data: Mapping[str, Any], key: str, where: str) -> int | None:
        return _sum_known(*(_count(data, f"{tier}{key}", where) for tier in _TIER_PREFIXES))

    cache_read = tiers(details, "cache_read", dpath)
    # langchain-anthropic reports the TTL breakdown and zeroes the generic key: the same tokens
    cache_write = _max_known(tiers(details, "cache_creation", dpath), _by_ttl(details, dpath))
    if zero_input_unknown and total == 0 and not cache_read and not cache_write:
        total = None
    reasoning = tiers(out_details, "reasoning", opath)
    return {
        "input_total": total,
        "input_uncached": _uncached(total, cache_read, cache_write, field=f"{dpath}cache_read"),
        "cache_read": cache_read,
        "cache_write": cache_write,
        "output": _count(usage, "output_tokens", path),
        "reasoning": reasoning,
    }


def _counts(fmt: str, usage: Mapping[str, Any], path: str, provider: Provider) -> UsageCounts:
    if fmt == "anthropic":
        return _anthropic(usage, path)
    if fmt == "gemini":
        return _gemini(usage, path)
    if fmt == "langchain":
        return _langchain(usage, path, zero_input_unknown=provider == "anthropic")
    return _openai(usage, path, chat=fmt == "openai_chat")


_FORMAT_PROVIDER: dict[str, Provider] = {
    "anthropic": "anthropic",
    "openai_chat": "openai",
    "openai_responses": "openai",
    "gemini": "google",
    "langchain": "langchain",
}


def _from_usage(
    usage: Any,
    *,
    provider: Provider | None,
    path: str,
    model: str | None = None,
    response_id: str | None = None,
    complete: bool = True,
    fmt: str | None = None,
) -> NormalizedUsage:
    field = path.rstrip(".") or "usage"
    if not isinstance(usage, Mapping):
        raise UsageParseError(field, f"expected a usage object, got {type(usage).__name__}")
    usage = _read_mapping(usage, field)
    fmt = fmt or detect_format(usage)
    if fmt is None:
        if provider is None:
            keys = sorted(_short(key, 40) for key in usage)
            raise UsageParseError(
                field,
                f"cannot tell the provider from keys [{', '.join(keys)}]; pass "
                "provider='openai', 'anthropic', 'google' or 'langchain'",
            )
        fmt = _format_for_provider(provider, usage)
    counts = _counts(fmt, usage, path, provider or _FORMAT_PROVIDER[fmt])
    return NormalizedUsage(
        **counts,
        provider=provider or _FORMAT_PROVIDER[fmt],
        model=model,
        response_id=response_id,
        complete=complete,
        raw=usage,
    )


def _from_message(message: BaseMessage, provider: Provider | None) -> NormalizedUsage:
    metadata = message.response_metadata
    meta = {} if metadata is None else _read_mapping(metadata, "response_metadata")
    provider = provider or _provider(meta.get("model_provider"), "response_metadata.model_provider")
    model = _name(meta.get("model_name")) or _name(meta.get("model"))
    response_id = _name(meta.get("id"))
    position = getattr(message, "chunk_position", "last")
    complete = type(message).__name__ == "AIMessage" or (
        isinstance(position, str) and position == "last"
    )
    raw_usage = (
        meta.get("token_usage")
        if isinstance(meta.get("token_usage"), Mapping)
        else meta.get("usage")
    )
    if isinstance(raw_usage, Mapping):
        raw_usage = _read_mapping(raw_usage, "response_metadata.usage")
    # the provider's own payload, when the integration kept it, is the most exact source
    exact = isinstance(raw_usage, dict) and detect_format(raw_usage) not in (None, "langchain")
    usage_metadata = getattr(message, "usage_metadata", None)
    if not exact and usage_metadata is None:
        return NormalizedUsage(
            provider=provider or "unknown", model=model, response_id=response_id, complete=False
        )
    return _from_usage(
        raw_usage if exact else usage_metadata,
        provider=provider,
        path="response_metadata.usage." if exact else "usage_metadata.",
        model=model,
        response_id=response_id,
        complete=complete,
        fmt=None if exact else "langchain",
    )


def normalize_usage(source: Any, *, provider: str | None = None) -> NormalizedUsage:
    """Normalize any supported usage payload.

    Accepts an OpenAI Responses response or its ``usage``; a Chat Completions response (or
    chunk) or its ``usage``; an Anthropic Messages response or its ``usage``; a Gemini response
    or its ``usage_metadata``; a LangChain ``AIMessage`` / ``AIMessageChunk`` or a
    ``UsageMetadata`` dict; SDK objects of those shapes. The provider is detected when the
    payload's keys tell it; otherwise pass ``provider=``.

    Raises:
        UsageParseError: the payload is malformed or cannot be read, or ``provider`` (or a
            message's ``model_provider``) is not a known provider name; the error names the
            field. Nothing else is raised, whatever the input. A model name or response id
            that is not a string is left unknown (None).

    Examples:
        >>> u = normalize_usage({"input_tokens": 50, "cache_read_input_tokens": 18_000,
        ...                      "cache_creation_input_tokens": 1_200, "output_tokens": 120})
        >>> u.provider, u.input_total, u.input_uncached, u.cache_read, u.cache_write, u.output
        ('anthropic', 19250, 50, 18000, 1200, 120)
        >>> u = normalize_usage({"prompt_tokens": 10_000, "completion_tokens": 20,
        ...                      "prompt_tokens_details": {"cached_tokens": 8_000}})
        >>> u.provider, u.input_total, u.input_uncached, u.cache_read, u.cache_write
        ('openai', 10000, 2000, 8000, None)
        >>> normalize_usage({"input_tokens": 0, "output_tokens": 7}, provider="anthropic").input_total is None
        True
    """
    wanted = _provider(provider)
    source = _as_mapping(source)
    if isinstance(source, BaseMessage):
        return _from_message(source, wanted)
    return _from_payload(_read_mapping(source, "usage"), wanted)


def _from_payload(source: dict[Any, Any], provider: Provider | None) -> NormalizedUsage:
    """A provider's response, by the keys that tell which one, or a bare usage object."""
    model = _name(source.get("model"))
    response_id = _name(source.get("id"))
    kind = _name(source.get("object")) or _name(source.get("type"))
    fmt = None
    if kind == "response" or (kind is None and "output" in source and "usage" in source):
        fmt = "openai_responses"
    elif kind in ("chat.completion", "chat.completion.chunk"):
        fmt = "openai_chat"
    if fmt is not None:
        if source.get("usage") is None:  # still in progress, or a chunk before the usage chunk
            return NormalizedUsage(
                provider="openai", model=model, response_id=response_id, complete=False, raw=source
            )
        return _from_usage(
            source["usage"],
            provider=provider or "openai",
            path="usage.",
            model=model,
            response_id=response_id,
            complete=_finished(source.get("status")),
            fmt=fmt,
        )
    if kind == "message" and "usage" in source:
        return _from_usage(
            source["usage"],
            provider=provider or "anthropic",
            path="usage.",
            model=model,
            response_id=response_id,
            fmt="anthropic",
        )
    for key in ("usage_metadata", "usageMetadata"):
        if key in source:  # Gemini
            return _from_usage(
                source[key],
                provider=provider or "google",
                path=f"{key}.",
                fmt="gemini",
                model=model
                or _name(source.get("model_version"))
                or _name(source.get("modelVersion")),
                response_id=_name(source.get("response_id")) or _name(source.get("responseId")),
            )
    if "usage" in source and isinstance(source["usage"], Mapping):
        return _from_usage(
            source["usage"], provider=provider, path="usage.", model=model, response_id=response_id
        )
    return _from_usage(source, provider=provider, path="")


def reply_usage(reply: BaseMessage) -> NormalizedUsage:
    """A reply's usage to book: an unreadable payload is ``unknown`` (logged), never raised.

    Examples:
        >>> from langchain_core.messages import AIMessage
        >>> reply_usage(AIMessage("ok", usage_metadata={"input_tokens": 9, "output_tokens": 2, "total_tokens": 11})).input_total
        9
        >>> reply_usage(AIMessage("ok", id="a1", response_metadata={"token_usage": "garbage"})).status
        'unknown'
    """
    try:
        return normalize_usage(reply)
    except ContextManagementError as exc:
        log.warning("ctx-langgraph: unreadable usage on message %s: %s", reply.id, exc)
        return NormalizedUsage(complete=False, raw={"error": str(exc), "message_id": reply.id})
