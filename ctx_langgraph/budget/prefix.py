"""The cacheable prefix of a request: its leading tokens identical to the previous request's.

A request is a sequence of parts (the tool schemas and a system prompt the model node adds, when
there are any, then each message), each with a digest of what the provider sees and a token
count. The cacheable prefix is the token sum of the leading parts whose digests equal the
previous request's, in order: what a provider's prompt cache can bill at a fraction of the price.
Everything that reports the figure (the ledger, ``context["cache"]``, the metering fake model,
the evaluation) measures with :func:`cacheable_prefix`.

Examples:
    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    >>> from ctx_langgraph.budget import TiktokenCounter
    >>> counter = TiktokenCounter("gpt-4o")
    >>> first = request_shape([SystemMessage("Be brief."), HumanMessage("hi")], counter)
    >>> second = request_shape(
    ...     [SystemMessage("Be brief."), HumanMessage("hi"), AIMessage("hello"), HumanMessage("bye")],
    ...     counter,
    ... )
    >>> cacheable_prefix(first.digests, second), second.input_tokens
    (12, 22)
    >>> cacheable_prefix(None, second)  # no previous request: nothing is cached yet
    0
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from ctx_langgraph.budget.counters import CountCache, TokenCounter

__all__ = [
    "DIGEST_CHARS",
    "RequestShape",
    "cacheable_prefix",
    "message_digest",
    "overhead_digest",
    "request_shape",
    "shared_parts",
]

DIGEST_CHARS = 12
"""Hex characters kept of a part's digest: enough to tell parts apart, small to store."""


@dataclass(frozen=True)
class RequestShape:
    """A request as the prefix measure sees it: one digest and one token count per part."""

    digests: tuple[str, ...]
    tokens: tuple[int, ...]

    @property
    def input_tokens(self) -> int:
        """The request's tokens, every part summed."""
        return sum(self.tokens)


def message_digest(message: BaseMessage) -> str:
    """A digest of what the provider sees of ``message`` (not its LangChain id)."""
    return CountCache.revision(message)[:DIGEST_CHARS]


def overhead_digest(tools: Sequence[Any] = (), system: str | None = None) -> str:
    """A digest of what precedes the messages: the tool schemas and the model node's prompt."""
    rendered = json.dumps([list(tools), system], sort_keys=True, default=str)
    return hashlib.blake2b(rendered.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()[
        :DIGEST_CHARS
    ]


def request_shape(
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    *,
    tools: Sequence[Any] = (),
    system: str | None = None,
    cache: CountCache | None = None,
    overhead_tokens: int | None = None,
) -> RequestShape:
    """The parts of a request of ``messages``: the overhead (``tools`` as OpenAI tool schemas
    and a ``system`` prompt the model node adds, counted as ``overhead_tokens`` when given),
    when there is any, then each message (counted through ``cache`` when given)."""
    digests: list[str] = []
    tokens: list[int] = []
    if tools or system:
        if overhead_tokens is None:
            overhead_tokens = counter.count_tools(list(tools)) if tools else 0
            if system:
                overhead_tokens += counter.count_message(SystemMessage(system))
        digests.append(overhead_digest(tools, system))
        tokens.append(overhead_tokens)
    for message in messages:
        revision = CountCache.revision(message)
        digests.append(revision[:DIGEST_CHARS])
        tokens.append(
            counter.count_message(message)
            if cache is None
            else cache.count(counter, message, revision)
        )
    return RequestShape(tuple(digests), tuple(tokens))


def shared_parts(previous: Sequence[str] | None, digests: Sequence[str]) -> int:
    """How many leading parts ``digests`` shares with ``previous``, in order.

    Examples:
        >>> shared_parts(["a", "b", "c"], ["a", "b", "x", "c"]), shared_parts(None, ["a"])
        (2, 0)
    """
    pairs = zip(digests, previous or (), strict=False)
    return sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], pairs))


def cacheable_prefix(previous: Sequence[str] | None, request: RequestShape) -> int:
    """The leading tokens of ``request`` identical to the previous request (its part digests;
    None when there was none)."""
    return sum(request.tokens[: shared_parts(previous, request.digests)])
