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


def test_history_demo_without_db_prints_no_path_it_deletes(capsys):
    assert main(["history-demo", "--sessions", "6", "--turns", "20"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert ".sqlite" not in out and "/" not in first, first  # the file is gone when it returns
    assert "a temporary file" in first and "--db" in first


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


def test_export_command_writes_history_and_memories_as_json(capsys, tmp_path):
    import json

    from langchain_core.messages import HumanMessage
    from langgraph.store.sqlite import SqliteStore

    from ctx_langgraph.history import Scope, SQLiteHistoryStore
    from ctx_langgraph.memory import LongTermMemory, MemoryScopes

    history, memories = tmp_path / "history.sqlite", tmp_path / "memory.sqlite"
    with (
        SQLiteHistoryStore.from_path(history) as store,
        SqliteStore.from_conn_string(str(memories)) as lts,
    ):
        store.setup()
        lts.setup()
        message = HumanMessage("my city is Oslo", id="m1")
        results = store.append(Scope("t1", tenant="acme"), [message])
        memory = LongTermMemory(lts)
        memory.observe(
            MemoryScopes("acme", "t1", user_id="u1"), [message], seqs={"m1": results[0].seq}
        )

    out = tmp_path / "export.json"
    args = ["export", "--sqlite", str(history), "--thread", "t1", "--tenant", "acme"]
    assert main([*args, "--memory-sqlite", str(memories), "--out", str(out)]) == 0
    assert "1 events, 0 summary versions, 1 memories" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert [m["content"] for m in document["memories"]] == ["The user's city is Oslo."]
    assert [e["event_id"] for e in document["events"]] == ["m1"]

    assert main(args) == 0  # to stdout, without memories
    printed = json.loads(capsys.readouterr().out)
    assert "memories" not in printed and printed["tenant"] == "acme"

    assert main(["export", "--sqlite", str(history), "--thread", "nobody"]) == 1
    assert "no history" in capsys.readouterr().err
    assert main(["export", "--sqlite", str(tmp_path / "missing.sqlite"), "--thread", "t"]) == 2
    assert "no such file" in capsys.readouterr().err
