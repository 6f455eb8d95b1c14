"""A compaction request: ``context["compact"]`` read and checked (docs/design.md §6)."""

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
    """A checked compaction request, as ``context["compact"]`` holds it; a
    :class:`~ctx_langgraph.errors.CompactRequestError` when it is not one."""
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
    """The request ``context["compact"]`` holds (None, True, text or a mapping), or why it
    cannot be served (never raised: it came in through the state)."""
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
