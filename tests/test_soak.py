"""The soak benchmark (``benchmarks/soak.py``) at a small size, with its failure rates raised: every
turn completes, no message is lost from the history store, no request holds an orphaned tool
result or a dangling tool call; and its checks do catch what they are meant to catch."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctx_langgraph.budget.counters import ApproximateCounter
from ctx_langgraph.compaction import SummaryRequest
from ctx_langgraph.history import SQLiteHistoryStore

SOAK = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"
RUN_KEYS = {
    "backend", "turns", "completed", "failed", "failures", "compactions", "compaction_failures",
    "fallbacks", "overflow_retries", "overflow_recovered_by", "model_calls", "lost_messages",
    "orphans", "wall_s",
    "ms_per_turn",
}  # fmt: skip
# small and hostile: about 3 summarizer calls in 5 fail, one model call in 7 overflows
SMALL = [
    "--turns", "30", "--seed", "7", "--summarizer-failure-rate", "0.6", "--overflow-rate", "0.15",
    "--compaction-timeout", "0.5", "--json",
]  # fmt: skip


@pytest.fixture(scope="module")
def soak() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("ctx_soak_benchmark", SOAK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pydantic look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def run_soak(soak: ModuleType, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code = soak.main([*SMALL, *extra])
    out = json.loads(capsys.readouterr().out)
    assert code == (0 if out["passed"] else 1)  # a missed target is a failing exit
    [run] = out["runs"]
    assert isinstance(run, dict)
    return run


def assert_soak_held(run: dict[str, Any]) -> None:
    assert run.keys() >= RUN_KEYS
    assert run["turns"] == 30 and run["completed"] + run["failed"] == 30
    # the hostile parts really happened
    assert run["overflow_errors_injected"] >= 1
    assert sum(run["summarizer_failures_injected"].values()) >= 1
    assert run["model_calls"] > run["turns"]  # tool calls: several model calls a turn
    assert run["compactions"] >= 1
    # the targets
    assert run["failed"] == 0, run["failure_groups"]
    assert run["lost_messages"] == 0, (run["lost_by_role"], run["lost_examples"])
    assert run["last_reply_recorded"]
    assert run["orphans"] == 0, run["orphan_examples"]
    assert run["altered_messages"] == 0
    # every turn's overflow was recovered by one compaction and a retry
    assert run["overflow_retries"] == run["overflow_errors_injected"]


def test_soak_on_sqlite(soak: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_soak(soak, capsys, "--backends", "sqlite")
    assert run["backend"] == "sqlite"
    assert_soak_held(run)


@pytest.mark.postgres
def test_soak_on_postgres(
    soak: ModuleType, capsys: pytest.CaptureFixture[str], pg_dsn: str
) -> None:
    run = run_soak(soak, capsys, "--backends", "postgres", "--pg", pg_dsn)
    assert run["backend"] == "postgres"
    assert_soak_held(run)


# ----------------------------------------------------------------------------- the checks


def test_orphan_check_accepts_a_valid_request_and_names_each_violation(soak: ModuleType) -> None:
    calls = [{"name": "read_file", "args": {"path": "/a"}, "id": c} for c in ("c1", "c2")]
    valid = [
        SystemMessage("rules"),
        HumanMessage("read both"),
        AIMessage("", tool_calls=calls),
        ToolMessage("A", tool_call_id="c1"),
        ToolMessage("B", tool_call_id="c2"),
        AIMessage("done"),
        HumanMessage("next"),
    ]
    assert soak.orphan_violations(valid) == []
    assert soak.orphan_violations([HumanMessage("x"), ToolMessage("A", tool_call_id="c9")]) == [
        "orphan tool result c9"
    ]
    # a result missing, the other separated from its call by a user message
    broken = [AIMessage("", tool_calls=calls), ToolMessage("A", tool_call_id="c1"),
              HumanMessage("?"), ToolMessage("B", tool_call_id="c2")]  # fmt: skip
    assert soak.orphan_violations(broken) == ["dangling tool call c2", "orphan tool result c2"]
    assert soak.orphan_violations([HumanMessage("x"), AIMessage("", tool_calls=calls[:1])]) == [
        "dangling tool call c1"
    ]


def test_lost_message_check_sees_a_hidden_event(
    soak: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = soak.parse(["--turns", "3", "--summarizer-failure-rate", "0", "--overflow-rate", "0"])
    store = SQLiteHistoryStore.from_path(tmp_path / "h.sqlite")
    with soak.sync_saver("memory", tmp_path, "t") as saver:
        run = soak.build("sqlite", store, saver, args)
        soak.soak_sync(run, 3)
        assert soak.check(run, 1.0)["lost_messages"] == 0
        tool_results = [i for i, (role, _) in run.tally.produced.items() if role == "tool"]
        store.hide_events(run.scope, [tool_results[0], "user-00001"])
        result = soak.check(run, 1.0)
    store.close()
    assert result["lost_messages"] == 2
    assert result["lost_by_role"] == {"tool": 1, "human": 1}


def test_the_overflow_is_openais_context_length_error(soak: ModuleType) -> None:
    error = soak.OverflowErrors(4096).error(5210)
    assert isinstance(error, openai.BadRequestError)
    assert (error.status_code, error.code, error.param, error.type) == (
        400, "context_length_exceeded", "messages", "invalid_request_error",
    )  # fmt: skip
    assert isinstance(error.body, dict)
    assert error.body["message"] == (
        "This model's maximum context length is 4096 tokens. However, your messages resulted "
        "in 5210 tokens. Please reduce the length of the messages."
    )
    assert error.response.json() == {"error": error.body}


def test_the_flaky_summarizer_fails_in_every_way(soak: ModuleType) -> None:
    summarizer = soak.FlakySummarizer(1.0, seed=3, slow_s=0.0)
    request = SummaryRequest(None, [], 0, cap_tokens=300, counter=ApproximateCounter())
    outcomes = []
    for _ in range(40):
        try:
            outcomes.append(summarizer.summarize(request))
        except ConnectionError:
            outcomes.append("raised")
    assert set(summarizer.injected) == set(soak.FAILURE_KINDS)
    assert "" in outcomes and "raised" in outcomes
    assert summarizer.calls == 40
