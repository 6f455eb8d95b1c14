"""The history store's vector index: its configuration (``index``), embedding the events that
await a vector (``embed_pending``), and the query vector of a ranked search. The embedding
flow is written once and run sync or async (:mod:`ctx_langgraph.core.effects`)."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from typing_extensions import Self

from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.scope import checked_scope
from ctx_langgraph.errors import EmbeddingError
from ctx_langgraph.history import vectors as vector_ops
from ctx_langgraph.history._store import StoreBase, async_twin, flow_method
from ctx_langgraph.history.index import (
    SEARCH_MODES,
    IndexConfig,
    SearchMode,
    VectorIndex,
    encode_vectors,
    vector_index,
)
from ctx_langgraph.history.types import Scope
from ctx_langgraph.history.vector_cache import VectorCache

__all__ = ["DEFAULT_EMBED_LIMIT", "EmbedReport", "EmbeddingLedger", "VectorsAPI"]

log = logging.getLogger("ctx_langgraph.history")

DEFAULT_EMBED_LIMIT = 512
"""Events one :meth:`~VectorsAPI.embed_pending` call embeds at most (the rest stay pending)."""


@dataclass(frozen=True)
class EmbedReport:
    """What one :meth:`~VectorsAPI.embed_pending` did: events embedded, events still pending
    (without vectors of the index's model), tokens of its calls, the error that stopped it
    (the events it did not embed stay pending) and the seconds it took."""

    embedded: int = 0
    pending: int = 0
    tokens: int = 0
    error: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "embedded": self.embedded,
            "pending": self.pending,
            "tokens": self.tokens,
            "error": self.error,
            "seconds": round(self.seconds, 4),
        }


@runtime_checkable
class EmbeddingLedger(Protocol):
    """Where embedding calls are booked (:class:`~ctx_langgraph.usage.UsageLedger` is one):
    the op that books a call, run on the ledger's own database (``db``)."""

    db: Any

    def embedding_booking(
        self,
        call_key: str,
        *,
        scope: Scope | str,
        model: str,
        tokens: int,
        texts: int,
        estimated: bool = False,
    ) -> Any: ...


class VectorsAPI(StoreBase):
    """A history store's vector index (``index``: none by default, so search is by words)."""

    index: VectorIndex | None = None
    _vector_cache: VectorCache | None = None

    @property
    def vector_cache(self) -> VectorCache:
        """The vectors of recently searched threads (256 MB at most; see
        :mod:`~ctx_langgraph.history.vector_cache`)."""
        if self._vector_cache is None:
            self._vector_cache = VectorCache()
        return self._vector_cache

    def use_index(self, index: IndexConfig | VectorIndex | None) -> Self:
        """Search this store by meaning too: ``index`` like LangGraph's store index,
        ``{"embed": <Embeddings or "provider:model">, "dims": N}`` (see
        :class:`~ctx_langgraph.history.index.IndexConfig`); None turns it off. Returns the
        store. The stores' ``from_path`` and ``from_conn_string`` take ``index=`` too.

        Examples:
            >>> from langchain_core.embeddings import DeterministicFakeEmbedding
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> store = SQLiteHistoryStore.from_path(":memory:")
            >>> store.use_index({"embed": DeterministicFakeEmbedding(size=16), "dims": 16}).index.key
            'DeterministicFakeEmbedding@16'
            >>> store.close()
        """
        self.index = vector_index(index)
        return self

    def search_mode(self, mode: SearchMode | None) -> SearchMode:
        """``mode`` checked; None is ``hybrid`` with an index, else ``keyword``.

        Raises:
            ValueError: an unknown mode, or ``semantic``/``hybrid`` on a store without index.
        """
        if mode is None:
            return "keyword" if self.index is None else "hybrid"
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")
        if mode != "keyword" and self.index is None:
            raise ValueError(
                f"mode={mode!r} needs a vector index: open the store with index="
                "{'embed': ..., 'dims': N}"
            )
        return mode

    # ------------------------------------------------------------------ embedding

    @flow_method
    def embed_pending(
        self,
        scope: Scope | str,
        *,
        limit: int = DEFAULT_EMBED_LIMIT,
        ledger: EmbeddingLedger | None = None,
    ) -> Flow[EmbedReport]:
        """Embed the thread's visible events that have no vector of the index's model for
        their current text (new, revised, shown again, or made by another model), at most
        ``limit``, in batches; with ``ledger`` (a :class:`~ctx_langgraph.usage.UsageLedger`:
        ``ctx_usage`` and the lookup pass theirs) each call is booked there, purpose
        ``embedding``. Never raises for the model: a failure or timeout stops it, leaves the
        rest pending and is in the report.

        Examples:
            >>> from langchain_core.embeddings import DeterministicFakeEmbedding
            >>> from langchain_core.messages import HumanMessage
            >>> from ctx_langgraph.history import SQLiteHistoryStore
            >>> index = {"embed": DeterministicFakeEmbedding(size=16), "dims": 16}
            >>> with SQLiteHistoryStore.from_path(":memory:", index=index) as store:
            ...     _ = store.setup()
            ...     _ = store.append("t", [HumanMessage("The order id is A-1042", id="m1")])
            ...     report = store.embed_pending("t")
            ...     report.embedded, report.pending, report.error
            (1, 0, None)
        """
        scope = checked_scope(scope)
        index = self.index
        if index is None:
            return EmbedReport()
        started = time.monotonic()
        events, pending = yield from self._op(
            vector_ops.pending_events(scope, index.key, max(1, limit))
        )
        embedded = tokens = 0
        error: str | None = None
        for start in range(0, len(events), index.batch_size):
            batch = events[start : start + index.batch_size]
            units = [
                [] if e.copy else vector_ops.embed_units(e.text, e.role, e.name, index.text_chars)
                for e in batch
            ]
            texts = [text for unit in units for text in unit]
            try:
                vectors = (
                    (yield from call(index.embed_texts, index.aembed_texts, texts)) if texts else []
                )
            except EmbeddingError as exc:
                error = str(exc)[:300]
                log.warning("ctx-langgraph: embedding %d event(s) failed: %s", len(batch), error)
                break
            counted, exact = index.count_tokens(texts) if texts else (0, True)
            blobs, at = [], 0
            for unit in units:  # an event's vectors, one after the other
                blobs.append(b"".join(encode_vectors(vectors[at : at + len(unit)])))
                at += len(unit)
            each = counted // max(1, len(texts))
            rows = [
                (event, each * len(unit), blob)
                for event, unit, blob in zip(batch, units, blobs, strict=True)
            ]
            written = yield from self._op(
                vector_ops.put_event_vectors(scope, index.key, rows), write=True
            )
            embedded += written
            tokens += counted
            if ledger is not None and texts:
                yield from _book(ledger, scope, index, batch, counted, exact)
        return EmbedReport(
            embedded, max(0, pending - embedded), tokens, error, time.monotonic() - started
        )

    aembed_pending = async_twin(embed_pending)

    def _query_vector(self, query: str) -> Flow[tuple[list[float] | None, str | None]]:
        assert self.index is not None
        try:
            vector = yield from call(self.index.embed_query, self.index.aembed_query, query)
        except EmbeddingError as exc:
            log.warning("ctx-langgraph: a search fell back to words: %s", exc)
            return None, str(exc)[:300]
        return vector, None


def _book(
    ledger: EmbeddingLedger,
    scope: Scope,
    index: VectorIndex,
    batch: list[vector_ops.PendingEvent],
    tokens: int,
    exact: bool,
) -> Flow[None]:
    """Book one embedding call: its key is the batch's events and revisions, so booking the
    same batch twice books it once."""
    digest = hashlib.sha256(
        ",".join(f"{event.pk}.{event.revision}" for event in batch).encode()
    ).hexdigest()[:24]
    op = ledger.embedding_booking(
        f"embed:{index.key}:{digest}",
        scope=scope,
        model=index.model,
        tokens=tokens,
        texts=len(batch),
        estimated=not exact,
    )
    try:
        yield from call(ledger.db.run, ledger.db.arun, op, write=True)
    except Exception as exc:  # the vectors are written: a ledger failure is only logged
        log.warning("ctx-langgraph: an embedding call was not booked: %s", exc)
