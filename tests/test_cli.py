from __future__ import annotations

import io

import pytest
from conftest import SHARED

from ctx_langgraph.cli import main, run_demo
from ctx_langgraph.datasets import load_locomo, synthetic_conversation
from ctx_langgraph.history import SQLiteHistoryStore


def test_demo_command_prints_its_tables(capsys, tmp_path):
    assert (
        main(
            [
                "history-demo",
                "--db",
                str(tmp_path / "demo.sqlite"),
                "--sessions",
                "6",
                "--turns",
                "20",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "120 messages in 6 sessions" in out
    assert "append the same again (idempotent) |    120" in out
    assert "covered seqs" in out and "1..60" in out
    assert "hits 1 -> 0" in out
    # every planted fact was found, at rank 1
    table = out.split("rank of the evidence")[1].split("coverage cursor")[0]
    rows = [line for line in table.splitlines() if "|" in line and "question" not in line]
    assert rows and all(line.split("|")[4].strip() == "1" for line in rows)


def test_synthetic_conversation_is_deterministic_and_answerable():
    a, b = synthetic_conversation(7), synthetic_conversation(7)
    assert [m.content for m in a.messages] == [m.content for m in b.messages]
    assert len(a.messages) == 19 * 32 and len(a.questions) == 6
    by_id = {m.id: m for m in a.messages}
    for qa in a.questions:
        assert qa.answer in by_id[qa.evidence[0]].content
    assert synthetic_conversation(8).questions != a.questions


@pytest.mark.skipif(
    not (SHARED / "datasets" / "locomo" / "30.json").exists(), reason="shared LoCoMo data absent"
)
def test_locomo_loader_keeps_dialog_ids_dates_and_evidence():
    conv = load_locomo(SHARED / "datasets" / "locomo" / "30.json")
    ids = {m.id for m in conv.messages}
    assert conv.messages[0].id == "D1:1" and conv.messages[0].name in ("Jon", "Gina")
    assert len(conv.sessions) == 19 and 300 < len(conv.messages) < 700
    assert conv.created_at == sorted(conv.created_at)
    answerable = [qa for qa in conv.questions if qa.category != 5]
    assert answerable and all(set(qa.evidence) <= ids for qa in answerable[:50])
    out = io.StringIO()
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        run_demo(store, conv, questions=3, out=out)
    assert f"{len(conv.messages)} messages" in out.getvalue()
