"""The command line refuses bad input in one line on stderr with exit status 2, before any work.

Every case runs ``main([...])`` in process; a few run the console entry point in a real
subprocess, where a traceback or a logger's noise would show. Each refused input must be
named in the message, and nothing the command points at may be changed by a refusal.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from ctx_langgraph.cli import build_parser, main

TURN = {"speaker": "Ana", "dia_id": "D1:1", "text": "My locker code is 4471-QX."}
REPLY = {"speaker": "Ben", "dia_id": "D1:2", "text": "Noted, 4471-QX."}
WHEN = "1:47 pm on 18 May, 2023"
QUESTION = {"question": "What is the locker code?", "answer": "4471-QX", "evidence": ["D1:1"]}


def _locomo(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": WHEN,
        "session_1": [TURN, REPLY],
        "qa": [QUESTION],
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One file or directory of each kind the cases name, by key."""
    root = tmp_path_factory.mktemp("inputs")
    made: dict[str, str] = {}

    def write(name: str, content: str | bytes) -> None:
        path = root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        made[name] = str(path)

    write("not_json.json", "this is not JSON\n")
    write("not_a_dataset.json", json.dumps({"a": 1}))
    write("array.json", json.dumps([1, 2]))
    write("binary.json", b"\xff\xfe\x00 binary")
    write("no_sessions.json", json.dumps({"speaker_a": "Ana", "speaker_b": "Ben", "qa": []}))
    write("empty_sessions.json", json.dumps(_locomo(session_1=[])))
    write("one_turn.json", json.dumps(_locomo(session_1=[TURN])))
    write("two_turns.json", json.dumps(_locomo()))
    write("bad_date.json", json.dumps(_locomo(session_1_date_time="yesterday")))
    write("no_date.json", json.dumps(_locomo(session_1_date_time=None)))
    write("turn_without_id.json", json.dumps(_locomo(session_1=[{"speaker": "Ana", "text": "hi"}])))
    write("turn_not_object.json", json.dumps(_locomo(session_1=["hello"])))
    write("session_not_list.json", json.dumps(_locomo(session_1={"text": "hi"})))
    write("text_not_string.json", json.dumps(_locomo(session_1=[{**TURN, "text": 42}])))
    write("repeated_id.json", json.dumps(_locomo(session_1=[TURN, {**REPLY, "dia_id": "D1:1"}])))
    write("qa_not_list.json", json.dumps(_locomo(qa={"question": "?"})))
    write("question_missing.json", json.dumps(_locomo(qa=[{"answer": "x"}])))
    write("bad_category.json", json.dumps(_locomo(qa=[{**QUESTION, "category": {"x": 1}}])))
    write("bad_line.jsonl", '{"role": "user", "content": "hi"}\nnot json\n')
    write("empty.jsonl", "")
    write("trace_named.txt", '{"role": "user", "content": "hi"}\n')
    write("plain.txt", "a file that is not a directory\n")
    (root / "empty_dir").mkdir()
    made["empty_dir"] = str(root / "empty_dir")
    made["missing"] = str(root / "missing.json")
    made["missing_dir_file"] = str(root / "no-such-dir" / "out.json")

    other = root / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    made["other.sqlite"] = str(other)

    from langchain_core.messages import HumanMessage

    from ctx_langgraph.history import Scope, SQLiteHistoryStore

    with SQLiteHistoryStore.from_path(root / "history.sqlite") as store:
        store.setup()
        store.append(Scope("t1"), [HumanMessage("hello", id="m1")])
    made["history.sqlite"] = str(root / "history.sqlite")
    # a demo's history file whose checkpoints are left from an earlier run
    (root / "left.checkpoints.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)
    made["left.sqlite"] = str(root / "left.sqlite")
    made["root"] = str(root)
    return made


REFUSED = "postgresql://ctx:secret@127.0.0.1:1/nothing"  # nothing listens on port 1

# (id, argv with {file} placeholders, fragments the one stderr line must contain)
CASES: list[tuple[str, list[str], list[str]]] = [
    # eval: datasets
    ("eval-json-not-a-dataset", ["eval", "--dataset", "{not_a_dataset.json}"], ["not_a_dataset.json", "speaker_a is missing"]),
    ("eval-not-json", ["eval", "--dataset", "{not_json.json}"], ["not_json.json", "not a JSON file"]),
    ("eval-json-array", ["eval", "--dataset", "{array.json}"], ["array.json", "JSON array"]),
    ("eval-not-utf8", ["eval", "--dataset", "{binary.json}"], ["binary.json", "not a JSON file"]),
    ("eval-no-conversation", ["eval", "--dataset", "{no_sessions.json}"], ["no_sessions.json", "no turn"]),
    ("eval-empty-sessions", ["eval", "--dataset", "{empty_sessions.json}"], ["empty_sessions.json", "no turn"]),
    ("eval-bad-date", ["eval", "--dataset", "{bad_date.json}"], ["session_1_date_time", "'yesterday'"]),
    ("eval-missing-date", ["eval", "--dataset", "{no_date.json}"], ["session_1_date_time is missing"]),
    ("eval-turn-without-id", ["eval", "--dataset", "{turn_without_id.json}"], ["session_1[0].dia_id is missing"]),
    ("eval-turn-not-object", ["eval", "--dataset", "{turn_not_object.json}"], ["session_1[0]", "not a turn"]),
    ("eval-session-not-list", ["eval", "--dataset", "{session_not_list.json}"], ["session_1 is a JSON object"]),
    ("eval-text-not-string", ["eval", "--dataset", "{text_not_string.json}"], ["session_1[0].text", "number"]),
    ("eval-repeated-dia-id", ["eval", "--dataset", "{repeated_id.json}"], ["'D1:1'", "earlier turn"]),
    ("eval-qa-not-list", ["eval", "--dataset", "{qa_not_list.json}"], ["qa is a JSON object"]),
    ("eval-question-missing", ["eval", "--dataset", "{question_missing.json}"], ["qa[0].question is missing"]),
    ("eval-bad-category", ["eval", "--dataset", "{bad_category.json}"], ["qa[0].category"]),
    ("eval-trace-bad-line", ["eval", "--dataset", "{bad_line.jsonl}"], ["bad_line.jsonl, line 2"]),
    ("eval-trace-empty", ["eval", "--dataset", "{empty.jsonl}"], ["empty.jsonl", "no messages"]),
    ("eval-trace-by-wrong-name", ["eval", "--dataset", "{trace_named.txt}"], ["trace_named.txt", "--format trace"]),
    ("eval-empty-directory", ["eval", "--dataset", "{empty_dir}"], ["empty_dir", "*.jsonl"]),
    ("eval-empty-directory-trace", ["eval", "--dataset", "{empty_dir}", "--format", "trace"], ["empty_dir", "*.jsonl"]),
    ("eval-missing-dataset", ["eval", "--dataset", "{missing}"], ["missing.json", "no such file"]),
    ("eval-no-dataset", ["eval"], ["--dataset is required"]),
    ("eval-unknown-format", ["eval", "--format", "xml"], ["--format", "'xml'"]),
    # eval: numbers and names
    ("eval-window-negative", ["eval", "--format", "synthetic", "--window", "-5"], ["--window", "'-5'"]),
    ("eval-window-zero", ["eval", "--format", "synthetic", "--window", "0"], ["--window", "'0'"]),
    ("eval-window-too-small", ["eval", "--format", "synthetic", "--window", "1023"], ["--window", "1,024"]),
    ("eval-window-not-a-number", ["eval", "--format", "synthetic", "--window", "4k"], ["--window", "'4k'"]),
    ("eval-turns-zero", ["eval", "--format", "synthetic", "--turns", "0"], ["--turns", "'0'"]),
    ("eval-turns-too-many", ["eval", "--format", "synthetic", "--turns", "2001"], ["--turns", "2,000"]),
    ("eval-sessions-zero", ["eval", "--format", "synthetic", "--sessions", "0"], ["--sessions", "'0'"]),
    ("eval-retrieval-tokens", ["eval", "--format", "synthetic", "--retrieval-tokens", "10"], ["--retrieval-tokens", "300"]),
    ("eval-unknown-strategy", ["eval", "--format", "synthetic", "--strategies", "magic"], ["unknown strategies ['magic']"]),
    ("eval-no-strategy", ["eval", "--format", "synthetic", "--strategies", ","], ["--strategies"]),
    ("eval-unknown-reader", ["eval", "--format", "synthetic", "--reader", "no-such-model"], ["--reader 'no-such-model'"]),
    ("eval-unknown-summarizer", ["eval", "--format", "synthetic", "--summarizer", "nope:x"], ["--summarizer 'nope:x'"]),
    ("eval-out-is-a-file", ["eval", "--format", "synthetic", "--out", "{plain.txt}"], ["--out", "plain.txt", "not a directory"]),
    ("eval-synthetic-dataset-is-a-file", ["eval", "--format", "synthetic", "--dataset", "{plain.txt}"], ["--dataset", "plain.txt"]),
    # demo
    ("demo-turns-zero", ["demo", "--turns", "0"], ["--turns", "'0'"]),
    ("demo-turns-too-many", ["demo", "--turns", "2001"], ["--turns", "2,000"]),
    ("demo-window-zero", ["demo", "--window", "0"], ["--window", "'0'"]),
    ("demo-window-negative", ["demo", "--window", "-5"], ["--window", "'-5'"]),
    ("demo-db-exists", ["demo", "--db", "{history.sqlite}"], ["--db", "history.sqlite", "already exists"]),
    ("demo-db-no-directory", ["demo", "--db", "{missing_dir_file}"], ["--db", "no such directory"]),
    ("demo-db-checkpoints-left", ["demo", "--db", "{left.sqlite}"], ["--db", "left.checkpoints.sqlite"]),
    ("demo-out-is-a-file", ["demo", "--out", "{plain.txt}"], ["--out", "not a directory"]),
    ("demo-compare-unknown", ["demo", "--compare", "magic"], ["--compare", "'magic'"]),
    ("demo-compare-empty", ["demo", "--compare", ","], ["--compare", "no strategy"]),
    ("demo-compare-and-no-compare", ["demo", "--compare", "all", "--no-compare"], ["--no-compare", "--compare"]),
    # history-demo
    ("history-demo-turns-negative", ["history-demo", "--turns", "-1"], ["--turns", "'-1'"]),
    ("history-demo-turns-zero", ["history-demo", "--turns", "0"], ["--turns", "'0'"]),
    ("history-demo-sessions-zero", ["history-demo", "--sessions", "0"], ["--sessions", "'0'"]),
    ("history-demo-too-few-turns", ["history-demo", "--sessions", "1", "--turns", "1"], ["--sessions 1 --turns 1", "6 turns"]),
    ("history-demo-too-many-turns", ["history-demo", "--sessions", "1000", "--turns", "1000"], ["--sessions 1000", "100,000"]),
    ("history-demo-questions-negative", ["history-demo", "--questions", "-1"], ["--questions", "'-1'"]),
    ("history-demo-locomo-not-a-dataset", ["history-demo", "--locomo", "{not_a_dataset.json}"], ["not_a_dataset.json", "speaker_a is missing"]),
    ("history-demo-locomo-not-json", ["history-demo", "--locomo", "{not_json.json}"], ["not_json.json", "not a JSON file"]),
    ("history-demo-locomo-no-conversation", ["history-demo", "--locomo", "{no_sessions.json}"], ["no_sessions.json", "no turn"]),
    ("history-demo-locomo-one-turn", ["history-demo", "--locomo", "{one_turn.json}"], ["one_turn.json", "at least 2"]),
    ("history-demo-locomo-missing", ["history-demo", "--locomo", "{missing}"], ["--locomo", "missing.json"]),
    ("history-demo-locomo-directory", ["history-demo", "--locomo", "{empty_dir}"], ["--locomo", "directory"]),
    ("history-demo-db-exists", ["history-demo", "--db", "{history.sqlite}"], ["--db", "already exists"]),
    ("history-demo-db-no-directory", ["history-demo", "--db", "{missing_dir_file}"], ["--db", "no such directory"]),
    # retention
    ("retention-keep-last-zero", ["retention", "--sqlite", "{history.sqlite}", "--keep-last", "0"], ["--keep-last", "'0'"]),
    ("retention-keep-last-negative", ["retention", "--sqlite", "{history.sqlite}", "--keep-last", "-1"], ["--keep-last", "'-1'"]),
    ("retention-keep-last-not-a-number", ["retention", "--sqlite", "{history.sqlite}", "--keep-last", "x"], ["--keep-last", "'x'"]),
    ("retention-keep-last-missing", ["retention", "--sqlite", "{history.sqlite}"], ["--keep-last"]),
    ("retention-keep-within-malformed", ["retention", "--sqlite", "{history.sqlite}", "--keep-last", "1", "--keep-within", "3x"], ["--keep-within", "'3x'"]),
    ("retention-keep-within-zero", ["retention", "--sqlite", "{history.sqlite}", "--keep-last", "1", "--keep-within", "0d"], ["--keep-within", "positive"]),
    ("retention-keep-within-huge", ["retention", "--sqlite", "{history.sqlite}", "--keep-last", "1", "--keep-within", "99999999999999w"], ["--keep-within", "longer"]),
    ("retention-thread-empty", ["retention", "--sqlite", "{history.sqlite}", "--keep-last", "1", "--thread", ""], ["--thread"]),
    ("retention-no-database", ["retention", "--keep-last", "1"], ["--sqlite", "--postgres"]),
    ("retention-sqlite-missing", ["retention", "--sqlite", "{missing}", "--keep-last", "1"], ["--sqlite", "missing.json", "no such file"]),
    ("retention-sqlite-directory", ["retention", "--sqlite", "{empty_dir}", "--keep-last", "1"], ["--sqlite", "directory"]),
    ("retention-sqlite-not-sqlite", ["retention", "--sqlite", "{not_json.json}", "--keep-last", "1"], ["--sqlite", "not a SQLite database"]),
    ("retention-sqlite-no-checkpoints", ["retention", "--sqlite", "{other.sqlite}", "--keep-last", "1"], ["--sqlite", "other.sqlite", "'checkpoints'"]),
    ("retention-postgres-malformed", ["retention", "--postgres", "not a dsn", "--keep-last", "1"], ["--postgres", "not a PostgreSQL connection string"]),
    ("retention-postgres-malformed-secret", ["retention", "--postgres", "postgresql://u:secret@[h:5432/db", "--keep-last", "1"], ["--postgres", "not a PostgreSQL connection string", "<the connection string>"]),
    ("retention-postgres-empty", ["retention", "--postgres", "", "--keep-last", "1"], ["--postgres", "empty connection string"]),
    ("retention-postgres-refused", ["retention", "--postgres", REFUSED, "--keep-last", "1"], ["--postgres", "127.0.0.1:1/nothing"]),
    # export
    ("export-thread-missing", ["export", "--sqlite", "{history.sqlite}"], ["--thread"]),
    ("export-thread-empty", ["export", "--sqlite", "{history.sqlite}", "--thread", ""], ["--thread ''"]),
    ("export-thread-spaces", ["export", "--sqlite", "{history.sqlite}", "--thread", " t1"], ["--thread ' t1'"]),
    ("export-tenant-empty", ["export", "--sqlite", "{history.sqlite}", "--thread", "t1", "--tenant", ""], ["--tenant ''"]),
    ("export-sqlite-missing", ["export", "--sqlite", "{missing}", "--thread", "t1"], ["--sqlite", "no such file"]),
    ("export-sqlite-directory", ["export", "--sqlite", "{empty_dir}", "--thread", "t1"], ["--sqlite", "directory"]),
    ("export-sqlite-not-sqlite", ["export", "--sqlite", "{not_json.json}", "--thread", "t1"], ["--sqlite", "not a SQLite database"]),
    ("export-sqlite-not-a-history-store", ["export", "--sqlite", "{other.sqlite}", "--thread", "t1"], ["--sqlite", "other.sqlite", "not a history store"]),
    ("export-memory-not-a-store", ["export", "--sqlite", "{history.sqlite}", "--thread", "t1", "--memory-sqlite", "{other.sqlite}"], ["--memory-sqlite", "'store'"]),
    ("export-memory-not-sqlite", ["export", "--sqlite", "{history.sqlite}", "--thread", "t1", "--memory-sqlite", "{plain.txt}"], ["--memory-sqlite", "not a SQLite database"]),
    ("export-out-no-directory", ["export", "--sqlite", "{history.sqlite}", "--thread", "t1", "--out", "{missing_dir_file}"], ["--out", "no such directory"]),
    ("export-out-is-a-directory", ["export", "--sqlite", "{history.sqlite}", "--thread", "t1", "--out", "{empty_dir}"], ["--out", "is a directory"]),
    ("export-postgres-refused", ["export", "--postgres", REFUSED, "--thread", "t1"], ["--postgres", "127.0.0.1:1/nothing"]),
    ("export-postgres-malformed", ["export", "--postgres", "not a dsn", "--thread", "t1"], ["--postgres", "connection string"]),
    # the command itself
    ("no-command", [], ["COMMAND"]),
    ("unknown-command", ["squash"], ["'squash'"]),
    # compact
    ("compact-no-database", ["compact", "--thread", "t"], ["--sqlite", "--postgres"]),
    ("compact-no-thread", ["compact", "--sqlite", "{history.sqlite}"], ["--thread"]),
    ("compact-sqlite-missing", ["compact", "--sqlite", "{missing}", "--thread", "t"], ["--sqlite", "missing.json", "no such file"]),
    ("compact-keep-negative", ["compact", "--sqlite", "{history.sqlite}", "--thread", "t", "--keep-recent-tokens", "-1"], ["--keep-recent-tokens", "'-1'"]),
    ("compact-window-small", ["compact", "--sqlite", "{history.sqlite}", "--thread", "t", "--window", "100"], ["--window", "'100'"]),
    ("compact-instructions-blank", ["compact", "--sqlite", "{history.sqlite}", "--thread", "t", "--instructions", " "], ["--instructions"]),
    ("compact-summary-model-unknown", ["compact", "--sqlite", "{history.sqlite}", "--thread", "t", "--summary-model", "nosuch:x"], ["nosuch:x"]),
]  # fmt: skip


def _argv(template: list[str], files: dict[str, str]) -> list[str]:
    return [
        files[arg[1:-1]] if arg.startswith("{") and arg.endswith("}") else arg for arg in template
    ]


COMMANDS = ("demo", "eval", "history-demo", "retention", "export", "compact", "inspect")


def _assert_refused(argv: list[str], status: int, out: str, err: str, fragments: list[str]) -> None:
    assert status == 2, (status, out, err)
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].strip(), err
    prefix = f"ctx-langgraph {argv[0]}" if argv and argv[0] in COMMANDS else "ctx-langgraph"
    assert lines[0].startswith(f"{prefix}: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "secret" not in err  # a DSN's password is never printed


def _tables(path: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    conn.close()
    return {name for (name,) in rows}


@pytest.mark.parametrize(("argv", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_input_is_refused_in_one_line(argv, fragments, files, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a default --out that slipped through would land here
    before = {name: _tables(files[name]) for name in ("other.sqlite", "history.sqlite")}
    args = _argv(argv, files)
    status = main(args)
    captured = capsys.readouterr()
    _assert_refused(args, status, captured.out, captured.err, fragments)
    # a refusal changes nothing: no tables created in a file that was the wrong one
    assert {name: _tables(files[name]) for name in before} == before
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["eval", "--dataset", "{not_a_dataset.json}"], ["speaker_a is missing"]),
        (["eval", "--format", "synthetic", "--window", "-5"], ["--window"]),
        (["history-demo", "--turns", "-1"], ["--turns"]),
        (["export", "--postgres", REFUSED, "--thread", "t1"], ["127.0.0.1:1/nothing"]),
        ([], ["COMMAND"]),
    ],
    ids=["dataset", "window", "turns", "postgres-refused", "no-command"],
)
def test_the_console_command_prints_no_traceback(argv, fragments, files, tmp_path):
    args = _argv(argv, files)
    result = subprocess.run(
        [sys.executable, "-m", "ctx_langgraph.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    _assert_refused(args, result.returncode, result.stdout, result.stderr, fragments)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_subcommand_is_described_and_shows_its_defaults():
    parser = build_parser()
    top = parser.format_help()
    assert "command line." not in top.split("\n\n")[1]  # a real description, not the docstring
    assert "examples:" in top and top.count("ctx-langgraph ") >= 3
    subcommands = _subcommands()
    assert set(subcommands) == set(COMMANDS)
    for name, sub in subcommands.items():
        assert name in top
        assert sub.description and len(sub.description) > 200, name
        assert "offline" in sub.description.lower(), name
        text = " ".join(sub.format_help().split())
        assert " ".join(sub.description.split()[:8]) in text
        grouped = {
            a.dest
            for group in sub._mutually_exclusive_groups
            if group.required
            for a in group._group_actions
        }
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            if action.default is not None and action.default is not False:
                assert f"(default: {action.default})" in text, (name, action.dest)
            elif action.default is None and not action.required and action.dest not in grouped:
                help_text = " ".join((action.help or "").split())
                assert "default" in help_text, (name, action.dest)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_exits_zero(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert "(default: " in capsys.readouterr().out


# --------------------------------------------------------------------------- good input still works


def test_history_demo_replays_a_small_locomo_file_and_asks_no_question(files, capsys):
    assert main(["history-demo", "--locomo", files["two_turns.json"]]) == 0
    assert "2 messages in 1 sessions" in capsys.readouterr().out
    assert main(["history-demo", "--sessions", "1", "--turns", "6", "--questions", "0"]) == 0
    assert "(no match)" not in capsys.readouterr().out


def test_retention_on_a_checkpoint_file_still_prunes(tmp_path, capsys):
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "checkpoints.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.setup()
    argv = ["retention", "--sqlite", str(path), "--keep-last", "2", "--keep-within", "7d"]
    assert main([*argv, "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dry_run"] is True


def test_export_of_an_unknown_thread_exits_1_in_one_line(files, capsys):
    assert main(["export", "--sqlite", files["history.sqlite"], "--thread", "nobody"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ctx-langgraph export: error: ")
    assert "default/nobody has no history" in err


def test_a_window_too_small_for_the_session_is_named(tmp_path, capsys):
    # the session's 12th turn carries a message too large for the smallest window
    argv = ["demo", "--turns", "12", "--window", "1024", "--no-compare", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("ctx-langgraph demo: error: --window 1024 is too small")


# --------------------------------------------------------------------------- PostgreSQL


@pytest.mark.postgres
def test_postgres_without_the_tables_is_refused_and_left_alone(pg_dsn, files, capsys):
    import psycopg

    cases = [
        (["retention", "--postgres", pg_dsn, "--keep-last", "1"], ["'checkpoints' table"]),
        (["export", "--postgres", pg_dsn, "--thread", "t1"], ["not a history store"]),
        (
            [
                "export",
                "--sqlite",
                files["history.sqlite"],
                "--thread",
                "t1",
                "--memory-postgres",
                pg_dsn,
            ],
            ["--memory-postgres", "'store' table"],
        ),
    ]
    for argv, fragments in cases:
        status = main(argv)
        captured = capsys.readouterr()
        _assert_refused(argv, status, captured.out, captured.err, fragments)
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchone()
    assert tables == (0,)  # neither the checkpointer nor the store created its tables


@pytest.mark.postgres
def test_postgres_with_the_tables_still_works(pg_dsn, capsys):
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.postgres import PostgresSaver

    from ctx_langgraph.history import PostgresHistoryStore, Scope

    with PostgresSaver.from_conn_string(pg_dsn) as saver:
        saver.setup()
    assert main(["retention", "--postgres", pg_dsn, "--keep-last", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dry_run"] is False
    with PostgresHistoryStore.from_conn_string(pg_dsn) as store:
        store.setup()
        store.append(Scope("t1"), [HumanMessage("hello", id="m1")])
    assert main(["export", "--postgres", pg_dsn, "--thread", "t1"]) == 0
    assert [e["event_id"] for e in json.loads(capsys.readouterr().out)["events"]] == ["m1"]
    assert main(["export", "--postgres", pg_dsn, "--thread", "nobody"]) == 1
    assert "no history" in capsys.readouterr().err


def test_every_refusal_case_names_an_existing_command():
    assert {c[1][0] for c in CASES if c[1]} - set(COMMANDS) == {"squash"}
    assert len({c[0] for c in CASES}) == len(CASES)
