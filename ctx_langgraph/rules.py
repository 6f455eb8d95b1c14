"""Pinned rules: persistent instructions that stay in force after every compaction.

Read on every turn by ``ctx_budget`` (text, a file or a LangGraph store entry) and kept as the
view's first message, never recorded nor summarized; only the first ``max_lines`` lines and
``max_bytes`` bytes are loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import SystemMessage

from ctx_langgraph.view.pinned import HEADER, PINNED_MESSAGE_ID, is_pinned, pin, pinned_message

__all__ = ["HEADER", "PINNED_MESSAGE_ID", "PinnedRules", "is_pinned", "pin"]


@dataclass(frozen=True)
class PinnedRules:
    """Where the pinned rules come from: ``text``, a file ``path``, or a LangGraph ``store``
    entry (``namespace``/``key``, its value's ``"text"``). Exactly one source.

    Examples:
        >>> rules = PinnedRules(text="Always answer in French.\\nNever delete backups.")
        >>> message = rules.message(rules.load())
        >>> message.id, message.text.splitlines()[-1]
        ('ctx-pinned-rules', 'Never delete backups.')
        >>> PinnedRules(text="\\n".join(f"rule {n}" for n in range(500))).load().splitlines()[-1]
        '[pinned rules cut: only the first 200 lines / 25,000 bytes are loaded]'
    """

    text: str | None = None
    path: str | Path | None = None
    store: Any = None
    """A LangGraph ``BaseStore`` (InMemoryStore, SqliteStore, PostgresStore)."""
    namespace: tuple[str, ...] = ("ctx_rules",)
    key: str = "rules"
    max_lines: int = 200
    max_bytes: int = 25_000

    def __post_init__(self) -> None:
        sources = sum(x is not None for x in (self.text, self.path, self.store))
        if sources != 1:
            raise ValueError("PinnedRules needs exactly one source: text, path or store")
        if self.max_lines < 1 or self.max_bytes < 64:
            raise ValueError(
                f"max_lines must be >= 1 and max_bytes >= 64, got {self.max_lines} and "
                f"{self.max_bytes}"
            )

    @classmethod
    def from_file(
        cls, path: str | Path, *, max_lines: int = 200, max_bytes: int = 25_000
    ) -> PinnedRules:
        """Rules read from a file on every turn (a missing or empty file pins nothing)."""
        return cls(path=path, max_lines=max_lines, max_bytes=max_bytes)

    @classmethod
    def from_store(
        cls,
        store: Any,
        namespace: Sequence[str] = ("ctx_rules",),
        key: str = "rules",
        *,
        max_lines: int = 200,
        max_bytes: int = 25_000,
    ) -> PinnedRules:
        """Rules read from a LangGraph store entry (``{"text": ...}``) on every turn."""
        return cls(
            store=store,
            namespace=tuple(namespace),
            key=key,
            max_lines=max_lines,
            max_bytes=max_bytes,
        )

    def _limited(self, raw: str | None) -> str | None:
        if raw is None or not raw.strip():
            return None
        lines = raw.strip("\n").splitlines()
        text = "\n".join(lines[: self.max_lines])
        data = text.encode()
        cut = len(lines) > self.max_lines or len(data) > self.max_bytes
        if len(data) > self.max_bytes:
            text = data[: self.max_bytes].decode(errors="ignore").rsplit("\n", 1)[0]
        if cut:
            text += (
                f"\n[pinned rules cut: only the first {self.max_lines} lines / "
                f"{self.max_bytes:,} bytes are loaded]"
            )
        return text

    def _from_value(self, item: Any) -> str | None:
        value = getattr(item, "value", None) if item is not None else None
        if isinstance(value, dict):
            text = value.get("text")
            return text if isinstance(text, str) else None
        return None

    def load(self) -> str | None:
        """The rules as they are now, within the limits; None when there are none."""
        if self.text is not None:
            return self._limited(self.text)
        if self.path is not None:
            try:
                return self._limited(Path(self.path).read_text(encoding="utf-8"))
            except FileNotFoundError:
                return None
        return self._limited(self._from_value(self.store.get(self.namespace, self.key)))

    async def aload(self) -> str | None:
        """Async twin of :meth:`load` (the store is read with ``aget``)."""
        if self.store is None:
            return self.load()
        return self._limited(self._from_value(await self.store.aget(self.namespace, self.key)))

    @staticmethod
    def message(text: str) -> SystemMessage:
        """The view's pinned-rules message for ``text``."""
        return pinned_message(text)
