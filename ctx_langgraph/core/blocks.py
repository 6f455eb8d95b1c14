"""A content block that is not text as one line of text: its kind and what identifies it
(names, mime type, URLs, ids; a payload by its size and SHA-256 digest, never pasted), read a
few levels deep. A block of an unexpected shape never raises.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["LONGEST_URL", "block_reference", "payload_label"]

LONGEST_URL: Final = 2_048
"""Longest URL shown whole; a longer one shows its start, length and digest."""

_URL_KEYS: Final = frozenset(
    ("url", "image_url", "file_url", "file_uri", "uri", "audio_url", "video_url", "document_url")
)
_NAME_KEYS: Final = ("filename", "file_name", "name", "title")
_MIME_KEYS: Final = ("mime_type", "media_type", "mimeType", "format")
_PAYLOAD_KEYS: Final = frozenset(("data", "base64", "file_data", "bytes"))
_OPAQUE_KEYS: Final = frozenset(
    ("signature", "encrypted_content", "encrypted_index", "cache_control")
)
_OPAQUE_KINDS: Final = frozenset(("redacted_thinking",))
_DEPTH: Final = 4
_ITEMS: Final = 64
_SHORT: Final = 300
_SPACES = re.compile(r"\s+")
_URLSAFE = re.compile(r"[A-Za-z0-9_-]+={0,2}")


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:8]


def payload_label(value: Any) -> str:
    """A payload by its size and digest: ``base64 N bytes``, ``N bytes`` or ``N chars``."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        return f"{len(raw):,} bytes {_digest(raw)}"
    text = str(value)
    decoded = _decoded(text)
    if decoded is None:
        return f"{len(text):,} chars {_digest(text.encode('utf-8', 'surrogatepass'))}"
    return f"base64 {len(decoded):,} bytes {_digest(decoded)}"


def _decoded(text: str) -> bytes | None:
    """The bytes of standard or URL-safe base64 (whitespace ignored), or None."""
    packed = _SPACES.sub("", text)
    if not packed:
        return None
    with contextlib.suppress(ValueError):  # binascii.Error is a ValueError
        return base64.b64decode(packed, validate=True)
    if len(packed) % 4 == 0 and _URLSAFE.fullmatch(packed):
        with contextlib.suppress(ValueError):
            return base64.urlsafe_b64decode(packed)
    return None


def _short(value: str) -> str:
    text = _SPACES.sub(" ", value).strip()
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "\u2026"


@dataclass
class _Reference:
    """What one block is shown by: names, mime types, then the rest."""

    names: list[str] = field(default_factory=list)
    mimes: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)

    def url(self, value: str) -> None:
        if value.startswith("data:"):
            header, comma, payload = value[5:].partition(",")
            if not comma:
                self.refs.append(payload_label(value))
                return
            mime = header.split(";")[0].strip()
            if mime:
                self.mimes.append(_short(mime))
            raw = payload if ";base64" in header else payload.encode("utf-8", "surrogatepass")
            self.refs.append(payload_label(raw))
        elif len(value) <= LONGEST_URL:
            self.refs.append(value.strip())
        else:
            digest = _digest(value.encode("utf-8", "surrogatepass"))
            self.refs.append(f"{value[:200]}\u2026 ({len(value):,} chars {digest})")

    def read(self, node: Any, depth: int) -> None:
        """Gather the references of a dict or a list, ``depth`` levels down."""
        if depth > _DEPTH:
            return
        if isinstance(node, list | tuple):
            for item in node[:_ITEMS]:
                self.read(item, depth + 1)
            return
        if not isinstance(node, dict):
            return
        textual = node.get("type") == "text"  # an Anthropic plain-text source
        for key, value in node.items():
            if not isinstance(key, str) or key in _OPAQUE_KEYS or key == "type":
                continue
            if key in _URL_KEYS and isinstance(value, str):
                self.url(value)
            elif key in _PAYLOAD_KEYS and value is not None and not isinstance(value, dict | list):
                if textual and isinstance(value, str):
                    self.refs.append(value)
                elif isinstance(value, str) and value.startswith("data:"):
                    self.url(value)
                else:
                    self.refs.append(payload_label(value))
            elif key == "text" and isinstance(value, str) and depth > 0:
                self.refs.append(value)
            elif key in _NAME_KEYS and isinstance(value, str) and value.strip():
                self.names.append(_short(value))
            elif key in _MIME_KEYS and isinstance(value, str) and value.strip():
                self.mimes.append(_short(value))
            elif (key == "id" or key.endswith(("_id", "Id"))) and isinstance(value, str | int):
                if not isinstance(value, bool) and str(value).strip():
                    self.refs.append(f"{key} {_short(str(value))}")
            elif isinstance(value, dict | list | tuple):
                self.read(value, depth + 1)

    def parts(self) -> Iterable[str]:
        return dict.fromkeys([*self.names, *self.mimes, *self.refs])


def _kind(block: dict[Any, Any]) -> tuple[str, Any]:
    """The block's kind, and the node its references are read from."""
    kind = block.get("type")
    if isinstance(kind, str) and kind:
        if kind == "non_standard" and isinstance(block.get("value"), dict):
            inner = block["value"].get("type")
            return (inner if isinstance(inner, str) and inner else kind), block
        return kind, block
    if len(block) == 1:
        ((key, value),) = block.items()
        if isinstance(key, str) and isinstance(value, dict):
            return key, value  # Bedrock's {"image": {"format": ..., "source": ...}}
    return "block", block


def block_reference(block: Any) -> str:
    """A content block as one line: its kind and what identifies it; text as it is."""
    if block is None:
        return ""
    if isinstance(block, str):
        return block
    if isinstance(block, bytes | bytearray | memoryview):
        return f"[bytes {payload_label(block)}]"
    if isinstance(block, list | tuple):
        return " ".join(shown for item in block[:_ITEMS] if (shown := block_reference(item)))
    if not isinstance(block, dict):
        text = str(block)
        return text if len(text) <= LONGEST_URL else payload_label(text)
    kind, node = _kind(block)
    reference = _Reference()
    if kind not in _OPAQUE_KINDS:
        reference.read(node, 0)
    return "[" + " ".join([_short(kind), *reference.parts()]) + "]"
