"""The vector index part of ``history_store.py --index``: after the load, one thread of
``--index-events`` (10,000) LoCoMo-like events is embedded with the local model (the
``embeddings`` extra) and searched by meaning (``semantic``) and by words and meaning
(``hybrid``), in the store that holds the whole load, whose other events get vectors too.

Query vectors are computed first and timed apart (``query_embed_*``); the timed searches get
them from a lookup table, so a search's latency is the store's alone. The model is timed on the
first backend only; the second gets the same vectors from memory (``embed_*`` is ``null``). The first search of the
thread reads its vectors into the store's cache (``cold_search_ms``); the others check that
they did not change (one row) and read the filtered events when a filter is set. After the
timed searches, five turns each add two events and embed them; the next search reads the
thread's (event, revision) list and only those vectors (``refresh_search_ms``: the median).
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from ctx_langgraph.embeddings import LOCAL_MODEL_ID, MiniLMEmbeddings
from ctx_langgraph.history import HistoryStore, Scope
from ctx_langgraph.history.vectors import embed_units
from ctx_langgraph.storage.statements import Op, Stmt

INDEX_P95_TARGET_MS = 20.0  # search by meaning, 10,000-event thread, query embedding apart
THREAD = "conv-index"
NAMES = ["Caroline", "Melanie", "Jon", "Gina", "Nate", "Joanna"]
ASKS = [
    "What did {name} do at {place}?",
    "When did {name} go {hobby}?",
    "What does {name} like to cook for the {relation}?",
    "How did {name} feel about the {event}?",
    "Which book did {name} read recently?",
    "What did {name} buy and when does it arrive?",
    "Where is {name} planning to travel?",
    "What hobby helps {name} relax after work?",
]
SLOTS = {
    "place": ["the museum", "the beach", "the park", "Tokyo", "the library"],
    "hobby": ["hiking", "kayaking", "camping", "running"],
    "relation": ["kids", "mom", "partner", "friends"],
    "event": ["charity race", "art show", "support group", "concert"],
}


class Remembered(Embeddings):
    """The local model, remembering every vector it made: the second backend of a run gets the
    first one's vectors (the model's speed does not depend on the store; it is timed once)."""

    model = LOCAL_MODEL_ID
    made: dict[str, list[float]] = {}  # noqa: RUF012 (shared on purpose, across backends)

    def __init__(self) -> None:
        self.inner = MiniLMEmbeddings()
        self.first = not self.made
        """No backend ran before: every text goes through the model (repeats too)."""

    def count_tokens(self, texts: list[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.first:
            vectors = self.inner.embed_documents(texts)
            self.made.update(zip(texts, vectors, strict=True))
            return vectors
        return [self.made[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class Precomputed(Embeddings):
    """The query vectors computed before the timed searches, by text (the index's model id, so
    the vectors written by the real model are the ones searched)."""

    model = LOCAL_MODEL_ID

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]


def questions(seed: int, count: int) -> list[str]:
    rng = random.Random(f"{seed}/index-questions")
    return [
        rng.choice(ASKS).format(
            name=rng.choice(NAMES), **{k: rng.choice(v) for k, v in SLOTS.items()}
        )
        for _ in range(count)
    ]


def _fill_others(tenant: str, blob: bytes, key: str, threads: Sequence[str]) -> Op[int]:
    """Every event of the other threads gets one vector (its payload's size is the point, not
    its value): the vector table holds the whole store, as an index on every thread would."""
    filled = 0
    for thread in threads:
        filled += yield Stmt(
            "INSERT INTO ctx_event_vectors (event_pk, tenant, thread_id, branch, seq, revision, "
            "model, tokens, vector) SELECT pk, tenant, thread_id, branch, seq, revision, ?, 1, ? "
            "FROM ctx_events WHERE tenant = ? AND thread_id = ?",
            (key, blob, tenant, thread),
            "rowcount",
        )
    return filled


def _search_after_a_turn(
    store: HistoryStore,
    scope: Scope,
    question: str,
    thread_turns: Callable[[int], Any],
    model: Embeddings,
    vectors: dict[str, list[float]],
) -> float:
    """Five turns of two new events each, embedded, then one search (the cache reads only
    them): the median of the five searches, in ms."""
    extra = list(thread_turns(10))
    timed: list[float] = []
    for turn in range(5):
        pair = extra[2 * turn : 2 * turn + 2]
        for item in pair:
            item.message.id = f"{item.message.id}-after"
        store.append(scope, [t.message for t in pair], created_at=[t.created_at for t in pair])
        store.use_index({"embed": model, "dims": 384})
        store.embed_pending(scope)
        store.use_index({"embed": Precomputed(vectors), "dims": 384})
        begin = time.perf_counter()
        store.rank(scope, question, mode="semantic")
        timed.append((time.perf_counter() - begin) * 1000)
    return statistics.median(timed)


def pct(values: list[float], p: int) -> float:
    return round(statistics.quantiles(values, n=100, method="inclusive")[p - 1], 3)


def bench_index(
    store: HistoryStore,
    thread_turns: Callable[[int], Any],
    threads: Sequence[str],
    args: Any,
    progress: Callable[[str], None],
    settle: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Load, embed and search the index thread; the figures of ``--json``'s ``index`` key.
    ``settle`` brings the store to the state it settles in after a bulk write (PostgreSQL:
    VACUUM ANALYZE, as after the load), before the timed searches."""
    scope = Scope(THREAD)
    messages = list(thread_turns(args.index_events))
    for start in range(0, len(messages), args.batch):
        chunk = messages[start : start + args.batch]
        store.append(scope, [c.message for c in chunk], created_at=[c.created_at for c in chunk])
    model = Remembered()
    store.use_index({"embed": model, "dims": 384})
    assert store.index is not None
    units = sum(
        len(embed_units(str(c.message.content), c.message.type, None, 2000)) for c in messages
    )
    begin = time.perf_counter()
    report = store.embed_pending(scope, limit=len(messages))
    embed_s = time.perf_counter() - begin
    progress(f"  embedded {report.embedded:,} events ({units:,} texts) in {embed_s:.1f}s")
    blob = np.ones((1, 384), dtype="<f4").tobytes()
    begin = time.perf_counter()
    filled = store.db.run(_fill_others("default", blob, store.index.key, threads), write=True)
    progress(f"  {filled:,} vectors for the other threads in {time.perf_counter() - begin:.0f}s")
    settle()  # the thread and the vectors were written in bulk, like the load before them
    asked = questions(args.seed, args.queries)
    vectors: dict[str, list[float]] = {}
    query_ms: list[float] = []
    for text in dict.fromkeys(asked):
        begin = time.perf_counter()
        vectors[text] = model.inner.embed_query(text)
        query_ms.append((time.perf_counter() - begin) * 1000)
    store.use_index({"embed": Precomputed(vectors), "dims": 384})
    begin = time.perf_counter()
    store.rank(scope, asked[0], mode="semantic")
    cold_ms = (time.perf_counter() - begin) * 1000
    timed: dict[str, list[float]] = {"semantic": [], "hybrid": [], "filtered": []}
    for text, mode in itertools.product(asked, ("semantic", "hybrid", "filtered")):
        options: dict[str, Any] = {"mode": "semantic" if mode == "filtered" else mode}
        if mode == "filtered":
            options["roles"] = "human"
        begin = time.perf_counter()
        hits = store.rank(scope, text, limit=60, **options)
        timed[mode].append((time.perf_counter() - begin) * 1000)
        assert hits and hits.unembedded == 0
    timed_embedding = model.first
    refresh_ms = _search_after_a_turn(store, scope, asked[0], thread_turns, model.inner, vectors)
    figures = {
        "events": report.embedded,
        "texts": units,
        "embed_s": round(embed_s, 1) if timed_embedding else None,
        "embed_events_per_s": round(report.embedded / embed_s, 1) if timed_embedding else None,
        "embed_texts_per_s": round(units / embed_s, 1) if timed_embedding else None,
        "embed_tokens": report.tokens,
        "query_embed_p50_ms": pct(query_ms, 50),
        "query_embed_p95_ms": pct(query_ms, 95),
        "cold_search_ms": round(cold_ms, 2),
        "refresh_search_ms": round(refresh_ms, 2),
        "other_vectors": filled,
    }
    for mode, values in timed.items():
        figures[f"{mode}_p50_ms"] = pct(values, 50)
        figures[f"{mode}_p95_ms"] = pct(values, 95)
    return figures


def index_rows(sq: dict[str, Any], pg: dict[str, Any] | None) -> list[tuple[str, ...]]:
    """The table's rows for the index figures: (name, sqlite, postgres, target, marks)."""

    def cell(side: dict[str, Any] | None, key: str, fmt: str) -> str:
        value = None if side is None or side.get("index") is None else side["index"][key]
        return "-" if value is None else fmt.format(value)

    def mark(side: dict[str, Any] | None, key: str) -> str:
        if side is None or side.get("index") is None:
            return "-"
        return "PASS" if side["index"][key] <= INDEX_P95_TARGET_MS else "FAIL"

    index = sq["index"]
    rows: list[tuple[str, ...]] = [
        (f"index: {index['events']:,}-event thread, {index['texts']:,} texts embedded",),
        ("  embedding (events/s)", cell(sq, "embed_events_per_s", "{:,.0f}"), cell(pg, "embed_events_per_s", "{:,.0f}")),
        ("  embedding (texts/s)", cell(sq, "embed_texts_per_s", "{:,.0f}"), cell(pg, "embed_texts_per_s", "{:,.0f}")),
        ("  query embedding p50 (ms)", cell(sq, "query_embed_p50_ms", "{:,.2f}"), cell(pg, "query_embed_p50_ms", "{:,.2f}")),
        ("  query embedding p95 (ms)", cell(sq, "query_embed_p95_ms", "{:,.2f}"), cell(pg, "query_embed_p95_ms", "{:,.2f}")),
        ("  first search, vectors read (ms)", cell(sq, "cold_search_ms", "{:,.2f}"), cell(pg, "cold_search_ms", "{:,.2f}")),
        ("  search after a turn (ms)", cell(sq, "refresh_search_ms", "{:,.2f}"), cell(pg, "refresh_search_ms", "{:,.2f}")),
    ]  # fmt: skip
    for mode in ("semantic", "hybrid", "filtered"):
        for p in ("p50", "p95"):
            key = f"{mode}_{p}_ms"
            gated = p == "p95"
            target = f"<= {INDEX_P95_TARGET_MS:g} ms" if gated else ""
            marks = (mark(sq, key), mark(pg, key)) if gated else ("", "")
            name = f"  {p} {mode}{' (role filter)' if mode == 'filtered' else ''} (ms)"
            rows.append((name, cell(sq, key, "{:,.2f}"), cell(pg, key, "{:,.2f}"), target, *marks))
    return rows
