"""Streamed calls that report their usage (:func:`asks_stream_usage`, for a model the package
holds), or one clear warning that they do not (:func:`warn_unknown_usage`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

__all__ = ["asks_stream_usage", "warn_unknown_usage"]

log = logging.getLogger("ctx_langgraph.usage")

_WARNED: set[tuple[str, str, bool]] = set()
_WARNED_LOCK = threading.Lock()


def _asked(model: BaseChatModel) -> bool:
    """Whether the model says itself if a stream reports usage."""
    if getattr(model, "stream_usage", None) is not None:
        return True
    model_kwargs = getattr(model, "model_kwargs", None)
    options = model_kwargs.get("stream_options") if isinstance(model_kwargs, Mapping) else None
    return isinstance(options, Mapping) and "include_usage" in options


def asks_stream_usage(model: Any) -> Any:
    """``model``, or a copy that asks for usage in a streamed call when its integration has a
    ``stream_usage`` setting left unset (``ChatOpenAI`` with a ``base_url``)."""
    if not isinstance(model, BaseChatModel) or "stream_usage" not in type(model).model_fields:
        return model
    if _asked(model):
        return model
    return model.model_copy(update={"stream_usage": True})


def _endpoint(serialized: Mapping[str, Any] | None) -> tuple[str, str]:
    """The model class and endpoint of a call, from its serialized model."""
    serialized = serialized or {}
    ids = serialized.get("id")
    name = str(ids[-1]) if isinstance(ids, list) and ids else str(serialized.get("name") or "")
    kwargs = serialized.get("kwargs")
    kwargs = kwargs if isinstance(kwargs, Mapping) else {}
    for key in ("openai_api_base", "base_url", "anthropic_api_url", "azure_endpoint", "endpoint"):
        if isinstance(kwargs.get(key), str):
            return name or "chat model", str(kwargs[key])
    return name or "chat model", "its default endpoint"


def warn_unknown_usage(serialized: Mapping[str, Any] | None, *, streamed: bool) -> bool:
    """Warn once per model class, endpoint and streamed-or-not that a call reported no usage;
    True when this call warned."""
    name, endpoint = _endpoint(serialized)
    key = (name, endpoint, streamed)
    with _WARNED_LOCK:
        if key in _WARNED:
            return False
        _WARNED.add(key)
    if streamed:
        log.warning(
            "ctx-langgraph: a streamed call of %s at %s reported no usage, so its tokens and cost "
            "are booked as unknown (the inspector says 'no usage reported'). A chat-completions "
            "stream carries usage only when the request asks for it: create the model with "
            "stream_usage=True (ChatOpenAI(..., base_url=..., stream_usage=True), which sends "
            "stream_options={'include_usage': true}); LangChain asks on its own only on OpenAI's "
            "own URL. If the server rejects stream_options, it cannot report streamed usage: "
            "call the model without streaming. (Said once per model and endpoint.)",
            name,
            endpoint,
        )
    else:
        log.warning(
            "ctx-langgraph: a call of %s at %s reported no usage, so its tokens and cost are "
            "booked as unknown (the inspector says 'no usage reported'). The provider or proxy "
            "sent no usage field; check that it returns OpenAI's 'usage' (or the provider's "
            "own). (Said once per model and endpoint.)",
            name,
            endpoint,
        )
    return True
