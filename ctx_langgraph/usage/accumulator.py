"""``UsageAccumulator``: fold a stream of events into one provisional-then-final usage.

The rules (docs/design.md §7): cumulative fields overwrite, true deltas add, missing fields are
not zeroed, stale events (by sequence number) are rejected, and the final value replaces the
provisional one.

| stream | usage arrives | semantics |
|---|---|---|
| Anthropic SSE | ``message_start`` (input side), every ``message_delta`` | cumulative snapshots |
| OpenAI Responses | only ``response.completed`` / ``.incomplete`` / ``.failed`` | final value |
| Chat Completions (``include_usage``) | the last chunk (some servers: every chunk) | cumulative snapshots |
| LangChain ``AIMessageChunk`` | per chunk | deltas (``add_usage`` semantics), except chunks from Anthropic, whose ``usage_metadata`` repeats the cumulative ``message_delta`` |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage

from ctx_langgraph.usage.normalize import _anthropic, _as_mapping, _provider, normalize_usage
from ctx_langgraph.usage.types import NormalizedUsage, Provider, UsageCounts

__all__ = ["UsageAccumulator"]

_RESPONSES_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def _add(older: NormalizedUsage, delta: NormalizedUsage) -> NormalizedUsage:
    """Field-wise sum where unknown + x = x and unknown + unknown = unknown."""

    def plus(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else a + b

    old, new = older.counts(), delta.counts()
    sums = UsageCounts(
        input_total=plus(old["input_total"], new["input_total"]),
        input_uncached=plus(old["input_uncached"], new["input_uncached"]),
        cache_read=plus(old["cache_read"], new["cache_read"]),
        cache_write=plus(old["cache_write"], new["cache_write"]),
        output=plus(old["output"], new["output"]),
        reasoning=plus(old["reasoning"], new["reasoning"]),
    )
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

    # ------------------------------------------------------------------ folding

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
                self._snapshot(
                    replace(usage, complete=terminal)
                    if terminal
                    else replace(usage, complete=False)
                )
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
        last = getattr(chunk, "chunk_position", None) == "last"
        if usage.known:
            if usage.provider == "anthropic":
                self._snapshot(replace(usage, complete=False))  # cumulative message_delta values
            elif self._usage is None:
                self._usage = replace(usage, complete=False)
            else:
                self._usage = replace(_add(self._usage, usage), complete=False)
        elif self._usage is not None:
            self._usage = usage.merged_over(self._usage)
        else:
            self._usage = replace(usage, complete=False)
        if last:
            self.finish()
        return True
