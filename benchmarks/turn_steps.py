"""Where a turn goes: timers on ours' steps, the store's round trips, the checkpointed bytes.

Used by ``agent_turn.py``: each measure installs its probes for the turns it times and takes
them out after (nothing of it stays in the package). The probes wrap module-level names where
the nodes look them up at call time, so they see the same functions a user's graph runs:

- :class:`StepTimers`: wall time per step of ``ctx_budget`` (record; reconcile with the store;
  the view; the estimate; the decision; the prefix and make-up; the report), of the model call,
  of ``ctx_usage`` (normalize; record and book) and of the checkpointer's writes;
- :class:`RoundTrips`: transactions and statements run on the history store's database
  (SQLite or PostgreSQL), from the runner every operation goes through;
- :class:`SerializedBytes`: bytes the checkpointer's serializer wrote.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from ctx_langgraph.budget import node as budget_node
from ctx_langgraph.compaction import node as compact_node
from ctx_langgraph.storage import postgres as pg_storage
from ctx_langgraph.storage import sqlite as sqlite_storage
from ctx_langgraph.usage import node as usage_node
from ctx_langgraph.usage.ledger import UsageLedger

# fmt: off
BUDGET_STEPS: dict[str, tuple[str, ...]] = {
    "budget: record": ("record",),
    "budget: reconcile": ("reconcile_edits", "pin_rules", "note_server_compaction",
                          "learn_and_recall", "apply_store_summary", "project_for_provider",
                          "repair_view"),
    "budget: view": ("cap_tool_results", "clear_old_tool_results", "apply_replacements",
                     "bump_epoch"),
    "budget: estimate": ("estimate_request", "fit_memory", "count_exactly"),
    "budget: decide": ("decide",),
    "budget: prefix and make-up": ("measure_prefix",),
    "budget: report": ("budget_update",),
}
USAGE_STEPS: dict[str, tuple[str, ...]] = {
    "usage: normalize": ("reply_usage", "_compaction_usages"),
    "usage: record and book": ("_record_reply",),
}
COMPACT_STEPS: dict[str, tuple[str, ...]] = {
    "compact: locate the span": ("locate_span",),
    "compact: snapshot": ("take_snapshot", "reconcile_with"),
    "compact: summarize (the summarizer)": ("write_summary",),
    "compact: commit": ("create_candidate", "commit_candidate", "commit_precomputed"),
}
# fmt: on
STEPS = (*BUDGET_STEPS, "model call", *USAGE_STEPS, "checkpoint write")


def _timed(function: Callable[..., Any], add: Callable[[float], None]) -> Callable[..., Any]:
    """``function`` timed into ``add``; a generator function (an effect flow) is timed over its
    whole run, the store calls it yields included."""
    if inspect.isgeneratorfunction(function):

        @functools.wraps(function)
        def flow(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return (yield from function(*args, **kwargs))
            finally:
                add(time.perf_counter() - began)

        return flow

    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            add(time.perf_counter() - began)

    return timed


class StepTimers:
    """Seconds per step, summed over the turns run inside :meth:`installed`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def _adder(self, step: str) -> Callable[[float], None]:
        def add(seconds: float) -> None:
            self.seconds[step] += seconds

        return add

    @contextlib.contextmanager
    def installed(self, model: Any, saver: Any, *, compaction: bool = False) -> Iterator[None]:
        """The probes on the nodes' modules, ``model``'s ``_generate`` and ``saver``'s writes."""
        patches: list[tuple[Any, str, Any]] = []
        groups = [(budget_node, BUDGET_STEPS), (usage_node, USAGE_STEPS)]
        if compaction:
            groups.append((compact_node, COMPACT_STEPS))
        for module, steps in groups:
            for step, names in steps.items():
                for name in names:
                    original = getattr(module, name)
                    patches.append((module, name, original))
                    setattr(module, name, _timed(original, self._adder(step)))
        for name in ("record", "arecord"):  # a booking made on its own (another database)
            original = getattr(UsageLedger, name)
            patches.append((UsageLedger, name, original))
            setattr(UsageLedger, name, _timed(original, self._adder("usage: record and book")))
        for target, name, step in (
            (model, "_generate", "model call"),
            (saver, "put", "checkpoint write"),
            (saver, "put_writes", "checkpoint write"),
        ):
            original = getattr(target, name)
            object.__setattr__(target, name, _timed(original, self._adder(step)))
            patches.append((target, name, None))
        try:
            yield
        finally:
            for target, name, original in reversed(patches):
                if original is None:
                    object.__delattr__(target, name)
                else:
                    setattr(target, name, original)


class RoundTrips:
    """Transactions and statements run on a history store's database, SQLite or PostgreSQL
    (a round trip to the server each, plus BEGIN and COMMIT per transaction)."""

    def __init__(self) -> None:
        self.transactions = 0
        self.statements = 0
        self.operations: dict[str, int] = defaultdict(int)

    @property
    def round_trips(self) -> int:
        """Statements, and a BEGIN and a COMMIT per transaction."""
        return self.statements + 2 * self.transactions

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        patches: list[tuple[Any, str, Any]] = []

        def transaction(original: Callable[..., Any]) -> Callable[..., Any]:
            def counted(db: Any, op: Any, *, write: bool) -> Any:
                self.transactions += 1
                self.operations[getattr(op, "__name__", "?")] += 1
                return original(db, op, write=write)

            return counted

        def statement(original: Callable[..., Any]) -> Callable[..., Any]:
            def counted(*args: Any) -> Any:  # (transaction, stmt) or (database, cursor, stmt)
                self.statements += 1
                return original(*args)

            return counted

        for database in (sqlite_storage.SQLiteDatabase, pg_storage.PostgresDatabase):
            for name in ("_execute", "_aexecute"):
                original = database.__dict__[name]
                patches.append((database, name, original))
                wrapped = transaction(original)
                if name == "_aexecute":
                    wrapped = _async_transaction(self, original)
                setattr(database, name, wrapped)
        statements = ((sqlite_storage.SQLiteDatabase, "_run_statement"),)
        statements += ((pg_storage._Transaction, "execute"), (pg_storage._Transaction, "aexecute"))
        for executor, name in statements:  # one statement run on an open transaction
            original = executor.__dict__[name]
            patches.append((executor, name, original))
            wrapped = statement(original)
            if name == "aexecute":
                wrapped = _async_statement(self, original)
            setattr(executor, name, wrapped)
        try:
            yield
        finally:
            for target, name, original in patches:
                setattr(target, name, original)


def _async_transaction(trips: RoundTrips, original: Callable[..., Any]) -> Callable[..., Any]:
    async def counted(db: Any, op: Any, *, write: bool) -> Any:
        trips.transactions += 1
        trips.operations[getattr(op, "__name__", "?")] += 1
        return await original(db, op, write=write)

    return counted


def _async_statement(trips: RoundTrips, original: Callable[..., Any]) -> Callable[..., Any]:
    async def counted(executor: Any, stmt: Any) -> Any:
        trips.statements += 1
        return await original(executor, stmt)

    return counted


class SerializedBytes:
    """Bytes a checkpointer's serializer wrote (channel values and pending writes)."""

    def __init__(self) -> None:
        self.bytes = 0

    @contextlib.contextmanager
    def installed(self, saver: Any) -> Iterator[None]:
        serde = saver.serde
        original = serde.dumps_typed

        def dumps_typed(value: Any) -> tuple[str, bytes]:
            kind, data = original(value)
            self.bytes += len(data)
            return kind, data

        object.__setattr__(serde, "dumps_typed", dumps_typed)
        try:
            yield
        finally:
            object.__delattr__(serde, "dumps_typed")
