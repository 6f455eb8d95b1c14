"""A compaction request: ``context["compact"]`` read and checked.

A compaction can be asked for whatever the budget says (docs/design.md §6): by the user or the
app (graph input ``{"context": {"compact": {"instructions": "..."}}}``, from Studio too, or
:func:`~ctx_langgraph.compaction.compact_thread`), or by the model, with the tool
:func:`~ctx_langgraph.compaction.make_compact_tool` makes. ``ctx_budget`` routes a pending request to ``ctx_compact``, which
serves it once through the same commit protocol as an automatic compaction and clears it; the
instructions go to the summarizer and are recorded with the summary version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctx_langgraph.errors import CompactRequestError
from ctx_langgraph.state import CompactRequest

__all__ = ["MAX_INSTRUCTIONS_CHARS", "REQUESTERS", "compact_request", "read_request"]

MAX_INSTRUCTIONS_CHARS = 2_000
"""The longest instructions a request may carry (they go into every summarizer prompt)."""

REQUESTERS = ("user", "model", "app")
"""Who may ask for a compaction; recorded with the summary version."""


def compact_request(
    instructions: str | None = None,
    *,
    requested_by: str = "app",
    keep_recent_tokens: int | None = None,
) -> CompactRequest:
    """A checked compaction request, as ``context["compact"]`` holds it.

    Raises:
        CompactRequestError: instructions that are not text or longer than
            :data:`MAX_INSTRUCTIONS_CHARS`, an unknown ``requested_by``, a negative or non-integer
            ``keep_recent_tokens``.

    Examples:
        >>> compact_request("  keep the API design decisions ", requested_by="user")
        {'instructions': 'keep the API design decisions', 'requested_by': 'user'}
        >>> compact_request(42)
        Traceback (most recent call last):
        ...
        ctx_langgraph.errors.CompactRequestError: compaction request not served: instructions must be text, got int
    """
    if instructions is not None and not isinstance(instructions, str):
        raise CompactRequestError(f"instructions must be text, got {type(instructions).__name__}")
    text = (instructions or "").strip() or None
    if text is not None and len(text) > MAX_INSTRUCTIONS_CHARS:
        raise CompactRequestError(
            f"instructions are {len(text):,} characters, more than {MAX_INSTRUCTIONS_CHARS:,}: "
            "say in a sentence or two what the summary must keep"
        )
    if requested_by not in REQUESTERS:
        raise CompactRequestError(
            f"requested_by must be one of {', '.join(REQUESTERS)}, got {requested_by!r}"
        )
    request: CompactRequest = {"instructions": text, "requested_by": requested_by}
    if keep_recent_tokens is not None:
        if isinstance(keep_recent_tokens, bool) or not isinstance(keep_recent_tokens, int):
            raise CompactRequestError(
                f"keep_recent_tokens must be an integer, got {type(keep_recent_tokens).__name__}"
            )
        if keep_recent_tokens < 0:
            raise CompactRequestError(f"keep_recent_tokens must be >= 0, got {keep_recent_tokens}")
        request["keep_recent_tokens"] = keep_recent_tokens
    return request


def read_request(value: Any) -> tuple[CompactRequest | None, str | None]:
    """The request ``context["compact"]`` holds, or why it cannot be served.

    Accepted: None or False (no request), True (no instructions), a string (the instructions), or
    a mapping with ``instructions``, ``requested_by`` (default ``user``: a state input comes from
    a person or the app) and ``keep_recent_tokens``. Anything else is not raised (it came in
    through the state, and raising would fail every later turn of the thread): it comes back as
    the problem, for ``context["compaction"]["request_error"]``.

    Examples:
        >>> read_request("keep the deploy steps")
        ({'instructions': 'keep the deploy steps', 'requested_by': 'user'}, None)
        >>> read_request(None), read_request(True)[0]
        ((None, None), {'instructions': None, 'requested_by': 'user'})
        >>> read_request([1, 2])
        (None, 'a compaction request is true, text or a mapping, got list')
    """
    if value is None or value is False:
        return None, None
    try:
        if value is True:
            return compact_request(requested_by="user"), None
        if isinstance(value, str):
            return compact_request(value, requested_by="user"), None
        if isinstance(value, Mapping):
            unknown = sorted(str(k) for k in value if k not in CompactRequest.__annotations__)
            if unknown:
                raise CompactRequestError(f"unknown field(s) {', '.join(unknown)}")
            return (
                compact_request(
                    value.get("instructions"),
                    requested_by=str(value.get("requested_by") or "user"),
                    keep_recent_tokens=value.get("keep_recent_tokens"),
                ),
                None,
            )
    except CompactRequestError as exc:
        return None, exc.problem
    return None, f"a compaction request is true, text or a mapping, got {type(value).__name__}"
