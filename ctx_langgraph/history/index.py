"""The history store's vector index configuration, shaped like LangGraph's ``BaseStore`` index
(``{"embed": ..., "dims": N}``), and its embedding calls: bounded, timed out, checked. Vectors
are unit-length little-endian float32 under :attr:`VectorIndex.key` (model id and dims)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from typing_extensions import TypedDict

from ctx_langgraph.errors import EmbeddingError

__all__ = [
    "DEFAULT_EMBED_CHARS",
    "SEARCH_MODES",
    "IndexConfig",
    "SearchMode",
    "VectorIndex",
    "encode_vectors",
    "vector_index",
]

SearchMode = Literal["keyword", "semantic", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("keyword", "semantic", "hybrid")
DEFAULT_EMBED_CHARS = 2000
"""Characters of an event's text embedded (its start: a model reads a few hundred words)."""
_MODEL_ID = re.compile(r"[^A-Za-z0-9_.:/@+-]+")


class IndexConfig(TypedDict, total=False):
    """A history store's vector index, as LangGraph's ``BaseStore`` index is configured.

    ``embed`` and ``dims`` are required; the rest have defaults.
    """

    embed: Embeddings | str
    """A LangChain ``Embeddings``, or a ``"provider:model"`` string for langchain's
    ``init_embeddings``."""
    dims: int
    """The vectors' dimensions (checked on every call)."""
    model: str
    """The model's id, stored with every vector (default: the ``embed`` string, or the
    object's ``model``/``model_name``, or its class name). Another id re-embeds everything."""
    text_chars: int
    """Characters of an event's text embedded (default 2,000)."""
    batch_size: int
    """Texts per embedding call (default 64)."""
    timeout_s: float
    """Seconds an embedding call may take before it is given up (default 30); the events
    stay pending and are embedded later."""


def _model_id(embed: Any, given: object) -> str:
    if given is not None:
        if not isinstance(given, str) or not given.strip():
            raise ValueError("index['model'] must be a non-empty string")
        return _MODEL_ID.sub("-", given.strip())[:200]
    if isinstance(embed, str):
        return _MODEL_ID.sub("-", embed)[:200]
    for attribute in ("model", "model_name", "model_id"):
        value = getattr(embed, attribute, None)
        if isinstance(value, str) and value.strip():
            return _MODEL_ID.sub("-", value.strip())[:200]
    return type(embed).__qualname__


def _resolve(embed: object) -> Embeddings:
    if isinstance(embed, str):
        try:
            from langchain.embeddings import init_embeddings
        except ImportError as exc:  # pragma: no cover - langchain is a dependency
            raise ImportError("an embedding model named by a string needs langchain") from exc
        resolved: Any = init_embeddings(embed)
        return resolved  # type: ignore[no-any-return]
    if not isinstance(embed, Embeddings):
        raise TypeError(
            "index['embed'] must be a LangChain Embeddings or a 'provider:model' string, got "
            f"{type(embed).__name__}"
        )
    return embed


def _positive(config: dict[str, Any], name: str, default: float, kind: type) -> Any:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"index[{name!r}] must be a positive number, got {value!r}")
    if kind is int and not isinstance(value, int):
        raise ValueError(f"index[{name!r}] must be a whole number, got {value!r}")
    return kind(value)


class _Workers:
    """The thread pool sync model calls run on, replaced when a call outlives its timeout."""

    SIZE = 4
    """Calls that may run at once (more wait for a thread)."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(
        self, method: Any, value: Any
    ) -> tuple[concurrent.futures.ThreadPoolExecutor, concurrent.futures.Future[Any]]:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self.SIZE, thread_name_prefix="ctx-embed"
                )
            return self._pool, self._pool.submit(method, value)

    def abandon(self, pool: concurrent.futures.ThreadPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False)


@dataclass(frozen=True)
class VectorIndex:
    """A checked :class:`IndexConfig`: the embedding model and how it is called."""

    embed: Embeddings
    dims: int
    model: str
    text_chars: int = DEFAULT_EMBED_CHARS
    batch_size: int = 64
    timeout_s: float = 30.0
    _workers: _Workers = field(default_factory=_Workers, compare=False, repr=False)

    @property
    def key(self) -> str:
        """What every vector of this index is stored under: model id and dimensions."""
        return f"{self.model}@{self.dims}"

    def checked(self, vectors: object, count: int) -> list[list[float]]:
        """``vectors`` as the model returned them, checked: ``count`` of them, each of
        :attr:`dims` finite numbers, not all zero (EmbeddingError naming what is wrong)."""
        if not isinstance(vectors, list | tuple) or len(vectors) != count:
            got = len(vectors) if isinstance(vectors, list | tuple) else type(vectors).__name__
            raise EmbeddingError(f"the embedding model returned {got} vectors for {count} texts")
        checked: list[list[float]] = []
        for vector in vectors:
            try:
                values = [float(x) for x in vector]
            except (TypeError, ValueError):
                raise EmbeddingError(
                    "the embedding model returned a vector of non-numbers"
                ) from None
            if len(values) != self.dims:
                raise EmbeddingError(
                    f"the embedding model returned {len(values)} dimensions, the index says "
                    f"dims={self.dims}"
                )
            norm = math.sqrt(sum(x * x for x in values))
            if not math.isfinite(norm) or norm == 0:
                raise EmbeddingError("the embedding model returned a zero or non-finite vector")
            checked.append([x / norm for x in values])
        return checked

    def _bounded(self, method: Any, value: Any) -> Any:
        """``method(value)`` within :attr:`timeout_s`, any failure an EmbeddingError."""
        pool, future = self._workers.submit(method, value)
        try:
            return future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            self._workers.abandon(pool)
            raise EmbeddingError(f"the embedding model took over {self.timeout_s:g} s") from None
        except Exception as exc:
            raise _failed(exc) from exc

    async def _abounded(self, call: Any) -> Any:
        """Async twin of :meth:`_bounded`: the awaitable ``call``."""
        try:
            return await asyncio.wait_for(call, timeout=self.timeout_s)
        except asyncio.TimeoutError:
            raise EmbeddingError(f"the embedding model took over {self.timeout_s:g} s") from None
        except Exception as exc:
            raise _failed(exc) from exc

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """The documents' vectors, within :attr:`timeout_s` (EmbeddingError otherwise)."""
        return self.checked(self._bounded(self.embed.embed_documents, list(texts)), len(texts))

    async def aembed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Async twin of :meth:`embed_texts`."""
        vectors = await self._abounded(self.embed.aembed_documents(list(texts)))
        return self.checked(vectors, len(texts))

    def embed_query(self, text: str) -> list[float]:
        """A query's vector (EmbeddingError when the model fails or times out)."""
        return self.checked([self._bounded(self.embed.embed_query, text)], 1)[0]

    async def aembed_query(self, text: str) -> list[float]:
        """Async twin of :meth:`embed_query`."""
        return self.checked([await self._abounded(self.embed.aembed_query(text))], 1)[0]

    def count_tokens(self, texts: Sequence[str]) -> tuple[int, bool]:
        """Tokens the texts cost, and whether the model counted them (``count_tokens``, as
        :class:`~ctx_langgraph.embeddings.MiniLMEmbeddings` has) or they are an estimate
        (4 characters a token)."""
        counter = getattr(self.embed, "count_tokens", None)
        if callable(counter):
            try:
                return sum(int(n) for n in counter(list(texts))), True
            except Exception:  # an estimate is booked instead
                pass
        return sum(max(1, len(text) // 4) for text in texts), False


def _failed(exc: Exception) -> EmbeddingError:
    return EmbeddingError(f"the embedding model failed: {type(exc).__name__}: {exc}")


def vector_index(config: IndexConfig | VectorIndex | None) -> VectorIndex | None:
    """``config`` checked (TypeError or ValueError naming the field), or None without one.

    Examples:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> index = vector_index({"embed": DeterministicFakeEmbedding(size=8), "dims": 8})
        >>> index.key, index.text_chars
        ('DeterministicFakeEmbedding@8', 2000)
        >>> vector_index({"embed": DeterministicFakeEmbedding(size=8)})
        Traceback (most recent call last):
        ...
        ValueError: index needs 'dims' (the vectors' dimensions), as LangGraph's store index does
    """
    if config is None or isinstance(config, VectorIndex):
        return config
    if not isinstance(config, dict):
        raise TypeError(f"index must be a dict like {{'embed': ..., 'dims': N}}, got {config!r}")
    unknown = set(config) - set(IndexConfig.__annotations__)
    if unknown:
        raise ValueError(
            f"index has unknown fields {sorted(unknown)}; it takes {list(IndexConfig.__annotations__)}"
        )
    if "embed" not in config:
        raise ValueError("index needs 'embed' (a LangChain Embeddings or 'provider:model')")
    if "dims" not in config:
        raise ValueError(
            "index needs 'dims' (the vectors' dimensions), as LangGraph's store index does"
        )
    try:
        import numpy  # noqa: F401  (searches by meaning score in NumPy)
    except ImportError:  # pragma: no cover - numpy comes with the embeddings extra
        raise ImportError(
            'a vector index needs numpy: pip install numpy, or "ctx-langgraph[embeddings]"'
        ) from None
    raw: dict[str, Any] = dict(config)
    embed = raw["embed"]
    return VectorIndex(
        embed=_resolve(embed),
        dims=_positive(raw, "dims", 0, int),
        model=_model_id(embed, raw.get("model")),
        text_chars=_positive(raw, "text_chars", DEFAULT_EMBED_CHARS, int),
        batch_size=_positive(raw, "batch_size", 64, int),
        timeout_s=_positive(raw, "timeout_s", 30.0, float),
    )


def encode_vectors(vectors: Sequence[Sequence[float]]) -> list[bytes]:
    """Each vector as the bytes a store keeps (little-endian float32)."""
    import numpy as np

    return [np.asarray(vector, dtype="<f4").tobytes() for vector in vectors]
