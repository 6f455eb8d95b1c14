"""One codec for the opaque paging cursors: a JSON object, base64url-encoded without padding."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

__all__ = ["MAX_CURSOR_CHARS", "decode_cursor", "encode_cursor"]

MAX_CURSOR_CHARS = 8192
"""Longer text is not a cursor this package wrote (it is refused before decoding)."""


def encode_cursor(payload: dict[str, Any]) -> str:
    """``payload`` as an opaque cursor string."""
    raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: object) -> dict[str, Any]:
    """The JSON object inside a cursor made by :func:`encode_cursor`; ValueError when it is not
    one."""
    if not isinstance(cursor, str):
        raise ValueError(f"a cursor is a string, not {type(cursor).__name__}")
    text = cursor.strip()
    if len(text) > MAX_CURSOR_CHARS:
        raise ValueError("too long to be a cursor")
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error, RecursionError) as exc:
        raise ValueError(f"not a cursor: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("not a cursor: not a JSON object")
    return data
