"""The chaos benchmark (``benchmarks/chaos.py``) at a small size: its own throwaway PostgreSQL
cluster stopped hard and the ``langgraph dev`` server SIGKILLed while runs are in flight, and
every thread consistent with the store afterwards; and its checks do catch what they are meant
to catch (a second timeline on the branch, a broken ledger)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

from ctx_langgraph.core.scope import Scope
from ctx_langgraph.history import PostgresHistoryStore, SQLiteHistoryStore
from ctx_langgraph.usage import NormalizedUsage, UsageLedger

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
KEYS = {
    "settings", "phases", "invariants", "dead_threads", "max_loop_supersteps", "wall_s", "passed",
}  # fmt: skip
PHASE_KEYS = {
    "phase", "sent", "succeeded", "failed", "failed_by_kind", "fault_s", "fault", "recovery_s",
    "recovery_all_s", "dead_threads", "max_loop_supersteps", "invariants", "examples",
}  # fmt: skip


@pytest.fixture(scope="module")
def chaos() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(
            "ctx_chaos_benchmark", BENCHMARKS / "chaos.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


def _can_start_a_cluster(chaos: ModuleType) -> str | None:
    """Why this machine cannot start a throwaway cluster, or None."""
    if chaos._bindir() is None:
        return "no PostgreSQL server binaries (initdb)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    return None


@pytest.mark.postgres
def test_a_server_kill_and_a_postgres_stop_leave_every_thread_consistent(
    chaos: ModuleType,
) -> None:
    reason = _can_start_a_cluster(chaos)
    if reason:
        if os.environ.get("CTX_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"chaos.py cannot start its PostgreSQL cluster: {reason}")
        pytest.skip(reason)
    args = [
        sys.executable, str(BENCHMARKS / "chaos.py"), "--threads", "2",
        "--phases", "pg-stop-5,server-kill", "--baseline-s", "11", "--after-s", "2",
        "--seed", "5", "--json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "CTX_TEST_PG_DSN"}
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert done.stdout.strip(), f"chaos.py failed:\n{done.stderr[-3000:]}"
    out = json.loads(done.stdout)
    found = {p["phase"]: (p["invariants"], p["examples"], p["dead_threads"]) for p in out["phases"]}
    assert done.returncode == 0, f"chaos.py found:\n{json.dumps(found, indent=1)}"
    assert out.keys() >= KEYS
    assert [p["phase"] for p in out["phases"]] == ["baseline", "pg-stop-5", "server-kill-1"]
    for phase in out["phases"]:
        assert phase.keys() >= PHASE_KEYS
        assert phase["dead_threads"] == 0, phase
        assert not any(phase["invariants"].values()), phase
        assert phase["succeeded"] > 0, phase
        assert phase["max_loop_supersteps"] <= chaos.LOOP_SUPERSTEPS
    for phase in out["phases"][1:]:  # a fault was injected and the threads came back
        assert phase["fault"] and phase["fault_s"] > 0, phase
        assert phase["recovery_all_s"] is not None, phase
    assert out["passed"] is True


def test_the_readme_documents_every_key_and_invariant(chaos: ModuleType) -> None:
    readme = (BENCHMARKS / "README.md").read_text()
    match = re.search(r"^## `chaos.py`.*?(?=^## |\Z)", readme, flags=re.S | re.M)
    assert match, "benchmarks/README.md has no section for chaos.py"
    keys = KEYS | PHASE_KEYS | set(chaos.INVARIANTS) | set(chaos.PHASES)
    missing = sorted(k for k in keys if f"`{k}`" not in match.group(0))
    assert not missing, f"chaos.py: not documented in its README section: {missing}"


def _values(*messages: Any, branch: str = "main") -> dict[str, Any]:
    return {
        "messages": [m["data"] | {"type": m["type"]} for m in messages_to_dict(list(messages))],
        "context": {"branch": branch},
    }


def test_a_second_timeline_appended_by_a_rerun_is_found(chaos: ModuleType) -> None:
    """The re-run of a completed turn whose first reply stayed on the branch: the state holds
    the question and the second answer, the branch all three."""
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    log = chaos.ThreadLog(0, thread_id="t")
    question = HumanMessage("Where is ORD-1042?", id="h-0-0")
    log.sent["h-0-0"] = question.text
    first = AIMessage("It shipped.", id="a-1")
    second = AIMessage("It shipped yesterday.", id="a-2")
    store.append("t", [question, first, second])
    values = _values(question, second)
    found, details = chaos.check_one(store, log, values, set(), {"h-0-0", "a-2"})
    assert found["off_timeline"] == 1 and found["gaps"] == 1, found
    assert any("a-1" in d for d in details), details
    # the same thread, consistent (the branch forked for the re-run): nothing found
    store.append("u", [question, second])
    log_u = chaos.ThreadLog(1, thread_id="u", sent=dict(log.sent))
    found, _ = chaos.check_one(store, log_u, values, set(), {"h-0-0", "a-2"})
    assert not any(found.values()), found
    # an answer a checkpoint held, that the state has dropped and the store never recorded
    timeline = {"h-0-0", "a-2", "a-9"}
    found, details = chaos.check_one(store, log_u, values, set(), timeline, {"a-2", "a-9"})
    assert found["lost_replies"] == 1 and any("a-9" in d for d in details), (found, details)


@pytest.mark.postgres
def test_ledger_duplicates_and_totals_that_are_not_the_sum_of_their_calls_are_found(
    chaos: ModuleType, pg_dsn: str
) -> None:
    store = PostgresHistoryStore.from_conn_string(pg_dsn)
    store.setup()
    try:
        ledger = UsageLedger(store)
        usage = NormalizedUsage(
            provider="openai", model="m", response_id="metered-x-1", input_total=100, output=5
        )
        ledger.record("openai:metered-x-1", usage, scope=Scope("t"))
        assert chaos.ledger_problems(pg_dsn, ["t"])["t"] == {}
        ledger.record("msg:a-1", usage, scope=Scope("t"))  # the same response, another key
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a booking that went astray
            conn.execute("UPDATE ctx_usage_totals SET output = output + 1 WHERE thread_id = 't'")
        found = chaos.ledger_problems(pg_dsn, ["t"])["t"]
        assert found == {"ledger_duplicates": 1, "ledger_totals": 1}, found
    finally:
        store.close()
