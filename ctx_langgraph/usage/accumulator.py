"""``UsageAccumulator``: fold a stream of events into one provisional-then-final usage.
Cumulative fields overwrite (Anthropic, Chat Completions snapshots), LangChain chunk deltas add
(except Anthropic's, which repeat the cumulative value), missing fields are not zeroed, stale
events are rejected, and the final value replaces the provisional one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage

from ctx_langgraph.usage.normalize import _anthropic, _as_mapping, _provider, normalize_usage
from ctx_langgraph.usage.types import COUNT_FIELDS, NormalizedUsage, Provider

__all__ = ["UsageAccumulator"]

_RESPONSES_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def _add(older: NormalizedUsage, delta: NormalizedUsage) -> NormalizedUsage:
    """Field-wise sum where unknown + x = x and unknown + unknown = unknown."""
    sums: dict[str, Any] = {}
    for name in COUNT_FIELDS:
        a, b = getattr(older, name), getattr(delta, name)
        sums[name] = b if a is None else a if b is None else a + b
    return replace(delta.merged_over(older), **sums)


class UsageAccumulator:
    """One call's usage, built from its stream events.

    Examples:
        >>> acc = UsageAccumulator()
        >>> acc.add({"type": "message_start", "message": {"id": "msg_1", "model": "claude-sonnet-4-5",
        ...     "usage": {"input_tokens": 50, "cache_read_input_tokens": 18000,
        ...               "cache_creation_input_tokens": 1200, "output_tokens": 1}}})
        True
        >>> for output in (30, 80, 120):  # cumulative: 120 in the end, not 230
        ...     _ = acc.add({"type": "message_delta", "usage": {"output_tokens": output}})
        >>> acc.add({"type": "message_stop"})
        True
        >>> acc.final, acc.usage.input_total, acc.usage.output, acc.usage.response_id
        (True, 19250, 120, 'msg_1')
    """

    def __init__(self, *, provider: str | None = None) -> None:
        self._provider: Provider | None = _provider(provider)
        self._usage: NormalizedUsage | None = None
        self._final = False
        self._last_seq: int | None = None

    @property
    def usage(self) -> NormalizedUsage | None:
        """The current value: provisional (``complete=False``) until the stream's final event."""
        return self._usage

    @property
    def final(self) -> bool:
        return self._final

    def finish(self) -> NormalizedUsage | None:
        """Mark the stream ended (for streams without a terminal event) and return the value."""
        self._final = True
        if self._usage is not None:
            self._usage = replace(self._usage, complete=True)
        return self._usage

    def _snapshot(self, new: NormalizedUsage) -> None:
        self._usage = new if self._usage is None else new.merged_over(self._usage)

    def _seq_ok(self, seq: Any) -> bool:
        if seq is None:
            return True
        seq = int(seq)
        if self._last_seq is not None and seq <= self._last_seq:
            return False
        self._last_seq = seq
        return True

    def add(self, event: Any, *, seq: int | None = None) -> bool:
        """Fold one event in; returns False when the event was rejected (stale, or after the final).

        Args:
            event: a raw provider stream event (dict or SDK object) or a LangChain ``AIMessageChunk``.
            seq: the event's position when the event itself carries none (OpenAI Responses events
                carry ``sequence_number``).
        """
        if self._final:
            return False
        event = _as_mapping(event)
        if isinstance(event, BaseMessage):
            return self._seq_ok(seq) and self._add_chunk(event)
        if not self._seq_ok(event.get("sequence_number", seq)):
            return False
        kind = event.get("type") or event.get("object")
        if kind == "message_start":
            message = event.get("message") or {}
            usage = normalize_usage(
                {**message, "type": "message", "usage": message.get("usage") or {}}
            )
            self._snapshot(replace(usage, complete=False))
        elif kind == "message_delta":
            usage = event.get("usage")
            if isinstance(usage, Mapping):
                counts = _anthropic(usage, "usage.")
                self._snapshot(
                    NormalizedUsage(**counts, provider="anthropic", complete=False, raw=dict(usage))
                )
        elif kind == "message_stop":
            self.finish()
        elif isinstance(kind, str) and kind.startswith("response."):
            response = event.get("response")
            if isinstance(response, Mapping):
                usage = normalize_usage({**response, "object": "response"})
                terminal = kind in _RESPONSES_TERMINAL and usage.known
                self._snapshot(replace(usage, complete=terminal))
                if terminal:
                    self._usage = usage  # the final replaces the provisional
                    self._final = True
        elif kind == "chat.completion.chunk":
            if event.get("usage") is not None:
                usage = normalize_usage(event)
                self._snapshot(replace(usage, complete=False))
                if not event.get("choices"):  # the include_usage chunk closes the stream
                    self.finish()
        else:
            return False
        return True

    def _add_chunk(self, chunk: BaseMessage) -> bool:
        usage = normalize_usage(chunk, provider=self._provider)
        if usage.known:
            if usage.provider == "anthropic":
                self._snapshot(replace(usage, complete=False))  # cumulative message_delta values
            else:
                added = usage if self._usage is None else _add(self._usage, usage)
                self._usage = replace(added, complete=False)
        else:
            self._usage = (
                replace(usage, complete=False)
                if self._usage is None
                else usage.merged_over(self._usage)
            )
        if getattr(chunk, "chunk_position", None) == "last":
            self.finish()
        return True
