"""Every benchmark runs end to end at a tiny size, as its README documents it: one JSON object
on stdout with the documented keys. A change that breaks a benchmark fails here, not in a
user's hands."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
README = (BENCHMARKS / "README.md").read_text()


@dataclass(frozen=True)
class Bench:
    script: str
    args: tuple[str, ...]
    keys: frozenset[str]  # documented top-level keys (of each backend's object, with backends)
    backends: bool = False  # keys are inside "sqlite" / "postgres" objects
    postgres: bool = False  # takes --pg
    nested: tuple[tuple[str, frozenset[str]], ...] = ()  # keys of sub-objects, by key


HISTORY_STORE_KEYS = (
    "append_events_per_s", "search_p50_ms", "search_p95_ms", "keyword_p50_ms", "keyword_p95_ms",
    "range_p50_ms", "range_p95_ms", "events", "threads", "append_s", "queries_per_kind", "wall_s",
    "index",
)  # fmt: skip
INDEX_KEYS = frozenset({
    "events", "texts", "embed_s", "embed_events_per_s", "embed_texts_per_s", "embed_tokens",
    "query_embed_p50_ms", "query_embed_p95_ms", "cold_search_ms", "refresh_search_ms",
    "other_vectors",
    "semantic_p50_ms", "semantic_p95_ms", "hybrid_p50_ms", "hybrid_p95_ms",
    "filtered_p50_ms", "filtered_p95_ms",
})  # fmt: skip
BENCHES = [
    Bench(
        "history_store.py",
        ("--sizes", "200,400", "--queries", "5", "--index", "--index-events", "40"),
        frozenset(HISTORY_STORE_KEYS),
        backends=True,
        postgres=True,
        nested=(("index", INDEX_KEYS),),
    ),
    Bench(
        "usage_ledger.py",
        ("--sizes", "20,40", "--turns", "5"),
        frozenset({"normalize_usage_p50_us", "sqlite", "postgres"}),
        postgres=True,
    ),
    Bench(
        "budget.py",
        ("--sizes", "200,400", "--turns", "3", "--peer-turns", "3"),
        frozenset(
            {
                "ours_node_ms",
                "ours_decision_ms",
                "langchain_ms",
                "langmem_ms",
                "min_ms",
                "max_ms",
                "ratios",
                "growth",
                "growth_basis",
                "growth_sizes",
                "growth_target",
                "growth_cycle",
                "equal_view",
                "passed",
                "views",
                "cycles",
                "phases",
                "summarized_turns",
                "conditions",
                "statistic",
                "turns",
                "peer_turns",
                "warmup",
                "seed",
                "thread_messages",
                "wall_s",
            }
        ),
    ),
    Bench(
        "agent_turn.py",
        ("--sizes", "200,400", "--turns", "2", "--warmup", "1", "--compaction-turns", "30"),
        frozenset(
            {
                "p50_ms",
                "p50_min_ms",
                "p50_max_ms",
                "p95_ms",
                "ratio_to_ours_p50",
                "growth_p50",
                "growth",
                "growth_basis",
                "growth_sizes",
                "growth_target",
                "equal_view",
                "passed",
                "faster_than",
                "view_messages",
                "view_tokens",
                "state_messages",
                "state_kb",
                "request_tokens",
                "summarized_turns",
                "cycles",
                "phases",
                "conditions",
                "saver",
                "turns",
                "warmup",
                "seed",
                "statistic",
                "thread_messages",
                "wall_s",
                "targets",
                "costs",
            }
        ),
        postgres=True,
        nested=(("costs", frozenset({"length", "steps", "round_trips", "bytes", "compaction"})),),
    ),
    Bench(
        "storage.py",
        ("--turns", "20,40", "--breakdown"),
        frozenset({"raw_message_bytes", "plain", "ours", "ours_retention", "targets"}),
        backends=True,
        postgres=True,
        nested=(
            (
                "targets",
                frozenset(
                    {
                        "turns",
                        "previous_turns",
                        "x_raw",
                        "x_raw_max",
                        "x_raw_pass",
                        "growth",
                        "growth_max",
                        "growth_pass",
                        "plain_x",
                        "plain_x_min",
                        "plain_x_pass",
                    }
                ),
            ),
        ),
    ),
    Bench(
        "memory.py",
        ("--records", "0,10", "--turns", "3"),
        frozenset({"store", "records", "median_ms", "p95_ms", "tokens", "overhead_ms"}),
    ),
    Bench(
        "inspect_open.py",
        ("--sizes", "40,80", "--opens", "1"),
        frozenset({"sizes", "growth_open", "target_ms", "passed"}),
        backends=True,
        postgres=True,
    ),
    Bench(
        "server_load.py",
        ("--threads", "4", "--turns", "6", "--double-text-threads", "4", "--window", "2400"),
        frozenset(
            {
                "settings",
                "turns_per_s",
                "latency_ms",
                "execution_ms",
                "our_share",
                "runs",
                "failed_runs",
                "refused_by_reject",
                "errors_by_kind",
                "double_texts",
                "restart_s",
                "dead_threads",
                "invariants",
                "generations",
                "wall_s",
                "passed",
            }
        ),
        postgres=True,
        nested=(
            (
                "invariants",
                frozenset(
                    {
                        "lost",
                        "duplicated",
                        "altered",
                        "kept_withdrawn",
                        "gaps",
                        "overlaps",
                        "orphans",
                    }
                ),
            ),
        ),
    ),
    Bench(
        "soak.py",
        ("--turns", "8", "--seed", "3"),
        frozenset({"settings", "runs", "passed"}),
    ),
]


def section(script: str) -> str:
    """The README section of one benchmark."""
    match = re.search(rf"^## `{re.escape(script)}`.*?(?=^## |\Z)", README, flags=re.S | re.M)
    assert match, f"benchmarks/README.md has no section for {script}"
    return match.group(0)


def run(bench: Bench, pg_dsn: str | None) -> Any:
    args = [sys.executable, str(BENCHMARKS / bench.script), *bench.args, "--json"]
    if bench.postgres:
        args += ["--pg", pg_dsn] if pg_dsn else []
    env = {k: v for k, v in os.environ.items() if k != "CTX_TEST_PG_DSN"}
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{bench.script} failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)  # only one JSON object on stdout


SMOKE_RUN_ELSEWHERE = {"chaos.py": "tests/test_chaos.py"}
"""Benchmarks whose small run has a test file of its own (its cluster, its assertions)."""


def test_every_benchmark_is_smoke_run_here() -> None:
    scripts = {p.name for p in BENCHMARKS.glob("*.py") if "__main__" in p.read_text()}
    assert scripts == {bench.script for bench in BENCHES} | SMOKE_RUN_ELSEWHERE.keys()
    for test in SMOKE_RUN_ELSEWHERE.values():
        assert (ROOT / test).exists(), test


@pytest.mark.parametrize("bench", BENCHES, ids=[b.script for b in BENCHES])
def test_documented_keys(bench: Bench) -> None:
    text = section(bench.script)
    keys = bench.keys.union(*(sub for _, sub in bench.nested))
    missing = [key for key in sorted(keys) if f"`{key}`" not in text]
    assert not missing, f"{bench.script}: keys not documented in its README section: {missing}"


@pytest.mark.parametrize("bench", BENCHES, ids=[b.script for b in BENCHES])
def test_benchmark_runs_at_a_tiny_size(bench: Bench, request: pytest.FixtureRequest) -> None:
    pg_dsn = request.getfixturevalue("pg_session_db") if bench.postgres else None
    out = run(bench, pg_dsn)
    objects = [out[name] for name in ("sqlite", "postgres")] if bench.backends else [out]
    if isinstance(out, list):  # one row per measurement
        objects = out
    for obj in objects:
        assert isinstance(obj, dict) and obj, out
        missing = bench.keys - obj.keys()
        assert not missing, f"{bench.script}: --json lacks {sorted(missing)}"
        for key, sub in bench.nested:
            lacking = sub - obj[key].keys()
            assert not lacking, f"{bench.script}: --json {key!r} lacks {sorted(lacking)}"


@pytest.mark.parametrize("script", ["budget.py", "agent_turn.py"])
def test_the_peers_simulated_states_are_their_real_states(script: str) -> None:
    """The benchmarks put each peer in the state it would really hold after N messages,
    computed in one pass; here the real peer runs turn by turn and must end in the same state."""
    module = load(script)
    checked = module.check_peer_simulation(size=600, window=4_000, seed=11)
    assert checked and all(summaries >= 2 for summaries in checked.values()), checked


def load(script: str) -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(
            f"ctx_bench_{script[:-3]}", BENCHMARKS / script
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))
