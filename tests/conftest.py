"""Shared fixtures: history-store backends (SQLite file, SQLite memory, PostgreSQL) and an API
adapter that runs each conformance test through the sync and the async methods."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings
from psycopg import sql

from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, SQLiteHistoryStore

REQUIRE_POSTGRES = os.environ.get("CTX_REQUIRE_POSTGRES") == "1"

# CI runs the same examples every time (a red build is reproducible); local runs explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def _no_postgres(reason: str) -> None:
    message = f"PostgreSQL is not available: {reason} (run scripts/test.sh, or set CTX_TEST_PG_DSN)"
    if REQUIRE_POSTGRES:
        pytest.fail(message + "; CTX_REQUIRE_POSTGRES=1 makes this a failure", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def pg_server_dsn() -> str:
    """DSN of the throwaway server started by scripts/test.sh."""
    dsn = os.environ.get("CTX_TEST_PG_DSN")
    if not dsn:
        _no_postgres("CTX_TEST_PG_DSN is not set")
    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.Error as exc:
        _no_postgres(f"cannot connect to {dsn}: {exc}")
    return dsn  # type: ignore[return-value]


@pytest.fixture(scope="session")
def pg_session_db(pg_server_dsn: str) -> Iterator[str]:
    """One database for the test session, dropped at its end."""
    name = f"ctx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield psycopg.conninfo.make_conninfo(pg_server_dsn, dbname=name)
    with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def pg_dsn(pg_session_db: str) -> Iterator[str]:
    """A fresh, empty schema for one test (the DSN's search_path), dropped afterwards: as
    isolated as a database of its own for everything here, at a fraction of the cost."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_session_db, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield psycopg.conninfo.make_conninfo(pg_session_db, options=f"-c search_path={schema}")
    with psycopg.connect(pg_session_db, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '5s'")
        # a connection a test left open can hold a lock: the session's database drop clears it
        with contextlib.suppress(psycopg.errors.LockNotAvailable):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@dataclass
class Backend:
    """How to open stores on one test database. ``shared`` is False for ``:memory:``, where a
    second store would be a different database, so ``make`` returns the same store."""

    name: str
    make: Callable[[], HistoryStore]
    shared: bool
    dsn: str | None = None


BACKENDS = [
    "sqlite_file",
    "sqlite_memory",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    opened: list[HistoryStore] = []

    def track(store: HistoryStore) -> HistoryStore:
        opened.append(store)
        return store

    if request.param == "sqlite_file":
        path = tmp_path / "history.sqlite"
        yield Backend("sqlite_file", lambda: track(SQLiteHistoryStore.from_path(path)), shared=True)
    elif request.param == "sqlite_memory":
        memory = track(SQLiteHistoryStore.from_path(":memory:"))
        yield Backend("sqlite_memory", lambda: memory, shared=False)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        yield Backend(
            "postgres",
            lambda: track(PostgresHistoryStore.from_conn_string(dsn, max_size=12)),
            shared=True,
            dsn=dsn,
        )
    for store in opened:
        store.close()


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[HistoryStore]:
    store = backend.make()
    store.setup()
    yield store
    await store.aclose()


class Api:
    """Calls ``store.NAME`` (sync mode) or ``await store.aNAME`` (async mode) behind one awaitable."""

    def __init__(self, store: HistoryStore, mode: str) -> None:
        self.store = store
        self.mode = mode

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if self.mode == "sync":
            method = getattr(self.store, name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                return method(*args, **kwargs)
        else:
            method = getattr(self.store, "a" + name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                return await method(*args, **kwargs)

        return call


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest, store: HistoryStore) -> Api:
    return Api(store, request.param)


# Each notebook runs once per test run: tests/test_notebooks_images.py executes every notebook
# that has a cell tagged "figure" and checks its pictures; when its case for a notebook is
# selected, nbmake's item for the same notebook is deselected. Run alone
# (``pytest notebooks/01_drop_in.ipynb``), nbmake runs it as usual.
IMAGE_TEST = "test_notebooks_images.py"


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    executed = {
        Path(item.callspec.params["notebook"]).resolve()
        for item in items
        if item.path.name == IMAGE_TEST and hasattr(item, "callspec")
    }
    duplicates = [
        item
        for item in items
        if getattr(item, "nbmake", False) and Path(item.path).resolve() in executed
    ]
    if duplicates:
        config.hook.pytest_deselected(items=duplicates)
        items[:] = [item for item in items if item not in duplicates]


@pytest.fixture(scope="module")
def browser(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Debian's headless Chromium through selenium (``benchmarks/chromium.py``), one per test
    module, its window ``BROWSER_SIZE`` of the module (width, height) when it sets one. Without
    the browser the test skips, unless ``CTX_REQUIRE_BROWSER=1`` (``scripts/test.sh`` sets it
    after installing the browser): then it fails."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from chromium import available, chromium

    missing = available()
    if missing:
        message = f"headless Chromium is not available ({missing}); scripts/test.sh installs it"
        if os.environ.get("CTX_REQUIRE_BROWSER") == "1":
            pytest.fail(message + "; CTX_REQUIRE_BROWSER=1 makes this a failure", pytrace=False)
        pytest.skip(message)
    width, height = getattr(request.module, "BROWSER_SIZE", (1400, 1800))
    with chromium(width=width, height=height) as driver:
        yield driver
