"""A loopback HTTP server that replays provider wire format (JSON bodies and SSE streams), so the
real ``ChatOpenAI`` / ``ChatAnthropic`` clients can be tested end to end without a network.

In metering mode (:meth:`ProviderReplay.meter`) a path answers every request itself, with usage
computed from the request as a provider with a prompt cache reports it: the input tokens of
the request (tiktoken of its tool schemas, system prompt and messages as sent), and as cache
reads the longest common token prefix with the previous request of the same thread (the
``x-ctx-thread`` header, one thread per server without it).
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    events: list[tuple[str | None, Any]] | None = None
    """SSE events as (event name or None, data): data is JSON-encoded unless it is a str."""


@dataclass
class ProviderReplay:
    replies: dict[str, deque[Reply]] = field(default_factory=lambda: defaultdict(deque))
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""
    answer: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    """A reply body computed from each request, for a path whose queue is empty."""
    metered: dict[str, Callable[[dict[str, Any]], str]] = field(default_factory=dict)
    """Paths in metering mode: the reply text for each request (usage computed from it)."""
    previous: dict[str, list[int]] = field(default_factory=dict)
    """Each thread's previous request, as tokens (metering mode)."""
    usages: list[dict[str, Any]] = field(default_factory=list)
    """What metering mode reported for each request: input, cache_read, thread, path."""

    def meter(self, path: str, text: Callable[[dict[str, Any]], str] | str = "Done.") -> None:
        """Answer every request of ``path`` with ``text`` (or ``text(body)``) and usage
        computed from the request (chat completions or Anthropic messages wire format)."""
        self.metered[path] = text if callable(text) else (lambda body: text)

    def _metered(self, path: str, body: dict[str, Any], thread: str) -> Reply:
        tokens = _request_tokens(path, body)
        before = self.previous.get(thread, [])
        cached = 0
        for mine, theirs in zip(tokens, before, strict=False):
            if mine != theirs:
                break
            cached += 1
        self.previous[thread] = tokens
        self.usages.append(
            {"path": path, "thread": thread, "input": len(tokens), "cache_read": cached}
        )
        text = self.metered[path](body)
        number = len(self.usages)
        if path.endswith("/messages"):
            usage = {
                "input_tokens": len(tokens) - cached,
                "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0,
                "output_tokens": _encoding().encode(text).__len__(),
            }
            return Reply(body=anthropic_message(f"msg_metered_{number}", usage, text))
        usage = {
            "prompt_tokens": len(tokens),
            "completion_tokens": len(_encoding().encode(text)),
            "total_tokens": len(tokens) + len(_encoding().encode(text)),
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        if body.get("stream"):  # as a real server: a usage chunk only when the request asks
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            stream = chat_completion_stream(f"chatcmpl-metered-{number}", usage, text, include)
            return Reply(events=stream)
        return Reply(body=chat_completion(f"chatcmpl-metered-{number}", usage, text))

    def json(self, path: str, body: Any, status: int = 200) -> None:
        self.replies[path].append(Reply(status=status, body=body))

    def sse(self, path: str, events: list[tuple[str | None, Any]]) -> None:
        self.replies[path].append(Reply(events=events))


def _handler(replay: ProviderReplay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.split("?")[0]
            replay.requests.append((path, body))
            queue = replay.replies.get(path)
            if not queue and path in replay.metered:
                thread = self.headers.get("x-ctx-thread") or "default"
                with _METER_LOCK:
                    queue = deque([replay._metered(path, body, thread)])
            if not queue and path in replay.answer:
                answered = replay.answer[path](body)  # a body, or a whole Reply (SSE)
                queue = deque([answered if isinstance(answered, Reply) else Reply(body=answered)])
            if not queue:
                self.send_response(404)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(
                    json.dumps({"error": {"message": f"no reply queued for {path}"}}).encode()
                )
                return
            reply = queue.popleft()
            self.send_response(reply.status)
            if reply.events is None:
                payload = json.dumps(reply.body).encode()
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for name, data in reply.events:
                text = data if isinstance(data, str) else json.dumps(data)
                frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                self.wfile.write(frame.encode())
                self.wfile.flush()

    return Handler


_METER_LOCK = threading.Lock()


def _encoding() -> Any:
    import tiktoken

    from ctx_langgraph.budget.counters import ensure_offline_encodings

    ensure_offline_encodings()
    return tiktoken.get_encoding("o200k_base")


def _request_tokens(path: str, body: dict[str, Any]) -> list[int]:
    """The request's tokens in the order a provider renders it: tool schemas, system prompt,
    then the messages (each as its JSON on the wire)."""
    encoding = _encoding()
    parts: list[Any] = []
    if body.get("tools"):
        parts.append(body["tools"])
    if path.endswith("/messages") and body.get("system"):
        parts.append(body["system"])
    parts += list(body.get("messages") or [])
    tokens: list[int] = []
    for part in parts:
        tokens += encoding.encode(json.dumps(part, sort_keys=True), disallowed_special=())
    return tokens


@contextmanager
def serve() -> Iterator[ProviderReplay]:
    replay = ProviderReplay()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replay))
    replay.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield replay
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------- wire formats


def anthropic_message(
    msg_id: str,
    usage: dict[str, Any],
    text: str = "Done.",
    blocks: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Messages API reply; ``blocks`` (a compaction block) come before the text."""
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [*(blocks or []), {"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def anthropic_compaction_block(summary: str | None, n: int) -> dict[str, Any]:
    """A compaction block as the API returns it (``BetaCompactionBlock``)."""
    return {
        "type": "compaction",
        "content": summary,
        "encrypted_content": f"EqAB{n:04d}==",
        "signature": f"sig_{n:04d}",
        "tool_changes": [],
    }


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """A compaction block streamed as the API streams it: the start carries the block without
    its content, one ``compaction_delta`` carries the content and the encrypted content."""
    start = {**block, "content": None, "encrypted_content": None}
    delta = {
        "type": "compaction_delta",
        "content": block.get("content"),
        "encrypted_content": block.get("encrypted_content"),
    }
    return [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def anthropic_stream(
    msg_id: str,
    start_usage: dict[str, Any],
    deltas: list[dict[str, Any]],
    text: str = "Done.",
    blocks: list[dict[str, Any]] | None = None,
) -> list:
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **anthropic_message(msg_id, start_usage),
                    "content": [],
                    "stop_reason": None,
                },
            },
        ),
    ]
    for index, block in enumerate(blocks or ()):
        events += _block_events(index, block)
    at = len(blocks or ())
    events += [
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": at,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": at,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": at}))
    for i, usage in enumerate(deltas):
        last = i == len(deltas) - 1
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn" if last else None, "stop_sequence": None},
                    "usage": usage,
                },
            )
        )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def chat_completion(cmpl_id: str, usage: dict[str, Any], text: str = "Done.") -> dict[str, Any]:
    return {
        "id": cmpl_id,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": usage,
    }


def chat_completion_stream(
    cmpl_id: str, usage: dict[str, Any], text: str = "Done.", include_usage: bool = True
) -> list:
    base = {
        "id": cmpl_id,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-4o-2024-08-06",
    }
    events: list[tuple[str | None, Any]] = [
        (
            None,
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
                "usage": None,
            },
        ),
        (
            None,
            {
                **base,
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
                "usage": None,
            },
        ),
        (
            None,
            {
                **base,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": None,
            },
        ),
        (None, {**base, "choices": [], "usage": usage}),
        (None, "[DONE]"),
    ]
    if not include_usage:  # stream_options.include_usage not asked: no usage chunk
        del events[-2]
    return events


def responses_body(
    resp_id: str, usage: dict[str, Any], text: str = "Done.", status: str = "completed"
) -> dict[str, Any]:
    return {
        "id": resp_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": "gpt-4.1-2025-04-14",
        "output": [
            {
                "type": "message",
                "id": "msg_" + resp_id,
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


def responses_stream(
    resp_id: str,
    usage: dict[str, Any],
    text: str = "Done.",
    output: list[dict[str, Any]] | None = None,
) -> list:
    """A Responses stream of one text message; ``output`` items (a server-side compaction
    item...) come first, each as ``response.output_item.added`` then ``.done``."""
    events = _responses_stream(resp_id, usage, text, len(output or ()))
    if not output:
        return events
    extra: list[tuple[str | None, Any]] = []
    for index, item in enumerate(output):
        for kind in ("response.output_item.added", "response.output_item.done"):
            extra.append(
                (kind, {"type": kind, "sequence_number": 0, "output_index": index, "item": item})
            )
    events = [*events[:2], *extra, *events[2:]]
    completed = events[-1][1]["response"]
    completed["output"] = [*output, *completed["output"]]
    for number, (_name, data) in enumerate(events):
        data["sequence_number"] = number
    return events


def _responses_stream(resp_id: str, usage: dict[str, Any], text: str, first: int) -> list:
    pending = {
        **responses_body(resp_id, None, text),
        "status": "in_progress",
        "output": [],
        "usage": None,
    }  # type: ignore[arg-type]
    item = {
        "type": "message",
        "id": "msg_" + resp_id,
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    seq = iter(range(100))
    return [
        (
            "response.created",
            {"type": "response.created", "sequence_number": next(seq), "response": pending},
        ),
        (
            "response.in_progress",
            {"type": "response.in_progress", "sequence_number": next(seq), "response": pending},
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": first,
                "item": item,
            },
        ),
        (
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": first,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": first,
                "content_index": 0,
                "delta": text,
                "logprobs": [],
            },
        ),
        (
            "response.output_text.done",
            {
                "type": "response.output_text.done",
                "sequence_number": next(seq),
                "item_id": item["id"],
                "output_index": first,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            },
        ),
        (
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": responses_body(resp_id, usage, text),
            },
        ),
    ]


# ----------------------------------------------------------------------------- error replies
# The bodies the providers send when a request is rejected (HTTP status, JSON body), as their
# documentation and real replies show them.


def openai_context_length_error(limit: int = 128_000, used: int = 130_012) -> dict[str, Any]:
    """Chat completions, HTTP 400: the request is longer than the model's context window."""
    return {
        "error": {
            "message": f"This model's maximum context length is {limit} tokens. However, your "
            f"messages resulted in {used} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


RESPONSES_CONTEXT_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)


def responses_context_length_error() -> dict[str, Any]:
    """Responses API, HTTP 400: the input is longer than the model's context window."""
    return {
        "error": {
            "message": RESPONSES_CONTEXT_MESSAGE,
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }


def responses_error_events(shape: str) -> list[tuple[str | None, Any]]:
    """A Responses stream that starts and then fails on the context window: an ``error`` event
    (``flat``: code and message on the event; ``nested``: an ``error`` object) or a
    ``response.failed`` event (``failed``)."""
    created = responses_stream("resp_err", {}, "")[0]
    if shape == "flat":
        event: dict[str, Any] = {
            "type": "error",
            "code": "context_length_exceeded",
            "message": RESPONSES_CONTEXT_MESSAGE,
            "param": "input",
            "sequence_number": 1,
        }
        return [created, ("error", event)]
    if shape == "nested":
        event = {
            "type": "error",
            "sequence_number": 1,
            "error": {
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
                "message": RESPONSES_CONTEXT_MESSAGE,
                "param": "input",
            },
        }
        return [created, ("error", event)]
    failed = {
        **responses_body("resp_err", None, ""),  # type: ignore[arg-type]
        "status": "failed",
        "output": [],
        "usage": None,
        "error": {"code": "context_length_exceeded", "message": RESPONSES_CONTEXT_MESSAGE},
    }
    return [
        created,
        ("response.failed", {"type": "response.failed", "sequence_number": 1, "response": failed}),
    ]


def openai_error(
    message: str, *, code: str | None, param: str | None = None, kind: str = "invalid_request_error"
) -> dict[str, Any]:
    """Any other OpenAI error body (an invalid tool schema, a rate limit, ...)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An Anthropic error body (HTTP 400 for ``invalid_request_error``, 413 for
    ``request_too_large``, 429 for ``rate_limit_error``)."""
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CVjxiYzEFcAQC4Fk87zw2",
    }


def anthropic_prompt_too_long(used: int = 215_000, limit: int = 200_000) -> dict[str, Any]:
    """Anthropic, HTTP 400: the prompt is longer than the model's context window."""
    return anthropic_error(f"prompt is too long: {used} tokens > {limit} maximum")
