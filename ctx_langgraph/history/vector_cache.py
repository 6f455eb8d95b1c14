"""The vectors of recently searched threads, in memory: read once, then only checked against
the thread's ``vector_version`` (and creation time); when it changed, only the vectors not held
yet are read. The least recently used entries go past ``max_bytes``."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_CACHE_BYTES", "ThreadVectors", "VectorCache"]

DEFAULT_CACHE_BYTES = 256 * 2**20
"""What a store's vector cache holds at most (about eight 10,000-event threads)."""


@dataclass(frozen=True)
class ThreadVectors:
    """Every vector of one thread under one index key, read at ``version`` of its
    ``incarnation``: per event its pk, revision, branch (into ``branch_names``) and seq, and
    its contiguous rows of ``matrix`` (from ``starts``, ``counts`` of them)."""

    incarnation: str
    version: int
    pks: Any
    revisions: Any
    branches: Any
    branch_names: tuple[str, ...]
    seqs: Any
    starts: Any
    counts: Any
    matrix: Any

    @classmethod
    def build(cls, incarnation: str, version: int, rows: Sequence[Any], dims: int) -> ThreadVectors:
        """From (event_pk, revision, branch, seq, vector blob) rows.

        Raises:
            ValueError: a blob that is not a whole number of ``dims``-float vectors.
        """
        import numpy as np

        blobs = [bytes(row[4]) for row in rows]
        counts = [len(blob) // (4 * dims) for blob in blobs]
        if any(n * 4 * dims != len(b) for n, b in zip(counts, blobs, strict=True)):
            raise ValueError(f"a stored vector is not a whole number of {dims}-float vectors")
        names = tuple(dict.fromkeys(str(row[2]) for row in rows))
        code = {name: n for n, name in enumerate(names)}
        sizes = np.asarray(counts, dtype=np.int64)
        return cls(
            incarnation,
            version,
            np.asarray([int(row[0]) for row in rows], dtype=np.int64),
            np.asarray([int(row[1]) for row in rows], dtype=np.int64),
            np.asarray([code[str(row[2])] for row in rows], dtype=np.int64),
            names,
            np.asarray([int(row[3]) for row in rows], dtype=np.int64),
            np.cumsum(sizes) - sizes,
            sizes,
            np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dims),
        )

    def stale(self, pks: Any, revisions: Any) -> tuple[Any, Any]:
        """Against the thread's (pk, revision) list now: which of this entry's events are
        still there at the same revision (a mask), and the pks to read (new or revised)."""
        import numpy as np

        if not len(pks):
            return np.zeros(len(self.pks), dtype=bool), []
        order = np.argsort(pks)
        listed, listed_revisions = pks[order], revisions[order]
        at = np.clip(np.searchsorted(listed, self.pks), 0, len(listed) - 1)
        kept = (listed[at] == self.pks) & (listed_revisions[at] == self.revisions)
        return kept, pks[~np.isin(pks, self.pks[kept])].tolist()

    def refreshed(self, version: int, kept: Any, rows: Sequence[Any], dims: int) -> ThreadVectors:
        """This entry without the events not ``kept``, with ``rows`` (as :meth:`build` takes
        them) added, at ``version``."""
        import numpy as np

        added = ThreadVectors.build(self.incarnation, version, rows, dims)
        names = tuple(dict.fromkeys((*self.branch_names, *added.branch_names)))
        recode = np.asarray([names.index(n) for n in added.branch_names] or [0], dtype=np.int64)
        counts = np.concatenate((self.counts[kept], added.counts))
        return ThreadVectors(
            self.incarnation,
            version,
            np.concatenate((self.pks[kept], added.pks)),
            np.concatenate((self.revisions[kept], added.revisions)),
            np.concatenate((self.branches[kept], recode[added.branches])),
            names,
            np.concatenate((self.seqs[kept], added.seqs)),
            np.cumsum(counts) - counts,
            counts,
            np.concatenate((self.matrix[np.repeat(kept, self.counts)], added.matrix)),
        )

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.pks.nbytes * 4)

    def _best(self, vector: Sequence[float], mask: Any) -> tuple[int, Any, Any]:
        """How many events ``mask`` selects, and the seqs and best cosines of those with
        vectors."""
        import numpy as np

        scored = mask & (self.counts > 0)
        if not scored.any():
            return int(mask.sum()), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        # einsum's own loop, not BLAS: no pool of BLAS threads waiting on a busy machine
        cosines = np.einsum("ij,j->i", self.matrix, np.asarray(vector, dtype=np.float32))
        filled = self.counts > 0
        best = np.zeros(len(self.pks), dtype=np.float32)
        best[filled] = np.maximum.reduceat(cosines, self.starts[filled])
        return int(mask.sum()), self.seqs[scored], best[scored]

    def scores_in(
        self, vector: Sequence[float], chain: Sequence[tuple[str, int | None]]
    ) -> tuple[int, Any, Any]:
        """The events of a branch (``chain``: its lineage, as
        :func:`~ctx_langgraph.history.branches.lineage` gives it) that have vectors here: how
        many, their seqs, and the best cosine of each with ``vector``."""
        import numpy as np

        mask = np.zeros(len(self.pks), dtype=bool)
        for name, bound in chain:
            if name in self.branch_names:
                on = self.branches == self.branch_names.index(name)
                mask |= on if bound is None else on & (self.seqs <= bound)
        return self._best(vector, mask)

    def scores_of(self, vector: Sequence[float], pks: Any) -> tuple[int, Any, Any]:
        """Like :meth:`scores_in`, for the events with these pks."""
        import numpy as np

        return self._best(vector, np.isin(self.pks, pks))


class VectorCache:
    """Thread vectors by (tenant, thread, index key), least recently used out first."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str, str], ThreadVectors] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0
        """Entries stored: a thread read whole, or refreshed with the vectors it lacked."""

    def get(self, key: tuple[str, str, str]) -> ThreadVectors | None:
        """The thread's entry, whatever version it was read at (the caller checks)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str, str], entry: ThreadVectors) -> None:
        with self._lock:
            self.loads += 1
            self._entries[key] = entry
            self._entries.move_to_end(key)
            total = sum(e.nbytes for e in self._entries.values())
            while total > self.max_bytes and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                total -= dropped.nbytes
