"""The embedding model of a strategy with a vector index, counted: calls, texts, tokens and
the seconds they took, so the cost table shows what recall by meaning costs."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings

__all__ = ["CountingEmbeddings", "EmbeddingTotals"]


@dataclass(frozen=True)
class EmbeddingTotals:
    """Embedding work so far: calls, texts, tokens (as the model counts them) and seconds."""

    calls: int = 0
    texts: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def __sub__(self, other: EmbeddingTotals) -> EmbeddingTotals:
        return EmbeddingTotals(
            self.calls - other.calls,
            self.texts - other.texts,
            self.tokens - other.tokens,
            self.seconds - other.seconds,
        )


class CountingEmbeddings(Embeddings):
    """``inner`` with its work counted (thread-safe); its ``model`` and ``count_tokens`` are
    the inner model's, so the index stores the inner model's id.

    Examples:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> counted = CountingEmbeddings(DeterministicFakeEmbedding(size=4))
        >>> _ = counted.embed_documents(["a", "b"]); _ = counted.embed_query("c")
        >>> counted.totals().calls, counted.totals().texts
        (2, 3)
    """

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.model = getattr(inner, "model", None) or type(inner).__qualname__
        self._lock = threading.Lock()
        self._totals = EmbeddingTotals()

    def totals(self) -> EmbeddingTotals:
        return self._totals

    def count_tokens(self, texts: list[str]) -> list[int]:
        counter = getattr(self.inner, "count_tokens", None)
        if callable(counter):
            return list(counter(texts))
        return [max(1, len(text) // 4) for text in texts]

    def _add(self, texts: list[str], started: float) -> None:
        seconds = time.perf_counter() - started
        tokens = sum(self.count_tokens(texts))
        with self._lock:
            t = self._totals
            self._totals = EmbeddingTotals(
                t.calls + 1, t.texts + len(texts), t.tokens + tokens, t.seconds + seconds
            )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = self.inner.embed_documents(texts)
        self._add(texts, started)
        return vectors

    def embed_query(self, text: str) -> list[float]:
        started = time.perf_counter()
        vector = self.inner.embed_query(text)
        self._add([text], started)
        return vector
