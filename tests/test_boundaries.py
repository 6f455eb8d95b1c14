"""The store behind its own door, checked: SQL text lives only in the storage core and the stores
(docs/architecture.md, "Where SQL lives"), one module touches the private parts of LangGraph's
``InMemorySaver`` (and the attributes it relies on still exist), and the history store holds its
database instead of being one."""

from __future__ import annotations

import ast
import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph.history import HistoryStore, SQLiteHistoryStore
from ctx_langgraph.storage.runner import Database

PACKAGE = Path(__file__).resolve().parents[1] / "ctx_langgraph"

SQL_HOMES = (
    "storage/",  # the storage core: schema, runner, the tables' shared statements, the savers'
    "history/",  # the history store and its operations
    "usage/ledger.py",  # the usage ledger's operations on its tables
    "usage/ledger_rows.py",
    "threads/ops.py",  # a whole thread's export and import, over the store's tables
)
"""Where SQL text may be written (docs/architecture.md names the same list)."""

PRIVATE_SAVER_MODULE = "retention/memory_saver.py"
"""The one module that reads and edits ``InMemorySaver``'s dictionaries (LangGraph has no public
way to delete some of a thread's checkpoints from it)."""

_SQL = re.compile(
    r"^\s*(SELECT\b.*\bFROM\b|SELECT\s+\d|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b"
    r"|CREATE\s+(UNIQUE\s+)?(TABLE|INDEX|VIEW|TRIGGER|VIRTUAL)\b|ALTER\s+TABLE\b"
    r"|DROP\s+(TABLE|INDEX|VIEW|TRIGGER)\b|WITH\s+(RECURSIVE\s+)?\w+(\s*\([^)]*\))?\s+AS\s*\("
    r"|PRAGMA\s+\w+|SET\s+TRANSACTION\b|(?-i:(BEGIN(\s+IMMEDIATE)?|COMMIT|ROLLBACK)\s*$))",
    re.IGNORECASE | re.DOTALL,
)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal and f-string (its holes as ``{}``) but the docstrings."""
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            found.append((node.lineno, "".join(str(p) for p in parts)))
    return found


def _sql_outside_homes() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith(SQL_HOMES):
            continue
        for line, text in _texts(ast.parse(path.read_text(encoding="utf-8"))):
            if _SQL.match(text):
                found.append(f"ctx_langgraph/{name}:{line}: {text.strip()[:60]!r}")
    return found


@pytest.mark.parametrize(
    ("text", "sql"),
    [
        ("SELECT a FROM t WHERE x = ?", True),
        ("  delete from checkpoints where thread_id = ?", True),
        ("UPDATE checkpoints SET parent_checkpoint_id = NULL", True),
        ("PRAGMA journal_mode=WAL", True),
        ("BEGIN IMMEDIATE", True),
        ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", True),
        ("WITH RECURSIVE chain(b) AS (SELECT 1)", True),
        ("Delete old LangGraph checkpoints (and their pending writes) from a saver", False),
        ("begin", False),
        ("Select the newest calls", False),
    ],
)
def test_the_sql_check_tells_sql_from_prose(text: str, sql: bool) -> None:
    assert bool(_SQL.match(text)) is sql


def test_no_sql_outside_the_storage_core_and_the_stores() -> None:
    """Another package asks a store for what it needs; it never writes a query of its own."""
    assert _sql_outside_homes() == []


_SAVER_NAME = re.compile(r"saver|checkpointer", re.IGNORECASE)
_SAVER_PRIVATE = frozenset({"storage", "writes", "blobs"})


def _saver_private_reads() -> list[str]:
    """``<saver>.storage`` / ``.writes`` / ``.blobs`` / ``._anything`` where ``<saver>`` is a
    name or attribute naming a checkpointer."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name == PRIVATE_SAVER_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            owner_name = (
                owner.id
                if isinstance(owner, ast.Name)
                else owner.attr
                if isinstance(owner, ast.Attribute)
                else ""
            )
            private = node.attr in _SAVER_PRIVATE or (
                node.attr.startswith("_") and not node.attr.startswith("__")
            )
            if private and _SAVER_NAME.search(owner_name):
                found.append(f"ctx_langgraph/{name}:{node.lineno}: {owner_name}.{node.attr}")
    return found


def test_only_one_module_touches_a_checkpointers_private_parts() -> None:
    assert _saver_private_reads() == []
    assert (PACKAGE / PRIVATE_SAVER_MODULE).exists()


def test_in_memory_saver_still_has_the_dictionaries_retention_edits() -> None:
    """LangGraph gives ``InMemorySaver`` no way to delete some of a thread's checkpoints; the
    retention module edits its dictionaries. A LangGraph release that renames or reshapes them
    fails here, not in a user's prune."""
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    builder = StateGraph(S)
    builder.add_node("inc", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "inc")
    saver = InMemorySaver()
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    # storage[thread_id][checkpoint_ns][checkpoint_id] = (checkpoint, metadata, parent_id),
    # the first two typed-serialized ``(type, bytes)`` pairs
    (ns, checkpoints), *_ = saver.storage["t"].items()
    assert ns == ""
    checkpoint_id, (checkpoint, metadata, parent) = next(iter(checkpoints.items()))
    assert isinstance(checkpoint_id, str) and (parent is None or isinstance(parent, str))
    assert isinstance(checkpoint[1], bytes) and isinstance(metadata[1], bytes)
    assert "channel_versions" in saver.serde.loads_typed(checkpoint)
    # writes[(thread_id, ns, checkpoint_id)][(task_id, idx)] = (task_id, channel, typed, path)
    key, writes = next(iter(saver.writes.items()))
    assert key[0] == "t" and len(key) == 3
    _task, channel, typed, _path = next(iter(writes.values()))
    assert isinstance(channel, str) and isinstance(typed[1], bytes)
    # blobs[(thread_id, ns, channel, version)] = (type, bytes)
    blob_key, blob = next(iter(saver.blobs.items()))
    assert blob_key[0] == "t" and len(blob_key) == 4 and isinstance(blob[1], bytes)


def test_the_history_store_holds_a_database_instead_of_being_one() -> None:
    """The store's public face is its own methods: no ``run``/``execute`` of arbitrary
    operations, and the database it runs on is one attribute (``store.db``)."""
    assert not issubclass(HistoryStore, Database)
    for name in ("run", "arun", "execute", "_execute", "_aexecute"):
        assert not hasattr(HistoryStore, name), name
    with SQLiteHistoryStore.from_path(":memory:") as store:
        assert isinstance(store.db, Database)
        assert store.setup() == store.schema_version()


async def test_the_store_lists_a_tenants_threads_newest_first(api: Any, store: Any) -> None:
    """What the inspector's thread list needs is a store method, sync and async, on every
    backend: per thread its branches, highest head seq and summary generation, newest first."""
    from langchain_core.messages import HumanMessage

    from ctx_langgraph.history import Scope

    T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for n, thread in enumerate(["old", "new"]):
        store.db.clock = lambda n=n: T0 + dt.timedelta(hours=n)
        store.append(thread, [HumanMessage(f"m{i}", id=f"{thread}{i}") for i in range(n + 2)])
    store.create_branch(Scope("old", branch="b"), "main", 1)
    store.append(Scope("other", tenant="t2"), [HumanMessage("x", id="x")])
    rows = await api.list_threads()
    assert [(r.thread_id, r.branches, r.head_seq) for r in rows] == [("new", 1, 3), ("old", 2, 2)]
    assert rows[0].created_at == T0 + dt.timedelta(hours=1)
    assert [r.thread_id for r in await api.list_threads(limit=1)] == ["new"]
    assert [r.thread_id for r in await api.list_threads("t2")] == ["other"]


async def test_the_store_says_its_schema_version_without_refusing_an_old_one(
    api: Any, store: Any
) -> None:
    from ctx_langgraph.storage.migrations import SCHEMA_VERSION

    assert await api.schema_version() == SCHEMA_VERSION
    with SQLiteHistoryStore.from_path(":memory:") as fresh:  # no tables: 0, not an error
        assert fresh.schema_version() == 0 and await fresh.aschema_version() == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_ledger_records_say_when_each_call_was_booked(store: Any, mode: str) -> None:
    """The inspector draws a call's time from the ledger's record, not from a query of its own."""
    from ctx_langgraph.usage import NormalizedUsage, UsageLedger

    T0 = dt.datetime(2026, 3, 1, 12, tzinfo=dt.timezone.utc)
    store.db.clock = lambda: T0
    ledger = UsageLedger(store)
    ledger.record("c1", NormalizedUsage(input_total=10, output=1), scope="t", purpose="summary")
    records = ledger.records("t") if mode == "sync" else await ledger.arecords("t")
    assert [(r.call_key, r.created_at) for r in records] == [("c1", T0)]
    assert (ledger.get("c1") if mode == "sync" else await ledger.aget("c1")).created_at == T0
