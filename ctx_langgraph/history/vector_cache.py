"""The vectors of recently searched threads, in memory: a search by meaning reads a thread's
vectors once, then only checks that they did not change (one row: the thread's
``vector_version``, bumped in every transaction that writes or drops a vector of it, and
its creation time, since a thread deleted and made again counts from 0 again).

Without it, each search would read every vector of the thread again (a 10,000-event thread:
some 30 MB). Entries are immutable; the least recently used ones go past ``max_bytes``.
"""

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
    """Every vector of one thread under one index key, as read at ``version``: per event (by
    ascending event pk) its branch (an index into ``branch_names``), seq, and the rows of
    ``matrix`` that are its vectors."""

    version: str
    pks: Any
    branches: Any
    branch_names: tuple[str, ...]
    seqs: Any
    starts: Any
    matrix: Any

    @classmethod
    def build(cls, version: str, rows: Sequence[Any], dims: int) -> ThreadVectors:
        """From (event_pk, branch, seq, vector blob) rows in event pk order.

        Raises:
            ValueError: a blob that is not a whole number of ``dims``-float vectors.
        """
        import numpy as np

        blobs = [bytes(row[3]) for row in rows]
        counts = [len(blob) // (4 * dims) for blob in blobs]
        if any(n < 1 or n * 4 * dims != len(b) for n, b in zip(counts, blobs, strict=True)):
            raise ValueError(f"a stored vector is not a whole number of {dims}-float vectors")
        names = tuple(dict.fromkeys(str(row[1]) for row in rows))
        code = {name: n for n, name in enumerate(names)}
        return cls(
            version,
            np.asarray([int(row[0]) for row in rows], dtype=np.int64),
            np.asarray([code[str(row[1])] for row in rows], dtype=np.int64),
            names,
            np.asarray([int(row[2]) for row in rows], dtype=np.int64),
            np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64),
            np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dims),
        )

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.pks.nbytes * 4)

    def _best(self, vector: Sequence[float], mask: Any) -> tuple[int, Any, Any]:
        import numpy as np

        if not mask.any():
            return 0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        cosines = self.matrix @ np.asarray(vector, dtype=np.float32)
        best = np.maximum.reduceat(cosines, self.starts)
        return int(mask.sum()), self.seqs[mask], best[mask]

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
        """Times a thread's vectors were read from the database (a miss)."""

    def get(self, key: tuple[str, str, str], version: str) -> ThreadVectors | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.version != version:
                return None
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
