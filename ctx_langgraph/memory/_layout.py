"""Where memory records live on a LangGraph ``BaseStore`` (``(root, tenant, scope, owner)``,
with a version token per namespace so a process caches active records until another writes),
and the batches, as effects, that read and write them.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchOp

from ctx_langgraph.core.effects import Flow, call
from ctx_langgraph.core.text import query_terms
from ctx_langgraph.errors import MemoryStoreError
from ctx_langgraph.memory.types import RECORD_FORMAT, MemoryRecord

Namespace = tuple[str, ...]


class Entry(NamedTuple):
    """An active record, the words its key and content are ranked by, its normalized content."""

    record: MemoryRecord
    terms: frozenset[str]
    norm: str


def label(value: str) -> str:
    """A namespace label for any id (LangGraph labels cannot hold '.' or NUL)."""
    return value.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")


def norm(text: str) -> str:
    """``text``'s words, lower-cased and single-spaced: two contents that say the same."""
    return " ".join(re.findall(r"\w+", text.lower()))


def entry(record: MemoryRecord) -> Entry:
    terms = frozenset(query_terms(f"{record.key or ''} {record.content}"))
    return Entry(record, terms, norm(record.content))


def batch(store: BaseStore, ops: list[Op]) -> Flow[list[Any]]:
    """The results of ``ops``, run as one batch; a store failure is a ``MemoryStoreError``."""
    try:
        try:
            results: list[Any] = yield from call(store.batch, store.abatch, ops)
        except NotImplementedError:  # a sync-only store (SqliteStore): off the loop
            results = yield from call(
                store.batch, lambda ops: asyncio.to_thread(store.batch, ops), ops
            )
    except Exception as exc:
        raise MemoryStoreError(f"the memory store failed: {exc!r:.300}") from exc
    return results


class RecordSpace:
    """The namespaces of one memory under ``root`` on ``store``, and this process's cache of
    their active records (at most ``cache_namespaces`` namespaces, least recently used out)."""

    def __init__(self, store: BaseStore, root: str, page_size: int, cache_namespaces: int) -> None:
        self.store = store
        self.root = root
        self.page_size = page_size
        self.cache_namespaces = cache_namespaces
        self.cache: OrderedDict[Namespace, tuple[str, list[Entry]]] = OrderedDict()

    def namespace(self, tenant: str, kind: str, owner: str) -> Namespace:
        return (self.root, label(tenant), kind, label(owner))

    def tenant_prefix(self, tenant: str) -> Namespace:
        return (self.root, label(tenant))

    def of(self, record: MemoryRecord) -> Namespace:
        return self.namespace(record.tenant, record.scope, record.owner)

    def _meta(self, namespace: Namespace) -> Namespace:
        """Where a namespace's version token lives (outside the records' prefix)."""
        return (f"{self.root}_meta", *namespace[1:])

    def search(self, prefix: Namespace, filter: dict[str, Any]) -> Flow[list[MemoryRecord]]:
        """Every record of this memory under ``prefix`` matching ``filter``, page by page."""
        records: list[MemoryRecord] = []
        offset = 0
        while True:
            ours = {"format": RECORD_FORMAT, **filter}
            op = SearchOp(prefix, filter=ours, limit=self.page_size, offset=offset)
            [items] = yield from batch(self.store, [op])
            records += [_read(item) for item in items]
            if len(items) < self.page_size:
                return records
            offset += len(items)

    @property
    def indexed(self) -> bool:
        """Whether the LangGraph store has a vector index (recall then ranks by meaning too)."""
        return bool(getattr(self.store, "index_config", None))

    def meaning(
        self, namespaces: Sequence[Namespace], query: str, limit: int
    ) -> Flow[dict[str, float]]:
        """The similarity of each namespace's best ``limit`` active records to ``query``, by id,
        from the store's own semantic search (none without an index or a query)."""
        if not self.indexed or not query.strip():
            return {}
        ours = {"format": RECORD_FORMAT, "status": "active"}
        ops: list[Op] = [SearchOp(ns, filter=ours, limit=limit, query=query) for ns in namespaces]
        found = yield from batch(self.store, ops)
        return {
            item.key: float(item.score)
            for items in found
            for item in items
            if getattr(item, "score", None) is not None
        }

    def write(
        self, puts: Sequence[MemoryRecord], deletes: Sequence[MemoryRecord] = ()
    ) -> Flow[None]:
        """Write records in one batch and stamp every touched namespace with a new version."""
        touched = sorted({self.of(r) for r in (*puts, *deletes)})
        if not touched:
            return
        cached = [ns for ns in touched if ns in self.cache]
        tokens = {ns: uuid.uuid4().hex for ns in touched}
        ops: list[Op] = [GetOp(self._meta(ns), "version") for ns in cached]
        ops += [PutOp(self.of(r), r.id, None) for r in deletes]
        # a store with a vector index embeds a record's content, not its bookkeeping
        ops += [PutOp(self.of(r), r.id, r.to_json(), index=["content"]) for r in puts]
        ops += [
            PutOp(self._meta(ns), "version", {"token": tokens[ns]}, index=False) for ns in touched
        ]
        results = yield from batch(self.store, ops)
        changed = {r.id for r in (*puts, *deletes)}
        for namespace, item in zip(cached, results, strict=False):
            seen = item.value.get("token") if item is not None else None
            cached_entry = self.cache.get(namespace)
            if cached_entry is None or seen != cached_entry[0]:
                self.cache.pop(namespace, None)
                continue
            kept = [e for e in cached_entry[1] if e.record.id not in changed]
            kept += [entry(r) for r in puts if r.status == "active" and self.of(r) == namespace]
            self.cache[namespace] = (tokens[namespace], kept)

    def active(self, namespaces: Sequence[Namespace]) -> Flow[dict[Namespace, list[Entry]]]:
        """The active records of each namespace with their search terms (cached per version)."""
        if not namespaces:
            return {}
        ops: list[Op] = [GetOp(self._meta(ns), "version") for ns in namespaces]
        items = yield from batch(self.store, ops)
        found: dict[Namespace, list[Entry]] = {}
        for namespace, item in zip(namespaces, items, strict=True):
            token = item.value.get("token") if item is not None else None
            cached = self.cache.get(namespace)
            if token is not None and cached is not None and cached[0] == token:
                self.cache.move_to_end(namespace)
                found[namespace] = cached[1]
                continue
            records = yield from self.search(namespace, {"status": "active"})
            entries = [entry(record) for record in records]
            if token is not None:
                self.cache[namespace] = (str(token), entries)
                while len(self.cache) > self.cache_namespaces:
                    self.cache.popitem(last=False)
            found[namespace] = entries
        return found


def _read(item: Item) -> MemoryRecord:
    try:
        return MemoryRecord.from_json(item.value)
    except (KeyError, TypeError, ValueError) as exc:
        raise MemoryStoreError(
            f"memory record {item.key!r} in {item.namespace} cannot be read: {exc!r}"
        ) from exc
